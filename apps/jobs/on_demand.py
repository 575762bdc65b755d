"""A worker for as long as a command waits, on the embedded default.

With SQLite and the filesystem broker nothing else need run: a pipeline command whose job no
worker has taken within a few seconds starts one, for as long as it waits, and says so on
standard error. With a real broker it only warns: there, workers are the operator's to run."""

import ctypes
import os
import signal
import subprocess
import sys
import time
from typing import Callable, Optional

from django.conf import settings
from django.core.management.base import CommandError

GRACE_SECONDS = 3.0  # a worker that is running takes a job well within this
WARN_SECONDS = 10.0


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

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.stop()

    def waiting(self, *, queued: bool) -> None:
        waited = time.monotonic() - self.started_at
        if not queued or self.process is not None:
            return
        if embedded() and waited > GRACE_SECONDS:
            self._start()
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

    def _start(self) -> None:
        log = settings.VAR_DIR / "command-worker.log"
        self.stderr.write(f"No worker took the job within {GRACE_SECONDS:.0f} s: starting one on {self.queues!r} for "
                          f"as long as this command waits (log: {log}).")
        with open(log, "ab") as output:
            self.process = subprocess.Popen(
                [sys.executable, "-m", "celery", "-A", "worker.celery_app", "worker", "-Q", self.queues,
                 "--concurrency", "1", "--without-gossip", "--without-mingle", "--loglevel", "INFO"],
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
