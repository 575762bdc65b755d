"""The figures of the curation dashboard: each repository's funnel from commits to accepted tasks,
why tasks were rejected, and how much each reviewer reviewed and agreed with the others."""

from collections import Counter, defaultdict
from datetime import timedelta
from itertools import combinations

from django.db.models import Count, Q
from django.utils import timezone

from apps.repositories.models import Commit
from apps.repositories.selectors import repositories_visible

from .models import Review, Task
from .selectors import VALID_OR_LATER


def _funnels(repositories) -> list[dict]:
    commits = {row["repository"]: row for row in Commit.objects.filter(repository__in=repositories).values(
        "repository").annotate(total=Count("id"), kept=Count("id", filter=Q(drop_reason="")))}
    tasks = {row["repository"]: row for row in Task.objects.filter(repository__in=repositories).values(
        "repository").annotate(
        valid=Count("id", filter=Q(state__in=VALID_OR_LATER)),
        reviewed=Count("id", filter=Q(state__in=[Task.State.ACCEPTED, Task.State.REJECTED])),
        accepted=Count("id", filter=Q(state=Task.State.ACCEPTED)),
        waiting=Count("id", filter=Q(state=Task.State.NEEDS_REVIEW)))}
    funnels = []
    for repository in repositories:
        c, t = commits.get(repository.pk, {}), tasks.get(repository.pk, {})
        steps = [("Commits", c.get("total", 0)), ("Kept by the filters", c.get("kept", 0)),
                 ("Valid tasks", t.get("valid", 0)), ("Reviewed", t.get("reviewed", 0)),
                 ("Accepted", t.get("accepted", 0))]
        top = steps[0][1] or 1
        funnels.append({"repository": repository, "waiting": t.get("waiting", 0),
                        "steps": [(label, n, 100 * n / top) for label, n in steps]})
    return funnels


def _agreement(reviews: list[Review]) -> tuple[dict[int, list[int]], int, int]:
    """Per reviewer [pairs agreed, pairs], and over all pairs: agreed, total. Two reviews of one task
    agree when they decided the same."""
    by_task = defaultdict(list)
    for row in reviews:
        by_task[row.task_id].append(row)
    per_reviewer, agreed, pairs = defaultdict(lambda: [0, 0]), 0, 0
    for task_reviews in by_task.values():
        for a, b in combinations(task_reviews, 2):
            same = a.decision == b.decision
            agreed, pairs = agreed + same, pairs + 1
            for reviewer in (a.reviewer_id, b.reviewer_id):
                per_reviewer[reviewer][0] += same
                per_reviewer[reviewer][1] += 1
    return per_reviewer, agreed, pairs


def dashboard_figures(*, user) -> dict:
    repositories = list(repositories_visible(user=user).order_by("name"))
    tasks = Task.objects.filter(repository__in=repositories)
    reasons = Counter(dict(tasks.filter(state=Task.State.REJECTED).values_list("reason").annotate(n=Count("id"))))
    week_ago = timezone.now() - timedelta(days=7)
    reviews = list(Review.objects.filter(task__in=tasks, current=True).only("task_id", "reviewer_id", "decision"))
    per_reviewer, agreed, pairs = _agreement(reviews)
    throughput = (Review.objects.filter(task__in=tasks).values("reviewer", "reviewer__username")
                  .annotate(total=Count("id"), week=Count("id", filter=Q(created_at__gte=week_ago)),
                            accepts=Count("id", filter=Q(decision="accept")),
                            rejects=Count("id", filter=Q(decision="reject")))
                  .order_by("-week", "-total"))
    reviewers = [{**row, "agreed": per_reviewer[row["reviewer"]][0], "pairs": per_reviewer[row["reviewer"]][1]}
                 for row in throughput]
    return {"funnels": _funnels(repositories), "reasons": reasons.most_common(),
            "reviewers": reviewers, "agreed": agreed, "pairs": pairs,
            "disagreements": tasks.filter(disagree=True).count()}
