"""The one life of every background job: start, dispatch, claim with a lease, heartbeat, progress,
finish, fail, cancel, retry, and the sweep that finds lost messages, dead workers and working
copies nobody owns; and the registry of the workers running. A kind only does its work
(registry.JobKind.run) and stores its results."""

import logging
import os
import shutil
import socket
import threading
import time
from datetime import timedelta
from pathlib import Path
from typing import Callable, Optional

from celery import current_app
from celery.exceptions import SoftTimeLimitExceeded
from django.conf import settings
from django.db import DatabaseError, IntegrityError, connection, transaction
from django.db.models import F, Q
from django.utils import timezone

from apps.bulk_insert import text_storable
from apps.jobs.leases import Lease, LeaseLost

from .broker import RESENT_PRIORITY, SENT_PRIORITY, broker_message_ids
from .models import Job, Worker
from .registry import job_kind

log = logging.getLogger(__name__)
# A job's working copies live in <COMMITGYM_WORK_DIR>/job-<id>-<its lease>: a worker that lost the
# job and one that took it over never share a folder.
WORK_PREFIX = "job-"
WORK_DIR_GRACE_SECONDS = 60


class JobCancelled(Exception):
    """Someone asked the job to stop; raised at its next progress report."""


class JobFailed(Exception):
    """The work cannot be done; `code` is a reason code, the message says why to a person."""

    def __init__(self, code: str, message: str = ""):
        super().__init__(message or code)
        self.code, self.message = code, message


class JobRefused(Exception):
    """An action on a job that its kind or its state does not allow; the message says why."""


class JobProgress:
    """Given to a kind's `run`: how it reports progress and learns it should stop."""

    def __init__(self, lease: Lease, job: Job):
        self.lease, self.job = lease, job
        self.started = time.monotonic()
        self.completed = False  # `complete` stored the results and ended the job

    def report(self, done: int, total: Optional[int] = None) -> None:
        """Record progress; JobCancelled when a cancel was asked, LeaseLost when another worker took
        the job over (stop writing: that worker stores its own results). A model job reports its
        calls: `total` the calls it plans, as soon as it knows them; `done` after each call."""
        if not self.go_on(done, total):
            raise JobCancelled()

    def go_on(self, done: int, total: Optional[int] = None) -> bool:
        """Record progress as `report` does, and say whether to go on (False once a cancel was asked)
        instead of raising: for work that stops on its own when told, such as a pool of model calls
        that starts no more (apps.llm.calls.model_scores's `on_each`)."""
        self.lease.update(progress_done=done, **({"progress_total": total} if total is not None else {}))
        return not self.cancel_requested()

    def cancel_requested(self) -> bool:
        return job_kind(self.job.kind).cancellable and self.lease.rows().filter(cancel_requested=True).exists()

    def holding(self) -> bool:
        """Whether this worker still holds the job (its results may be stored)."""
        return self.lease.rows().exists()

    def complete(self, store: Callable[[], None]) -> None:
        """Store the job's results and end it as succeeded, in one transaction: a worker that takes
        the job over after this finds it ended, so no result is ever stored twice. LeaseLost when
        the job is no longer this worker's (nothing is stored)."""
        with transaction.atomic():
            if not self.lease.rows().select_for_update().exists():  # holds off a take-over until the end
                raise LeaseLost()
            store()
            finished = self.lease.finish(Job.State.SUCCEEDED, seconds=time.monotonic() - self.started)
        self.completed = finished  # once committed

    def work_dir(self) -> Path:
        """A folder of this job's own for working copies; removed when the job ends, and by the sweep
        if its worker dies."""
        work_root()
        path = job_work_dir(self.job.id, self.lease.token)
        path.mkdir(exist_ok=True)
        return path


def work_root() -> Path:
    root = Path(settings.COMMITGYM_WORK_DIR)
    root.mkdir(parents=True, exist_ok=True)
    root.chmod(0o711)  # sandbox users walk through it to their own working copies only
    return root


def job_work_dir(job_id: int, token: str) -> Path:
    return Path(settings.COMMITGYM_WORK_DIR) / f"{WORK_PREFIX}{job_id}-{token[:12]}"


# --- starting -----------------------------------------------------------------------------------


def _subject_fields(subject) -> dict:
    if subject is None:
        return {"subject_type": "", "subject_id": None, "subject_label": ""}
    return {"subject_type": subject._meta.label_lower, "subject_id": subject.pk, "subject_label": str(subject)[:255]}


def job_start(*, kind: str, subject=None, user=None) -> tuple[Job, bool]:
    """Queue a job of `kind` on `subject`: (the job, True), or (the one already queued or running
    on it, False). Call it inside the transaction that stores the kind's own row for the job: the
    message goes out when that transaction commits."""
    job_kind(kind)  # a kind nobody registered is refused before anything is stored
    fields = _subject_fields(subject)
    same = {"kind": kind, "subject_type": fields["subject_type"], "subject_id": fields["subject_id"]}
    jobs_lost_end(kind=kind, subject=subject)
    try:
        with transaction.atomic():
            job = Job.objects.create(kind=kind, requested_by=user if getattr(user, "pk", None) else None, **fields)
    except IntegrityError:
        active = Job.objects.filter(state__in=Job.ACTIVE_STATES, **same).first()
        if active is None:  # it ended between the two queries
            return job_start(kind=kind, subject=subject, user=user)
        return active, False
    transaction.on_commit(lambda: job_dispatch(job.id))
    return job, True


def job_dispatch(job_id: int, *, front: bool = False) -> None:
    """Send the job's message to its kind's queue (again, after a loss: running it twice is safe);
    `front`: ahead of the jobs waiting there."""
    job = Job.objects.get(id=job_id)
    kind = job_kind(job.kind)
    message = current_app.send_task(kind.celery_job, args=[job.id], queue=kind.queue,
                                    priority=RESENT_PRIORITY if front else SENT_PRIORITY)
    Job.objects.filter(id=job.id).update(message_id=message.id, dispatched_at=timezone.now(),
                                         dispatches=F("dispatches") + 1)


# --- running ------------------------------------------------------------------------------------


def job_run(*, job_id: int, worker: str = "") -> bool:
    """Run a queued job to its end. Safe to call twice: a job that ended is left as it is. False
    when another worker holds it and may still be running it (try again once its lease could be
    stale: then this worker takes it over)."""
    lease = Lease.claim(Job, job_id, waiting_state=Job.State.QUEUED, running_state=Job.State.RUNNING,
                        worker=(worker or socket.gethostname())[:255])
    if lease is None:
        return not Lease.held_elsewhere(Job, job_id, running_state=Job.State.RUNNING)
    job = Job.objects.get(id=job_id)
    progress = JobProgress(lease, job)
    ended: Optional[dict] = None
    with lease:
        try:
            # A kind this worker does not know (its app is not installed here) fails the job, in words.
            job_kind(job.kind).runner()(job, progress)
            ended = {"state": Job.State.SUCCEEDED}
        except LeaseLost:
            return True  # another worker took it over; it ends the job
        except JobCancelled:
            ended = {"state": Job.State.CANCELLED}
        except JobFailed as failed:
            ended = {"state": Job.State.FAILED, "error_code": failed.code,
                     "error_message": text_storable(failed.message)[:4000]}
        except SoftTimeLimitExceeded:
            ended = {"state": Job.State.FAILED, "error_code": "time_limit",
                     "error_message": "The job ran past its time limit (CELERY_TASK_SOFT_TIME_LIMIT)."}
        except Exception as error:  # noqa: BLE001 - the job must end in a state a person can see
            log.exception("%s job %s failed", job.kind, job_id)
            ended = {"state": Job.State.FAILED, "error_code": "worker_error",
                     "error_message": text_storable(f"{type(error).__name__}: {error}")[:4000]}
        finally:
            shutil.rmtree(job_work_dir(job_id, lease.token), ignore_errors=True)
        state = ended.pop("state")
        if progress.completed:
            return True  # its results and its end were stored together
        with transaction.atomic():  # the end and the kind's clean-up, together or not at all
            seconds = time.monotonic() - progress.started
            if lease.finish(state, seconds=seconds, **ended) and state != Job.State.SUCCEEDED:
                _failure_hook(job)
    return True


def _failure_hook(job: Job) -> None:
    try:
        hook = job_kind(job.kind).failure_hook()
    except LookupError:
        return
    if hook is not None:
        hook(Job.objects.get(id=job.id))


def jobs_lost_end(*, kind: str, subject=None) -> int:
    """End the running jobs of `kind` on `subject` whose worker stopped reporting (their kind's
    clean-up runs): a new one may start."""
    fields = _subject_fields(subject)
    stale = Lease.stale_rows(Job, running_state=Job.State.RUNNING, kind=kind, subject_type=fields["subject_type"],
                             subject_id=fields["subject_id"])
    return sum(job_end_lost(job) for job in stale)


def job_end_lost(job: Job) -> bool:
    """End a running job whose worker stopped reporting, as failed; False if it moved meanwhile."""
    return _job_end_stale(job, state=Job.State.FAILED, error_code="worker_lost",
                          error_message="The worker running this job stopped reporting.")


def _job_end_stale(job: Job, **fields) -> bool:
    with transaction.atomic():
        ended = Job.objects.filter(id=job.id, state=Job.State.RUNNING, heartbeat_at__lt=Lease.stale_cutoff()).update(
            finished_at=timezone.now(), **fields)
        if ended:
            _failure_hook(job)
    if ended:
        shutil.rmtree(job_work_dir(job.id, job.lease_token), ignore_errors=True)
    return bool(ended)


# --- people's actions ---------------------------------------------------------------------------


def job_cancel(*, job: Job, user=None) -> None:
    """A queued job stops at once; a running one at its next progress report, keeping what it stored."""
    if not job_kind(job.kind).cancellable:
        raise JobRefused(f"A {job_kind(job.kind).label.lower()} job cannot be cancelled.")
    with transaction.atomic():
        if Job.objects.filter(id=job.id, state=Job.State.QUEUED).update(
                state=Job.State.CANCELLED, cancel_requested=True, finished_at=timezone.now()):
            _failure_hook(job)
            return
    if not Job.objects.filter(id=job.id, state=Job.State.RUNNING).update(cancel_requested=True):
        raise JobRefused(f"Job {job.id} has ended already.")


def job_retry(*, job: Job, user=None) -> Job:
    """A new job doing what a failed or cancelled one was for (its kind says how)."""
    kind = job_kind(job.kind)
    if not kind.retry:
        raise JobRefused(f"A {kind.label.lower()} job cannot be retried.")
    if job.state not in (Job.State.FAILED, Job.State.CANCELLED):
        raise JobRefused(f"Job {job.id} is {job.state}: only failed or cancelled jobs are retried.")
    return kind.retrier()(job, user)


# --- the sweep ----------------------------------------------------------------------------------


def jobs_sweep() -> dict[str, int]:
    """Re-send queued jobs whose message the broker lost, queue again running jobs whose worker died
    (ending those handed on too often, or asked to stop), both ahead of the jobs waiting, and
    remove working copies no running job owns. Safe to run anywhere, any number of times at once:
    every job runs once whatever is sent."""
    counts = {"resent": 0, "taken_over": 0, "ended": 0}
    waited = timezone.now() - timedelta(seconds=settings.COMMITGYM_JOB_REQUEUE_SECONDS)
    held: dict[str, Optional[set[str]]] = {}  # the broker's message ids, read once per queue
    queued = Job.objects.filter(state=Job.State.QUEUED).filter(
        Q(dispatched_at__lt=waited) | Q(dispatched_at__isnull=True, created_at__lt=waited))
    for job in queued.iterator():
        queue = _queue_of(job)
        if queue is None:
            continue  # a kind this process does not know: the worker that runs it fails it in words
        if queue not in held:
            held[queue] = broker_message_ids(queue)
        if held[queue] is not None and job.message_id not in held[queue]:
            counts["resent"] += job_resend(job, because=Job.Resent.MESSAGE_LOST)
    stale = Lease.stale_rows(Job, running_state=Job.State.RUNNING).filter(
        Q(dispatched_at__lt=Lease.stale_cutoff()) | Q(dispatched_at__isnull=True))
    for job in stale.iterator():
        if job.cancel_requested:
            counts["ended"] += _job_end_stale(job, state=Job.State.CANCELLED)
        elif job.dispatches > settings.COMMITGYM_JOB_MAX_DISPATCHES:
            counts["ended"] += _job_end_stale(
                job, state=Job.State.FAILED, error_code="worker_lost",
                error_message=f"Its workers stopped reporting {job.dispatches} times: it is not tried again.")
        elif _queue_of(job) is not None:
            counts["taken_over"] += job_resend(job, because=Job.Resent.WORKER_LOST)
    counts["work_dirs_removed"] = work_dirs_sweep()
    return counts


def job_resend(job: Job, *, because: str) -> bool:
    """Send a job again, ahead of the jobs waiting on its queue, saying why. A running job whose
    worker stopped reporting is queued again first (its lease lost: should that worker come back,
    it stops at its next write), its working copies removed. False if the job moved meanwhile."""
    rows = Job.objects.filter(id=job.id, state=job.state)
    fields = {"resent_because": because, "resent_at": timezone.now()}
    if job.state == Job.State.RUNNING:
        rows = rows.filter(heartbeat_at__lt=Lease.stale_cutoff())
        fields.update(state=Job.State.QUEUED, started_at=None)
    if not rows.update(**fields):
        return False
    if job.state == Job.State.RUNNING:
        shutil.rmtree(job_work_dir(job.id, job.lease_token), ignore_errors=True)
    job_dispatch(job.id, front=True)
    return True


def _queue_of(job: Job) -> Optional[str]:
    try:
        return job_kind(job.kind).queue
    except LookupError:
        return None


def work_dirs_sweep() -> int:
    """Remove the working copies no running job's lease owns (their worker was killed mid-run, or
    lost the job to another)."""
    root = Path(settings.COMMITGYM_WORK_DIR)
    if not root.is_dir():
        return 0
    # A job just claimed may be making its folder now.
    settled = time.time() - min(WORK_DIR_GRACE_SECONDS, settings.COMMITGYM_JOB_STALE_SECONDS)
    removed = 0
    for path in root.iterdir():
        job_id, _, token = path.name.removeprefix(WORK_PREFIX).partition("-")
        if not path.name.startswith(WORK_PREFIX) or not job_id.isdecimal() or not token:
            continue
        try:
            if path.is_symlink() or path.lstat().st_mtime > settled:
                continue
        except OSError:
            continue  # its job removed it meanwhile
        owner = Job.objects.filter(id=int(job_id), state=Job.State.RUNNING).values_list("lease_token", flat=True)
        if token not in {held[:12] for held in owner}:
            shutil.rmtree(path, ignore_errors=True)
            removed += 1
    return removed


# --- the workers' registry ----------------------------------------------------------------------

WORKER_ROWS_KEPT = timedelta(days=1)  # a killed worker's row, kept for the jobs page's history


def worker_beat(*, name: str, queues: list[str], host: str, pid: int) -> None:
    """Record that this worker process is alive and which queues it consumes (its row comes back
    if someone removed it)."""
    now = timezone.now()
    Worker.objects.update_or_create(host=host, pid=pid, defaults={"name": name, "queues": queues, "heartbeat_at": now},
                                    create_defaults={"name": name, "queues": queues, "heartbeat_at": now,
                                                     "started_at": now})


def worker_end(*, host: str, pid: int) -> None:
    Worker.objects.filter(host=host, pid=pid).delete()
    Worker.objects.filter(heartbeat_at__lt=timezone.now() - WORKER_ROWS_KEPT).delete()


class WorkerPresence:
    """A worker process's row in the registry, written by a thread of its own as the worker starts,
    every COMMITGYM_JOB_HEARTBEAT_SECONDS while it runs (busy or not), and removed as it ends."""

    def __init__(self, *, name: str, queues: list[str]):
        self.fields = {"name": name[:255], "queues": sorted(queues), "host": socket.gethostname()[:255],
                       "pid": os.getpid()}
        self._stopped = threading.Event()
        self._thread = threading.Thread(target=self._beat, name="worker-presence", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stopped.set()
        self._thread.join(timeout=30)

    def _beat(self) -> None:
        try:
            while True:
                try:
                    worker_beat(**self.fields)
                except DatabaseError:
                    log.warning("this worker's report to the workers' registry failed; it tries again", exc_info=True)
                    connection.close()
                if self._stopped.wait(settings.COMMITGYM_JOB_HEARTBEAT_SECONDS):
                    break
            worker_end(host=self.fields["host"], pid=self.fields["pid"])
        except DatabaseError:
            log.warning("this worker's row in the workers' registry could not be removed", exc_info=True)
        finally:
            connection.close()
