"""A pool of model calls stops between calls: once the caller says stop (a cancel, a lost job), or its
callback raises, no call starts after the ones under way, however fast the calls end."""

import threading

import pytest

from worker.engine.llm.clients import calls_collect


class Calls:
    def __init__(self):
        self.started, self.lock = [], threading.Lock()

    def __call__(self, key):
        with self.lock:
            self.started.append(key)
        return key * 10


@pytest.mark.parametrize("in_flight", [1, 3])
def test_no_call_starts_after_the_callback_says_stop(in_flight):
    calls, heard = Calls(), []

    def on_each(key, result) -> bool:
        heard.append(key)
        return len(heard) < 2

    results = calls_collect(calls, list(range(20)), in_flight=in_flight, on_each=on_each)
    # The calls under way as the second ended finish (and are heard of); none starts after that.
    assert len(calls.started) == in_flight + 1 and sorted(calls.started) == list(range(in_flight + 1))
    assert sorted(results) == sorted(heard) == sorted(calls.started)
    assert all(results[key] == key * 10 for key in results)


def test_one_at_a_time_starts_each_call_after_the_last_was_heard_of():
    calls, heard_before_start = Calls(), []

    def on_each(key, result) -> bool:
        heard_before_start.append(len(calls.started))
        return True

    calls_collect(calls, list(range(6)), in_flight=1, on_each=on_each)
    assert calls.started == list(range(6)) and heard_before_start == [1, 2, 3, 4, 5, 6]


def test_a_callback_that_raises_starts_no_more_calls():
    calls = Calls()

    def on_each(key, result) -> bool:
        raise RuntimeError("the database went away")

    with pytest.raises(RuntimeError, match="database went away"):
        calls_collect(calls, list(range(20)), in_flight=1, on_each=on_each)
    assert calls.started == [0]
