from django.apps import AppConfig
from django.urls import reverse


def _task_page(job) -> str:
    return reverse("tasks:detail", args=[job.subject_label]) if job.subject_label else ""


class LlmConfig(AppConfig):
    name = "apps.llm"
    label = "llm"
    verbose_name = "Language models"

    def ready(self):
        from apps.jobs.registry import JobKind, job_kind_register

        from . import checks  # noqa: F401 - registers the settings check

        for name, label in (("backtranslate", "Issue writing"), ("generate_tests", "Test writing")):
            job_kind_register(JobKind(name=name, label=label, queue="llm", run="apps.llm.services.language_job_work",
                                      subject="tasks.task", retry="apps.llm.services.language_job_retry",
                                      link=_task_page))
