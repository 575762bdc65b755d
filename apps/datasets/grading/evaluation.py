"""commitgym as the harness for anyone's predictions: a release's or a dataset's instances, the
predictions imported as a run and graded against each task's hidden tests (with every guard a grade
has), and the result written as SWE-bench's harness writes it (worker/engine/grade/evaluation.py)."""

from dataclasses import dataclass
from pathlib import Path

from django.db.models import QuerySet

from apps.jobs.services import JobFailed
from apps.tasks.models import Task
from worker.engine.grade.evaluation import Evaluated, evaluation_write, folder_name_unsafe, model_folder

from ..candidates.imports import GRADED
from ..models import Candidate, Dataset, Grade, Run
from ..releases import ReleaseRefused, release_named
from ..selectors import INSTANCES, dataset_tasks
from .grades import grading_validation, task_to_grade
from .release_folder import FolderRefused, release_folder_tasks


class EvaluationRefused(Exception):
    """What to evaluate against, or the predictions, cannot be used; the message says why."""


@dataclass(frozen=True)
class EvaluationTarget:
    label: str  # "release NAME@N" or "dataset NAME"
    tasks: QuerySet  # its instances


def evaluation_target(name: str, *, backend: str = "", stderr=None, timeout: float = 6 * 3600) -> EvaluationTarget:
    """A release of this database (NAME@N), a dataset (its instances: imported ones, and mined tasks
    that validated), or a release folder (its instances imported where this database has not got them,
    their environments made again from the folder: release_folder.py)."""
    dataset = Dataset.objects.filter(name=name).first()
    if dataset is None and Path(name).is_dir():
        try:
            label, tasks = release_folder_tasks(Path(name).resolve(), backend=backend, stderr=stderr, timeout=timeout)
        except FolderRefused as refused:
            raise EvaluationRefused(str(refused)) from None
        return EvaluationTarget(f"release folder {label}", tasks)
    if dataset is None and "@" in name:
        try:
            release = release_named(name)
        except ReleaseRefused as refused:
            raise EvaluationRefused(str(refused)) from None
        return EvaluationTarget(f"release {release}", Task.objects.filter(id__in=release.task_ids))
    if dataset is None:
        raise EvaluationRefused(f"no dataset, release folder or release named {name!r} (a release is NAME@VERSION)")
    return EvaluationTarget(f"dataset {dataset.name}", dataset_tasks(dataset).filter(INSTANCES))


def evaluation_candidates(target: EvaluationTarget, run: Run, instance_ids) -> list[Candidate]:
    """The run's candidates for the target's instances that these predictions name."""
    return list(Candidate.objects.filter(run=run, task__in=target.tasks, task__instance_id__in=list(instance_ids))
                .select_related("task", "run").order_by("task__instance_id", "id"))


def evaluation_run_checked(name: str) -> str:
    """The run's id in the harness's folders (its name, "/" as "__", as the harness writes a model's);
    EvaluationRefused where that cannot name a folder, or where a run of the name holds candidates made
    here (an import would replace them)."""
    run_id = model_folder(name)
    if folder_name_unsafe(run_id):
        raise EvaluationRefused(f"{name!r} cannot name the folder of a run's logs: give --run NAME")
    if Candidate.objects.filter(run__name=name).exclude(source=Candidate.Source.IMPORT).exists():
        raise EvaluationRefused(f"a run named {name!r} holds candidates made here, which these predictions would "
                                "replace: give --run NAME")
    return run_id


def to_grade(candidates: list[Candidate]) -> list[Candidate]:
    """Those whose ground truth is not a grade made here (none, or an imported report's word)."""
    return [candidate for candidate in candidates
            if candidate.outcome_source != GRADED and not candidate.no_patch]


def evaluation_written(*, target: EvaluationTarget, run_id: str, candidates: list[Candidate], models: dict[str, str],
                       folder: Path, report_path: Path) -> dict:
    """The per-instance reports and the run report, from the candidates' ground truths. `models`: each
    submitted prediction's instance id -> its model_name_or_path (the harness's log folder)."""
    dataset_ids = sorted(target.tasks.values_list("instance_id", flat=True))
    evaluated = [_evaluated(candidate, models.get(candidate.task.instance_id, run_id)) for candidate in candidates]
    unsafe = next((name for one in evaluated for name in (one.instance_id, model_folder(one.model))
                   if folder_name_unsafe(name)), None)
    if unsafe is not None:
        raise EvaluationRefused(f"{unsafe!r} cannot name a folder of the harness's logs")
    return evaluation_write(folder, run_id, dataset_ids, sorted(models), evaluated, report_path)


def _evaluated(candidate: Candidate, model: str) -> Evaluated:
    grade = candidate.grades.filter(job__state=Grade.State.SUCCEEDED).only("runs", "backend").first()
    run = (grade.runs or [{}])[0] if grade else {}
    fail_to_pass, pass_to_pass = _graded_tests(candidate.task, grade.backend) if grade else ((), ())
    return Evaluated(instance_id=candidate.task.instance_id, model=model, outcome=candidate.outcome,
                     fail_to_pass=fail_to_pass, pass_to_pass=pass_to_pass, outcomes=run.get("outcomes") or {},
                     untrusted=run.get("untrusted") or "")


def _graded_tests(task: Task, backend: str) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """The F2P and P2P tests a grade of the task runs (none where it has no environment to grade in)."""
    try:
        graded = task_to_grade(task, grading_validation(task, backend))
    except JobFailed:
        return (), ()
    return graded.fail_to_pass, graded.pass_to_pass
