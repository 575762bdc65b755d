"""`verify` run again after what a failed step lacked was given: the step is started again (its inputs
changed); a failure whose inputs did not change stays, said to be from an earlier run; and tasks are
named by their id, never by an internal number."""

from io import StringIO

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError
from django.utils import timezone

from apps.datasets.models import ReproductionTests
from apps.datasets.verifiers.execution import STARTED, STOPPED, UNDER_WAY, task_execution_advance
from apps.jobs.models import Job
from apps.jobs.services import job_run
from apps.tasks.models import IssueVersion
from tests.apps.test_judging import TASKS, imported
from tests.apps.test_sampling import valid_task  # noqa: F401 - a fixture

pytestmark = pytest.mark.django_db


def verify_said(*args) -> str:
    """What verify wrote to standard error (it fails when a verifier step failed)."""
    out, err = StringIO(), StringIO()
    try:
        call_command("verify", *args, stdout=out, stderr=err)
    except CommandError as error:
        err.write(str(error))
    return err.getvalue()


def test_a_step_that_failed_for_want_of_an_issue_runs_again_once_the_issue_is_written(valid_task):  # noqa: F811
    assert task_execution_advance(valid_task) == (STARTED, "reproduction tests queued")
    first = ReproductionTests.objects.get(task=valid_task)
    job_run(job_id=first.job_id)
    first.refresh_from_db()
    assert first.state == Job.State.FAILED and "no issue text yet" in first.error_message
    # Run again with nothing changed: the old failure stands, and is said to be an earlier run's.
    said = verify_said(valid_task.instance_id, "--no-judge", "--json")
    assert "writing reproduction tests failed: The task has no issue text yet" in said
    assert "from an earlier run, ended" in said and "not started again" in said
    assert ReproductionTests.objects.filter(task=valid_task).count() == 1
    # Asked with no run begun before it failed, the reason is only the reason.
    where, why = task_execution_advance(valid_task)
    assert where == STOPPED and "earlier run" not in why
    # The issue is written: what the step reads changed, so it is started again.
    IssueVersion.objects.create(task=valid_task, number=1, author="model", text="slugify keeps accents", leak_score=0)
    assert task_execution_advance(valid_task) == (
        STARTED, "reproduction tests queued again (what the failed one read has changed since)")
    again = ReproductionTests.objects.filter(task=valid_task).first()
    assert again.id != first.id and again.inputs["issue"] is not None and first.inputs["issue"] is None
    assert task_execution_advance(valid_task)[0] == UNDER_WAY


def test_verify_names_a_task_by_its_id(tmp_path):
    tasks = list(imported(tmp_path))
    # A judging of the first task is running elsewhere (its worker alive): verify starts none beside it.
    Job.objects.create(kind="judge", subject_type="tasks.task", subject_id=tasks[0].id, subject_label=TASKS[0],
                       state=Job.State.RUNNING, heartbeat_at=timezone.now(), started_at=timezone.now(),
                       lease_token="elsewhere", worker="elsewhere")
    said = verify_said(TASKS[0], "--no-tests", "--json")
    assert f"{TASKS[0]}: being judged already" in said
    assert f"task {tasks[0].id}" not in said


def test_a_run_against_the_verifier_tests_that_failed_runs_again_once_its_environment_changed(
        valid_task):  # noqa: F811
    from apps.datasets.models import Candidate, Execution, VerifierTestSet
    from apps.datasets.verifiers.execution import DONE, execution_inputs
    from tests.apps.test_execution_measures import succeeded

    reproduction = ReproductionTests.objects.create(job=succeeded("reproduce", valid_task), task=valid_task)
    test_set = VerifierTestSet.objects.create(job=succeeded("verifier_tests", valid_task), task=valid_task,
                                              reproduction=reproduction, touched=["textkit/slug.py"])
    slug = "diff --git a/textkit/slug.py b/textkit/slug.py\n--- a/textkit/slug.py\n+++ b/textkit/slug.py\n" \
           "@@ -1 +1 @@\n-a\n+b\n"
    candidate = Candidate.objects.create(task=valid_task, source="import", kind="a", patch=slug)
    failed = succeeded("execute", candidate)
    Job.objects.filter(id=failed.id).update(state=Job.State.FAILED, error_message="no environment on disk")
    Execution.objects.create(job=failed, candidate=candidate, test_set=test_set, inputs=execution_inputs(valid_task))
    # Nothing it read has changed: it stays failed, for a person to retry.
    assert task_execution_advance(valid_task) == (DONE, "done")
    # It read another validation than the one the task would be graded in now (the task was validated again).
    Execution.objects.filter(candidate=candidate).update(inputs={"validation": -1})
    assert task_execution_advance(valid_task) == (STARTED, "1 candidates queued")
    assert Execution.objects.filter(candidate=candidate).count() == 2


def test_a_step_a_worker_starts_between_the_check_and_the_look_is_under_way_not_stopped(
        valid_task, monkeypatch):  # noqa: F811
    """verify asks while a worker chains a task's next step on: nothing was under way when it checked, and
    by the time it reads the step, the worker has queued it. That step is under way, never a failure."""
    from apps.datasets.models import VerifierTestSet
    from apps.datasets.verifiers import execution
    from tests.apps.test_execution_measures import succeeded

    reproduction = ReproductionTests.objects.create(job=succeeded("reproduce", valid_task), task=valid_task)
    queued = Job.objects.create(kind="verifier_tests", subject_type="tasks.task", subject_id=valid_task.id,
                                subject_label=valid_task.instance_id)
    VerifierTestSet.objects.create(job=queued, task=valid_task, reproduction=reproduction,
                                   inputs=execution.verifier_tests_inputs(valid_task, set()))
    monkeypatch.setattr(execution, "execution_under_way", lambda tasks: False)  # the check came first
    assert task_execution_advance(valid_task) == (UNDER_WAY, "under way")
    Job.objects.filter(id=reproduction.job_id).update(state=Job.State.RUNNING)
    assert task_execution_advance(valid_task) == (UNDER_WAY, "under way")
