from django.conf import settings
from django.core.cache import cache
from django.db import models

from apps.jobs.models import JobLife
from worker.engine.curate.rubric import DIFFICULTIES
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

    class Source(models.TextChoices):
        MINED = "mined"  # a kept commit of the repository's history
        IMPORTED = "imported"  # an instance of a SWE-bench file (its patches and oracle in ImportedInstance)

    instance_id = models.CharField(max_length=255, unique=True, help_text="<owner>__<repo>-<first 10 hex of the sha>")
    source = models.CharField(max_length=16, choices=Source.choices, default=Source.MINED)
    # The (repository, state) index serves lookups by repository: a second index would only slow inserts.
    repository = models.ForeignKey("repositories.Repository", on_delete=models.CASCADE, related_name="tasks",
                                   db_index=False)
    # A mined task's commit is its fix (one task a commit); an imported task's is its base commit,
    # which other imported instances may share.
    commit = models.ForeignKey("repositories.Commit", on_delete=models.CASCADE, related_name="tasks")
    state = models.CharField(max_length=32, choices=State.choices, default=State.MINED)
    reason = models.CharField(max_length=64, blank=True)
    excluded_tests = models.JSONField(default=list, blank=True,
                                      help_text="Tests reviewers dropped from the oracle as wrong.")
    # A summary of the task's validations, issue and reviews, kept by task_summary_refresh so that the
    # list filters and sorts on plain columns.
    verdict = models.CharField(max_length=32, blank=True, help_text="The latest finished validation's verdict.")
    fail_to_pass_count = models.PositiveIntegerField(default=0)
    flaky_count = models.PositiveIntegerField(default=0)
    has_generated_tests = models.BooleanField(default=False)
    leak_score = models.FloatField(null=True, blank=True, help_text="The current issue's leak score.")
    issue_held_back = models.BooleanField(default=False, help_text="Its current issue was cut off or is degenerate, "
                                                                   "and no curator let it into the review queue.")
    review_count = models.PositiveSmallIntegerField(default=0)
    underspecified = models.PositiveSmallIntegerField(null=True, blank=True, help_text="Merged (most severe).")
    false_negative = models.PositiveSmallIntegerField(null=True, blank=True, help_text="Merged (most severe).")
    disagree = models.BooleanField(default=False, help_text="Its reviewers disagree: a curator settles it.")
    mutation_score = models.FloatField(null=True, blank=True, help_text="The oracle's mutation score: the share of "
                                                                         "its graded mutants the hidden tests catch.")
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["-created_at", "-id"]
        # The list's default order, alone and within a state.
        indexes = [models.Index(fields=["repository", "state"]), models.Index(fields=["state", "-updated_at"]),
                   models.Index(fields=["-updated_at", "-id"], name="task_recently_changed")]
        constraints = [models.UniqueConstraint(fields=["commit"], condition=models.Q(source="mined"),
                                               name="one_mined_task_per_commit")]

    def __str__(self):
        return self.instance_id

    @property
    def imported(self) -> bool:
        return self.source == self.Source.IMPORTED

    @property
    def reason_sentence(self) -> str:
        return reason_sentence(self.reason) if self.reason else ""


class ImportedInstance(models.Model):
    """What a SWE-bench instance file gave an imported task: its patches and its oracle as given.

    The task's commit is the instance's base commit; the problem statement is issue version 1.
    The test ids are kept as the file gives them: SWE-bench's are often not pytest node ids
    (Django's and SymPy's name tests their own way)."""

    task = models.OneToOneField(Task, on_delete=models.CASCADE, related_name="imported_instance")
    patch = models.TextField(help_text="The gold patch.")
    test_patch = models.TextField()
    fail_to_pass = models.JSONField(default=list)
    pass_to_pass = models.JSONField(default=list)
    hints_text = models.TextField(blank=True)
    created_at = models.CharField(max_length=64, blank=True, help_text="As the file gives it.")
    version = models.CharField(max_length=64, blank=True)
    environment_setup_commit = models.CharField(max_length=40, blank=True)
    checksum = models.CharField(max_length=64, help_text="Of the row's fields: the same row imported again is "
                                                         "recognised, a different one refused.")
    # Where it came from a release folder (evaluate): its base tree and its environment's files there.
    source_archive = models.CharField(max_length=1000, blank=True, help_text="The release's archive of its base tree.")
    release_environment = models.CharField(max_length=1000, blank=True,
                                           help_text="The release's folder of its environment.")

    def __str__(self):
        return f"imported instance {self.task_id}"


class TaskStateChange(models.Model):
    task = models.ForeignKey(Task, on_delete=models.CASCADE, related_name="state_changes")
    from_state = models.CharField(max_length=32, blank=True)
    to_state = models.CharField(max_length=32)
    reason = models.CharField(max_length=64, blank=True)
    actor = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL)
    at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["at", "id"]


class Validation(JobLife, models.Model):
    """One validation of a task: its environment, its runs, its oracle and verdict; its life is its
    `job`'s (apps.jobs), whose subject is the task."""

    # Set in the transaction that makes the row.
    job = models.OneToOneField("jobs.Job", null=True, on_delete=models.CASCADE, related_name="validation")
    task = models.ForeignKey(Task, on_delete=models.CASCADE, related_name="validations")
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
    grade_selection = models.JSONField(
        null=True, blank=True, help_text="What pytest ran in the runs that are the gold and empty patches' grades "
                                         "(the suite's arguments), which every grade of the task's candidates then "
                                         "runs; null: the files of the F2P and P2P tests.")
    controls = models.JSONField(
        default=dict, blank=True, help_text="The gold and empty patches' grades made by the validation's own runs, "
                                            "{source: {outcome, tampering, touches_tests, runs, seconds}}.")
    seconds = models.FloatField(null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    generated = models.BooleanField(default=False, help_text="Checks generated tests in an earlier validation's "
                                                             "environment, instead of the commit's own tests.")

    class Meta:
        ordering = ["-created_at", "-id"]

    def __str__(self):
        return f"validation {self.pk} of {self.task_id}"

    error = property(lambda self: self.job.error_message)

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
    reason = models.CharField(max_length=64, blank=True, help_text="Why it was refused (a reason code).")
    lifted = models.JSONField(default=dict, blank=True, help_text="{package: the date cutoff it was lifted to}")
    pytest = models.CharField(max_length=128, blank=True, help_text="The pytest it installed, and why that one.")

    class Meta:
        ordering = ["id"]

    @property
    def reason_sentence(self) -> str:
        return reason_sentence(self.reason) if self.reason else ""


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
    untrusted = models.TextField(blank=True, help_text="Why the run's report cannot be believed (its outcomes "
                                                       "then count for nothing).")

    class Meta:
        ordering = ["id"]


class IssueVersion(models.Model):
    """One version of a task's issue text. Versions are never changed or removed: the model writes
    new ones, people edit into new ones, and the current one is the task's problem statement."""

    class Author(models.TextChoices):
        MODEL = "model"
        PERSON = "person"
        IMPORTED = "imported"  # an imported instance's problem statement

    task = models.ForeignKey(Task, on_delete=models.CASCADE, related_name="issue_versions")
    number = models.PositiveIntegerField()
    text = models.TextField()
    author = models.CharField(max_length=16, choices=Author.choices)
    model_call = models.ForeignKey("llm.ModelCall", null=True, blank=True, on_delete=models.SET_NULL,
                                   related_name="issue_versions")
    edited_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL)
    leak_score = models.FloatField(default=0, help_text="The share of the fix the text reveals (0-1).")
    leak = models.JSONField(default=dict, help_text="What of the fix was found in the text.")
    problems = models.JSONField(default=list, blank=True, help_text="Why a model's text is kept out of the review "
                                                                    "queue: [{code, why}] (cut_off, degenerate).")
    measures = models.JSONField(default=dict, blank=True, help_text="How repetitive the text is (its degeneration "
                                                                    "measures).")
    admitted_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL,
                                    related_name="+", help_text="Who let it into the review queue despite its problems.")
    admitted_at = models.DateTimeField(null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["task", "number"]
        constraints = [models.UniqueConstraint(fields=["task", "number"], name="issue_version_number_unique")]

    @property
    def leak_flagged(self) -> bool:
        return self.leak_score > settings.COMMITGYM_LEAK_THRESHOLD

    @property
    def held_back(self) -> bool:
        """Kept out of the review queue: the text has problems and no curator let it in."""
        return bool(self.problems) and self.admitted_at is None


def current_issue(versions: list[IssueVersion]) -> IssueVersion | None:
    """The problem statement among a task's versions: the newest a person wrote, else the one an
    import gave, else the newest the model wrote. No model output ever replaces a person's edit or
    an imported instance's statement."""
    newest_first = sorted(versions, key=lambda version: version.number, reverse=True)
    for author in (IssueVersion.Author.PERSON, IssueVersion.Author.IMPORTED):
        found = next((v for v in newest_first if v.author == author), None)
        if found:
            return found
    return next(iter(newest_first), None)


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


# --- curation ---------------------------------------------------------------------------------


class RejectReason(models.Model):
    """A reason curators pick when they reject a task; admins manage the list."""

    code = models.SlugField(max_length=64, unique=True)
    sentence = models.CharField(max_length=255)
    active = models.BooleanField(default=True, help_text="Offered when rejecting; old rejections keep their reason.")
    order = models.PositiveSmallIntegerField(default=0)

    class Meta:
        ordering = ["order", "code"]

    def __str__(self):
        return self.code


class CurationSettings(models.Model):
    """The review rules, one row for the whole site; admins change them in the admin."""

    required_reviews = models.PositiveSmallIntegerField(
        default=1, help_text="Reviews a task needs before it can be accepted.")
    underspecified_below = models.PositiveSmallIntegerField(
        default=2, help_text="Accept only when the merged 'issue underspecified' score (0-3) is below this.")
    false_negative_below = models.PositiveSmallIntegerField(
        default=2, help_text="Accept only when the merged 'tests could reject a valid solution' score (0-3) is "
                             "below this.")
    hold_minutes = models.PositiveSmallIntegerField(
        default=30, help_text="How long a task taken from the queue stays held for its reviewer.")

    class Meta:
        verbose_name_plural = "curation settings"

    def __str__(self):
        return "Curation settings"

    CACHE_KEY = "tasks:curation_settings"

    @classmethod
    def current(cls) -> "CurationSettings":
        """The rules now. Every review page reads them: each process keeps them for 30 s, and a save
        in the admin clears them at once in the process that saved."""
        return cache.get_or_set(cls.CACHE_KEY, lambda: cls.objects.get_or_create(pk=1)[0], 30)


class Review(models.Model):
    """One reviewer's scores and decision on a task, with SWE-bench Verified's rubric. A reviewer has
    one current review per task; reopening a task or changing its issue or tests retires them."""

    class Decision(models.TextChoices):
        ACCEPT = "accept"
        REJECT = "reject"

    DIFFICULTY_CHOICES = list(zip(DIFFICULTIES, ("under 15 minutes", "15 minutes to 1 hour", "1 to 4 hours",
                                                 "more than 4 hours")))
    SCORES = [(0, "0"), (1, "1"), (2, "2"), (3, "3")]

    task = models.ForeignKey(Task, on_delete=models.CASCADE, related_name="reviews")
    reviewer = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="reviews")
    decision = models.CharField(max_length=16, choices=Decision.choices)
    # A rejection may leave the rubric out: only accepting needs it.
    underspecified = models.PositiveSmallIntegerField(
        choices=SCORES, null=True, blank=True,
        help_text="Is the issue well specified? 0 well specified … 3 almost impossible to solve.")
    false_negative = models.PositiveSmallIntegerField(
        choices=SCORES, null=True, blank=True, help_text="Could the tests reject a valid solution? 0 no … 3 almost "
                                                         "certainly.")
    difficulty = models.CharField(max_length=32, choices=DIFFICULTY_CHOICES, blank=True)
    other_problems = models.TextField(blank=True)
    reject_reason = models.CharField(max_length=64, blank=True)
    note = models.TextField(blank=True)
    current = models.BooleanField(default=True)
    settles = models.BooleanField(default=False, help_text="A curator's final word on a disagreement.")
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["task", "created_at", "id"]
        constraints = [models.UniqueConstraint(fields=["task", "reviewer"], condition=models.Q(current=True),
                                               name="one_current_review_per_reviewer")]
        indexes = [models.Index(fields=["reviewer", "created_at"])]


class TaskHold(models.Model):
    """A task a reviewer took from the queue: others skip it until the hold expires."""

    task = models.OneToOneField(Task, on_delete=models.CASCADE, related_name="hold")
    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="task_holds")
    expires_at = models.DateTimeField(db_index=True)


class TaskChange(models.Model):
    """What people changed on a task besides its state: who, when, before and after."""

    class Kind(models.TextChoices):
        ISSUE_EDITED = "issue_edited"
        REVIEWED = "reviewed"
        TEST_DROPPED = "test_dropped"
        TEST_RESTORED = "test_restored"
        REVIEWS_RETIRED = "reviews_retired"
        TESTS_FLAGGED_WEAK = "tests_flagged_weak"  # mutants of the gold patch survive them

    task = models.ForeignKey(Task, on_delete=models.CASCADE, related_name="changes")
    kind = models.CharField(max_length=32, choices=Kind.choices)
    actor = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL)
    before = models.JSONField(default=dict, blank=True)
    after = models.JSONField(default=dict, blank=True)
    note = models.TextField(blank=True)
    at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["at", "id"]


class SavedView(models.Model):
    """A named task-list query: the filters and sort of the list's address."""

    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="saved_views")
    name = models.CharField(max_length=100)
    query = models.CharField(max_length=2000)
    shared = models.BooleanField(default=False, help_text="Everyone sees it in their list of views.")
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["name", "id"]
        constraints = [models.UniqueConstraint(fields=["user", "name"], name="saved_view_name_unique")]


class BulkAction(models.Model):
    """An action on every task a list query matched, run as a background job (`job`); undoable,
    the undo a job of its own (`undo_job`)."""

    class Action(models.TextChoices):
        REJECT = "reject"
        REOPEN = "reopen"
        VALIDATE = "validate"
        WRITE_ISSUES = "write_issues", "write issues"
        GENERATE_TESTS = "generate_tests", "generate tests"

    user = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, on_delete=models.SET_NULL)
    action = models.CharField(max_length=16, choices=Action.choices)
    query = models.CharField(max_length=2000, help_text="The task list's filters, as in its address.")
    task_ids = models.JSONField(default=list, help_text="The tasks the query matched when it was confirmed.")
    task_count = models.PositiveIntegerField(default=0)
    reject_reason = models.CharField(max_length=64, blank=True)
    note = models.TextField(blank=True)
    # Set in the transaction that makes the action: the job's subject is the action itself.
    job = models.OneToOneField("jobs.Job", null=True, on_delete=models.CASCADE, related_name="bulk_action")
    undo_job = models.OneToOneField("jobs.Job", null=True, blank=True, on_delete=models.SET_NULL,
                                    related_name="bulk_undo")
    changed = models.JSONField(default=list, help_text="[[task id, state before, reason before, [reviews it "
                                                       "retired]]] of what it moved.")
    skipped = models.PositiveIntegerField(default=0)
    created_at = models.DateTimeField(auto_now_add=True)
    undone_at = models.DateTimeField(null=True, blank=True)
    undone_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL,
                                  related_name="+")

    class Meta:
        ordering = ["-created_at", "-id"]

    def __str__(self):
        return f"bulk {self.action} of {self.task_count} tasks"

    @property
    def state(self) -> str:
        """The action's job's state; once an undo is asked, undoing, undone or undo_failed."""
        if self.undo_job_id:
            return {"queued": "undoing", "running": "undoing", "succeeded": "undone"}.get(self.undo_job.state,
                                                                                          "undo_failed")
        return self.job.state if self.job_id else "queued"

    @property
    def is_active(self) -> bool:
        return self.state in ("queued", "running", "undoing")
