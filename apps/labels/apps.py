from django.apps import AppConfig


class LabelsConfig(AppConfig):
    name = "apps.labels"
    label = "labels"
    verbose_name = "People's labels of candidates"

    def ready(self):
        from apps.datasets.registry import DATASET_PAGE, PEOPLE_LABELS
        from apps.jobs.registry import JobKind, job_kind_register
        from apps.tasks.registry import TASK_REVIEW_PAGE

        from .exports import label_export_page
        from .panels import dataset_labels_panel, task_weak_oracle
        from .selectors import people_final_labels

        TASK_REVIEW_PAGE.register(task_weak_oracle)
        DATASET_PAGE.register(dataset_labels_panel)
        PEOPLE_LABELS.register(people_final_labels)
        job_kind_register(JobKind(name="label_export", label="Export of labels", queue="curation",
                                  run="apps.labels.exports.label_export_work", subject="labels.labelexport",
                                  cancellable=True, progress_unit="labels", link=label_export_page))
