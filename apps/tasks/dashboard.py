"""The figures of the curation dashboard: each repository's funnel from commits to accepted tasks,
why tasks were rejected, how much each reviewer reviewed and agreed with the others, and how often
both verifiers are wrong together on each dataset."""

from collections import Counter
from datetime import timedelta

from django.db.models import Count, Q
from django.utils import timezone

from apps.datasets.measures import verifier_overlaps
from apps.datasets.selectors import datasets_listed
from apps.repositories.models import Commit
from apps.repositories.selectors import repositories_visible
from worker.engine.label.agreement import Judgement, pairwise_agreement

from .models import Review, Task
from .states import REVIEWED_STATES, VALID_OR_LATER


def _funnels(repositories) -> list[dict]:
    commits = {row["repository"]: row for row in Commit.objects.filter(repository__in=repositories).values(
        "repository").annotate(total=Count("id"), kept=Count("id", filter=Q(drop_reason="")))}
    tasks = {row["repository"]: row for row in Task.objects.filter(repository__in=repositories).values(
        "repository").annotate(
        valid=Count("id", filter=Q(state__in=VALID_OR_LATER)),
        reviewed=Count("id", filter=Q(state__in=REVIEWED_STATES)),
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


def dashboard_figures(*, user) -> dict:
    repositories = list(repositories_visible(user=user).order_by("name"))
    tasks = Task.objects.filter(repository__in=repositories)
    reasons = Counter(dict(tasks.filter(state=Task.State.REJECTED).values_list("reason").annotate(n=Count("id"))))
    week_ago = timezone.now() - timedelta(days=7)
    reviews = list(Review.objects.filter(task__in=tasks, current=True).only("task_id", "reviewer_id", "decision"))
    # Two reviews of one task agree when they decided the same.
    agreement = pairwise_agreement(Judgement(row.task_id, row.reviewer_id, row.decision) for row in reviews)
    per_reviewer = agreement.per_person
    throughput = (Review.objects.filter(task__in=tasks).values("reviewer", "reviewer__username")
                  .annotate(total=Count("id"), week=Count("id", filter=Q(created_at__gte=week_ago)),
                            accepts=Count("id", filter=Q(decision="accept")),
                            rejects=Count("id", filter=Q(decision="reject")))
                  .order_by("-week", "-total"))
    reviewers = [{**row, "agreed": per_reviewer[row["reviewer"]][0], "pairs": per_reviewer[row["reviewer"]][1]}
                 for row in throughput]
    datasets = [row.dataset for row in datasets_listed(user=user)]
    return {"funnels": _funnels(repositories), "reasons": reasons.most_common(),
            "verifier_overlaps": verifier_overlaps(datasets),
            "reviewers": reviewers, "agreed": agreement.agreed, "pairs": agreement.pairs,
            "disagreements": tasks.filter(disagree=True).count()}
