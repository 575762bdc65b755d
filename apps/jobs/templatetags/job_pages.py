"""A job's state as every page shows it (templates/jobs/job_state.html), and durations for people."""

from typing import Optional

from django import template

from ..models import Job
from ..registry import job_kind
from ..selectors import job_elapsed_seconds, job_seconds_left

register = template.Library()


@register.filter
def duration(seconds) -> str:
    """Seconds for people: 4.2 s, 38 s, 3 min 07 s, 2 h 05 min (static/js/jobs.js writes them alike)."""
    if seconds is None:
        return ""
    seconds = max(0.0, float(seconds))
    if seconds < 10:
        return f"{seconds:.1f} s"
    whole = int(seconds)
    if whole < 60:
        return f"{whole} s"
    if whole < 3600:
        return f"{whole // 60} min {whole % 60:02d} s"
    return f"{whole // 3600} h {whole % 3600 // 60:02d} min"


@register.inclusion_tag("jobs/job_state.html")
def job_state(job: Optional[Job]) -> dict:
    """A job's state wherever one is shown: its badge, when it started and how long it has run (still
    counting in the page while it runs), how far it got (a model job: calls done of calls planned), and
    whether it was sent again. Nothing for no job."""
    if job is None:
        return {"job": None}
    try:
        unit = job_kind(job.kind).progress_unit
    except LookupError:
        unit = ""  # its app is not installed here any more
    return {"job": job, "running": job.state == Job.State.RUNNING, "elapsed": job_elapsed_seconds(job),
            "seconds_left": job_seconds_left(job), "unit": unit}
