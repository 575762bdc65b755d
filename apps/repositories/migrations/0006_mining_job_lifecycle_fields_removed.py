"""A mining job's life is its Job's: the fields it kept of its own go (after 0005 moved them); one
active job per repository is the jobs table's constraint now (one per kind and subject)."""

from django.db import migrations


class Migration(migrations.Migration):

    dependencies = [
        ("repositories", "0005_mining_jobs_in_the_jobs_table"),
    ]

    operations = [
        migrations.RemoveConstraint(model_name="miningjob", name="one_active_mining_job_per_repository"),
        *[migrations.RemoveField(model_name="miningjob", name=name) for name in (
            "cancel_requested", "error_code", "error_message", "finished_at", "heartbeat_at", "lease_token",
            "progress_done", "progress_total", "requested_by", "started_at", "state")],
    ]
