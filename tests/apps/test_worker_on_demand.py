"""How a command waits for its jobs: until what it waits for is done, and past its time limit a
message that says what did not finish and what is left."""

import io

import pytest
from django.core.management.base import CommandError

from apps.jobs.on_demand import WorkerOnDemand


def test_it_waits_until_done_and_says_what_is_left_past_its_time_limit(settings):
    settings.CELERY_BROKER_URL = "redis://127.0.0.1:6379/15"  # a real broker: it never starts a worker itself
    polls = iter([False, False, True])
    with WorkerOnDemand(queues="tests", stderr=io.StringIO()) as worker:
        worker.wait_until(lambda: next(polls), queued=lambda: False, timeout=60, what="the grades", every=0.01)
        assert next(polls, "spent") == "spent"
        with pytest.raises(CommandError, match=r"^the grades did not finish within 0 s \(2 still running\)$"):
            worker.wait_until(lambda: False, queued=lambda: False, timeout=0.05, what="the grades", every=0.01,
                              still=lambda: "2 still running")
