"""Making datasets: a repository's (with the repository), and a snapshot of a saved task-list view."""

from django.db import IntegrityError, transaction

from apps.bulk_insert import rows_insert
from apps.tasks.models import SavedView

from .models import Dataset, DatasetTask


class DatasetRefused(ValueError):
    """A dataset that cannot be made as asked; the message says why."""


def repository_dataset_ensure(repository) -> Dataset:
    """The repository's dataset, named after it (with " (repository)" where an import took the name)."""
    found = Dataset.objects.filter(repository=repository).first()
    if found:
        return found
    for name in (repository.name, f"{repository.name} (repository)"):
        try:
            with transaction.atomic():
                return Dataset.objects.create(name=name[:200], kind=Dataset.Kind.REPOSITORY, repository=repository)
        except IntegrityError:
            continue
    raise DatasetRefused(f"no free dataset name for the repository {repository.name}")


def dataset_from_view(*, view: SavedView, name: str, task_ids: list[int], user) -> Dataset:
    """A dataset of the tasks the saved view matched (`task_ids`, as `user` sees them): a snapshot,
    so that what is measured on it can be measured again."""
    name = name.strip() or view.name
    if Dataset.objects.filter(name=name).exists():
        raise DatasetRefused(f"a dataset named {name!r} exists already: choose another name")
    if not task_ids:
        raise DatasetRefused(f"the view {view.name!r} matches no task now: nothing to make a dataset of")
    with transaction.atomic():
        dataset = Dataset.objects.create(name=name[:200], kind=Dataset.Kind.VIEW, query=view.query, created_by=user)
        rows_insert(DatasetTask, [{"dataset_id": dataset.id, "task_id": task_id} for task_id in task_ids])
    return dataset
