"""Reads for environments: who sees which, the validations that used one, and how often
validations shared one."""

from dataclasses import dataclass

from django.db.models import Count, Q, QuerySet

from apps.accounts.roles import ADMIN, user_roles
from apps.repositories.selectors import repositories_visible
from apps.tasks.models import Validation

from .models import Environment


@dataclass(frozen=True)
class EnvironmentReuse:
    validations: int  # finished validations that got an environment
    reused: int  # of those, how many reused one built before
    environments: int  # distinct environments they ran in

    @property
    def percent(self) -> float:
        return 100 * self.reused / self.validations if self.validations else 0.0


def environment_reuse(*, validations: QuerySet) -> EnvironmentReuse:
    """How often validations found an environment to share (the builder tries reuse first)."""
    # A check of generated tests runs in the environment of the validation before it: not a reuse.
    with_environment = validations.filter(job__state=Validation.State.SUCCEEDED, environment__isnull=False,
                                          generated=False)
    counts = with_environment.aggregate(total=Count("id"), reused=Count("id", filter=Q(environment_reused=True)),
                                        environments=Count("environment", distinct=True))
    return EnvironmentReuse(counts["total"], counts["reused"], counts["environments"])


def validations_of_environment(*, environment, user, limit: int = 200) -> QuerySet:
    visible = repositories_visible(user=user).values("pk")
    return (Validation.objects.filter(environment=environment, task__repository__in=visible)
            .select_related("task", "job")
            .only("id", "job__state", "job__started_at", "verdict", "reason", "created_at", "environment_reused",
                  "task__instance_id", "task__state")
            .order_by("-created_at", "-id")[:limit])


def environments_visible(*, user) -> QuerySet:
    """Environments built for a visible repository, or used by a validation of one. Admins see them all."""
    if ADMIN in user_roles(user):
        return Environment.objects.all()
    visible = repositories_visible(user=user).values("pk")
    used = Validation.objects.filter(task__repository__in=visible, environment__isnull=False).values("environment_id")
    return Environment.objects.filter(Q(repository__in=visible) | Q(pk__in=used))


def environments_listed(*, user) -> QuerySet:
    """Visible environments with `validation_count` (validations of visible repositories that used each)."""
    visible = repositories_visible(user=user).values("pk")
    return (environments_visible(user=user).select_related("repository")
            .annotate(validation_count=Count("validations", filter=Q(validations__task__repository__in=visible)))
            .order_by("-created_at", "-id"))
