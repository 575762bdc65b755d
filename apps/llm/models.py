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
    """What a model-backed job on one task (writing its issue, generating its tests) was asked and
    what it gave; the job's life (queued, running, ended, by whom) is its `job`'s."""

    class Kind(models.TextChoices):
        BACKTRANSLATE = "backtranslate"
        GENERATE_TESTS = "generate_tests"

    job = models.OneToOneField("jobs.Job", on_delete=models.CASCADE, related_name="language_job")
    kind = models.CharField(max_length=32, choices=Kind.choices)
    task = models.ForeignKey("tasks.Task", on_delete=models.CASCADE, related_name="language_jobs")
    regenerate = models.BooleanField(default=False)
    outcome = models.CharField(max_length=16, blank=True, help_text="written, cached, skipped or failed")
    detail = models.TextField(blank=True, help_text="Why it was skipped or failed.")
    model = models.CharField(max_length=255, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["-created_at", "-id"]

    @property
    def state(self) -> str:
        return self.job.state

    @property
    def is_active(self) -> bool:
        return self.job.is_active
