from django.apps import AppConfig
from django.urls import reverse


def task_page(job) -> str:
    """The page of the task a job works on (its subject)."""
    return reverse("tasks:detail", args=[job.subject_label]) if job.subject_label else ""


def _bulk_page(job) -> str:
    return reverse("tasks:bulk", args=[job.subject_id]) if job.subject_id else ""


class TasksConfig(AppConfig):
    name = "apps.tasks"
    label = "tasks"

    def ready(self):
        from django.db.models.signals import post_delete, post_save

        from apps.jobs.registry import JobKind, job_kind_register

        # Models can be imported only once Django has loaded every app.
        from .models import CurationSettings, RejectReason
        from .review import REJECT_REASONS_CACHE_KEY

        def forget(key):
            def handler(**kwargs):
                from django.core.cache import cache

                cache.delete(key)
            return handler

        for signal in (post_save, post_delete):
            signal.connect(forget(CurationSettings.CACHE_KEY), sender=CurationSettings, weak=False)
            signal.connect(forget(REJECT_REASONS_CACHE_KEY), sender=RejectReason, weak=False)

        job_kind_register(JobKind(name="validation", label="Validation", queue="tests",
                                  run="apps.tasks.services.validation_job_work", subject="tasks.task",
                                  retry="apps.tasks.services.validation_job_retry",
                                  on_failure="apps.tasks.services.validation_job_ended", link=task_page))
        job_kind_register(JobKind(name="bulk_action", label="Bulk action", queue="curation",
                                  run="apps.tasks.bulk.bulk_action_work", subject="tasks.bulkaction", cancellable=True,
                                  progress_unit="tasks", link=_bulk_page))
        job_kind_register(JobKind(name="bulk_undo", label="Bulk undo", queue="curation",
                                  run="apps.tasks.bulk.bulk_undo_work", subject="tasks.bulkaction",
                                  retry="apps.tasks.bulk.bulk_undo_retry", progress_unit="tasks", link=_bulk_page))
