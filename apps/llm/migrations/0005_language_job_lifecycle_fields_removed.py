"""The language job's life is its Job's: the fields it kept of its own go (after 0004 moved them)."""

import django.db.models.deletion
from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ("llm", "0004_language_jobs_in_the_jobs_table"),
    ]

    operations = [
        migrations.AlterField(
            model_name="languagejob",
            name="job",
            field=models.OneToOneField(on_delete=django.db.models.deletion.CASCADE, related_name="language_job",
                                       to="jobs.job"),
        ),
        migrations.RemoveField(model_name="languagejob", name="finished_at"),
        migrations.RemoveField(model_name="languagejob", name="heartbeat_at"),
        migrations.RemoveField(model_name="languagejob", name="lease_token"),
        migrations.RemoveField(model_name="languagejob", name="requested_by"),
        migrations.RemoveField(model_name="languagejob", name="seconds"),
        migrations.RemoveField(model_name="languagejob", name="started_at"),
        migrations.RemoveField(model_name="languagejob", name="state"),
    ]
