"""A bulk action's life is its jobs': the fields it kept of its own go (after 0011 moved them)."""

from django.db import migrations


class Migration(migrations.Migration):

    dependencies = [
        ("tasks", "0011_bulk_actions_in_the_jobs_table"),
    ]

    operations = [
        migrations.RemoveField(model_name="bulkaction", name="error"),
        migrations.RemoveField(model_name="bulkaction", name="finished_at"),
        migrations.RemoveField(model_name="bulkaction", name="state"),
    ]
