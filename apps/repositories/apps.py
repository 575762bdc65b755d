from django.apps import AppConfig
from django.urls import reverse


def _repository_page(job) -> str:
    return reverse("repositories:detail", args=[job.subject_id]) if job.subject_id else ""


class RepositoriesConfig(AppConfig):
    name = "apps.repositories"
    label = "repositories"

    def ready(self):
        from django.db.models.signals import post_save

        from apps.jobs.registry import JobKind, job_kind_register, job_subject_visibility_register

        from .models import Repository
        from .registry import REPOSITORY_CREATED
        from .selectors import repositories_visible

        def repository_saved(sender, instance, created, raw=False, **kwargs):
            # The model's own signal: every way a repository is created passes here.
            if created and not raw:
                REPOSITORY_CREATED.call(instance)

        post_save.connect(repository_saved, sender=Repository, weak=False, dispatch_uid="repository_created")

        job_kind_register(JobKind(name="mining", label="Mining", queue="mining",
                                  run="apps.repositories.services.mining_job_work", subject="repositories.repository",
                                  cancellable=True, retry="apps.repositories.services.mining_job_retry_job",
                                  progress_unit="commits", link=_repository_page))
        job_subject_visibility_register("repositories.repository",
                                        lambda *, user: repositories_visible(user=user).values("pk"))
