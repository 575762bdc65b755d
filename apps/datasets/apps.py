from django.apps import AppConfig
from django.urls import reverse


def candidate_page(job) -> str:
    """The candidate a job grades, on its task's candidates page."""
    return reverse("datasets:candidate", args=[job.subject_id]) if job.subject_id else ""


def task_candidates_page(job) -> str:
    """The candidates of the task a job judges."""
    return reverse("datasets:task_candidates", args=[job.subject_label]) if job.subject_label else ""


def sampled_task_page(job) -> str:
    """The candidates of the task a sampling job samples ("sample N of TASK")."""
    _, _, instance_id = job.subject_label.partition(" of ")
    return reverse("datasets:task_candidates", args=[instance_id]) if instance_id else ""


def task_matrix_page(job) -> str:
    """The matrix of the task whose verifier tests a job makes."""
    return reverse("datasets:task_matrix", args=[job.subject_label]) if job.subject_label else ""


def upload_page(job) -> str:
    """The upload a job imports, with the import's counts once it ends."""
    return reverse("datasets:upload", args=[job.subject_id]) if job.subject_id else ""


def dataset_page(job) -> str:
    """The dataset a job works on."""
    return reverse("datasets:detail", args=[job.subject_id]) if job.subject_id else ""


def release_page(job) -> str:
    """The release (or export) a job writes."""
    return reverse("datasets:release", args=[job.subject_id]) if job.subject_id else ""


def release_images_page(job) -> str:
    """The release whose images a job builds, at its images."""
    return reverse("datasets:release_images", args=[job.subject_id]) if job.subject_id else ""


class DatasetsConfig(AppConfig):
    name = "apps.datasets"
    label = "datasets"
    verbose_name = "Datasets and candidates"

    def ready(self):
        from apps.jobs.registry import MODEL_CALLS, JobKind, job_kind_register
        from apps.repositories.registry import REPOSITORY_CREATED
        from apps.tasks.registry import DASHBOARD_FIGURES, TASK_REVIEW_PAGE

        from .making import repository_dataset_ensure
        from .panels import dashboard_overlaps, task_review_panels

        TASK_REVIEW_PAGE.register(task_review_panels)
        DASHBOARD_FIGURES.register(dashboard_overlaps)
        REPOSITORY_CREATED.register(repository_dataset_ensure)
        job_kind_register(JobKind(name="grade", label="Grading", queue="tests",
                                  run="apps.datasets.grading.grades.grade_job_work", subject="datasets.candidate",
                                  retry="apps.datasets.grading.grades.grade_job_retry", link=candidate_page))
        job_kind_register(JobKind(name="dataset_grade", label="Grading a dataset", queue="curation",
                                  run="apps.datasets.grading.grades.dataset_grade_work", subject="datasets.dataset",
                                  cancellable=True, progress_unit="tasks", link=dataset_page))
        job_kind_register(JobKind(name="dataset_verify", label="Verifying a dataset", queue="curation",
                                  run="apps.datasets.verifiers.verifying.dataset_verify_work",
                                  subject="datasets.dataset", cancellable=True, progress_unit="tasks",
                                  link=dataset_page))
        job_kind_register(JobKind(name="dataset_mutants", label="Mutants of a dataset", queue="curation",
                                  run="apps.datasets.candidates.mutants.dataset_mutants_work",
                                  subject="datasets.dataset", cancellable=True, progress_unit="tasks",
                                  link=dataset_page))
        job_kind_register(JobKind(name="dataset_sample", label="Sampling a dataset", queue="curation",
                                  run="apps.datasets.candidates.sampling.dataset_sample_work",
                                  subject="datasets.dataset", cancellable=True, progress_unit="tasks",
                                  link=dataset_page))
        job_kind_register(JobKind(name="judge", label="Judging", queue="llm",
                                  run="apps.datasets.verifiers.judging.judge_job_work", subject="tasks.task",
                                  retry="apps.datasets.verifiers.judging.judge_job_retry",
                                  cancellable=True, progress_unit=MODEL_CALLS, link=task_candidates_page))
        job_kind_register(JobKind(name="sample", label="Sampling", queue="llm",
                                  run="apps.datasets.candidates.sampling.sample_job_work", subject="datasets.sampling",
                                  retry="apps.datasets.candidates.sampling.sample_job_retry",
                                  cancellable=True, progress_unit=MODEL_CALLS, link=sampled_task_page))
        job_kind_register(JobKind(name="reproduce", label="Reproduction tests", queue="llm",
                                  run="apps.datasets.verifiers.execution.reproduce_job_work", subject="tasks.task",
                                  retry="apps.datasets.verifiers.execution.reproduce_job_retry",
                                  cancellable=True, progress_unit=MODEL_CALLS, link=task_matrix_page))
        job_kind_register(JobKind(name="verifier_tests", label="Verifier tests", queue="tests",
                                  run="apps.datasets.verifiers.execution.verifier_tests_job_work", subject="tasks.task",
                                  retry="apps.datasets.verifiers.execution.verifier_tests_job_retry",
                                  link=task_matrix_page))
        job_kind_register(JobKind(name="execute", label="Execution", queue="tests",
                                  run="apps.datasets.verifiers.execution.execute_job_work",
                                  subject="datasets.candidate",
                                  retry="apps.datasets.verifiers.execution.execute_job_retry", link=candidate_page))
        job_kind_register(JobKind(name="release", label="Release", queue="curation",
                                  run="apps.datasets.releases.release_job_work", subject="datasets.release",
                                  cancellable=True, progress_unit="tasks", link=release_page))
        job_kind_register(JobKind(name="release_images", label="Release images", queue="tests",
                                  run="apps.datasets.release_images.release_images_work",
                                  subject="datasets.releaseimages", cancellable=True, progress_unit="images",
                                  link=release_images_page))
        job_kind_register(JobKind(name="release_validation", label="Environment from a release", queue="tests",
                                  run="apps.datasets.grading.release_folder.release_validation_work",
                                  subject="tasks.task", link=task_candidates_page))
        job_kind_register(JobKind(name="export", label="Training export", queue="curation",
                                  run="apps.datasets.releases.export_job_work", subject="datasets.release",
                                  cancellable=True, progress_unit="tasks", link=release_page))
        job_kind_register(JobKind(name="upload_import", label="Import of an upload", queue="curation",
                                  run="apps.datasets.candidates.uploads.upload_import_work", subject="datasets.upload",
                                  retry="apps.datasets.candidates.uploads.upload_import_retry", link=upload_page))
        job_kind_register(JobKind(name="path_import", label="Import of a file on the server", queue="curation",
                                  run="apps.datasets.candidates.in_place.path_import_work", subject="datasets.upload",
                                  retry="apps.datasets.candidates.uploads.upload_import_retry", link=upload_page))
