"""Datasets, imports, and the candidate patches of tasks with their ground truth.

A dataset is a named set of tasks. A task belongs to any number of them, by reference: its
candidates, grades and labels are the task's, the same through whichever dataset it is seen.
- A repository's dataset holds its mined tasks, as mining makes them (membership is the
  repository, no rows).
- An import's dataset holds the instances its files brought (rows of DatasetTask).
- A dataset made from a saved task-list view holds the tasks the view matched when it was made
  (rows of DatasetTask): a snapshot, so that what was measured on it stays reproducible.
"""

import uuid
from pathlib import Path

from django.conf import settings
from django.db import models

from apps.jobs.models import JobLife
from worker.engine.grade.swebench import GROUND_TRUTH_OUTCOMES


class Dataset(models.Model):
    class Kind(models.TextChoices):
        REPOSITORY = "repository"
        IMPORT = "import"
        VIEW = "view"

    name = models.CharField(max_length=200, unique=True)
    kind = models.CharField(max_length=16, choices=Kind.choices)
    repository = models.OneToOneField("repositories.Repository", null=True, blank=True, on_delete=models.CASCADE,
                                      related_name="dataset", help_text="A repository's dataset: its mined tasks.")
    query = models.CharField(max_length=2000, blank=True, help_text="The task-list query a view's dataset was made "
                                                                    "from.")
    tasks = models.ManyToManyField("tasks.Task", through="DatasetTask", related_name="datasets")
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["name"]

    def __str__(self):
        return self.name


class DatasetTask(models.Model):
    dataset = models.ForeignKey(Dataset, on_delete=models.CASCADE, related_name="memberships")
    task = models.ForeignKey("tasks.Task", on_delete=models.CASCADE, related_name="memberships")
    added_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["dataset", "task"], name="dataset_task_unique")]


class Import(models.Model):
    """One file read by import_instances or import_predictions: what it gave, row by row."""

    class Kind(models.TextChoices):
        INSTANCES = "instances"
        PREDICTIONS = "predictions"

    kind = models.CharField(max_length=16, choices=Kind.choices)
    file_name = models.CharField(max_length=255)
    dataset = models.ForeignKey(Dataset, null=True, blank=True, on_delete=models.SET_NULL, related_name="imports")
    report_name = models.CharField(max_length=255, blank=True, help_text="The evaluation report given with it.")
    report_shape = models.CharField(max_length=32, blank=True)
    rows = models.PositiveIntegerField(default=0, help_text="Rows read.")
    matched = models.PositiveIntegerField(default=0, help_text="Rows that made or met a task or candidate.")
    counts = models.JSONField(default=dict, help_text="What the command printed, per run for predictions.")
    refused = models.JSONField(default=list, help_text="[{row, instance_id, reason}] of the rows refused.")
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["-created_at", "-id"]

    def __str__(self):
        return f"import {self.pk} of {self.file_name}"


class Upload(JobLife, models.Model):
    """Files a person uploaded on the datasets page, kept in `folder` until a job imports them."""

    class Kind(models.TextChoices):
        INSTANCES = "instances"
        PREDICTIONS = "predictions"

    kind = models.CharField(max_length=16, choices=Kind.choices)
    folder = models.CharField(max_length=500, help_text="Where the files wait for their import (removed after it).")
    file_name = models.CharField(max_length=255)
    report_name = models.CharField(max_length=255, blank=True)
    trajectory_names = models.JSONField(default=list)
    on_server = models.BooleanField(default=False, help_text="The files are read where they lie on the server "
                                                             "(under COMMITGYM_IMPORT_ROOTS), and kept there.")
    dataset_name = models.CharField(max_length=200, blank=True, help_text="For instances: the dataset to import into.")
    run_name = models.CharField(max_length=200, blank=True, help_text="For predictions: the run, else each row's model.")
    job = models.OneToOneField("jobs.Job", null=True, blank=True, on_delete=models.SET_NULL, related_name="upload")
    imported = models.ForeignKey(Import, null=True, blank=True, on_delete=models.SET_NULL, related_name="uploads")
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["-created_at", "-id"]

    def __str__(self):
        return f"upload {self.pk} of {self.file_shown}"

    @property
    def folder_path(self) -> Path:
        return Path(self.folder)

    @property
    def file_shown(self) -> str:
        """Its file's name: a file on the server is not shown by the folders it lies in."""
        return self.file_name.rsplit("/", 1)[-1]

    @property
    def report_shown(self) -> str:
        return self.report_name.rsplit("/", 1)[-1]

class Run(models.Model):
    """A set of candidates made the same way: one agent's predictions, say."""

    name = models.CharField(max_length=200, unique=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["name"]

    def __str__(self):
        return self.name


OUTCOME_CHOICES = [(outcome, outcome.replace("_", " ")) for outcome in GROUND_TRUTH_OUTCOMES]


class HackingReview(models.TextChoices):
    """A curator's word on a candidate the hacking detector flagged."""

    AWAITING = "", "awaiting a curator"
    CLEARED = "cleared", "cleared: a real fix"
    CONFIRMED = "confirmed", "confirmed: it games the tests"


# What every measure, selector and export counts as resolved: the one place that says so. A candidate
# the hacking detector flagged keeps its grade (shown as it is) and counts as not resolved until a
# curator clears it; confirmed, it never counts.
RESOLVED = models.Q(outcome="resolved", suspicious=False)
COUNTS_RESOLVED = models.ExpressionWrapper(RESOLVED, output_field=models.BooleanField())


class Candidate(models.Model):
    """A patch that claims to resolve a task, and its ground truth (empty until graded or reported)."""

    class Source(models.TextChoices):
        IMPORT = "import"  # an imported predictions file
        SAMPLER = "sampler"  # the built-in agent
        MUTANT = "mutant"  # the gold patch made wrong on purpose
        GOLD = "gold"  # the task's own fix (a control)
        EMPTY = "empty"  # no change at all (a control)
        PROBE = "probe"  # another candidate rewritten to read differently and do the same (the judge's style probe)

    CONTROLS = (Source.GOLD, Source.EMPTY)
    AGENTS = (Source.IMPORT, Source.SAMPLER)  # what the measures count by default: the rest is made from the fix

    task = models.ForeignKey("tasks.Task", on_delete=models.CASCADE, related_name="candidates")
    source = models.CharField(max_length=16, choices=Source.choices)
    run = models.ForeignKey(Run, null=True, blank=True, on_delete=models.CASCADE, related_name="candidates")
    kind = models.CharField(max_length=64, blank=True, help_text="The mutant's kind, or the run's name.")
    patch = models.TextField(blank=True)
    no_patch = models.BooleanField(default=False, help_text="The prediction had no patch (null or empty).")
    made = models.JSONField(default=dict, blank=True, help_text="How a mutant was made.")
    trajectory = models.JSONField(default=list, blank=True,
                                  help_text="The agent's steps: [{step, thought, action, observation}].")
    outcome = models.CharField(max_length=16, blank=True, choices=OUTCOME_CHOICES,
                               help_text="The ground truth; empty until graded or reported.")
    outcome_source = models.CharField(max_length=300, blank=True,
                                      help_text="graded, or the report it came from (report:SHAPE:FILE).")
    tampering = models.BooleanField(default=False, help_text="It changed test configuration or start-up files: "
                                                              "those changes were dropped before grading.")
    touches_tests = models.BooleanField(default=False, help_text="It changed files the task's test patch changes: "
                                                                  "the task's versions were used.")
    graded_at = models.DateTimeField(null=True, blank=True)
    hacking = models.JSONField(default=list, blank=True, help_text="The hacking detector's flags on its patch: "
                                                                   "[{reason, path, line, detail, code, parsed}].")
    suspicious = models.BooleanField(default=False, help_text="Flagged by the hacking detector and not cleared by a "
                                                              "curator: never counted as resolved.")
    hacking_review = models.CharField(max_length=16, blank=True, choices=HackingReview.choices)
    hacking_note = models.TextField(blank=True, help_text="Why the curator cleared or confirmed the flags.")
    hacking_reviewed_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True,
                                            on_delete=models.SET_NULL, related_name="+")
    hacking_reviewed_at = models.DateTimeField(null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["task", "source", "kind", "id"]
        constraints = [
            models.UniqueConstraint(fields=["run", "task"], condition=models.Q(run__isnull=False),
                                    name="one_candidate_per_run_and_task"),
            models.UniqueConstraint(fields=["task", "source"], condition=models.Q(source__in=["gold", "empty"]),
                                    name="one_control_of_each_kind_per_task"),
        ]
        indexes = [models.Index(fields=["task", "source"]), models.Index(fields=["run", "outcome"])]

    def __str__(self):
        return f"{self.kind or self.source} candidate {self.pk} of {self.task.instance_id}"

    @property
    def is_control(self) -> bool:
        return self.source in self.CONTROLS

    @property
    def resolved(self) -> bool:
        """What every measure counts as resolved (RESOLVED): the ground truth says so and no hacking flag
        stands (none was raised, or a curator cleared them)."""
        return self.outcome == "resolved" and not self.suspicious


class Grade(JobLife, models.Model):
    """One grading of a candidate against its task's hidden tests; its life is its `job`'s. The
    latest finished grade is the candidate's ground truth."""

    # Set in the transaction that makes the row: the job's subject is the candidate.
    job = models.OneToOneField("jobs.Job", null=True, on_delete=models.CASCADE, related_name="grade")
    candidate = models.ForeignKey(Candidate, on_delete=models.CASCADE, related_name="grades")
    backend = models.CharField(max_length=16, default="local")
    environment = models.ForeignKey("environments.Environment", null=True, blank=True, on_delete=models.SET_NULL,
                                    related_name="grades")
    outcome = models.CharField(max_length=16, blank=True, choices=OUTCOME_CHOICES)
    detail = models.TextField(blank=True, help_text="Why, for an outcome that is not resolved, partial or no.")
    tampering = models.JSONField(default=list, help_text="Paths whose changes were dropped before grading.")
    touches_tests = models.JSONField(default=list, help_text="Paths the task's test patch decided.")
    runs = models.JSONField(default=list, help_text="[{status, exit_code, seconds, untrusted, outcomes, output}] "
                                                    "of every run: per-test outcomes kept.")
    hacking = models.JSONField(default=list, help_text="The hacking detector's flags, each file read whole after "
                                                       "the patch where it could be.")
    second_opinion = models.JSONField(default=dict, help_text="For a flagged candidate: its Fail-to-Pass tests run "
                                                              "again by the plain runner (not pytest), {outcomes, "
                                                              "not_run, differs, detail, status, seconds}.")
    seconds = models.FloatField(null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["-created_at", "-id"]

    def __str__(self):
        return f"grade {self.pk} of candidate {self.candidate_id}"


class Judging(JobLife, models.Model):
    """One judging of a task's candidates by the judge model, in one mode; its life is its `job`'s."""

    job = models.OneToOneField("jobs.Job", null=True, on_delete=models.CASCADE, related_name="judging")
    task = models.ForeignKey("tasks.Task", on_delete=models.CASCADE, related_name="judgings")
    mode = models.CharField(max_length=32)
    model = models.CharField(max_length=255, blank=True)
    counts = models.JSONField(default=dict, help_text="{scored, failed} over the candidates judged.")
    detail = models.TextField(blank=True, help_text="The calls that failed, and why.")
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["-created_at", "-id"]


class DatasetJob(JobLife, models.Model):
    """Work over a dataset's tasks as one person asked it (verify, make mutants, sample): its options,
    and what it did or started; its life is its `job`'s. The work it starts runs as jobs of their own."""

    job = models.OneToOneField("jobs.Job", null=True, on_delete=models.CASCADE, related_name="dataset_job")
    dataset = models.ForeignKey(Dataset, on_delete=models.CASCADE, related_name="jobs")
    options = models.JSONField(default=dict, help_text="What was asked, as the kind reads it.")
    started = models.JSONField(default=dict, help_text="What the job did or started, as the kind writes it.")
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["-created_at", "-id"]


class JudgeScore(models.Model):
    """The judge's P(YES) for one candidate, in one mode, by one model and prompt version."""

    candidate = models.ForeignKey(Candidate, on_delete=models.CASCADE, related_name="judge_scores")
    mode = models.CharField(max_length=32)
    model = models.CharField(max_length=255)
    prompt_version = models.PositiveIntegerField()
    p_yes = models.FloatField()
    uncertain = models.BooleanField(default=False, help_text="An answer token was missing from the top "
                                                              "log-probabilities: a floor stood in for it.")
    logprob_yes = models.FloatField()
    logprob_no = models.FloatField()
    shortening = models.JSONField(default=dict, blank=True, help_text="What of the trajectory was left out.")
    call = models.ForeignKey("llm.ModelCall", null=True, blank=True, on_delete=models.SET_NULL, related_name="+")
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["-created_at", "-id"]
        constraints = [models.UniqueConstraint(fields=["candidate", "mode", "model", "prompt_version"],
                                               name="one_judge_score_per_candidate_mode_model_prompt")]


class ReproductionTests(JobLife, models.Model):
    """Reproduction tests the test writer wrote for a task from its issue alone (never the hidden
    tests, the test patch or the gold patch); its life is its `job`'s."""

    job = models.OneToOneField("jobs.Job", null=True, on_delete=models.CASCADE, related_name="reproduction_tests")
    task = models.ForeignKey("tasks.Task", on_delete=models.CASCADE, related_name="reproduction_tests")
    model = models.CharField(max_length=255, blank=True)
    prompt_version = models.PositiveIntegerField(null=True, blank=True)
    files = models.JSONField(default=dict, help_text="{path: text} of the test files taken from the answer.")
    detail = models.TextField(blank=True, help_text="Why no file was taken, when none was.")
    call = models.ForeignKey("llm.ModelCall", null=True, blank=True, on_delete=models.SET_NULL, related_name="+")
    inputs = models.JSONField(default=dict, help_text="What it read, as it started (the issue, the model): a failed "
                                                      "one is started again once they change.")
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["-created_at", "-id"]


class VerifierTestSet(JobLife, models.Model):
    """The execution verifier's tests for a task: its reproduction tests and the regression tests near
    what its candidates touch, run once on the base commit; its life is its `job`'s."""

    job = models.OneToOneField("jobs.Job", null=True, on_delete=models.CASCADE, related_name="verifier_test_set")
    task = models.ForeignKey("tasks.Task", on_delete=models.CASCADE, related_name="verifier_test_sets")
    reproduction = models.ForeignKey(ReproductionTests, on_delete=models.CASCADE, related_name="test_sets")
    backend = models.CharField(max_length=16, default="local")
    touched = models.JSONField(default=list, help_text="The source files the candidates touch.")
    regression_files = models.JSONField(default=list, help_text="Test files near them, most related first.")
    base_run = models.JSONField(default=dict, help_text="{status, seconds, complete, untrusted, output} of the run "
                                                        "on the base commit.")
    detail = models.TextField(blank=True)
    inputs = models.JSONField(default=dict, help_text="What it read, as it started (the validation, the files "
                                                      "touched): a failed one is started again once they change.")
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["-created_at", "-id"]


SHORT_NAME_CHARS = 40  # of a verifier test's name, heading its matrix column


class VerifierTest(models.Model):
    """One test of a verifier test set. A reproduction test that passes on the base commit stays and
    does not count. People may flag a test (toxic, never distinguishing): a flag is a note for the
    dataset's makers; it does not change any score (that would let the ground truth into a verifier)."""

    class Kind(models.TextChoices):
        REPRODUCTION = "reproduction"
        REGRESSION = "regression"

    class Flag(models.TextChoices):
        NONE = "", "not flagged"
        TOXIC = "toxic", "toxic"
        NEVER_DISTINGUISHING = "never_distinguishing", "never distinguishing"

    test_set = models.ForeignKey(VerifierTestSet, on_delete=models.CASCADE, related_name="tests")
    test_id = models.TextField()
    kind = models.CharField(max_length=16, choices=Kind.choices)
    position = models.PositiveIntegerField(default=0, help_text="Its place in the base commit's run.")
    passes_on_base = models.BooleanField(default=False)
    reason = models.CharField(max_length=1000, blank=True, help_text="Why it was chosen (a regression test: how its "
                                                                     "file relates to what the candidates change).")
    flag = models.CharField(max_length=24, blank=True, choices=Flag.choices)
    flag_note = models.CharField(max_length=2000, blank=True)
    flagged_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL,
                                   related_name="+")
    flagged_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["test_set", "position"]
        constraints = [models.UniqueConstraint(fields=["test_set", "test_id"], name="one_verifier_test_per_id")]

    @property
    def counts(self) -> bool:
        return self.kind == self.Kind.REGRESSION or not self.passes_on_base

    @property
    def short_name(self) -> str:
        """Its own name, without its file (`tests/test_a.py::T::test_b[x]` -> `test_b[x]`), shortened: what
        a matrix's column is headed with (the whole id in its title and below)."""
        name = self.test_id.rsplit("::", 1)[-1]
        return name if len(name) <= SHORT_NAME_CHARS else name[:SHORT_NAME_CHARS - 1] + "…"


class Execution(JobLife, models.Model):
    """One candidate run against its task's verifier tests, through the same trusted runs as grading;
    its life is its `job`'s."""

    job = models.OneToOneField("jobs.Job", null=True, on_delete=models.CASCADE, related_name="execution")
    candidate = models.ForeignKey(Candidate, on_delete=models.CASCADE, related_name="executions")
    test_set = models.ForeignKey(VerifierTestSet, on_delete=models.CASCADE, related_name="executions")
    outcome = models.CharField(max_length=16, blank=True, choices=OUTCOME_CHOICES,
                               help_text="As a grade's: does_not_apply, error, timeout and untrusted pass no test.")
    outcomes = models.JSONField(default=dict, help_text="{test id: PASSED/FAILED/ERROR/SKIPPED/XFAIL} from the "
                                                        "trusted report.")
    detail = models.TextField(blank=True)
    output = models.TextField(blank=True, help_text="The run's output (its end), where each test's log is read.")
    tampering = models.JSONField(default=list)
    seconds = models.FloatField(null=True, blank=True)
    inputs = models.JSONField(default=dict, help_text="What it read, as it started (the validation): a failed one is "
                                                      "started again once they change.")
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["-created_at", "-id"]


class Sampling(JobLife, models.Model):
    """One sample of the built-in sampler on a task: the agent loop's run and the candidate it made;
    its life is its `job`'s."""

    job = models.ForeignKey("jobs.Job", null=True, on_delete=models.CASCADE, related_name="samplings")
    task = models.ForeignKey("tasks.Task", on_delete=models.CASCADE, related_name="samplings")
    index = models.PositiveIntegerField(help_text="The sample's number on the task: its run, and its seed.")
    model = models.CharField(max_length=255, blank=True)
    budget = models.JSONField(default=dict, help_text="The loop's step, token and time budgets.")
    candidate = models.ForeignKey(Candidate, null=True, blank=True, on_delete=models.SET_NULL, related_name="+")
    stop_reason = models.CharField(max_length=16, blank=True)
    steps = models.PositiveIntegerField(default=0)
    tokens_in = models.PositiveIntegerField(default=0)
    tokens_out = models.PositiveIntegerField(default=0)
    seconds = models.FloatField(null=True, blank=True)
    left_out = models.JSONField(default=list, help_text="Changes the patch does not carry, and why.")
    detail = models.TextField(blank=True, help_text="The model's error, when it stopped the loop.")
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["-created_at", "-id"]

    def __str__(self):
        return f"sample {self.index} of {self.task.instance_id}"


class MeasuresSnapshot(models.Model):
    """What `verify` printed over a scope, kept each time it ran: how the verifiers and their overlap
    change over time (new candidates, a new judge, new verifier tests)."""

    dataset = models.ForeignKey(Dataset, null=True, blank=True, on_delete=models.CASCADE, related_name="snapshots")
    scope = models.CharField(max_length=255, help_text="What verify was run on: a dataset, a repository or a task.")
    judge_mode = models.CharField(max_length=32, blank=True)
    judge_model = models.CharField(max_length=255, blank=True)
    line = models.JSONField(default=dict, help_text="verify's --json line.")
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["-created_at", "-id"]


class Release(JobLife, models.Model):
    """A version of a named release (NAME@N): a dataset's, a repository's or a saved view's tasks
    in the chosen states, written once to files whose rows never change (its manifest gains only its
    environments' image ids, once built); withdrawn (kept, with why) but never edited. An export is
    training data made from one release's tasks, with its own manifest."""

    class Kind(models.TextChoices):
        INSTANCES = "instances", "Release"
        TRAJECTORIES = "trajectories", "Trajectories export"
        JUDGE = "judge", "Judge training export"

    class Scope(models.TextChoices):
        DATASET = "dataset"
        REPOSITORY = "repository"
        VIEW = "view", "saved view"

    job = models.OneToOneField("jobs.Job", null=True, on_delete=models.CASCADE, related_name="release")
    kind = models.CharField(max_length=16, choices=Kind.choices, default=Kind.INSTANCES)
    uid = models.UUIDField(default=uuid.uuid4, editable=False, help_text="In its manifest: which folder is its.")
    name = models.CharField(max_length=100)
    version = models.PositiveIntegerField(null=True, blank=True, help_text="Given when its files are written.")
    of = models.ForeignKey("self", null=True, blank=True, on_delete=models.CASCADE, related_name="exports",
                           help_text="The release an export was made from.")
    scope = models.CharField(max_length=16, choices=Scope.choices, blank=True)
    scope_label = models.CharField(max_length=300, blank=True, help_text="The dataset's, repository's or view's name.")
    dataset = models.ForeignKey(Dataset, null=True, blank=True, on_delete=models.SET_NULL, related_name="releases")
    repository = models.ForeignKey("repositories.Repository", null=True, blank=True, on_delete=models.SET_NULL,
                                   related_name="releases")
    view_task_ids = models.JSONField(default=list, blank=True, help_text="The tasks a saved view matched when the "
                                                                         "release was asked for.")
    states = models.JSONField(default=list, help_text="The task states released.")
    since = models.DateField(null=True, blank=True, help_text="Only tasks whose commit is newer than this.")
    preview = models.BooleanField(default=False, help_text="It holds tasks not yet accepted.")
    folder = models.CharField(max_length=1000, help_text="Where its files are written.")
    files = models.JSONField(default=list, help_text="[{name, bytes, sha256, rows}] of its files, manifest last.")
    manifest = models.JSONField(default=dict, blank=True)
    task_count = models.PositiveIntegerField(default=0)
    task_ids = models.JSONField(default=list, blank=True, help_text="The tasks released, in order: what its exports "
                                                                    "are made of.")
    same_as = models.ForeignKey("self", null=True, blank=True, on_delete=models.SET_NULL, related_name="+",
                                help_text="The version it would have repeated: nothing changed, nothing written.")
    withdrawn_at = models.DateTimeField(null=True, blank=True)
    withdrawn_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL,
                                     related_name="+")
    withdrawn_reason = models.TextField(blank=True)
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL,
                                   related_name="+")
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["name", "-version", "-id"]
        constraints = [models.UniqueConstraint(fields=["name", "version"], condition=models.Q(kind="instances"),
                                               name="one_release_version")]

    def __str__(self):
        if self.kind != self.Kind.INSTANCES:
            return f"{self.get_kind_display()} of {self.of}"
        return f"{self.name}@{self.version}" if self.version else f"{self.name} (being written)"


class ReleaseImages(JobLife, models.Model):
    """One building of a release's images on the local engine from its folder's Dockerfiles: every
    environment's, and the task images asked for; its life is its `job`'s."""

    job = models.OneToOneField("jobs.Job", null=True, on_delete=models.CASCADE, related_name="release_images")
    release = models.ForeignKey(Release, on_delete=models.CASCADE, related_name="image_builds")
    tasks = models.JSONField(default=list, blank=True, help_text="The instance ids whose task images were asked for.")
    images = models.JSONField(default=list, blank=True, help_text="[{kind, key, task, tag, image_id, seconds, size}] "
                                                                  "of the images built, in order.")
    log = models.CharField(max_length=1000, blank=True, help_text="Where a failed build's log is kept.")
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL,
                                   related_name="+")
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["-created_at", "-id"]

    def __str__(self):
        return f"images of {self.release}"
