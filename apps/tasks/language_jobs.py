"""Language jobs: a model writes something for a task (its issue, generated tests) in the
background, on the `llm` queue. Their life is the jobs table's (apps.jobs), their rows the llm app's
(LanguageJob); here is only the work and what it stores."""

import logging

from django.conf import settings
from django.db import transaction

from apps.jobs.leases import LeaseLost
from apps.jobs.services import JobCancelled, JobFailed, job_start
from apps.llm.models import LanguageJob
from worker.engine.llm.clients import ModelError, ModelSettings

from .backtranslation import task_backtranslate
from .generation import task_generate_tests

log = logging.getLogger(__name__)

# What each kind of job runs, and the role whose model it calls.
LANGUAGE_JOB_WORK = {
    LanguageJob.Kind.BACKTRANSLATE: ("issue_writer", task_backtranslate),
    LanguageJob.Kind.GENERATE_TESTS: ("test_writer", task_generate_tests),
}


def language_job_start(*, task, kind: str, regenerate: bool = False, user=None) -> LanguageJob:
    """Queue a job of `kind` on `task`; one already queued or running is returned instead."""
    with transaction.atomic():
        job, created = job_start(kind=kind, subject=task, user=user)
        if not created:
            return LanguageJob.objects.select_related("job").get(job=job)
        return LanguageJob.objects.create(job=job, task=task, kind=kind, regenerate=regenerate)


def language_job_work(job, progress) -> None:
    """The registered `run` of both kinds: ask the role's model, store what came of it. Cancelled
    during its call, it stores nothing of what came (the call is recorded all the same: a retry that
    does not regenerate is answered from it)."""
    language_job = LanguageJob.objects.select_related("task").get(job=job)
    role, work = LANGUAGE_JOB_WORK[language_job.kind]
    model = ModelSettings(**settings.COMMITGYM_MODELS[role])
    try:
        outcome, detail, model_name = work(task=language_job.task, regenerate=language_job.regenerate,
                                           progress=progress)
    except JobCancelled:
        _store(progress, language_job, outcome="", detail="cancelled before its results were stored",
               model=model.model_name)
        raise
    except LeaseLost:
        raise
    except ModelError as error:
        message = model.redact(f"{error.code}: {error}")
        _store(progress, language_job, outcome="failed", detail=message, model=model.model_name)
        raise JobFailed("model_failed", message) from None
    except Exception as error:
        log.exception("language job %s failed", job.id)
        message = model.redact(f"{type(error).__name__}: {error}")[:2000]
        _store(progress, language_job, outcome="failed", detail=message, model=model.model_name)
        raise JobFailed("worker_error", message) from None
    _store(progress, language_job, outcome=outcome, detail=detail, model=model_name)


def _store(progress, language_job: LanguageJob, **fields) -> None:
    """What the job gave, while this worker still holds it (one that took the job over stores its own)."""
    if progress.holding():
        fields["detail"] = fields["detail"][:2000]
        LanguageJob.objects.filter(id=language_job.id).update(**fields)


def language_job_retry(job, user) -> LanguageJob:
    """The registered `retry`: the same kind on the same task, asking the model afresh."""
    language_job = LanguageJob.objects.select_related("task").get(job=job)
    return language_job_start(task=language_job.task, kind=language_job.kind, regenerate=language_job.regenerate,
                              user=user).job
