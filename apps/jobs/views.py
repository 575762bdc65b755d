"""The jobs page: every background job, newest first, filterable; cancel and retry where the kind
allows; which workers are alive. It polls while anything runs."""

from datetime import datetime

from django.contrib import messages
from django.core.paginator import Paginator
from django.http import HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.utils import timezone
from django.views.decorators.http import require_POST

from apps.accounts.roles import user_can_mine
from apps.pages import page_render, redirect_back, require_miner

from . import selectors
from .models import Job
from .registry import job_kind, job_kinds
from .services import JobRefused, job_cancel, job_retry

JOBS_PER_PAGE = 50


def _rows(jobs) -> list[dict]:
    rows = []
    for job in jobs:
        try:
            kind = job_kind(job.kind)
        except LookupError:
            kind = None  # its app is not installed here any more: shown, not acted on
        rows.append({"job": job, "kind": kind, "label": kind.label if kind else job.kind,
                     "link": kind.link(job) if kind and kind.link else "",
                     "can_cancel": bool(kind and kind.cancellable and job.is_active),
                     "can_retry": bool(kind and kind.retry and job.state in (Job.State.FAILED, Job.State.CANCELLED))})
    return rows


def job_list(request):
    filters = {name: request.GET.get(name, "").strip()[:200] for name in ("kind", "state", "subject")}
    jobs = selectors.jobs_filtered(user=request.user, **filters)
    page = Paginator(jobs, JOBS_PER_PAGE).get_page(request.GET.get("page"))
    rows = _rows(page.object_list)
    context = {"page": page, "rows": rows, "filters": filters, "kinds": job_kinds(), "states": Job.State.choices,
               "polling": any(row["job"].is_active for row in rows), "can_act": user_can_mine(request.user),
               "query": request.GET.urlencode()}
    return page_render(request, "jobs/job_list.html", context, partial="jobs")


def job_workers(request):
    """The workers panel, fetched on its own so that asking the workers never holds up the page."""
    return render(request, "jobs/job_list.html#workers", {"workers": selectors.workers_alive()})


def _job(request, pk: int) -> Job:
    return get_object_or_404(selectors.jobs_visible(user=request.user), pk=pk)


@require_POST
def job_cancel_view(request, pk: int):
    job = _job(request, pk)
    require_miner(request)
    try:
        job_cancel(job=job, user=request.user)
        messages.success(request, f"Job {job.pk} is being cancelled.")
    except JobRefused as refused:
        messages.error(request, str(refused))
    return redirect_back(request, redirect("jobs:list"))


@require_POST
def job_retry_view(request, pk: int):
    job = _job(request, pk)
    require_miner(request)
    try:
        again = job_retry(job=job, user=request.user)
        messages.success(request, f"Job {job.pk} is queued again as job {again.pk}.")
    except JobRefused as refused:
        messages.error(request, str(refused))
    return redirect_back(request, redirect("jobs:list"))


LONG_JOB_SECONDS = 20  # a job this long, ended while the person went on: say so
TOASTS_AT_ONCE = 3
TOAST_SINCE = "jobs_toast_since"


def job_toasts(request):
    """Polled by every page (htmx): the long jobs this person started that ended since the last
    poll, each as a note with a link to what it made. The first poll of a session only starts the
    clock."""
    if not request.user.is_authenticated:
        return HttpResponse(status=204)
    now = timezone.now()
    since = request.session.get(TOAST_SINCE)
    request.session[TOAST_SINCE] = now.isoformat()
    if not since:
        return HttpResponse(status=204)
    ended = list(Job.objects.filter(requested_by=request.user, finished_at__gt=datetime.fromisoformat(since),
                                    finished_at__lte=now, seconds__gte=LONG_JOB_SECONDS)
                 .order_by("finished_at", "id")[:TOASTS_AT_ONCE + 1])
    if not ended:
        return HttpResponse(status=204)
    if len(ended) > TOASTS_AT_ONCE:  # many at once (a bulk action's): one note for them all
        failed = Job.objects.filter(requested_by=request.user, finished_at__gt=datetime.fromisoformat(since),
                                    finished_at__lte=now, state__in=(Job.State.FAILED, Job.State.CANCELLED)).count()
        return render(request, "jobs/toasts.html", {"many": True, "failed": failed})
    return render(request, "jobs/toasts.html", {"rows": _rows(ended)})
