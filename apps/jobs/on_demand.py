"""A worker for as long as a command waits, on the embedded default.

With SQLite and the filesystem broker nothing else need run: a pipeline command whose job no
worker has taken within a few seconds starts one, unless a running worker consumes the job's queue
(the workers' registry says; it is busy, and the job waits for it), for as long as it waits, and
says so on standard error. No beat runs there either: the waiting command runs the sweep itself,
so a job whose message was lost is sent again. With a real broker it only warns: there, workers
and the sweep are the operator's to run."""

import ctypes
import os
import signal
import subprocess
import sys
import time
from typing import Callable, Optional

from django.conf import settings
from django.core.management.base import CommandError
from django.db import DatabaseError

from apps.jobs.models import Job
from apps.jobs.selectors import queues_without_worker
from apps.jobs.services import jobs_sweep

GRACE_SECONDS = 3.0  # a worker that is running takes a job well within this
WARN_SECONDS = 10.0
SWEEP_SECONDS = 5.0  # at most; COMMITGYM_JOB_SWEEP_SECONDS if shorter


def embedded() -> bool:
    return (settings.CELERY_BROKER_URL.startswith("filesystem://")
            and settings.DATABASES["default"]["ENGINE"].endswith("sqlite3"))


class WorkerOnDemand:
    """Call `waiting(queued=...)` on each poll of a command's wait; `stop()` (or leave the `with`)
    when it is done."""

    def __init__(self, *, queues: str, stderr):
        self.queues, self.stderr = queues, stderr
        self.started_at = time.monotonic()
        self.process = None
        self.warned = False
        self.said_busy = False
        self.swept_at: Optional[float] = None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.stop()

    def waiting(self, *, queued: bool) -> None:
        if embedded():
            self._sweep()
        waited = time.monotonic() - self.started_at
        if not queued or self.process is not None:
            return
        if embedded() and waited > GRACE_SECONDS:
            missing = queues_without_worker(self.queues.split(","))
            if missing:
                self._start(",".join(missing))
            elif not self.said_busy:
                self.stderr.write(f"The job waits for the worker already running on {self.queues!r}.")
                self.said_busy = True
        elif not embedded() and waited > WARN_SECONDS and not self.warned:
            self.stderr.write(f"The job is still queued: is a worker running for the {self.queues!r} queue?")
            self.warned = True

    def wait_until(self, done: Callable[[], bool], *, queued: Callable[[], bool], timeout: float, what: str,
                   every: float = 0.5, still: Optional[Callable[[], str]] = None) -> None:
        """Poll `done` (which may report what ended meanwhile) until it says all is done; a worker is
        started or asked for while `queued()` says jobs wait. Past `timeout`, a CommandError saying
        `what` did not finish (and `still()`, what is left)."""
        deadline = time.monotonic() + timeout
        while not done():
            if time.monotonic() > deadline:
                left = f" ({still()})" if still else ""
                raise CommandError(f"{what} did not finish within {timeout:.0f} s{left}")
            self.waiting(queued=queued())
            time.sleep(every)

    def _sweep(self) -> None:
        """Now and then: a job whose message was lost is sent again (and one whose worker died is
        queued again) within COMMITGYM_JOB_REQUEUE_SECONDS, not at the end of the command's wait."""
        now = time.monotonic()
        if self.swept_at is not None and now - self.swept_at < min(SWEEP_SECONDS, settings.COMMITGYM_JOB_SWEEP_SECONDS):
            return
        self.swept_at = now
        try:
            counts = jobs_sweep()
        except DatabaseError as error:  # the database busy for longer than its timeout: the next look
            self.stderr.write(f"The sweep of lost jobs failed this time ({error}); it runs again in a moment.")
            return
        if counts["resent"] or counts["taken_over"]:
            self.stderr.write(f"Sent again, ahead of the jobs waiting: {counts['resent']} job(s) whose message was "
                              f"lost, {counts['taken_over']} whose worker stopped reporting.")

    def _start(self, queues: str) -> None:
        log = settings.VAR_DIR / "command-worker.log"
        self.stderr.write(f"No worker took the job within {GRACE_SECONDS:.0f} s and none runs on {queues!r}: starting "
                          f"one on {queues!r} for as long as this command waits (log: {log}).")
        with open(log, "ab") as output:
            self.process = subprocess.Popen(
                [sys.executable, "-m", "celery", "-A", "worker.celery_app", "worker", "-Q", queues,
                 "--concurrency", "1", "--without-gossip", "--without-mingle", "--loglevel", "INFO",
                 "--hostname", f"command{os.getpid()}@%h"],
                stdout=output, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True,
                preexec_fn=_end_with_parent)

    def stop(self) -> None:
        """End the worker and every process it started (its pool's children included)."""
        if self.process is None:
            return
        _signal_group(self.process, signal.SIGTERM)
        try:
            self.process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            _signal_group(self.process, signal.SIGKILL)
            self.process.wait()
        self.process = None


def _signal_group(process: subprocess.Popen, signal_number: int) -> None:
    try:
        os.killpg(process.pid, signal_number)
    except ProcessLookupError:
        pass


def _end_with_parent() -> None:
    """In the worker, before it starts: if the command dies without stopping it (killed, a closed
    terminal), the kernel ends the worker too (Linux's parent-death signal)."""
    try:
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGTERM)  # 1 = PR_SET_PDEATHSIG
    except OSError:
        pass


def job_waited(job_id: int, *, queues: str, what: str, stderr, timeout: float) -> None:
    """For a command: wait for one job to end, a worker started for it on the embedded default;
    CommandError unless it succeeded (`what` names it: "the release")."""
    ended = lambda: Job.objects.filter(id=job_id).exclude(state__in=Job.ACTIVE_STATES).exists()  # noqa: E731
    queued = lambda: Job.objects.filter(id=job_id, state=Job.State.QUEUED).exists()  # noqa: E731
    with WorkerOnDemand(queues=queues, stderr=stderr) as worker:
        worker.wait_until(ended, queued=queued, timeout=timeout, what=what)
    job = Job.objects.get(id=job_id)
    if job.state != Job.State.SUCCEEDED:
        raise CommandError(f"{what} {job.state}: {job.error_message or 'see its job'}")
