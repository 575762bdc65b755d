"""The figures of the curation dashboard: each repository's funnel from commits to accepted tasks,
why tasks were rejected, how much each reviewer reviewed and agreed with the others; and those the
apps above register (DASHBOARD_FIGURES: how often both verifiers are wrong together on each dataset)."""

from collections import Counter
from datetime import timedelta

from django.db.models import Count, Q
from django.db.models.functions import TruncWeek
from django.utils import timezone

from apps.charts import Series, line_chart
from apps.repositories.models import Commit
from apps.repositories.selectors import repositories_visible
from worker.engine.label.agreement import Judgement, pairwise_agreement

from .models import Review, Task
from .registry import DASHBOARD_FIGURES
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


WEEKS = 12  # the review charts' span


def review_weeks(tasks, *, weeks: int = WEEKS) -> list[dict]:
    """Per week (oldest first, the last `weeks` ending this one): reviews written and the share of
    them that accepted."""
    now = timezone.now()
    start = (now - timedelta(days=now.weekday(), weeks=weeks - 1)).replace(hour=0, minute=0, second=0,
                                                                           microsecond=0)
    counted = {row["week"].date(): row for row in Review.objects.filter(task__in=tasks, created_at__gte=start)
               .annotate(week=TruncWeek("created_at")).values("week")
               .annotate(reviews=Count("id"), accepts=Count("id", filter=Q(decision="accept")))}
    rows = []
    for number in range(weeks):
        week = (start + timedelta(weeks=number)).date()
        row = counted.get(week, {})
        reviews, accepts = row.get("reviews", 0), row.get("accepts", 0)
        rows.append({"week": week, "reviews": reviews, "accepts": accepts,
                     "acceptance": accepts / reviews if reviews else None})
    return rows


def review_charts(weeks: list[dict]) -> dict:
    """Throughput and acceptance rate over the weeks, drawn by the product's chart helper."""
    x_range = (1, len(weeks))
    top = max((row["reviews"] for row in weeks), default=0)
    throughput = line_chart([Series("reviews", [(n, row["reviews"]) for n, row in enumerate(weeks, 1)])],
                            x_label=f"week (1 = {weeks[0]['week']:%Y-%m-%d})", y_label="reviews", x_range=x_range,
                            title="Reviews per week", y_high=max(top, 1))
    acceptance = line_chart([Series("accepted", [(n, row["acceptance"]) for n, row in enumerate(weeks, 1)])],
                            x_label=f"week (1 = {weeks[0]['week']:%Y-%m-%d})", y_label="share accepted",
                            x_range=x_range, title="Share of reviews that accepted, per week")
    return {"throughput": throughput, "acceptance": acceptance}


def dashboard_figures(*, user) -> dict:
    # A repository that never mined (a host that did not answer) has nothing to show yet.
    repositories = list(repositories_visible(user=user).exclude(mined_head="").order_by("name"))
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
    weeks = review_weeks(tasks)
    return {"funnels": _funnels(repositories), "reasons": reasons.most_common(),
            "weeks": weeks, "review_charts": review_charts(weeks),
            "reviewers": reviewers, "agreed": agreement.agreed, "pairs": agreement.pairs,
            "disagreements": tasks.filter(disagree=True).count(), **DASHBOARD_FIGURES.context(user=user)}
