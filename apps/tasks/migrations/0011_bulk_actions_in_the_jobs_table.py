"""Bulk actions run as jobs of the jobs table: each row gets a Job for the action and, when an
undo was asked, one for the undo ("done" is "succeeded"; "undoing" and "undone" are the undo's)."""

import django.db.models.deletion
from django.db import migrations, models

FORWARD = {"queued": "queued", "running": "running", "done": "succeeded", "failed": "failed",
           "undoing": "succeeded", "undone": "succeeded"}
UNDO = {"undoing": "queued", "undone": "succeeded"}


def jobs_create(apps, schema_editor):
    Job = apps.get_model("jobs", "Job")
    BulkAction = apps.get_model("tasks", "BulkAction")
    for bulk in BulkAction.objects.iterator():
        label = f"bulk {bulk.action} of {bulk.task_count} tasks"
        subject = {"subject_type": "tasks.bulkaction", "subject_id": bulk.id, "subject_label": label}
        state = FORWARD.get(bulk.state, "failed")
        job = Job.objects.create(kind="bulk_action", requested_by_id=bulk.user_id, state=state,
                                 error_code="worker_error" if bulk.error else "", error_message=bulk.error,
                                 finished_at=bulk.finished_at if state not in ("queued", "running") else None,
                                 progress_done=len(bulk.changed), progress_total=bulk.task_count, **subject)
        Job.objects.filter(id=job.id).update(created_at=bulk.created_at)
        undo = None
        if bulk.state in UNDO:
            undo = Job.objects.create(kind="bulk_undo", requested_by_id=bulk.undone_by_id, state=UNDO[bulk.state],
                                      finished_at=bulk.undone_at, **subject)
        BulkAction.objects.filter(id=bulk.id).update(job=job, undo_job=undo)


def jobs_back(apps, schema_editor):
    BulkAction = apps.get_model("tasks", "BulkAction")
    back = {"succeeded": "done", "failed": "failed", "queued": "queued", "running": "running", "cancelled": "failed"}
    for bulk in BulkAction.objects.select_related("job", "undo_job").iterator():
        state = back.get(bulk.job.state, "failed") if bulk.job_id else "queued"
        if bulk.undo_job_id:
            state = "undone" if bulk.undo_job.state == "succeeded" else "undoing"
        BulkAction.objects.filter(id=bulk.id).update(
            state=state, error=bulk.job.error_message if bulk.job_id else "",
            finished_at=bulk.job.finished_at if bulk.job_id else None)


class Migration(migrations.Migration):

    dependencies = [
        ("jobs", "0001_initial"),
        ("tasks", "0010_drop_repository_index_covered_by_others"),
    ]

    operations = [
        migrations.AddField(
            model_name="bulkaction",
            name="job",
            field=models.OneToOneField(null=True, on_delete=django.db.models.deletion.CASCADE,
                                       related_name="bulk_action", to="jobs.job"),
        ),
        migrations.AddField(
            model_name="bulkaction",
            name="undo_job",
            field=models.OneToOneField(blank=True, null=True, on_delete=django.db.models.deletion.SET_NULL,
                                       related_name="bulk_undo", to="jobs.job"),
        ),
        migrations.RunPython(jobs_create, jobs_back),
    ]
