"""Validations run as jobs of the jobs table: each row gets a Job carrying its life (state, lease,
times, error); "done" is spelled "succeeded" there. Its subject is the task it validates."""

import django.db.models.deletion
from django.db import migrations, models

STATES = {"queued": "queued", "running": "running", "done": "succeeded", "failed": "failed"}


def _end(row) -> tuple[str, str, str]:
    """(state, error code, error message) of the row's job."""
    if row.state == "failed":
        lost = "stopped reporting" in row.error
        return "failed", "worker_lost" if lost else "worker_error", row.error
    return STATES.get(row.state, "failed"), "", ""


def jobs_create(apps, schema_editor):
    Job = apps.get_model("jobs", "Job")
    Validation = apps.get_model("tasks", "Validation")
    active = set()  # one active validation per task: an older duplicate (a race) ends as lost
    for row in Validation.objects.select_related("task").order_by("-created_at", "-id").iterator():
        state, error_code, error_message = _end(row)
        if state in ("queued", "running"):
            if row.task_id in active:
                state, error_code, error_message = "failed", "worker_lost", "Another validation of the task ran."
            active.add(row.task_id)
        job = Job.objects.create(
            kind="validation", subject_type="tasks.task", subject_id=row.task_id, subject_label=row.task.instance_id,
            state=state, lease_token=row.lease_token, error_code=error_code, error_message=error_message,
            started_at=row.started_at, heartbeat_at=row.heartbeat_at, finished_at=row.finished_at,
            seconds=row.seconds)
        Job.objects.filter(id=job.id).update(created_at=row.created_at)
        Validation.objects.filter(id=row.id).update(job=job)


def jobs_back(apps, schema_editor):
    Validation = apps.get_model("tasks", "Validation")
    back = {new: old for old, new in STATES.items()}
    for row in Validation.objects.select_related("job").iterator():
        job = row.job
        Validation.objects.filter(id=row.id).update(
            state=back.get(job.state, "failed"), error=job.error_message, lease_token=job.lease_token,
            started_at=job.started_at, heartbeat_at=job.heartbeat_at, finished_at=job.finished_at)


class Migration(migrations.Migration):

    dependencies = [
        ("jobs", "0001_initial"),
        ("tasks", "0012_bulk_action_lifecycle_fields_removed"),
    ]

    operations = [
        migrations.AddField(
            model_name="validation",
            name="job",
            field=models.OneToOneField(null=True, on_delete=django.db.models.deletion.CASCADE,
                                       related_name="validation", to="jobs.job"),
        ),
        migrations.RunPython(jobs_create, jobs_back),
    ]
