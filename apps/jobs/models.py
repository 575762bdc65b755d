from django.conf import settings
from django.db import models
from django.db.models import Q

from worker.engine.reasons import reason_sentence


class Job(models.Model):
    """One background job of any kind: what it works on, who asked, and where it is in its life.
    Each kind keeps its results in tables of its own, linked to its job."""

    class State(models.TextChoices):
        QUEUED = "queued"
        RUNNING = "running"
        SUCCEEDED = "succeeded"
        FAILED = "failed"
        CANCELLED = "cancelled"

    class Resent(models.TextChoices):
        WORKER_LOST = "worker_lost", "worker lost"
        MESSAGE_LOST = "message_lost", "message lost"

    ACTIVE_STATES = (State.QUEUED, State.RUNNING)
    ENDED_STATES = (State.SUCCEEDED, State.FAILED, State.CANCELLED)

    kind = models.CharField(max_length=64, help_text="A registered kind (apps.jobs.registry).")
    subject_type = models.CharField(max_length=64, blank=True, help_text="The model it works on, app_label.model.")
    subject_id = models.PositiveBigIntegerField(null=True, blank=True)
    subject_label = models.CharField(max_length=255, blank=True, help_text="What it works on, for people.")
    requested_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL,
                                     related_name="jobs")
    state = models.CharField(max_length=16, choices=State.choices, default=State.QUEUED)
    cancel_requested = models.BooleanField(default=False)
    progress_done = models.PositiveIntegerField(default=0)
    progress_total = models.PositiveIntegerField(null=True, blank=True)
    error_code = models.CharField(max_length=32, blank=True)
    error_message = models.TextField(blank=True)
    worker = models.CharField(max_length=255, blank=True, help_text="The worker that holds (or last held) it.")
    lease_token = models.CharField(max_length=32, blank=True, help_text="Which worker holds the running job.")
    message_id = models.CharField(max_length=64, blank=True, help_text="The Celery message last sent for it.")
    dispatches = models.PositiveIntegerField(default=0, help_text="Messages sent for it (more after a loss).")
    resent_because = models.CharField(max_length=16, choices=Resent.choices, blank=True,
                                      help_text="Why the sweep last sent it again, ahead of the jobs waiting.")
    resent_at = models.DateTimeField(null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    dispatched_at = models.DateTimeField(null=True, blank=True)
    started_at = models.DateTimeField(null=True, blank=True)
    heartbeat_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    seconds = models.FloatField(null=True, blank=True, help_text="From the worker's claim to the end.")

    class Meta:
        ordering = ["-created_at", "-id"]
        indexes = [models.Index(fields=["state", "created_at"]), models.Index(fields=["kind", "-created_at"]),
                   models.Index(fields=["subject_type", "subject_id"])]
        constraints = [
            models.UniqueConstraint(fields=["kind", "subject_type", "subject_id"],
                                    condition=Q(state__in=["queued", "running"]),
                                    name="one_active_job_per_kind_and_subject"),
        ]

    def __str__(self):
        return f"{self.kind} job {self.pk} ({self.state})"

    @property
    def is_active(self) -> bool:
        return self.state in self.ACTIVE_STATES

    @property
    def error_sentence(self) -> str:
        return reason_sentence(self.error_code) if self.error_code else ""


class Worker(models.Model):
    """A running Celery worker process, as it reports itself from its start to its end: the queues it
    consumes and when it last said it was alive (apps.jobs.services.WorkerPresence). A worker killed
    outright leaves its row: it counts as gone once its process is (on this host) or its reports stop."""

    name = models.CharField(max_length=255, help_text="Celery's name for it, name@host.")
    host = models.CharField(max_length=255)
    pid = models.PositiveIntegerField()
    queues = models.JSONField(default=list)
    started_at = models.DateTimeField()
    heartbeat_at = models.DateTimeField()

    class Meta:
        ordering = ["name", "pid"]
        constraints = [models.UniqueConstraint(fields=["host", "pid"], name="one_row_per_worker_process")]

    def __str__(self):
        return f"{self.name} ({self.host}, process {self.pid})"


class JobLife:
    """Mixed into a kind's own model (its `job` a one-to-one to Job): what pages and commands show
    of its life, read from its job."""

    State = Job.State
    ACTIVE_STATES = Job.ACTIVE_STATES

    state = property(lambda self: self.job.state)
    is_active = property(lambda self: self.job.is_active)
    requested_by = property(lambda self: self.job.requested_by)
    progress_done = property(lambda self: self.job.progress_done)
    progress_total = property(lambda self: self.job.progress_total)
    cancel_requested = property(lambda self: self.job.cancel_requested)
    error_code = property(lambda self: self.job.error_code)
    error_message = property(lambda self: self.job.error_message)
    error_sentence = property(lambda self: self.job.error_sentence)
    started_at = property(lambda self: self.job.started_at)
    finished_at = property(lambda self: self.job.finished_at)
