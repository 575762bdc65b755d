"""The kinds of background job. A kind is one registration, made in its app's `ready()`: the Celery
job and queue that carry it, the service that does its work, what it works on, whether people
may cancel or retry it, and where its results are shown. Nothing dispatches on kinds otherwise.

The service is named by its dotted path and imported when a job runs, so that this registry
imports no app's services (they import the job services back)."""

from dataclasses import dataclass
from typing import Callable, Optional

from django.utils.module_loading import import_string

CELERY_JOB = "worker.tasks.job_run_task"  # the Celery job (task, in its words) that runs a job of any kind
MODEL_CALLS = "model calls"  # what a model job's progress counts: calls done of calls planned


@dataclass(frozen=True)
class JobKind:
    name: str  # stored on every job of the kind
    label: str  # for people: "Mining", "Issue writing"
    queue: str  # mining, tests, llm or curation: the worker pool that runs it
    run: str  # dotted path of `run(job, progress)`, which does the work and stores its results
    subject: str = ""  # the model it works on, app_label.model ("" for none)
    cancellable: bool = False  # a running job stops at its next progress report
    progress_unit: str = ""  # what its progress counts, for people: MODEL_CALLS, "commits" ("" says no unit)
    # Dotted path of `retry(job, user) -> Job`: a new job doing what a failed or cancelled one was
    # for ("" when the kind cannot be retried).
    retry: str = ""
    # Dotted path of `ended(job)`, called once when the job ends failed or cancelled (the kind's
    # clean-up: give a task back, say).
    on_failure: str = ""
    # Where the job's results are shown: the address of its subject's page, say.
    link: Optional[Callable] = None
    celery_job: str = CELERY_JOB

    def runner(self) -> Callable:
        return import_string(self.run)

    def retrier(self) -> Callable:
        return import_string(self.retry)

    def failure_hook(self) -> Optional[Callable]:
        return import_string(self.on_failure) if self.on_failure else None


_KINDS: dict[str, JobKind] = {}


def job_kind_register(kind: JobKind) -> JobKind:
    """Register a kind; registering the same definition again (a reload) changes nothing."""
    known = _KINDS.get(kind.name)
    if known is not None and known != kind:
        raise ValueError(f"a job kind named {kind.name!r} is registered already, differently")
    _KINDS[kind.name] = kind
    return kind


def job_kind(name: str) -> JobKind:
    try:
        return _KINDS[name]
    except KeyError:
        raise LookupError(f"no job kind named {name!r} is registered (is its app installed?)") from None


def job_kinds() -> list[JobKind]:
    return sorted(_KINDS.values(), key=lambda kind: kind.label)


# Subjects whose jobs people see when they may see the subject (a repository, a task of one),
# registered by the subject's app: subject type (app_label.model) -> `subject_ids(user=)`, the ids of
# those the user may see. A job on any other subject is seen by who asked for it.
_SUBJECTS_VISIBLE: dict[str, Callable] = {}


def job_subject_visibility_register(subject_type: str, subject_ids: Callable) -> None:
    _SUBJECTS_VISIBLE[subject_type] = subject_ids


def job_subjects_visible() -> dict[str, Callable]:
    return dict(_SUBJECTS_VISIBLE)
