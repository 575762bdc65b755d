"""Where the demo stands, as the first page says it: nothing where there is no demo, and for a database
holding the sample as an earlier version of the demo wrote it (other commit dates, so none of the
bundle's tasks), what to do about it, with nothing started."""

from datetime import datetime, timezone

import pytest
from django.urls import reverse

from apps.datasets.demo import MINING, demo_advance, demo_progress
from apps.jobs.models import Job
from apps.repositories.services import repository_register
from tests.conftest import mine_now
from worker.demo.bundle import REPOSITORY_NAME
from tests.apps.test_sampling import valid_task  # noqa: F401 - a fixture
from worker.demo.sample_repo import sample_repo_write

pytestmark = pytest.mark.django_db


def test_no_demo_repository_no_progress_block(curator_client):
    assert demo_progress() is None
    assert 'id="demo-progress"' not in curator_client.get(reverse("home")).content.decode()


def test_a_sample_from_an_earlier_demo_says_to_start_afresh_and_starts_nothing(curator_client, tmp_path, settings):
    sample = tmp_path / "sample-repo"
    sample_repo_write(sample, now=datetime(2024, 1, 8, tzinfo=timezone.utc))  # not the bundle's day
    mine_now(repository_register(location=str(sample), name=REPOSITORY_NAME))

    progress = demo_advance(sample=sample)

    assert progress.steps[MINING].complete and progress.current == 2
    assert "was written by an earlier version of the demo" in progress.stopped
    assert f"Remove {settings.VAR_DIR} (make clean) and run make demo again" in progress.stopped
    assert list(Job.objects.values_list("kind", flat=True)) == ["mining"]  # nothing else was started
    page = curator_client.get(reverse("home")).content.decode()
    assert "The demo's preparation stopped at step 2 of 8" in page and "make clean" in page


def test_a_task_read_before_its_validation_ended_counts_as_validated(valid_task):  # noqa: F811
    """The page read the demo's tasks, then their worker stored a valid verdict and ended the validation:
    the step is done, not stopped at "its validation succeeded, valid"."""
    from apps.datasets.demo import VALIDATING, DemoProgress, demo_task_progress
    from apps.tasks.models import Task, Validation
    from tests.apps.test_execution_measures import succeeded

    read_before = Task.objects.get(id=valid_task.id)
    read_before.verdict = ""  # as it was when the page read it
    Validation.objects.create(job=succeeded("validation", valid_task), task=valid_task, verdict="valid")
    progress = DemoProgress()
    said = demo_task_progress(read_before, progress.steps, ("embedded", 1))
    assert not said.startswith("its validation") and progress.steps[VALIDATING].done == 1
    # One that ended without a valid verdict still says why it stopped.
    Task.objects.filter(id=valid_task.id).update(verdict="invalid")
    Validation.objects.create(job=succeeded("validation", valid_task), task=valid_task, verdict="invalid",
                              reason="no_fail_to_pass")
    assert demo_task_progress(Task.objects.get(id=valid_task.id), DemoProgress().steps, ("embedded", 1)) == (
        "its validation succeeded, invalid: no_fail_to_pass")
