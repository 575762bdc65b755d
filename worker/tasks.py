"""Thin Celery tasks: ids in, a service call, results stored by the service.

Each imports its service when it runs: this module is loaded with the Celery app before Django is
set up. Jobs are sent to these tasks by name (apps.jobs.services.job_dispatch)."""

import gc
import logging

from celery.signals import worker_process_init, worker_ready, worker_shutdown

from worker.celery_app import app

log = logging.getLogger(__name__)


@app.task(bind=True, name="worker.tasks.job_run_task", max_retries=None)
def job_run_task(self, job_id: int) -> None:
    """A job of the jobs table, of any kind (apps.jobs.registry)."""
    from django.conf import settings

    from apps.jobs.services import job_run

    # Held by another worker (a redelivery while it still runs, or after it died): come back when
    # its lease would be stale, and take the job over then if need be.
    if not job_run(job_id=job_id, worker=self.request.hostname or ""):
        raise self.retry(countdown=settings.COMMITGYM_JOB_STALE_SECONDS)


@app.task(name="worker.tasks.jobs_sweep_task")
def jobs_sweep_task() -> dict:
    from apps.jobs.services import jobs_sweep

    return jobs_sweep()


@worker_process_init.connect
def job_services_import(**kwargs) -> None:
    """Each pool process imports the services its jobs run as it starts, not in its first job (a
    grade's first run took 60 ms more than the next)."""
    from apps.jobs.registry import job_kinds

    for kind in job_kinds():
        try:
            kind.runner()
        except Exception:  # noqa: BLE001 - its jobs fail in words when they run (apps.jobs.services.job_run)
            log.exception("the %s jobs' service cannot be imported", kind.name)


@worker_process_init.connect
def pool_heap_freeze(**kwargs) -> None:
    """What a pool process has loaded before its first job (Django, Celery, the services) is left
    out of the garbage collector's full passes from then on: one pass through it took 60 to 100 ms,
    inside whichever job it fell in (a tenth of a mining job). Connected after the services' import."""
    gc.freeze()


_presence = []  # this worker process's WorkerPresence, from ready to shutdown


@worker_ready.connect
def worker_presence_start(sender=None, **kwargs) -> None:
    """The worker says in the database that it runs and which queues it consumes, for as long as it
    does: how a command on the embedded default, with no broker to ask, knows a worker is there."""
    from apps.jobs.services import WorkerPresence

    queues = [queue.name for queue in sender.task_consumer.queues]
    presence = WorkerPresence(name=sender.hostname, queues=queues)
    presence.start()
    _presence.append(presence)


@worker_shutdown.connect
def worker_presence_end(**kwargs) -> None:
    while _presence:
        _presence.pop().stop()
