"""Mutants of a task's gold patch as candidates (engine: grade/mutants.py), and the oracle's
mutation score: the share of its graded mutants the hidden tests catch (a mutant that resolves
the task survives). A curator may mark a survivor equivalent (it is a right fix after all): it
then counts for nothing."""

from typing import Optional

from unidiff import PatchSet

from apps.tasks.models import Task, TaskChange
from apps.tasks.selectors import task_patches
from worker.engine.git.repo import BlobReader, GitError
from worker.engine.grade.mutants import mutants_make

from ..dataset_jobs import dataset_job_each_task, dataset_job_of, dataset_job_start, dataset_job_tasks
from ..models import RESOLVED, Candidate, Dataset, DatasetJob

DATASET_MUTANTS = "dataset_mutants"  # the job kind (registered in apps.datasets.apps)
FILE_BYTES = 1 << 20  # a source file larger than this is not mutated
# The outcomes where the hidden tests judged the mutant: one that did not apply or whose run broke
# says nothing of the tests.
TESTS_RAN = ("resolved", "partial", "no")


def task_mutants_make(task: Task) -> tuple[list[str], str]:
    """The task's mutants, one of each kind the fix allows, where it has none of that kind yet:
    (the kinds made, "" or why none could be)."""
    if task.imported:
        return [], "an imported instance has no mirror to read its files from"
    try:
        patches = task_patches(task=task)
        paths = [patched.path for patched in PatchSet(patches.source_patch) if patched.path.endswith(".py")]
        files = files_at_commits(task, paths, (task.commit.parent_sha, task.commit.sha))
    except (GitError, OSError) as error:
        return [], f"the task's files cannot be read from the mirror ({error})"
    have = set(Candidate.objects.filter(task=task, source=Candidate.Source.MUTANT).values_list("kind", flat=True))
    made = [mutant for mutant in mutants_make(patches.source_patch, files) if mutant.kind not in have]
    Candidate.objects.bulk_create([Candidate(task=task, source=Candidate.Source.MUTANT, kind=mutant.kind,
                                             patch=mutant.patch, made=mutant.made) for mutant in made])
    if not made and not have:
        return [], "the fix has nothing a mutant kind changes (or is not Python 3)"
    return [mutant.kind for mutant in made], ""


def dataset_mutants_start(*, dataset: Dataset, user) -> tuple[DatasetJob, bool]:
    """Queue making the mutants of the dataset's valid tasks (or return the job under way)."""
    return dataset_job_start(kind=DATASET_MUTANTS, dataset=dataset, user=user, options={})


def dataset_mutants_work(job, progress) -> None:
    """The registered `run`: each valid task's missing mutants, as `manage.py make_mutants` makes them
    (graded by the dataset's grading, like any candidate without a ground truth); what each task got, or
    why none, kept on the row. Running it twice makes nothing more."""
    row = dataset_job_of(job)
    tasks = dataset_job_tasks(row)
    started = {"made": dict(row.started.get("made", {})), "skipped": dict(row.started.get("skipped", {}))}
    for task in dataset_job_each_task(row, tasks, progress, started):
        made, why = task_mutants_make(task)
        started["made"][task.instance_id] = started["made"].get(task.instance_id, []) + made  # a second run adds
        if why:
            started["skipped"][task.instance_id] = why


def files_at_commits(task: Task, paths: list[str], shas: tuple[str, ...]) -> dict[str, tuple[Optional[str], ...]]:
    """Each path's text at each of the commits, from the task's mirror: None where the file is not
    there (or the sha is empty: no such commit) or is larger than FILE_BYTES."""
    with BlobReader(task.repository.mirror_dir) as blobs:
        read = [blobs.read_objects([f"{sha}:{path}" for path in paths]) if sha else [None] * len(paths)
                for sha in shas]
    return {path: tuple(None if data is None or len(data) > FILE_BYTES else data.decode("utf-8", "replace")
                        for data in texts)
            for path, *texts in zip(paths, *read)}


def task_mutation_score_refresh(task_id: int) -> None:
    """The task's mutation score from its graded mutants (none graded: no score)."""
    survived = [candidate.resolved for candidate in Candidate.objects.filter(
        task_id=task_id, source=Candidate.Source.MUTANT, outcome__in=TESTS_RAN).only("outcome", "suspicious", "made")
        if not (candidate.made or {}).get("equivalent")]
    score = sum(not resolved for resolved in survived) / len(survived) if survived else None
    Task.objects.filter(id=task_id).update(mutation_score=score)


def mutant_mark_equivalent(*, candidate: Candidate, equivalent: bool = True) -> None:
    """A survivor a curator found to be a right fix: it no longer counts against the tests."""
    made = {**(candidate.made or {}), "equivalent": equivalent}
    Candidate.objects.filter(id=candidate.id).update(made=made)
    task_mutation_score_refresh(candidate.task_id)


def task_tests_flag_weak(*, task: Task, user) -> TaskChange:
    """A curator's word that the hidden tests let wrong fixes through (the surviving mutants named)."""
    survivors = [f"{kind}: {(made or {}).get('description', '')}" for kind, made in Candidate.objects.filter(
        RESOLVED, task=task, source=Candidate.Source.MUTANT).values_list("kind", "made")
        if not (made or {}).get("equivalent")]
    return TaskChange.objects.create(task=task, kind=TaskChange.Kind.TESTS_FLAGGED_WEAK, actor=user,
                                     after={"survivors": survivors},
                                     note="Mutants of the gold patch survive the tests.")
