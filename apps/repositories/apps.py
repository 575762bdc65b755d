from django.apps import AppConfig
from django.urls import reverse


def _repository_page(job) -> str:
    return reverse("repositories:detail", args=[job.subject_id]) if job.subject_id else ""


class RepositoriesConfig(AppConfig):
    name = "apps.repositories"
    label = "repositories"

    def ready(self):
        from apps.jobs.registry import JobKind, job_kind_register, job_subject_visibility_register

        from .selectors import repositories_visible

        job_kind_register(JobKind(name="mining", label="Mining", queue="mining",
                                  run="apps.repositories.services.mining_job_work", subject="repositories.repository",
                                  cancellable=True, retry="apps.repositories.services.mining_job_retry_job",
                                  progress_unit="commits", link=_repository_page))
        job_subject_visibility_register("repositories.repository",
                                        lambda *, user: repositories_visible(user=user).values("pk"))
