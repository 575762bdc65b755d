"""People's labels of candidate patches: whether each is correct, given blind, with overlap, and a
curator's settlement where annotators disagree.

A label belongs to its candidate (a candidate is the task's, the same through whichever dataset it
is seen); the dataset it was given through says which queue and which settings were in force."""

from django.conf import settings
from django.db import models

from apps.jobs.models import JobLife


class Verdict(models.TextChoices):
    CORRECT = "correct", "correct"
    INCORRECT = "incorrect", "incorrect"
    CANT_TELL = "cant_tell", "can't tell"


class QueueOrder(models.TextChoices):
    RANDOM = "random", "uniformly at random"
    DISAGREEMENT = "disagreement", "where the verifiers and the hidden tests disagree first"
    UNCERTAIN = "uncertain", "where the judge is least certain first"


DEFAULT_OVERLAP = 2


class LabelSettings(models.Model):
    """How a dataset's candidates are labelled; curators change them on the dataset's labels page."""

    dataset = models.OneToOneField("datasets.Dataset", on_delete=models.CASCADE, related_name="label_settings")
    overlap = models.PositiveSmallIntegerField(default=DEFAULT_OVERLAP, help_text="Annotators each candidate goes to.")
    control_share = models.FloatField(default=0.0, help_text="The share of hidden controls (gold, empty and mutant "
                                                             "patches whose answer is known) mixed into the queue.")
    order = models.CharField(max_length=16, choices=QueueOrder.choices, default=QueueOrder.RANDOM)
    hide_trajectory = models.BooleanField(default=False, help_text="Annotators do not see the agent's trajectory "
                                                                   "(its own tone biases the reader).")
    queue_fingerprint = models.CharField(max_length=200, blank=True, help_text="What the queue was last built "
                                                                             "from: it is built again when it changes.")
    updated_at = models.DateTimeField(auto_now=True)

    def __str__(self):
        return f"label settings of {self.dataset}"


class QueueItem(models.Model):
    """A candidate in a dataset's labelling queue, at its place in the order in force. A control's
    `answer` is known; it is shown as any other item."""

    dataset = models.ForeignKey("datasets.Dataset", on_delete=models.CASCADE, related_name="label_queue")
    candidate = models.ForeignKey("datasets.Candidate", on_delete=models.CASCADE, related_name="+")
    priority = models.FloatField(help_text="Lower is labelled first.")
    control = models.BooleanField(default=False)
    answer = models.CharField(max_length=16, blank=True, choices=Verdict.choices, help_text="A control's answer.")
    order = models.CharField(max_length=16, choices=QueueOrder.choices, help_text="The order its priority follows.")
    active = models.BooleanField(default=True, help_text="In the queue now; an item no longer wanted that has "
                                                         "labels stays, inactive.")

    class Meta:
        constraints = [models.UniqueConstraint(fields=["dataset", "candidate"], name="one_queue_item_per_candidate")]
        indexes = [models.Index(fields=["dataset", "priority"])]


class LabelHold(models.Model):
    """An item an annotator took from the queue: theirs to label until it expires."""

    dataset = models.ForeignKey("datasets.Dataset", on_delete=models.CASCADE, related_name="+")
    candidate = models.ForeignKey("datasets.Candidate", on_delete=models.CASCADE, related_name="label_holds")
    annotator = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="label_holds")
    taken_at = models.DateTimeField()
    expires_at = models.DateTimeField(db_index=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["candidate", "annotator"], name="one_label_hold_per_person")]


class Label(models.Model):
    """One annotator's judgement of one candidate, kept as given."""

    candidate = models.ForeignKey("datasets.Candidate", on_delete=models.CASCADE, related_name="labels")
    annotator = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="labels")
    dataset = models.ForeignKey("datasets.Dataset", on_delete=models.CASCADE, related_name="labels",
                                help_text="The queue it was given through.")
    verdict = models.CharField(max_length=16, choices=Verdict.choices)
    confidence = models.PositiveSmallIntegerField(help_text="1 (a guess) to 3 (sure).")
    rationale = models.TextField(blank=True)
    lines = models.JSONField(default=list, blank=True, help_text="Lines of the diff the rationale is pinned to: "
                                                                 "[{path, line}].")
    seconds = models.FloatField(help_text="From taking the item to labelling it.")
    control = models.BooleanField(default=False, help_text="A hidden control: its answer was known.")
    answer = models.CharField(max_length=16, blank=True, choices=Verdict.choices)
    order = models.CharField(max_length=16, choices=QueueOrder.choices, help_text="The queue's order when it was "
                                                                                  "given.")
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["created_at", "id"]
        constraints = [models.UniqueConstraint(fields=["candidate", "annotator"], name="one_label_per_person")]
        indexes = [models.Index(fields=["dataset", "created_at"])]

    def __str__(self):
        return f"{self.get_verdict_display()} by {self.annotator_id} on candidate {self.candidate_id}"


class Settlement(models.Model):
    """A curator's final label of a candidate whose annotators disagree; the latest one stands."""

    candidate = models.ForeignKey("datasets.Candidate", on_delete=models.CASCADE, related_name="settlements")
    verdict = models.CharField(max_length=16, choices=Verdict.choices)
    note = models.TextField(blank=True)
    settled_by = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="+")
    labels_seen = models.JSONField(default=list, help_text="The ids of the labels the curator saw.")
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["created_at", "id"]


class LabelExport(JobLife, models.Model):
    """Every label of a dataset written to a file by a job (never inside a web request)."""

    class Format(models.TextChoices):
        JSONL = "jsonl"
        CSV = "csv"

    job = models.OneToOneField("jobs.Job", null=True, on_delete=models.CASCADE, related_name="label_export")
    dataset = models.ForeignKey("datasets.Dataset", on_delete=models.CASCADE, related_name="label_exports")
    format = models.CharField(max_length=8, choices=Format.choices, default=Format.JSONL)
    pseudonymize = models.BooleanField(default=False, help_text="People named by a pseudonym, not their id.")
    path = models.CharField(max_length=1000, blank=True, help_text="The file written.")
    rows = models.PositiveIntegerField(default=0)
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL,
                                   related_name="+")
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["-created_at", "-id"]

    def __str__(self):
        return f"labels of dataset {self.dataset_id} ({self.format})"
