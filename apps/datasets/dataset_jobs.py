"""Work over a dataset's valid tasks started as one job, its DatasetJob row holding what was asked and
what it did: verify, make mutants, sample. Each kind registers its `run` (apps.py), reads its options
and writes what it started; asking while one is under way returns that one."""

from typing import Optional

from django.db import transaction

from apps.jobs.services import job_start
from apps.tasks.models import Task

from .models import Dataset, DatasetJob
from .selectors import dataset_tasks, dataset_tasks_visible


def dataset_job_start(*, kind: str, dataset: Dataset, user, options: dict) -> tuple[DatasetJob, bool]:
    """(its row, True), or (the one of this kind under way on the dataset, with its own options, False)."""
    with transaction.atomic():
        job, created = job_start(kind=kind, subject=dataset, user=user)
        if created:
            return DatasetJob.objects.create(job=job, dataset=dataset, options=options), True
    return DatasetJob.objects.select_related("job").get(job=job), False


def dataset_job_latest(dataset: Dataset, kind: str) -> Optional[DatasetJob]:
    return DatasetJob.objects.filter(dataset=dataset, job__kind=kind).select_related("job").first()


def dataset_job_of(job) -> DatasetJob:
    return DatasetJob.objects.select_related("dataset").get(job=job)


def dataset_job_tasks(dataset_job: DatasetJob) -> list[Task]:
    """The dataset's valid tasks that the person who asked sees, in a stable order."""
    user = dataset_job.job.requested_by
    tasks = dataset_tasks_visible(dataset_job.dataset, user=user) if user else dataset_tasks(dataset_job.dataset)
    return list(tasks.filter(verdict="valid").select_related("repository", "commit").order_by("id"))


def dataset_job_note(dataset_job: DatasetJob, started: dict) -> None:
    """What the job has done so far, kept as it goes (a job cancelled half-way says how far it got)."""
    DatasetJob.objects.filter(pk=dataset_job.pk).update(started=started)
