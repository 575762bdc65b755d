import re

from django.db import transaction

from .models import Task, TaskStateChange


def _id_part(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]+", "-", text).strip("-") or "repo"


def task_instance_id(*, owner: str, name: str, sha: str) -> str:
    """SWE-bench's `owner__repo-N` shape, with the first 10 hex of the sha as N."""
    return f"{_id_part(owner)}__{_id_part(name)}-{sha[:10]}"


@transaction.atomic
def tasks_create_for_commits(*, repository, commits) -> int:
    """Kept commits become tasks in state `mined` at once; commits that already have one are left as they are."""
    owner, name = repository.owner_and_name
    ids = {task_instance_id(owner=owner, name=name, sha=c.sha): c for c in commits}
    existing = set(Task.objects.filter(instance_id__in=ids).values_list("instance_id", flat=True))
    new = [
        Task(instance_id=iid, repository=repository, commit=commit)
        for iid, commit in ids.items() if iid not in existing
    ]
    Task.objects.bulk_create(new, ignore_conflicts=True)
    created = Task.objects.filter(instance_id__in=[t.instance_id for t in new], state_changes__isnull=True)
    TaskStateChange.objects.bulk_create(
        [TaskStateChange(task=task, from_state="", to_state=Task.State.MINED) for task in created]
    )
    return len(new)


def tasks_delete_unstarted(*, commit_ids) -> int:
    """Tasks of commits the filters now drop go away while nothing has been done with them yet."""
    deleted, _ = Task.objects.filter(commit_id__in=commit_ids, state=Task.State.MINED).delete()
    return deleted
