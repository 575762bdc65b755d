from django.apps import AppConfig
from django.urls import reverse


def _labels_page(job) -> str:
    """The labels page of the dataset whose labels a job exports."""
    from .models import LabelExport

    export = LabelExport.objects.filter(pk=job.subject_id).only("dataset_id").first()
    return reverse("labels:dataset", args=[export.dataset_id]) if export else ""


class LabelsConfig(AppConfig):
    name = "apps.labels"
    label = "labels"
    verbose_name = "People's labels of candidates"

    def ready(self):
        from apps.datasets.registry import DATASET_PAGE, PEOPLE_LABELS
        from apps.jobs.registry import JobKind, job_kind_register
        from apps.tasks.registry import TASK_REVIEW_PAGE

        from .panels import dataset_labels_panel, task_weak_oracle
        from .selectors import people_final_labels

        TASK_REVIEW_PAGE.register(task_weak_oracle)
        DATASET_PAGE.register(dataset_labels_panel)
        PEOPLE_LABELS.register(people_final_labels)
        job_kind_register(JobKind(name="label_export", label="Export of labels", queue="curation",
                                  run="apps.labels.exports.label_export_work", subject="labels.labelexport",
                                  cancellable=True, progress_unit="labels", link=_labels_page))
