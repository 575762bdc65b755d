from django.apps import AppConfig


class LlmConfig(AppConfig):
    name = "apps.llm"
    label = "llm"
    verbose_name = "Language models"

    def ready(self):
        from apps.jobs.registry import MODEL_CALLS, JobKind, job_kind_register
        from apps.tasks.apps import task_page

        from . import checks  # noqa: F401 - registers the settings check

        for name, label in (("backtranslate", "Issue writing"), ("generate_tests", "Test writing")):
            job_kind_register(JobKind(name=name, label=label, queue="llm", run="apps.llm.services.language_job_work",
                                      subject="tasks.task", retry="apps.llm.services.language_job_retry",
                                      cancellable=True, progress_unit=MODEL_CALLS, link=task_page))
