"""Language jobs: a model writes something for a task (its issue, generated tests) in the
background, on the `llm` queue."""

import logging
import time

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from apps.leases import Lease, LeaseLost
from apps.tasks.backtranslation import task_backtranslate
from apps.tasks.generation import task_generate_tests
from worker.engine.llm.clients import ModelError, ModelSettings

from .models import LanguageJob

log = logging.getLogger(__name__)


def language_job_start(*, task, kind: str, regenerate: bool = False, user=None) -> LanguageJob:
    """Queue a job of `kind` on `task`; one already queued or running is returned instead."""
    from worker.tasks import language_job_run_task  # dispatch: worker.tasks imports this module

    Lease.stale_rows(LanguageJob, running_state=LanguageJob.State.RUNNING, task=task, kind=kind).update(
        state=LanguageJob.State.FAILED, outcome="failed", finished_at=timezone.now(),
        detail="The worker running this job stopped reporting.")
    active = LanguageJob.objects.filter(task=task, kind=kind, state__in=LanguageJob.ACTIVE_STATES).first()
    if active:
        return active
    job = LanguageJob.objects.create(task=task, kind=kind, regenerate=regenerate, requested_by=user)
    transaction.on_commit(lambda: language_job_run_task.delay(job.id))
    return job


# What each kind of job runs, and the role whose model it calls.
LANGUAGE_JOB_WORK = {
    LanguageJob.Kind.BACKTRANSLATE: ("issue_writer", task_backtranslate),
    LanguageJob.Kind.GENERATE_TESTS: ("test_writer", task_generate_tests),
}


def language_job_run(*, job_id: int) -> bool:
    """Run a queued job to its end. Safe to call twice. False when another worker holds it."""
    lease = Lease.claim(LanguageJob, job_id, waiting_state=LanguageJob.State.QUEUED,
                        running_state=LanguageJob.State.RUNNING)
    if lease is None:
        return not Lease.held_elsewhere(LanguageJob, job_id, running_state=LanguageJob.State.RUNNING)
    job = LanguageJob.objects.select_related("task").get(id=job_id)
    if job.kind not in LANGUAGE_JOB_WORK:  # a kind this version does not know: never run it as another
        lease.finish(LanguageJob.State.FAILED, outcome="failed", detail=f"no such kind of language job: {job.kind}")
        return True
    role, work = LANGUAGE_JOB_WORK[job.kind]
    started = time.monotonic()
    with lease:
        try:
            outcome, detail, model = work(task=job.task, regenerate=job.regenerate)
        except LeaseLost:
            return True
        except ModelError as error:
            outcome, detail = "failed", f"{error.code}: {error}"
            model = ModelSettings(**settings.COMMITGYM_MODELS[role]).model_name
        except Exception as error:  # noqa: BLE001 - the job must end in a state a person can see
            log.exception("language job %s failed", job_id)
            redact = ModelSettings(**settings.COMMITGYM_MODELS[role]).redact
            lease.finish(LanguageJob.State.FAILED, outcome="failed",
                         detail=redact(f"{type(error).__name__}: {error}")[:2000],
                         seconds=time.monotonic() - started)
            return True
        lease.finish(LanguageJob.State.DONE, outcome=outcome, detail=detail[:2000], model=model,
                     seconds=time.monotonic() - started)
    return True
