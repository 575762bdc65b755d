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

        from apps.environments.registry import ENVIRONMENT_PAGE
        from apps.jobs.models import Job
        from apps.jobs.registry import MODEL_CALLS, JobKind, job_kind_register, job_subject_visibility_register
        from apps.repositories.registry import COMMITS_DROPPED, COMMITS_KEPT, REPOSITORY_DELETING, REPOSITORY_PAGE
        from apps.repositories.selectors import repositories_visible

        # Models can be imported only once Django has loaded every app.
        from .models import CurationSettings, RejectReason, Task
        from .review import REJECT_REASONS_CACHE_KEY
        from .states import tasks_create_for_kept_commits, tasks_delete_unstarted
        from .views.curation import repository_actions_panel
        from .views.tasks import environment_validations_panel

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
        for name, label in (("backtranslate", "Issue writing"), ("generate_tests", "Test writing")):
            job_kind_register(JobKind(name=name, label=label, queue="llm",
                                      run="apps.tasks.language_jobs.language_job_work", subject="tasks.task",
                                      retry="apps.tasks.language_jobs.language_job_retry",
                                      cancellable=True, progress_unit=MODEL_CALLS, link=task_page))

        # A task's jobs are seen by who sees its repository, and go with it.
        def visible_task_ids(*, user):
            return Task.objects.filter(repository__in=repositories_visible(user=user).values("pk")).values("pk")

        def task_jobs_delete(repository):
            Job.objects.filter(subject_type="tasks.task", subject_id__in=repository.tasks.values("pk")).delete()

        job_subject_visibility_register("tasks.task", visible_task_ids)
        REPOSITORY_DELETING.register(task_jobs_delete)
        # Commits mining keeps become tasks; those it drops take their unstarted tasks with them.
        COMMITS_KEPT.register(tasks_create_for_kept_commits)
        COMMITS_DROPPED.register(tasks_delete_unstarted)
        REPOSITORY_PAGE.register(repository_actions_panel)
        ENVIRONMENT_PAGE.register(environment_validations_panel)
