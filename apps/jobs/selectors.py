"""Reads for the jobs page: which jobs a person may see, filtered, with their time estimates; and
which workers are alive: those the workers' registry holds (apps.jobs.services.WorkerPresence), or
on a broker that can be asked, those that answer Celery's inspect (a short timeout, kept a few
seconds)."""

import os
import socket
import threading
from dataclasses import dataclass
from typing import Iterable, Optional

from celery import current_app
from django.conf import settings
from django.core.cache import cache
from django.db.models import Q, QuerySet
from django.utils import timezone

from apps.accounts.roles import ADMIN, user_roles

from .leases import Lease
from .models import Job, Worker
from .registry import job_subjects_visible

INSPECT_SECONDS = 1.0
WORKERS_CACHE_SECONDS = 5
_INSPECTING = threading.Lock()  # one inspect at a time per process


def jobs_visible(*, user) -> QuerySet:
    """Admins see every job; others the jobs on what they may see (the subjects whose visibility an
    app registered: a repository, or a task of one), and the other jobs they asked for themselves."""
    jobs = Job.objects.select_related("requested_by")
    if ADMIN in user_roles(user):
        return jobs
    visible = job_subjects_visible()
    seen = ~Q(subject_type__in=list(visible)) & Q(requested_by=user)
    for subject_type, subject_ids in visible.items():
        seen |= Q(subject_type=subject_type, subject_id__in=subject_ids(user=user))
    return jobs.filter(seen)


def jobs_filtered(*, user, kind: str = "", state: str = "", subject: str = "") -> QuerySet:
    """Newest first; `subject` is a subject's app_label.model:id, or words of its label."""
    jobs = jobs_visible(user=user)
    if kind:
        jobs = jobs.filter(kind=kind)
    if state:
        jobs = jobs.filter(state=state)
    if subject:
        subject_type, _, subject_id = subject.rpartition(":")
        if subject_type and subject_id.isdecimal():
            jobs = jobs.filter(subject_type=subject_type, subject_id=int(subject_id))
        else:
            jobs = jobs.filter(subject_label__icontains=subject)
    return jobs.order_by("-created_at", "-id")


def job_elapsed_seconds(job: Job) -> Optional[float]:
    """How long the job has run: until now while it runs, from its worker's claim to its end once it
    ended; None when it never started."""
    if job.state == Job.State.RUNNING and job.started_at:
        return max(0.0, (timezone.now() - job.started_at).total_seconds())
    if job.state not in Job.ENDED_STATES:
        return None
    if job.seconds is not None:
        return job.seconds
    if job.started_at and job.finished_at:
        return max(0.0, (job.finished_at - job.started_at).total_seconds())
    return None


def job_seconds_left(job: Job) -> Optional[float]:
    """A running job's time to go, from its pace so far; None when it cannot be told."""
    if job.state != Job.State.RUNNING or not job.started_at or not job.progress_total or not job.progress_done:
        return None
    elapsed = (timezone.now() - job.started_at).total_seconds()
    return max(0.0, elapsed / job.progress_done * (job.progress_total - job.progress_done))


@dataclass(frozen=True)
class WorkerSeen:
    name: str
    queues: tuple[str, ...]


def workers_running() -> list[Worker]:
    """The workers of the registry that reported within COMMITGYM_JOB_STALE_SECONDS, less those of
    this host whose process is gone (killed outright: nothing removed their row)."""
    host = socket.gethostname()[:255]
    recent = Worker.objects.filter(heartbeat_at__gte=Lease.stale_cutoff())
    return [worker for worker in recent if worker.host != host or _process_exists(worker.pid)]


def _process_exists(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # another user's
    return True


def queues_without_worker(queues: Iterable[str]) -> list[str]:
    """Those of `queues` that no running worker consumes."""
    consumed = {queue for worker in workers_running() for queue in worker.queues}
    return [queue for queue in queues if queue not in consumed]


def workers_alive() -> list[WorkerSeen]:
    """The workers alive and the queues each consumes: on the embedded filesystem transport, which
    has no broadcast to ask them, the registry's; elsewhere those that answered Celery's inspect
    within a second."""
    if settings.CELERY_BROKER_URL.startswith("filesystem://"):
        return [WorkerSeen(worker.name, tuple(worker.queues)) for worker in workers_running()]
    seen = cache.get("jobs:workers", "unknown")
    if seen != "unknown":
        return seen
    if not _INSPECTING.acquire(blocking=False):
        return []  # another request of this process is asking right now: it fills the cache
    try:
        seen = _inspect()
        cache.set("jobs:workers", seen, WORKERS_CACHE_SECONDS)
    finally:
        _INSPECTING.release()
    return seen


def _inspect() -> list[WorkerSeen]:
    answers: dict = {}

    def ask() -> None:
        answers["queues"] = current_app.control.inspect(timeout=INSPECT_SECONDS).active_queues() or {}

    thread = threading.Thread(target=ask, daemon=True)
    thread.start()
    thread.join(INSPECT_SECONDS * 2)  # never longer, whatever the broker does
    return [WorkerSeen(name, tuple(sorted(q["name"] for q in queues)))
            for name, queues in sorted(answers.get("queues", {}).items())]
