"""Reads for environments: who sees which. (The validations that used one, and how often
validations shared one, are the tasks app's: apps.tasks.selectors.)"""

from pathlib import Path

from django.db.models import Count, Q, QuerySet

from apps.accounts.roles import ADMIN, user_roles
from apps.repositories.selectors import repositories_visible
from worker.engine.sandbox.docker import docker_client, engine_errors

from .models import Environment


def environments_visible(*, user) -> QuerySet:
    """Environments built for a visible repository, or used by a validation of one. Admins see them all."""
    if ADMIN in user_roles(user):
        return Environment.objects.all()
    visible = repositories_visible(user=user).values("pk")
    used = Environment.objects.filter(validations__task__repository__in=visible).values("pk")
    return Environment.objects.filter(Q(repository__in=visible) | Q(pk__in=used))


def environments_listed(*, user) -> QuerySet:
    """Visible environments with `validation_count` (validations of visible repositories that used each)."""
    visible = repositories_visible(user=user).values("pk")
    return (environments_visible(user=user).select_related("repository")
            .annotate(validation_count=Count("validations", filter=Q(validations__task__repository__in=visible)))
            .order_by("-created_at", "-id"))


def environment_present(environment: Environment) -> bool:
    """Whether the environment is still here to run in: its folder on disk, and where an image holds
    it, that image on the engine."""
    if not Path(environment.path).is_dir():
        return False
    if not environment.sealed_image:
        return True
    try:
        docker_client(timeout=30).images.get(environment.sealed_image)
    except engine_errors():
        return False
    return True
