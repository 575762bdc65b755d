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


class Validation(models.Model):
    """One validation of a task: its environment, its runs, its oracle and verdict."""

    class State(models.TextChoices):
        QUEUED = "queued"
        RUNNING = "running"
        DONE = "done"
        FAILED = "failed"  # the job itself broke (not the task): see `error`

    ACTIVE_STATES = (State.QUEUED, State.RUNNING)

    task = models.ForeignKey(Task, on_delete=models.CASCADE, related_name="validations")
    state = models.CharField(max_length=16, choices=State.choices, default=State.QUEUED)
    verdict = models.CharField(max_length=32, blank=True)  # valid | invalid | environment_failed
    reason = models.CharField(max_length=64, blank=True)
    backend = models.CharField(max_length=16, default="local")
    isolation_reduced = models.BooleanField(
        default=False, help_text="Ran without bubblewrap, because the operator allowed it (COMMITGYM_ALLOW_UNSANDBOXED).")
    environment = models.ForeignKey("environments.Environment", null=True, blank=True, on_delete=models.SET_NULL,
                                    related_name="validations")
    environment_reused = models.BooleanField(default=False)
    fail_to_pass = models.JSONField(default=list)
    pass_to_pass = models.JSONField(default=list)
    flaky = models.JSONField(default=list)
    breaks = models.JSONField(default=list)
    error = models.TextField(blank=True)
    seconds = models.FloatField(null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    started_at = models.DateTimeField(null=True, blank=True)
    heartbeat_at = models.DateTimeField(null=True, blank=True)
    lease_token = models.CharField(max_length=32, blank=True, help_text="Which worker holds the running validation.")
    generated = models.BooleanField(default=False, help_text="Checks generated tests in an earlier validation's "
                                                             "environment, instead of the commit's own tests.")
    finished_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at", "-id"]

    @property
    def is_active(self) -> bool:
        return self.state in self.ACTIVE_STATES

    @property
    def reason_sentence(self) -> str:
        return reason_sentence(self.reason) if self.reason else ""


class EnvironmentAttempt(models.Model):
    """One try at an environment for a validation: reusing one, or an install strategy."""

    validation = models.ForeignKey(Validation, on_delete=models.CASCADE, related_name="attempts")
    strategy = models.CharField(max_length=64)
    commands = models.JSONField(default=list)
    status = models.CharField(max_length=32)
    step = models.CharField(max_length=16, blank=True)
    output = models.TextField(blank=True)
    seconds = models.FloatField(default=0)

    class Meta:
        ordering = ["id"]


class TestRunRecord(models.Model):
    """One pytest run of a validation, with its outcomes."""

    __test__ = False  # not a pytest test class

    validation = models.ForeignKey(Validation, on_delete=models.CASCADE, related_name="runs")
    side = models.CharField(max_length=16)  # before | after | gold | empty
    scope = models.CharField(max_length=16)  # selected | suite | breaks | graded
    index = models.PositiveIntegerField(default=0)
    status = models.CharField(max_length=32)
    exit_code = models.IntegerField(null=True, blank=True)
    collection_error = models.BooleanField(default=False)
    seconds = models.FloatField(default=0)
    output = models.TextField(blank=True)
    outcomes = models.JSONField(default=dict, help_text="{test id: status}")

    class Meta:
        ordering = ["id"]


class IssueVersion(models.Model):
    """One version of a task's issue text. Versions are never changed or removed: the model writes
    new ones, people edit into new ones, and the current one is the task's problem statement."""

    class Author(models.TextChoices):
        MODEL = "model"
        PERSON = "person"

    task = models.ForeignKey(Task, on_delete=models.CASCADE, related_name="issue_versions")
    number = models.PositiveIntegerField()
    text = models.TextField()
    author = models.CharField(max_length=16, choices=Author.choices)
    model_call = models.ForeignKey("llm.ModelCall", null=True, blank=True, on_delete=models.SET_NULL,
                                   related_name="issue_versions")
    edited_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL)
    leak_score = models.FloatField(default=0, help_text="The share of the fix the text reveals (0-1).")
    leak = models.JSONField(default=dict, help_text="What of the fix was found in the text.")
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["task", "number"]
        constraints = [models.UniqueConstraint(fields=["task", "number"], name="issue_version_number_unique")]

    @property
    def leak_flagged(self) -> bool:
        return self.leak_score > settings.COMMITGYM_LEAK_THRESHOLD


class GeneratedTest(models.Model):
    """A test file the test writer wrote for a task; kept when its tests fail before the fix and
    pass after it in every run, dropped otherwise, with why."""

    class State(models.TextChoices):
        PENDING = "pending"
        KEPT = "kept"
        DROPPED = "dropped"

    task = models.ForeignKey(Task, on_delete=models.CASCADE, related_name="generated_tests")
    model_call = models.ForeignKey("llm.ModelCall", null=True, blank=True, on_delete=models.SET_NULL,
                                   related_name="generated_tests")
    validation = models.ForeignKey(Validation, null=True, blank=True, on_delete=models.SET_NULL,
                                   related_name="generated_tests", help_text="The validation that checked it.")
    index = models.PositiveIntegerField(help_text="Its place in the model's answer.")
    content = models.TextField()
    path = models.CharField(max_length=255, blank=True, help_text="Where it was put in the repository.")
    state = models.CharField(max_length=16, choices=State.choices, default=State.PENDING)
    reason = models.CharField(max_length=32, blank=True,
                              help_text="Why it was dropped: passes_before, fails_after, errors, flaky, no_tests.")
    fail_to_pass = models.JSONField(default=list)
    before = models.JSONField(default=list, help_text="Its tests' outcomes in each run before the fix.")
    after = models.JSONField(default=list, help_text="Its tests' outcomes in each run after the fix.")
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["task", "id"]
