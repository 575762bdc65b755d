"""The first page after logging in: what commitgym does, and its two paths (making tasks, choosing
patches), each step linked to the first thing of its kind there is and counted, so a newcomer sees
where the data stands and where to go next."""

from django.db.models import Count
from django.shortcuts import render

from apps.accounts.roles import user_can_review
from apps.datasets.models import Candidate, Dataset
from apps.repositories.selectors import repositories_visible
from apps.tasks.models import Task
from apps.tasks.selectors import tasks_visible


def home(request):
    user = request.user
    repositories = repositories_visible(user=user)
    tasks = tasks_visible(user=user)
    candidates = Candidate.objects.filter(task__in=tasks)
    repository = repositories.exclude(mined_head="").annotate(n=Count("tasks")).order_by("-n", "name").first()
    # The task with the most candidates: the richest matrix to look at first.
    task = (tasks.filter(candidates__isnull=False).annotate(n=Count("candidates")).order_by("-n", "instance_id")
            .only("instance_id").first())
    dataset = (Dataset.objects.filter(repository=repository).first() if repository else None) or (
        Dataset.objects.filter(tasks=task).order_by("kind", "name").first() if task else None)
    context = {
        "repository_count": repositories.count(),
        "repository": repository,
        "task_count": tasks.count(),
        "valid_count": tasks.filter(state__in=(Task.State.VALID, Task.State.NEEDS_REVIEW, Task.State.ACCEPTED)).count(),
        "waiting_count": tasks.filter(state=Task.State.NEEDS_REVIEW).count(),
        "accepted_count": tasks.filter(state=Task.State.ACCEPTED).count(),
        "dataset": dataset,
        "dataset_count": Dataset.objects.count(),
        "task": task,
        "candidate_count": candidates.count(),
        "can_review": user_can_review(user),
    }
    return render(request, "home.html", context)
