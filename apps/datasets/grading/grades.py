"""Grading candidates: each one a job on the `tests` queue, against its task's hidden tests, in the
task's environment (never one environment per candidate), through the engine (grade/candidate.py).
Controls (the gold and empty patches) are made for every task before its candidates are graded."""

from functools import lru_cache
from pathlib import Path
from typing import Optional

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from apps.bulk_insert import text_storable
from apps.environments.selectors import environment_present
from apps.jobs.services import JobFailed, JobRefused, job_start
from apps.tasks.models import Task, TestRunRecord, Validation
from apps.tasks.selectors import task_base_sha, task_patches
from apps.tasks.services import built_environment, environment_builder, sandbox_limits
from worker.engine.git.repo import GitError
from worker.engine.grade.candidate import GradeResult, GradeSettings, TaskToGrade, candidate_grade, runs_graded
from worker.engine.grade.second_opinion import Doubts, candidate_doubts
from worker.engine.run.pytest_run import TestRun
from worker.engine.sandbox.base import Limits

from .hacking import candidate_hacking_store
from ..candidates.imports import GRADED
from ..models import Candidate, Dataset, Grade
from ..selectors import INSTANCES, dataset_tasks, dataset_tasks_visible
from ..candidates.mutants import task_mutation_score_refresh

GRADE = "grade"  # the job kind (registered in apps.datasets.apps)
FLAKY_RUNS = 3  # runs of each candidate of a task whose tests were ever flaky
_OUTPUT_KEPT = 20_000  # characters of a run's output kept with a grade
GRADE_BASES = "grade-bases"  # in COMMITGYM_WORK_DIR: each task's base with its test patch, kept by the worker


def task_controls_ensure(task: Task) -> str:
    """The task's gold and empty patches as candidates (controls), where they are not yet; "" when
    they are there, else why they cannot be made."""
    if Candidate.objects.filter(task=task, source__in=Candidate.CONTROLS).count() == len(Candidate.CONTROLS):
        return ""
    try:
        gold = task_patches(task=task).source_patch
    except (GitError, OSError) as error:
        return f"the gold patch cannot be read from the repository's mirror ({error}): no controls"
    for source, patch in ((Candidate.Source.GOLD, gold), (Candidate.Source.EMPTY, "")):
        Candidate.objects.get_or_create(task=task, source=source, defaults={"kind": source, "patch": patch})
    return ""


def candidate_grade_start(*, candidate: Candidate, actor=None, backend: str = "") -> Optional[Grade]:
    """Queue a grading of the candidate; None when one is queued or running already."""
    with transaction.atomic():
        job, created = job_start(kind=GRADE, subject=candidate, user=actor)
        if not created:
            return None
        return Grade.objects.create(job=job, candidate=candidate, backend=backend or settings.COMMITGYM_SANDBOX)


DATASET_GRADE = "dataset_grade"  # the job kind that grades a dataset (registered in apps.datasets.apps)


def dataset_grade_start(*, dataset, user) -> tuple:
    """Queue grading every candidate of the dataset without a ground truth: one job that makes the
    tasks' controls and starts a grade each; the job already under way, if there is one."""
    return job_start(kind=DATASET_GRADE, subject=dataset, user=user)


def dataset_grade_work(job, progress) -> None:
    """The registered `run`: each task with an oracle (imported, or validated valid) that the person who
    asked sees gets its controls, then each of its candidates without a ground truth a grading job of
    its own. Running it twice starts nothing more."""
    dataset = Dataset.objects.get(pk=job.subject_id)
    user = job.requested_by
    tasks = list((dataset_tasks_visible(dataset, user=user) if user else dataset_tasks(dataset)).filter(INSTANCES)
                 .select_related("repository", "commit").order_by("id"))
    for done, task in enumerate(tasks):
        task_controls_ensure(task)
        for candidate in Candidate.objects.filter(task=task, outcome="").order_by("id"):
            candidate_grade_start(candidate=candidate, actor=user)
        if not progress.go_on(done + 1, len(tasks)):
            return


def grade_job_work(job, progress) -> None:
    """The registered `run`: grade the candidate in its task's environment; store the runs and the
    outcome, and make it the candidate's ground truth, at once. The hacking detector reads its patch;
    a flagged candidate whose tests passed gets a second opinion from the plain runner (its doubts)."""
    grade = Grade.objects.select_related("candidate__task__commit", "candidate__task__repository").get(job=job)
    candidate, task = grade.candidate, grade.candidate.task
    validation = grading_validation(task, grade.backend)
    patch = None if candidate.no_patch else candidate.patch
    to_grade = task_to_grade(task, validation)
    # A time limit or an unexpected error ends the job in words (jobs.services.job_run).
    result = control_graded_by_validation(candidate, validation, to_grade) or graded_in_environment(
        task, validation, to_grade, patch, progress)
    doubts = candidate_doubts(to_grade, patch, result, builder=environment_builder(task.repository, validation.backend),
                              environment=built_environment(validation.environment), work_root=progress.work_dir(),
                              settings=_grade_settings(GradeSettings.limits))
    progress.complete(lambda: _grade_store(grade, validation, result, doubts))


def graded_in_environment(task: Task, validation: Validation, to_grade: TaskToGrade, patch: Optional[str], progress,
                          limits: Limits = GradeSettings.limits) -> GradeResult:
    """`candidate_grade` in the validation's environment, in the job's working folder, with the task's
    base kept by the worker: how every run of a candidate against a task's tests is made."""
    return candidate_grade(to_grade, patch, builder=environment_builder(task.repository, validation.backend),
                           environment=built_environment(validation.environment), work_root=progress.work_dir(),
                           settings=_grade_settings(limits))


def control_graded_by_validation(candidate: Candidate, validation: Validation, to_grade: TaskToGrade
                                 ) -> Optional[GradeResult]:
    """The gold or empty patch's grade that the validation's own run made (validate/pipeline.py:
    the same path and selection as any grade), its outcome by the task's tests as they are now; None
    where there is none, or where grading makes more runs than one (a task whose tests were ever flaky)."""
    stored = validation.controls.get(candidate.source) if candidate.source in Candidate.CONTROLS else None
    if stored is None or to_grade.runs != 1:
        return None
    side = "after" if candidate.source == Candidate.Source.GOLD else "before"
    record = TestRunRecord.objects.filter(validation=validation, side=side, scope="suite").order_by("index").first()
    if record is None:
        return None
    run = TestRun(outcomes=record.outcomes, status=record.status, exit_code=record.exit_code,
                  output=record.output.encode("utf-8", "surrogatepass"), seconds=record.seconds,
                  collection_error=record.collection_error, untrusted=record.untrusted)
    outcome, detail = runs_graded(to_grade, [run])
    return GradeResult(outcome, tampering=list(stored["tampering"]), touches_tests=list(stored["touches_tests"]),
                       runs=[run], detail=detail, seconds=stored["seconds"])


def _grade_settings(limits: Limits) -> GradeSettings:
    return GradeSettings(per_test_timeout=settings.COMMITGYM_TEST_TIMEOUT, limits=sandbox_limits(limits),
                         bases=Path(settings.COMMITGYM_WORK_DIR) / GRADE_BASES)


def run_output_kept(run) -> str:
    """The end of a run's output, as stored with a grade or an execution."""
    return text_storable(run.output)[-_OUTPUT_KEPT:]


def grade_job_retry(job, user):
    grade = Grade.objects.select_related("candidate").get(job=job)
    again = candidate_grade_start(candidate=grade.candidate, actor=user, backend=grade.backend)
    if again is None:
        raise JobRefused("This candidate is being graded already.")
    return again.job


def grading_validation(task: Task, backend: str) -> Validation:
    """The validation whose environment and oracle grade the task's candidates: its latest valid one
    in the backend, with its environment still on disk."""
    validation = _grading_validations(task, backend).select_related("environment").first()
    if validation is None and task.imported:
        raise JobFailed("no_environment", f"{task.instance_id} is an imported instance with no environment here: "
                                          "its candidates get their ground truth from an imported report, or from "
                                          "evaluate on the release folder it came in.")
    if validation is None or not environment_present(validation.environment):
        again = "evaluate the release folder it came in again" if task.imported else "validate it first"
        raise JobFailed("no_environment", f"{task.instance_id} has no valid validation with its environment on "
                                          f"disk (and its image, where one holds it) in the {backend} sandbox: "
                                          f"{again}.")
    return validation


def grading_validation_id(task: Task, backend: str) -> Optional[int]:
    """The id of the validation grading_validation chooses (whether its environment is on disk or not),
    or None."""
    return _grading_validations(task, backend).values_list("id", flat=True).first()


def _grading_validations(task: Task, backend: str):
    return Validation.objects.filter(task=task, verdict="valid", backend=backend, generated=False,
                                     job__state=Validation.State.SUCCEEDED, environment__isnull=False).order_by(
        "-created_at", "-id")


def task_to_grade(task: Task, validation: Validation) -> TaskToGrade:
    try:
        return _task_to_grade_cached(task, validation.id, tuple(task.excluded_tests))
    except (GitError, OSError) as error:
        raise JobFailed("no_environment", f"the task's patches cannot be read from the mirror: {error}") from None


@lru_cache(maxsize=64)
def _task_to_grade_cached(task: Task, validation_id: int, excluded: tuple) -> TaskToGrade:
    """What grading a task's candidates needs, read once per worker process for a validation: a
    worker grading many candidates of one task reads its runs once."""
    validation = Validation.objects.only("fail_to_pass", "pass_to_pass", "grade_selection").get(id=validation_id)
    xfail = {test for outcomes in TestRunRecord.objects.filter(validation_id=validation_id, side="after")
             .values_list("outcomes", flat=True) for test, status in outcomes.items() if status == "XFAIL"}
    ever_flaky = Validation.objects.filter(task=task).exclude(flaky=[]).exists()
    archive = task.imported_instance.source_archive if task.imported else ""
    return TaskToGrade(
        mirror_dir=task.repository.mirror_dir, base_sha=task_base_sha(task),
        source_archive=Path(archive) if archive else None,
        test_patch=task_patches(task=task).test_patch,
        fail_to_pass=tuple(t for t in validation.fail_to_pass if t not in excluded),
        pass_to_pass=tuple(t for t in validation.pass_to_pass if t not in excluded),
        reference_xfail=frozenset(xfail), runs=FLAKY_RUNS if ever_flaky else 1,
        rules=task.repository.test_file_rules(),
        selection=None if validation.grade_selection is None else tuple(validation.grade_selection))


def _storable(value):
    """JSON whose every text PostgreSQL takes (what tested code raised may hold anything)."""
    if isinstance(value, str):
        return text_storable(value)
    if isinstance(value, dict):
        return {_storable(key): _storable(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_storable(item) for item in value]
    return value


def _grade_store(grade: Grade, validation: Validation, result: GradeResult, doubts: Doubts) -> None:
    flags = _storable([flag.as_json() for flag in doubts.flags])
    runs = [{"status": run.status, "exit_code": run.exit_code, "seconds": round(run.seconds, 3),
             "untrusted": text_storable(run.untrusted), "complete": run.complete,
             "outcomes": {text_storable(test): status for test, status in run.outcomes.items()},
             "output": run_output_kept(run)} for run in result.runs]
    Grade.objects.filter(id=grade.id).update(
        environment=validation.environment, outcome=result.outcome, detail=text_storable(result.detail),
        tampering=[text_storable(path) for path in result.tampering],
        touches_tests=[text_storable(path) for path in result.touches_tests], runs=runs, seconds=result.seconds,
        hacking=flags, second_opinion=_storable(doubts.opinion.as_json()) if doubts.opinion else {})
    Candidate.objects.filter(id=grade.candidate_id).update(
        outcome=result.outcome, outcome_source=GRADED, tampering=bool(result.tampering),
        touches_tests=bool(result.touches_tests), graded_at=timezone.now())
    candidate_hacking_store(grade.candidate_id, flags)
    if grade.candidate.source == Candidate.Source.MUTANT:
        task_mutation_score_refresh(grade.candidate.task_id)
