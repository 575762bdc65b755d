"""Task sections shown on pages of other apps."""

from django import template

from apps.tasks import selectors
from apps.tasks.models import Validation

register = template.Library()


@register.inclusion_tag("tasks/validation_funnel.html")
def validation_funnel(repository):
    """The repository's tasks through validation, as bars like the mining funnel's (one query)."""
    steps = selectors.repository_validation_funnel(repository=repository)
    total = steps[0].remaining or 1
    return {
        "repository": repository,
        "steps": [(step, 100 * step.remaining / total, 100 * step.dropped / total) for step in steps],
        "reuse": selectors.environment_reuse(validations=Validation.objects.filter(task__repository=repository)),
    }
