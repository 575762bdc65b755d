"""Language jobs live in the jobs table: each row gets a Job carrying its life (state, lease,
times, who asked); "done" is spelled "succeeded" there. A job that was "done" with a failed
outcome was a model that did not answer: it is a failed job now, as new ones are."""

import django.db.models.deletion
from django.db import migrations, models

STATES = {"queued": "queued", "running": "running", "done": "succeeded", "failed": "failed"}


def _end(row) -> tuple[str, str, str]:
    """(state, error code, error message) of the row's job."""
    if row.state == "done" and row.outcome == "failed":
        return "failed", "model_failed", row.detail
    if row.state == "failed":
        lost = "stopped reporting" in row.detail
        return "failed", "worker_lost" if lost else "worker_error", row.detail
    return STATES.get(row.state, "failed"), "", ""


def jobs_create(apps, schema_editor):
    Job = apps.get_model("jobs", "Job")
    LanguageJob = apps.get_model("llm", "LanguageJob")
    active = set()  # one active job per kind and task: an older duplicate (a race) ends as lost
    for row in LanguageJob.objects.select_related("task").order_by("-created_at", "-id").iterator():
        state, error_code, error_message = _end(row)
        if state in ("queued", "running"):
            if (row.kind, row.task_id) in active:
                state, error_code, error_message = "failed", "worker_lost", "Another job on the task ran instead."
            active.add((row.kind, row.task_id))
        job = Job.objects.create(
            kind=row.kind, subject_type="tasks.task", subject_id=row.task_id, subject_label=row.task.instance_id,
            requested_by_id=row.requested_by_id, state=state, lease_token=row.lease_token, error_code=error_code,
            error_message=error_message, started_at=row.started_at, heartbeat_at=row.heartbeat_at,
            finished_at=row.finished_at, seconds=row.seconds)
        Job.objects.filter(id=job.id).update(created_at=row.created_at)
        LanguageJob.objects.filter(id=row.id).update(job=job)


def jobs_back(apps, schema_editor):
    LanguageJob = apps.get_model("llm", "LanguageJob")
    back = {new: old for old, new in STATES.items()}
    for row in LanguageJob.objects.select_related("job").iterator():
        job = row.job
        LanguageJob.objects.filter(id=row.id).update(
            state=back.get(job.state, "failed"), requested_by_id=job.requested_by_id, lease_token=job.lease_token,
            started_at=job.started_at, heartbeat_at=job.heartbeat_at, finished_at=job.finished_at, seconds=job.seconds)


class Migration(migrations.Migration):

    dependencies = [
        ("jobs", "0001_initial"),
        ("llm", "0003_model_call_finish_reason"),
    ]

    operations = [
        migrations.AddField(
            model_name="languagejob",
            name="job",
            field=models.OneToOneField(null=True, on_delete=django.db.models.deletion.CASCADE,
                                       related_name="language_job", to="jobs.job"),
        ),
        migrations.RunPython(jobs_create, jobs_back),
    ]
