"""Importing SWE-bench files: instance files make tasks of a dataset, predictions files make
candidates of those tasks, with the ground truth an evaluation report gives. Each row is accepted or
refused with its reason; a file is imported whole or not at all (one transaction), and its Import
row keeps what it gave for the import's page."""

import hashlib
import json
from collections import defaultdict
from dataclasses import asdict, dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Optional

from django.db import transaction
from django.utils import timezone as django_timezone

from apps.bulk_insert import rows_insert, text_storable
from apps.repositories.models import Commit, Repository
from apps.repositories.selectors import repositories_visible
from apps.tasks.models import ImportedInstance, IssueVersion, Task, TaskStateChange
from apps.tasks.selectors import tasks_visible
from worker.engine.grade.swebench import Instance, Report, instances_read, predictions_read, report_read
from worker.engine.grade.trajectories import Trajectories, trajectories_read
from worker.engine.test_files import TestFileRules

from ..grading.hacking import candidates_hacking_read, patch_hacking_fields
from ..models import Candidate, Dataset, DatasetTask, Import, Run


class ImportUnreadable(Exception):
    """Nothing could be read from the file (or the report): the message says why."""


# --- instances ---------------------------------------------------------------------------------


def instances_import(*, path: Path, dataset_name: str = "", user=None) -> Import:
    """Each instance of the file becomes a task of the dataset (named after the file unless
    named): ImportUnreadable when nothing could be read; refused rows are listed on the Import."""
    path = Path(path)
    found = instances_read(path)
    if found.unreadable:
        raise ImportUnreadable(found.unreadable)
    name = dataset_name or path.stem
    with transaction.atomic():
        dataset, created = Dataset.objects.get_or_create(name=name, defaults={"kind": Dataset.Kind.IMPORT,
                                                                              "created_by": user})
        if dataset.kind != Dataset.Kind.IMPORT:
            raise ImportUnreadable(f"{name!r} is a {dataset.get_kind_display().lower()} dataset: name another with "
                                   "--dataset")
        if not created and user is not None and dataset.created_by_id != user.pk \
                and dataset.tasks.exclude(id__in=_tasks_seen(user)).exists():
            raise ImportUnreadable(f"{name!r} holds tasks of repositories you may not see: name another dataset")
        refused = [asdict(row) for row in found.refused]
        counts = {"rows": found.rows, "created": 0, "unchanged": 0, "refused": 0, "duplicates": len(found.duplicates)}
        known = {task.instance_id: task for task in Task.objects.filter(instance_id__in=list(found.kept))
                 .select_related("imported_instance", "repository").prefetch_related("datasets")}
        seen = set(_tasks_seen(user).filter(id__in=[task.pk for task in known.values()]).values_list("id", flat=True))
        hidden = _repositories_hidden(user, {instance.repo for instance in found.kept.values()})
        new = {}
        for instance_id, instance in found.kept.items():
            checksum = _checksum(instance)
            task = known.get(instance_id)
            if task is None and instance.repo in hidden:
                refused.append({"row": found.row_of[instance_id], "instance_id": instance_id,
                                "reason": f"{instance.repo} cannot take imported tasks from you"})
                continue
            if task is None:
                new[instance_id] = (instance, checksum)
                continue
            why = _existing_refusal(task, dataset, checksum) if task.pk in seen else \
                f"{instance_id} exists already: instance ids are unique"
            if why:
                refused.append({"row": found.row_of[instance_id], "instance_id": instance_id, "reason": why})
            else:
                counts["unchanged"] += 1
        _instances_create(list(new.values()), dataset)
        counts["created"] = len(new)
        counts["refused"] = len(refused)
        return Import.objects.create(kind=Import.Kind.INSTANCES, file_name=path.name[:255], dataset=dataset,
                                     rows=found.rows, matched=counts["created"] + counts["unchanged"],
                                     counts=counts, refused=_refused_sorted(refused), created_by=user)


def _tasks_seen(user):
    """The tasks an import by `user` may touch: those of the repositories they see (every task from the
    command line, where `user` is None)."""
    return Task.objects.all() if user is None else tasks_visible(user=user)


def _repositories_hidden(user, names: set) -> set:
    """Of the repositories named, those that exist and the person may not see."""
    if user is None:
        return set()
    existing = set(Repository.objects.filter(name__in=names).values_list("name", flat=True))
    return existing - set(repositories_visible(user=user).filter(name__in=names).values_list("name", flat=True))


def _checksum(instance: Instance) -> str:
    return hashlib.sha256(json.dumps(asdict(instance), sort_keys=True).encode("utf-8", "surrogatepass")).hexdigest()


def _existing_refusal(task: Task, dataset: Dataset, checksum: str) -> str:
    """Why a row whose instance id is a task already is refused ("" when it is that same row again)."""
    datasets = [other.name for other in task.datasets.all() if other.pk != dataset.pk]
    if not task.imported:
        return f"{task.instance_id} is a task mined from {task.repository.name}: instance ids are unique"
    if dataset.pk not in {other.pk for other in task.datasets.all()}:
        where = ", ".join(sorted(datasets)) or "another dataset"
        return f"{task.instance_id} exists already, in dataset {where}: instance ids are unique"
    if task.imported_instance.checksum != checksum:
        return (f"{task.instance_id} is in this dataset already with different fields: delete the task or import "
                "the file as another dataset")
    return ""


def _steps(trajectories: Optional[Trajectories], instance_id: str) -> Optional[list]:
    found = trajectories.found.get(instance_id) if trajectories else None
    return [{key: text_storable(value) if isinstance(value, str) else value for key, value in step.items()}
            for step in found.steps] if found else None


def _instances_create(new: list[tuple[Instance, str]], dataset: Dataset) -> None:
    """The tasks of imported instances, given with their checksums: a repository row each (no mirror
    until one is fetched), their base commits, the patches and oracle as given, the problem statement
    as issue version 1, and the two controls (the gold patch and the empty patch) as candidates.
    A few statements per table, however many instances."""
    if not new:
        return
    repositories = {}
    for repo in sorted({instance.repo for instance, _ in new}):
        repositories[repo], _ = Repository.objects.get_or_create(name=repo, defaults={
            "url": f"https://github.com/{repo}.git"})
    commits = {(repositories[instance.repo].id, instance.base_commit): _when(instance.created_at)
               for instance, _ in new}
    rows_insert(Commit, [dict(repository_id=repository_id, sha=sha, author_name="", author_email="", authored_at=when,
                              committed_at=when, message="", drop_reason="imported_base")
                         for (repository_id, sha), when in commits.items()])
    commit_ids = {(row.repository_id, row.sha): row.id for row in Commit.objects.filter(
        repository_id__in=[r.id for r in repositories.values()], sha__in={sha for _, sha in commits}).only(
        "id", "repository_id", "sha")}
    rows_insert(Task, [dict(instance_id=instance.instance_id, source=Task.Source.IMPORTED,
                            repository_id=repositories[instance.repo].id,
                            commit_id=commit_ids[repositories[instance.repo].id, instance.base_commit],
                            state=Task.State.VALID, verdict="valid", fail_to_pass_count=len(instance.fail_to_pass))
                       for instance, _ in new])
    task_ids = dict(Task.objects.filter(instance_id__in=[instance.instance_id for instance, _ in new])
                    .values_list("instance_id", "id"))
    rows_insert(TaskStateChange, [dict(task_id=task_id, from_state="", to_state=Task.State.VALID, reason="imported")
                                  for task_id in task_ids.values()])
    rows_insert(ImportedInstance, [dict(
        task_id=task_ids[instance.instance_id], patch=text_storable(instance.patch),
        test_patch=text_storable(instance.test_patch),
        fail_to_pass=[text_storable(test) for test in instance.fail_to_pass],
        pass_to_pass=[text_storable(test) for test in instance.pass_to_pass],
        hints_text=text_storable(instance.hints_text), created_at=instance.created_at[:64],
        version=instance.version[:64], environment_setup_commit=instance.environment_setup_commit[:40],
        checksum=checksum) for instance, checksum in new])
    rows_insert(IssueVersion, [dict(task_id=task_ids[instance.instance_id], number=1,
                                    text=text_storable(instance.problem_statement), author=IssueVersion.Author.IMPORTED)
                               for instance, _ in new])
    rows_insert(DatasetTask, [dict(dataset_id=dataset.id, task_id=task_id) for task_id in task_ids.values()])
    rows_insert(Candidate, [dict(task_id=task_ids[instance.instance_id], source=source, kind=source,
                                 patch=text_storable(instance.patch) if source == Candidate.Source.GOLD else "")
                            for instance, _ in new for source in Candidate.CONTROLS])


def _when(created_at: str) -> datetime:
    """The instance's date where the file gives one SWE-bench's way, else now."""
    try:
        when = datetime.fromisoformat(created_at.replace("Z", "+00:00"))
    except ValueError:
        return django_timezone.now()
    return when if when.tzinfo else when.replace(tzinfo=timezone.utc)


def _refused_sorted(refused: list[dict]) -> list[dict]:
    return sorted(refused, key=lambda row: (row["row"], row["instance_id"]))


# --- predictions -------------------------------------------------------------------------------

NO_PATCH_SOURCE = "import: no patch"  # the ground truth of a prediction without a patch needs no run
GRADED = "graded"  # the outcome source of a grade made here


@dataclass
class RunImported:
    """One run's share of a predictions file, as `import_predictions --json` prints it."""

    run: Optional[str]  # None: refused rows that name no run
    rows: int = 0
    candidates: int = 0  # candidates made, replaced or kept as they were
    no_patch: int = 0
    unknown_instance: int = 0
    duplicates: int = 0
    rejected: int = 0
    resolved: Optional[int] = None  # by the report; None without one
    ungraded: Optional[int] = None  # with a report: candidates with a patch left without a ground truth
    replaced: int = 0  # of `candidates`, those whose patch replaced the run's earlier one for the task
    trajectories: int = 0  # of `candidates`, those given a trajectory
    unknown_ids: list = field(default_factory=list)

    def printed(self) -> dict:
        line = asdict(self)
        line.pop("unknown_ids")
        return line


def predictions_import(*, path: Path, run_name: str = "", report_path: Optional[Path] = None,
                       trajectories_path: Optional[Path] = None, user=None) -> tuple[Import, list[RunImported]]:
    """Each prediction becomes the candidate of its run for the task with its instance id. A run's
    earlier candidate for the task is kept when the patch is the same (its ground truth with it),
    replaced otherwise. With a report, the candidates get the ground truth it gives, marked with its
    source. Trajectories (a file or folder, worker/engine/grade/trajectories.py) go with the
    candidates of their instances. ImportUnreadable when nothing could be read from the file, the
    report or the trajectories."""
    path = Path(path)
    report = _report(report_path)
    trajectories = _trajectories(trajectories_path)
    found = predictions_read(path, run=run_name)
    if found.unreadable:
        raise ImportUnreadable(found.unreadable)
    ids = {prediction.instance_id for prediction in found.kept.values()}
    # A person's upload reaches only the tasks they may see; another's instance id is no task of theirs.
    tasks = dict(_tasks_seen(user).filter(instance_id__in=ids).values_list("instance_id", "id"))
    by_run = _runs_counted(found, run_name)
    source = f"report:{report.shape}:{Path(report_path).name}"[:300] if report else ""
    with transaction.atomic():
        for summary in by_run.values():
            if summary.run is not None:
                _run_import(summary, [p for p in found.kept.values() if p.run == summary.run], tasks, report, source,
                            trajectories)
        refused = [asdict(row) for row in found.refused]
        refused += [{"row": found.row_of[summary.run, instance_id], "instance_id": instance_id,
                     "reason": "no task has this instance id"}
                    for summary in by_run.values() for instance_id in summary.unknown_ids]
        refused += [{"row": 0, "instance_id": "", "reason": why}
                    for why in (trajectories.refused if trajectories else [])]
        imported = Import.objects.create(
            kind=Import.Kind.PREDICTIONS, file_name=path.name[:255],
            report_name=Path(report_path).name[:255] if report else "", report_shape=report.shape if report else "",
            rows=found.rows, matched=sum(summary.candidates for summary in by_run.values()),
            counts={"runs": [summary.printed() for summary in by_run.values()]}, refused=_refused_sorted(refused),
            created_by=user)
    return imported, list(by_run.values())


def _report(report_path: Optional[Path]) -> Optional[Report]:
    if report_path is None:
        return None
    try:
        return report_read(Path(report_path))
    except ValueError as unreadable:
        raise ImportUnreadable(str(unreadable)) from None


def _trajectories(path: Optional[Path]) -> Optional[Trajectories]:
    if path is None:
        return None
    if not Path(path).exists():
        raise ImportUnreadable(f"{Path(path).name}: no such file or folder of trajectories")
    read = trajectories_read(Path(path))
    if not read.found:
        raise ImportUnreadable(f"{Path(path).name}: no trajectory could be read"
                               f"{' (' + read.refused[0] + ')' if read.refused else ''}")
    return read


def _runs_counted(found, run_name: str) -> dict:
    """The file's rows counted per run. A refused row counts for the run when the import names it
    or the file holds one run; otherwise in a line of its own (run null)."""
    by_run: dict = {}
    for prediction in found.kept.values():
        by_run.setdefault(prediction.run, RunImported(prediction.run)).rows += 1
    for key in found.duplicates:
        summary = by_run[found.kept[key].run]
        summary.duplicates += 1
        summary.rows += 1
    if found.refused:
        owner = run_name or (next(iter(by_run)) if len(by_run) == 1 else None)
        summary = by_run.setdefault(owner, RunImported(owner))
        summary.rejected += len(found.refused)
        summary.rows += len(found.refused)
    return by_run


def _run_import(summary: RunImported, predictions: list, tasks: dict, report: Optional[Report],
                source: str, trajectories: Optional[Trajectories]) -> None:
    run, _ = Run.objects.get_or_create(name=summary.run)
    summary.unknown_ids = sorted(p.instance_id for p in predictions if p.instance_id not in tasks)
    summary.unknown_instance = len(summary.unknown_ids)
    predictions = [p for p in predictions if p.instance_id in tasks]
    existing = {row["task_id"]: row for row in Candidate.objects.filter(
        run=run, task_id__in=[tasks[p.instance_id] for p in predictions]).values("id", "task_id", "patch", "no_patch")}
    now = django_timezone.now()
    rows, kept, replaced = [], [], []
    for prediction in predictions:
        task_id, patch = tasks[prediction.instance_id], text_storable(prediction.patch or "")
        outcome, outcome_source = ((report.outcomes.get(prediction.instance_id, report.unlisted), source) if report
                                   else ("", ""))
        if prediction.patch is None:
            outcome, outcome_source = "no_patch", NO_PATCH_SOURCE  # no run can say otherwise
        earlier = existing.get(task_id)
        steps = _steps(trajectories, prediction.instance_id)
        summary.trajectories += steps is not None
        if earlier and (earlier["patch"], earlier["no_patch"]) == (patch, prediction.patch is None):
            kept.append((earlier["id"], outcome, outcome_source))
            if steps is not None:
                Candidate.objects.filter(id=earlier["id"]).update(trajectory=steps)
            continue
        if earlier:
            replaced.append(earlier["id"])
        rows.append(dict(task_id=task_id, source=Candidate.Source.IMPORT, run_id=run.id, kind=summary.run[:64],
                         patch=patch, no_patch=prediction.patch is None, outcome=outcome,
                         outcome_source=outcome_source if outcome else "", graded_at=now if outcome else None,
                         trajectory=steps or [],
                         # What a report calls resolved counts at once: it is read now (grading reads the rest).
                         **patch_hacking_fields(patch if outcome == "resolved" else "", TestFileRules())))
    Candidate.objects.filter(id__in=replaced).delete()
    rows_insert(Candidate, rows)
    # The report's word; without one, a kept candidate keeps the ground truth it had.
    by_outcome = defaultdict(list)
    for candidate_id, outcome, outcome_source in kept:
        if outcome:
            by_outcome[outcome, outcome_source].append(candidate_id)
    for (outcome, outcome_source), ids in by_outcome.items():  # a grade here outranks a report from elsewhere
        Candidate.objects.filter(id__in=ids).exclude(outcome_source=GRADED).update(
            outcome=outcome, outcome_source=outcome_source, graded_at=now)
        if outcome == "resolved":
            candidates_hacking_read(ids, TestFileRules())
    summary.replaced = len(replaced)
    summary.candidates = len(rows) + len(kept)
    summary.no_patch = sum(p.patch is None for p in predictions)
    if report:
        resolved = {p.instance_id for p in predictions if p.patch is not None
                    and report.outcomes.get(p.instance_id) == "resolved"}
        summary.resolved = len(resolved)
        summary.ungraded = Candidate.objects.filter(run=run, task_id__in=[tasks[p.instance_id] for p in predictions],
                                                    outcome="").count()
