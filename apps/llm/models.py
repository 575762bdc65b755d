from django.conf import settings
from django.db import models


class ModelCall(models.Model):
    """One call to a language model: what was asked, of which model, what came back, and at what cost.
    Calls are cached by `cache_key` (role, model, prompt version, messages, parameters)."""

    class Outcome(models.TextChoices):
        OK = "ok"
        FAILED = "failed"

    role = models.CharField(max_length=32)
    backend = models.CharField(max_length=16)
    model = models.CharField(max_length=255)
    prompt_name = models.CharField(max_length=64)
    prompt_version = models.PositiveIntegerField()
    prompt_digest = models.CharField(max_length=16, help_text="A digest of the template's text.")
    cache_key = models.CharField(max_length=64, db_index=True)
    messages = models.JSONField(default=list)
    parameters = models.JSONField(default=dict)
    answer = models.TextField(blank=True)
    logprobs = models.JSONField(null=True, blank=True)
    tokens_in = models.PositiveIntegerField(default=0)
    tokens_out = models.PositiveIntegerField(default=0)
    finish_reason = models.CharField(max_length=32, blank=True, help_text='"length": the answer was cut off.')
    seconds = models.FloatField(default=0)
    outcome = models.CharField(max_length=16, choices=Outcome.choices)
    error_code = models.CharField(max_length=32, blank=True)
    error_message = models.TextField(blank=True)
    regenerated = models.BooleanField(default=False, help_text="Asked to bypass the cache.")
    task = models.ForeignKey("tasks.Task", null=True, blank=True, on_delete=models.CASCADE, related_name="model_calls")
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["-created_at", "-id"]

    def __str__(self):
        return f"{self.role} {self.model} ({self.outcome})"


class LanguageJob(models.Model):
    """A model-backed job on one task (writing its issue, say), run by a worker on the `llm` queue."""

    class Kind(models.TextChoices):
        BACKTRANSLATE = "backtranslate"
        GENERATE_TESTS = "generate_tests"

    class State(models.TextChoices):
        QUEUED = "queued"
        RUNNING = "running"
        DONE = "done"
        FAILED = "failed"

    ACTIVE_STATES = (State.QUEUED, State.RUNNING)

    kind = models.CharField(max_length=32, choices=Kind.choices)
    task = models.ForeignKey("tasks.Task", on_delete=models.CASCADE, related_name="language_jobs")
    regenerate = models.BooleanField(default=False)
    requested_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL)
    state = models.CharField(max_length=16, choices=State.choices, default=State.QUEUED)
    outcome = models.CharField(max_length=16, blank=True, help_text="written, cached, skipped or failed")
    detail = models.TextField(blank=True, help_text="Why it was skipped or failed.")
    model = models.CharField(max_length=255, blank=True)
    seconds = models.FloatField(null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    started_at = models.DateTimeField(null=True, blank=True)
    heartbeat_at = models.DateTimeField(null=True, blank=True)
    lease_token = models.CharField(max_length=32, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at", "-id"]
