"""Language jobs live in the jobs table: each row gets a Job carrying its life (state, lease,
times, who asked); "done" is spelled "succeeded" there."""

import django.db.models.deletion
from django.db import migrations, models

STATES = {"queued": "queued", "running": "running", "done": "succeeded", "failed": "failed"}


def jobs_create(apps, schema_editor):
    Job = apps.get_model("jobs", "Job")
    LanguageJob = apps.get_model("llm", "LanguageJob")
    for row in LanguageJob.objects.select_related("task").iterator():
        job = Job.objects.create(
            kind=row.kind, subject_type="tasks.task", subject_id=row.task_id, subject_label=row.task.instance_id,
            requested_by_id=row.requested_by_id, state=STATES.get(row.state, "failed"), lease_token=row.lease_token,
            error_code="model_failed" if row.state == "failed" else "", error_message=row.detail if row.state == "failed" else "",
            started_at=row.started_at, heartbeat_at=row.heartbeat_at, finished_at=row.finished_at, seconds=row.seconds)
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
