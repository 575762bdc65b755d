"""The validation job's states and storage, with the engine's answer given (the real engine
runs in tests/worker/test_validate.py and end to end in test_validation_e2e.py)."""

from dataclasses import replace
from datetime import timedelta
from pathlib import Path

import pytest
from django.utils import timezone

import apps.tasks.services as services
from apps.jobs.models import Job
from apps.jobs.services import job_run
from apps.tasks.models import Task, Validation
from worker.engine.env.builder import Attempt, BuiltEnvironment
from worker.engine.run.pytest_run import TestRun
from worker.engine.grade.oracle import Oracle
from worker.engine.validate.pipeline import RunRecord, ValidationResult


def _result(verdict="valid", reason=""):
    run = TestRun(outcomes={"tests/test_a.py::test_a": "PASSED"}, status="ok", exit_code=0, output=b"ok\x00",
                  seconds=0.1, collection_error=False)
    return ValidationResult(
        verdict=verdict, reason=reason, oracle=Oracle(["tests/test_a.py::test_a"], [], [], []),
        attempts=[Attempt("editable", ["uv pip install -e ."], "ok", "", "<script>log</script>", 1.0)],
        runs=[RunRecord("after", "selected", 0, run)], seconds=2.0)


@pytest.fixture
def task(small_repository):
    return Task.objects.filter(repository=small_repository).order_by("id").first()


def _run(validation) -> bool:
    return job_run(job_id=validation.job_id, worker="w1")


def _fresh(validation) -> Validation:
    return Validation.objects.select_related("job").get(id=validation.id)


@pytest.mark.django_db
def test_a_validation_moves_the_task_and_stores_what_it_found(task, monkeypatch):
    monkeypatch.setattr(services, "task_validate", lambda *a, **k: _result())
    validation = services.task_validation_start(task=task)
    assert validation.state == Validation.State.QUEUED and Task.objects.get(id=task.id).state == "building"
    assert (validation.job.kind, validation.job.subject_id, validation.job.subject_label) == (
        "validation", task.id, task.instance_id)
    assert services.task_validation_start(task=task) is None  # one at a time
    assert _run(validation) is True
    validation = _fresh(validation)
    assert validation.state == "succeeded" and validation.verdict == "valid" and validation.job.worker == "w1"
    assert validation.fail_to_pass == ["tests/test_a.py::test_a"]
    assert validation.attempts.get().output == "<script>log</script>"
    assert validation.runs.get().outcomes == {"tests/test_a.py::test_a": "PASSED"}
    assert list(task.state_changes.values_list("to_state", flat=True)) == [
        "mined", "building", "validating", "valid"]
    assert _run(validation) is True  # a second delivery does nothing
    assert task.state_changes.count() == 4 and validation.runs.count() == 1


@pytest.mark.django_db
def test_an_engine_error_fails_the_validation_and_frees_the_task(task, monkeypatch):
    def broken(*args, **kwargs):
        raise RuntimeError("disk full\x00")

    monkeypatch.setattr(services, "task_validate", broken)
    validation = services.task_validation_start(task=task)
    assert _run(validation) is True
    validation = _fresh(validation)
    assert validation.state == "failed" and validation.job.error_code == "validation_error"
    assert validation.error == "RuntimeError: disk full"
    assert Task.objects.get(id=task.id).state == "mined"
    assert task.state_changes.last().reason == "validation_error"


@pytest.mark.django_db
def test_a_validation_whose_worker_died_is_taken_over_when_stale(task, monkeypatch, settings):
    monkeypatch.setattr(services, "task_validate", lambda *a, **k: _result("invalid", "no_fail_to_pass"))
    validation = services.task_validation_start(task=task)
    Job.objects.filter(id=validation.job_id).update(state="running", heartbeat_at=timezone.now(), lease_token="dead")
    assert _run(validation) is False
    Job.objects.filter(id=validation.job_id).update(
        heartbeat_at=timezone.now() - timedelta(seconds=settings.COMMITGYM_JOB_STALE_SECONDS + 1))
    assert _run(validation) is True
    assert Task.objects.get(id=task.id).state == "invalid" and _fresh(validation).state == "succeeded"


@pytest.mark.django_db
def test_text_a_sandbox_wrote_is_stored_whatever_it_holds(task, monkeypatch):
    result = _result()
    hostile = TestRun(outcomes={"t.py::test_\x00\udcff": "PASSED"}, status="ok", exit_code=0,
                      output=b"\x00\xff\xfe out", seconds=0.1, collection_error=False)
    result.runs.append(RunRecord("before", "selected", 0, hostile))
    result.attempts.append(Attempt("editable", ["\x00"], "ok", "", "log\x00\udcff", 1.0))
    monkeypatch.setattr(services, "task_validate", lambda *a, **k: result)
    validation = services.task_validation_start(task=task)
    assert _run(validation)
    validation = _fresh(validation)
    assert validation.state == "succeeded" and validation.runs.count() == 2
    assert "\x00" not in validation.runs.last().output


@pytest.mark.django_db
def test_a_stale_validation_gives_its_task_back(task, settings):
    validation = services.task_validation_start(task=task)
    Job.objects.filter(id=validation.job_id).update(
        state="running", heartbeat_at=timezone.now() - timedelta(seconds=settings.COMMITGYM_JOB_STALE_SECONDS + 1))
    Task.objects.filter(id=task.id).update(state="validating")
    again = services.task_validation_start(task=task)
    assert again is not None and again.id != validation.id
    assert (_fresh(validation).state, _fresh(validation).job.error_code) == ("failed", "worker_lost")
    assert "worker_lost" in task.state_changes.values_list("reason", flat=True)


@pytest.mark.django_db
def test_a_validation_taken_over_while_storing_keeps_nothing_of_this_worker(task, monkeypatch):
    def taken_over(*args, **kwargs):
        Job.objects.filter(validation__task=task).update(lease_token="another-worker")
        return _result()

    monkeypatch.setattr(services, "task_validate", taken_over)
    validation = services.task_validation_start(task=task)
    assert _run(validation) is True
    validation = _fresh(validation)
    assert validation.state == "running" and not validation.runs.exists() and not validation.attempts.exists()
    assert validation.verdict == "" and Task.objects.get(id=task.id).state == "validating"


@pytest.mark.django_db
def test_an_untrusted_run_is_stored_with_its_reason_and_shown_on_the_task_page(task, monkeypatch, curator_client):
    from django.urls import reverse

    result = _result("invalid", "untrusted_run")
    forged = TestRun(outcomes={}, status="failed", exit_code=1, output=b"1 failed", seconds=0.1,
                     collection_error=False, untrusted="forged_result: tests/test_a.py::test_a: the call phase failed "
                                                        "but was reported passed")
    result.runs.append(RunRecord("after", "selected", 1, forged))
    result.oracle = None
    monkeypatch.setattr(services, "task_validate", lambda *a, **k: result)
    validation = services.task_validation_start(task=task)
    _run(validation)
    validation = _fresh(validation)
    assert (validation.verdict, validation.reason, validation.fail_to_pass) == ("invalid", "untrusted_run", [])
    assert validation.runs.get(index=1).untrusted.startswith("forged_result: tests/test_a.py::test_a")
    page = curator_client.get(reverse("tasks:detail", args=[task.instance_id])).content.decode()
    assert "untrusted" in page and "the call phase failed but was reported passed" in page
    assert "forged or tampered with" in page  # the reason in words


@pytest.mark.django_db
def test_a_failed_validation_is_retried_the_same_way(task, monkeypatch):
    from apps.jobs.services import JobRefused, job_retry
    from apps.tasks.models import GeneratedTest

    def broken(*args, **kwargs):
        raise RuntimeError("disk full")

    monkeypatch.setattr(services, "task_validate", broken)
    plain = services.task_validation_start(task=task, backend="local")
    _run(plain)
    again = job_retry(job=_fresh(plain).job)
    assert again.kind == "validation" and again.validation.backend == "local" and not again.validation.generated
    with pytest.raises(JobRefused, match="being validated|cannot be validated now"):
        job_retry(job=_fresh(plain).job)  # the task is building again: one validation at a time

    Job.objects.filter(id=again.id).update(state="failed")
    Task.objects.filter(id=task.id).update(state="invalid")
    source = again.validation
    checking = services.generated_tests_check_start(task=task, source=source, tests=[("def test_a(): ...", None),
                                                                                     ("def test_b(): ...", None)])
    _run(checking)  # its environment is gone
    checking = _fresh(checking)
    assert (checking.state, checking.job.error_code) == ("failed", "environment_gone")
    assert set(GeneratedTest.objects.filter(validation=checking).values_list("state", "reason")) == {
        ("dropped", "not_run")}
    retried = job_retry(job=checking.job).validation
    assert retried.generated and list(GeneratedTest.objects.filter(validation=retried).order_by("index")
                                      .values_list("content", "state")) == [("def test_a(): ...", "pending"),
                                                                           ("def test_b(): ...", "pending")]


@pytest.mark.django_db
def test_without_bubblewrap_validation_runs_only_if_allowed_and_the_page_says_so(task, monkeypatch, settings, tmp_path):
    from django.test import Client
    from django.urls import reverse

    from worker.engine.sandbox.base import SandboxUnavailable
    from worker.engine.sandbox.local import LocalSandbox

    monkeypatch.setattr(LocalSandbox, "available", staticmethod(lambda: False))
    settings.COMMITGYM_ALLOW_UNSANDBOXED = False
    assert not services.environment_builder(task.repository, "local").sandbox().allow_unsandboxed
    with pytest.raises(SandboxUnavailable):
        services.environment_builder(task.repository, "local").sandbox().run(["true"], workdir=tmp_path)

    settings.COMMITGYM_ALLOW_UNSANDBOXED = True
    assert services.environment_builder(task.repository, "local").sandbox().allow_unsandboxed
    monkeypatch.setattr(services, "task_validate", lambda *a, **k: _result())
    validation = services.task_validation_start(task=task)
    _run(validation)
    assert Validation.objects.get(id=validation.id).isolation_reduced
    client = Client()
    client.force_login(task.repository.created_by)
    page = client.get(reverse("tasks:detail", args=[task.instance_id])).content.decode()
    assert "isolation reduced" in page


@pytest.mark.django_db
def test_the_controls_grades_come_from_the_validations_runs_unless_grading_would_run_more(task, monkeypatch):
    from apps.datasets.grading.grades import control_graded_by_validation
    from apps.datasets.models import Candidate
    from worker.engine.grade.candidate import GradeResult, TaskToGrade

    tests = {"tests/test_a.py::test_fixed": "PASSED", "tests/test_a.py::test_other": "PASSED"}
    result = _result()
    result.runs = [RunRecord("before", "suite", 0, TestRun(outcomes={**tests, "tests/test_a.py::test_fixed": "FAILED"},
                                                           status="ok", exit_code=1, output=b"F.",
                                                           seconds=0.1, collection_error=False)),
                   RunRecord("after", "suite", 0, TestRun(outcomes=tests, status="ok", exit_code=0, output=b"..",
                                                          seconds=0.1, collection_error=False))]
    result.gold, result.empty = GradeResult("resolved", tampering=["tox.ini"], seconds=1.5), GradeResult("no")
    result.environment = BuiltEnvironment(path=Path("/nowhere"), key="k", python_version="3.11", lock="",
                                          recipe_key="r", suite_args=("tests",))
    monkeypatch.setattr(services, "task_validate", lambda *a, **k: result)
    validation = services.task_validation_start(task=task)
    assert _run(validation) is True
    validation = _fresh(validation)
    assert validation.grade_selection == ["tests"] and set(validation.controls) == {"gold", "empty"}
    gold = Candidate.objects.create(task=task, source="gold", kind="gold", patch="the fix")
    empty = Candidate.objects.create(task=task, source="empty", kind="empty", patch="")
    agent = Candidate.objects.create(task=task, source="import", kind="agent", patch="a fix")
    graded = TaskToGrade(mirror_dir=None, base_sha="", test_patch="", fail_to_pass=("tests/test_a.py::test_fixed",),
                         pass_to_pass=("tests/test_a.py::test_other",), selection=("tests",))
    stood_in = control_graded_by_validation(gold, validation, graded)
    assert (stood_in.outcome, stood_in.tampering, stood_in.runs[0].outcomes) == ("resolved", ["tox.ini"], tests)
    assert control_graded_by_validation(empty, validation, graded).outcome == "no"
    # The task's tests as they are now: a reviewer's exclusion counts.
    assert control_graded_by_validation(empty, validation, TaskToGrade(
        mirror_dir=None, base_sha="", test_patch="", fail_to_pass=(), pass_to_pass=("tests/test_a.py::test_other",)
    )).outcome == "resolved"
    assert control_graded_by_validation(agent, validation, graded) is None  # only the controls
    assert control_graded_by_validation(gold, validation, replace(graded, runs=3)) is None  # ever flaky: graded again
