from django.conf import settings
from django.db import models

from worker.engine.reasons import reason_sentence


class Task(models.Model):
    """A kept commit on its way to a verified task. Its id never changes."""

    class State(models.TextChoices):
        MINED = "mined"
        BUILDING = "building"
        VALIDATING = "validating"
        VALID = "valid"
        INVALID = "invalid"
        ENVIRONMENT_FAILED = "environment_failed"
        NEEDS_REVIEW = "needs_review"
        ACCEPTED = "accepted"
        REJECTED = "rejected"

    instance_id = models.CharField(max_length=255, unique=True, help_text="<owner>__<repo>-<first 10 hex of the sha>")
    repository = models.ForeignKey("repositories.Repository", on_delete=models.CASCADE, related_name="tasks")
    commit = models.OneToOneField("repositories.Commit", on_delete=models.CASCADE, related_name="task")
    state = models.CharField(max_length=32, choices=State.choices, default=State.MINED)
    reason = models.CharField(max_length=64, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["-created_at", "-id"]
        indexes = [models.Index(fields=["repository", "state"])]

    def __str__(self):
        return self.instance_id

    @property
    def reason_sentence(self) -> str:
        return reason_sentence(self.reason) if self.reason else ""


class TaskStateChange(models.Model):
    task = models.ForeignKey(Task, on_delete=models.CASCADE, related_name="state_changes")
    from_state = models.CharField(max_length=32, blank=True)
    to_state = models.CharField(max_length=32)
    reason = models.CharField(max_length=64, blank=True)
    actor = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL)
    at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["at", "id"]
