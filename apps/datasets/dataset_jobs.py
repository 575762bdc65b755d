"""Work over a dataset's valid tasks started as one job, its DatasetJob row holding what was asked and
what it did: verify, make mutants, sample. Each kind registers its `run` (apps.py), reads its options
and writes what it started; asking while one is under way returns that one."""

from typing import Iterator, Optional

from django.db import transaction

from apps.jobs.services import JobFailed, job_start
from apps.tasks.models import Task

from .models import Dataset, DatasetJob
from .selectors import dataset_tasks_visible


class DatasetJobBusy(Exception):
    """Work of this kind is under way on the dataset as someone else, or with other options, asked it."""


def dataset_job_start(*, kind: str, dataset: Dataset, user, options: dict) -> tuple[DatasetJob, bool]:
    """(its row, True); (the one under way, False) when the same person asked the same; DatasetJobBusy
    when the one under way was asked by another person (it covers the tasks they see) or otherwise."""
    with transaction.atomic():
        job, created = job_start(kind=kind, subject=dataset, user=user)
        if created:
            return DatasetJob.objects.create(job=job, dataset=dataset, options=options), True
    row = DatasetJob.objects.select_related("job").get(job=job)
    if row.job.requested_by_id != getattr(user, "pk", None):
        raise DatasetJobBusy(f"Another person's {job.kind.replace('_', ' ')} of this dataset is under way "
                             f"(job {job.pk}): ask again when it ends.")
    if row.options != options:
        raise DatasetJobBusy(f"Your {job.kind.replace('_', ' ')} of this dataset is under way (job {job.pk}) with "
                             f"other options ({', '.join(f'{k}={v}' for k, v in sorted(row.options.items()))}): "
                             "ask again when it ends, or cancel it.")
    return row, False


def dataset_job_latest(dataset: Dataset, kind: str) -> Optional[DatasetJob]:
    return DatasetJob.objects.filter(dataset=dataset, job__kind=kind).select_related("job").first()


def dataset_job_of(job) -> DatasetJob:
    return DatasetJob.objects.select_related("dataset").get(job=job)


def dataset_job_tasks(dataset_job: DatasetJob) -> list[Task]:
    """The dataset's valid tasks that the person who asked sees, in a stable order; JobFailed when that
    person is gone (what they saw cannot be told any more)."""
    user = dataset_job.job.requested_by
    if user is None:
        raise JobFailed("requester_gone", "the person who asked for it was removed: ask again")
    tasks = dataset_tasks_visible(dataset_job.dataset, user=user)
    return list(tasks.filter(verdict="valid").select_related("repository", "commit").order_by("id"))


def dataset_job_each_task(dataset_job: DatasetJob, tasks: list[Task], progress, started: dict) -> Iterator[Task]:
    """Each task in turn; after each, `started` (what the kind has done so far) is kept on the row, so a
    job cancelled half-way says how far it got, and the job's progress moves on (or it stops there)."""
    for done, task in enumerate(tasks):
        yield task
        DatasetJob.objects.filter(pk=dataset_job.pk).update(started=started)
        if not progress.go_on(done + 1, len(tasks)):
            return
