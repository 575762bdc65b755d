"""A validation's life is its Job's: the fields it kept of its own go (after 0013 moved them)."""

from django.db import migrations


class Migration(migrations.Migration):

    dependencies = [
        ("tasks", "0013_validations_in_the_jobs_table"),
    ]

    operations = [
        migrations.RemoveField(model_name="validation", name=name)
        for name in ("state", "error", "started_at", "heartbeat_at", "lease_token", "finished_at")
    ]
