"""Mining jobs run as jobs of the jobs table: each row gets a Job carrying its life (the states
are spelled the same there)."""

import django.db.models.deletion
from django.db import migrations, models

LIFE = ("state", "cancel_requested", "progress_done", "progress_total", "error_code", "error_message",
        "lease_token", "started_at", "heartbeat_at", "finished_at")


def jobs_create(apps, schema_editor):
    Job = apps.get_model("jobs", "Job")
    MiningJob = apps.get_model("repositories", "MiningJob")
    for row in MiningJob.objects.select_related("repository").iterator():
        job = Job.objects.create(kind="mining", subject_type="repositories.repository", subject_id=row.repository_id,
                                 subject_label=row.repository.name[:255], requested_by_id=row.requested_by_id,
                                 seconds=row.seconds, **{name: getattr(row, name) for name in LIFE})
        Job.objects.filter(id=job.id).update(created_at=row.created_at)
        MiningJob.objects.filter(id=row.id).update(job=job)


def jobs_back(apps, schema_editor):
    MiningJob = apps.get_model("repositories", "MiningJob")
    for row in MiningJob.objects.select_related("job").iterator():
        MiningJob.objects.filter(id=row.id).update(requested_by_id=row.job.requested_by_id,
                                                   **{name: getattr(row.job, name) for name in LIFE})


class Migration(migrations.Migration):

    dependencies = [
        ("jobs", "0001_initial"),
        ("repositories", "0004_drop_repository_index_covered_by_others"),
    ]

    operations = [
        migrations.AddField(
            model_name="miningjob",
            name="job",
            field=models.OneToOneField(null=True, on_delete=django.db.models.deletion.CASCADE,
                                       related_name="mining_job", to="jobs.job"),
        ),
        migrations.RunPython(jobs_create, jobs_back),
    ]
