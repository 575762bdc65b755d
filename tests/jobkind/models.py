from django.db import models


class Chore(models.Model):
    """Something for a test job to do: `steps` steps of `step_seconds` each, or fail at `fail_at`."""

    name = models.CharField(max_length=64)
    steps = models.PositiveIntegerField(default=3)
    step_seconds = models.FloatField(default=0)
    fail_at = models.IntegerField(default=-1)

    def __str__(self):
        return f"chore {self.name}"


class ChoreRun(models.Model):
    """What one job of a chore did: one row per job, `started` each time a worker began it."""

    job = models.OneToOneField("jobs.Job", on_delete=models.CASCADE, related_name="chore_run")
    chore = models.ForeignKey(Chore, on_delete=models.CASCADE)
    started = models.PositiveIntegerField(default=0)
    finished = models.PositiveIntegerField(default=0)
    failed_hook = models.PositiveIntegerField(default=0)
    work_dir = models.CharField(max_length=500, blank=True)
