"""The demo's progress, for the first page: `{% load demo %}{% demo_progress %}`."""

from django import template

from apps.datasets.demo import demo_progress as progress_read

register = template.Library()


@register.inclusion_tag("datasets/demo_progress.html")
def demo_progress():
    return {"progress": progress_read()}
