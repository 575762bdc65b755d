"""What a dataset's labels say: agreement between annotators, the items a curator settles, people
against the hidden tests and both verifiers, the oracle's error rate, controls and progress. The
figures are the engine's (worker.engine.label); this reads the rows they stand on, once per page."""

import hashlib
import json
import time
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from statistics import median
from datetime import datetime
from typing import NamedTuple, Optional

from django.core.cache import cache
from django.db.models import Count, Max, Q, QuerySet

from apps.charts import Series, line_chart

from apps.datasets.models import COUNTS_RESOLVED, Candidate, Dataset, Execution, JudgeScore
from apps.datasets.selectors import dataset_tasks_visible
from apps.datasets.verifiers.judging import judge_identity
from apps.datasets.verifiers.measures import (
    CACHE_SECONDS,
    DEFAULT_SOURCES,
    SELECTORS,
    measures_compute,
    scope_cached,
    scope_fingerprint,
)
from worker.engine.label.agreement import (
    Judgement,
    cohens_kappas,
    fleiss_kappa,
    krippendorff_alpha,
    krippendorff_alpha_over_time,
    pairwise_agreement,
)
from worker.engine.label.final import AGREED, DISAGREE, SETTLED, FinalLabel, final_label
from worker.engine.label.overturns import overturns
from worker.engine.label.queue import uniform_share
from worker.engine.llm.clients import ModelError
from worker.engine.run.pytest_run import PASSING

from .models import DEFAULT_OVERLAP, Label, LabelSettings, QueueItem, Settlement, Verdict

CANT_TELL = Verdict.CANT_TELL.value


@dataclass(frozen=True)
class VerifierScores:
    p_yes: Optional[float]  # the judge's, in the patch mode, by the judge in use
    execution_passed: Optional[int]  # verifier tests the latest execution passed
    execution_tests: Optional[int]

    @property
    def execution_passes(self) -> Optional[bool]:
        """Every verifier test passed; None where the candidate was not run."""
        return None if not self.execution_tests else self.execution_passed == self.execution_tests


def verifier_scores(candidates) -> dict[int, VerifierScores]:
    """Per candidate (ids, or a query of candidates): the judge's P(YES) and what its latest execution
    passed."""
    chosen = candidates if isinstance(candidates, QuerySet) else list(candidates)
    try:
        model, version = judge_identity()
    except ModelError:
        model, version = "", 0
    p_yes = dict(JudgeScore.objects.filter(candidate__in=chosen, mode="patch", model=model, prompt_version=version)
                 .values_list("candidate_id", "p_yes"))
    executed = {}
    for candidate_id, outcomes in (Execution.objects.filter(candidate__in=chosen, job__state="succeeded")
                                   .order_by("created_at", "id").values_list("candidate_id", "outcomes")):
        executed[candidate_id] = (sum(status in PASSING for status in outcomes.values()), len(outcomes))
    ids = chosen.values_list("id", flat=True) if isinstance(chosen, QuerySet) else chosen
    return {i: VerifierScores(p_yes.get(i), *executed.get(i, (None, None))) for i in ids}


class LabelRow(NamedTuple):
    """A label as the figures read it (a row, not a model: a page over 20,000 labels reads them all)."""

    id: int
    candidate_id: int
    annotator_id: int
    annotator: str  # the annotator's user name
    verdict: str
    seconds: float
    created_at: datetime
    control: bool
    answer: str
    dataset_id: int

    @property
    def verdict_said(self) -> str:
        return Verdict(self.verdict).label


def label_rows(labels: QuerySet) -> list[LabelRow]:
    return [LabelRow(*values) for values in labels.order_by("created_at", "id").values_list(
        "id", "candidate_id", "annotator_id", "annotator__username", "verdict", "seconds", "created_at", "control",
        "answer", "dataset_id")]


def dataset_label_settings(dataset: Dataset) -> LabelSettings:
    return LabelSettings.objects.get_or_create(dataset=dataset)[0]


def dataset_labels(dataset: Dataset, *, user) -> QuerySet:
    """The labels given through the dataset's queue, of tasks the user sees."""
    return Label.objects.filter(dataset=dataset, candidate__task__in=dataset_tasks_visible(dataset, user=user))


def dataset_seed(dataset_id: int) -> str:
    """What the dataset's seeded orders hash with: its queue's random order and the oracle's sample."""
    return f"dataset-{dataset_id}"


# A candidate people cannot label: nothing to read (a prediction without a patch). People would call
# it incorrect; it is in no queue.
EMPTY_PATCH = Q(no_patch=True) | Q(patch="")
# The grades that say a candidate does not resolve its task. Errors, timeouts, untrusted runs, a patch
# that does not apply, no patch, and a pass the hacking detector doubts say nothing either way.
NOT_RESOLVED = ("no", "partial")


@dataclass
class LabelledCandidate:
    """A candidate with labels, and what each judge of it said."""

    id: int
    task: str
    repository: str
    labels: list = field(default_factory=list)  # of Label, controls' too
    final: FinalLabel = FinalLabel(None, "pending")
    settlement: Optional[Settlement] = None
    outcome: str = ""  # the hidden tests' grade, "" ungraded
    resolved: Optional[bool] = None  # True resolved (and not in doubt), False no or partial, else None
    scores: VerifierScores = VerifierScores(None, None, None)

    @property
    def people_say(self) -> Optional[bool]:
        """Correct, incorrect, or None (no final label, or can't tell)."""
        return {Verdict.CORRECT: True, Verdict.INCORRECT: False}.get(self.final.verdict)

    @property
    def judge_says(self) -> Optional[bool]:
        return None if self.scores.p_yes is None else self.scores.p_yes >= 0.5


def final_labels(candidates, *, labels: Optional[list] = None) -> dict[int, tuple[FinalLabel, list, Optional[Settlement]]]:
    """Per candidate with labels (ids, or a query of candidates; controls' labels left out): its final
    label, its labels (LabelRow) and the settlement that stands if any. `labels` may bring rows read
    already: those of other datasets are read besides. The overlap asked for is that of the dataset
    it was first labelled through."""
    chosen = candidates if isinstance(candidates, QuerySet) else list(candidates)
    everything = Label.objects.filter(candidate__in=chosen, control=False)
    if labels is None:
        labels = label_rows(everything)
    else:
        datasets = {label.dataset_id for label in labels}
        labels = sorted([*labels, *label_rows(everything.exclude(dataset_id__in=datasets))],
                        key=lambda label: (label.created_at, label.id))
    by_candidate: dict[int, list] = defaultdict(list)
    for label in labels:
        if not label.control:
            by_candidate[label.candidate_id].append(label)
    settlements = {}
    for settlement in (Settlement.objects.filter(candidate__in=chosen).select_related("settled_by")
                       .order_by("created_at", "id")):
        settlements[settlement.candidate_id] = settlement  # the latest stands
    overlaps = dict(LabelSettings.objects.filter(dataset_id__in={label.dataset_id for label in labels})
                    .values_list("dataset_id", "overlap"))
    found = {}
    for candidate_id, given in by_candidate.items():
        settlement = settlements.get(candidate_id)
        final = final_label([label.verdict for label in given], settled=settlement.verdict if settlement else None,
                            required=overlaps.get(given[0].dataset_id, DEFAULT_OVERLAP))
        found[candidate_id] = (final, given, settlement)
    return found


def _tests_say(outcome: str, counted: bool) -> Optional[bool]:
    if counted:
        return True
    return False if outcome in NOT_RESOLVED else None


def labelled_candidates(dataset: Dataset, *, user, labels: Optional[list] = None) -> list[LabelledCandidate]:
    """The dataset's labelled agent candidates (controls are not among them), each with its final
    label (from every label it has, through whichever dataset) and its grade and scores."""
    labels = labels if labels is not None else label_rows(dataset_labels(dataset, user=user))
    labelled = Candidate.objects.filter(id__in=Label.objects.filter(dataset=dataset, control=False).values(
        "candidate_id"), task__in=dataset_tasks_visible(dataset, user=user))
    finals = final_labels(labelled, labels=[label for label in labels if not label.control])
    scores = verifier_scores(labelled)
    rows = []
    for candidate in (labelled.annotate(counted=COUNTS_RESOLVED)
                      .values("id", "outcome", "counted", "task__instance_id", "task__repository__name")):
        if candidate["id"] not in finals:
            continue
        final, given, settlement = finals[candidate["id"]]
        rows.append(LabelledCandidate(
            id=candidate["id"], task=candidate["task__instance_id"], repository=candidate["task__repository__name"],
            labels=given, settlement=settlement, final=final, outcome=candidate["outcome"],
            resolved=_tests_say(candidate["outcome"], candidate["counted"]), scores=scores[candidate["id"]]))
    return sorted(rows, key=lambda row: (row.task, row.id))


def people_final_labels(*, task_ids) -> dict[int, tuple[bool, str]]:
    """For the judge-training export: {candidate id: (people say correct, the label's source)} of the
    tasks' candidates with a final label of correct or incorrect."""
    labelled = Candidate.objects.filter(task_id__in=list(task_ids), labels__control=False).distinct()
    return {candidate_id: (final.verdict == Verdict.CORRECT, f"people:{final.status}")
            for candidate_id, (final, _, _) in final_labels(labelled).items()
            if final.verdict in (Verdict.CORRECT, Verdict.INCORRECT)}


# --- agreement ------------------------------------------------------------------------------------


@dataclass
class AgreementFigures:
    raw: Optional[float]  # over every pair of labels of one item, can't tell a category of its own
    pairs: int
    cohens: list  # [(first name, second name, ChanceCorrected)]
    fleiss: object  # ChanceCorrected over the items with the full number of labels
    alpha: object  # ChanceCorrected, can't tell counted as missing
    raters: int
    per_annotator: list  # [{name, labels, agreed, pairs, share}]


def agreement_figures(labels: list, *, overlap: int) -> AgreementFigures:
    """The agreement of the labels of agent candidates (never of controls)."""
    judgements = [Judgement(label.candidate_id, label.annotator_id, label.verdict) for label in labels
                  if not label.control]
    names = {label.annotator_id: label.annotator for label in labels}
    raw = pairwise_agreement(judgements)
    counts = Counter(judgement.person for judgement in judgements)
    cohens = [(names[first], names[second], kappa) for (first, second), kappa in
              sorted(cohens_kappas(judgements).items(), key=lambda pair: (names[pair[0][0]], names[pair[0][1]]))]
    per_annotator = [{"name": names[person], "labels": counts[person], "agreed": raw.per_person.get(person, [0, 0])[0],
                      "pairs": raw.per_person.get(person, [0, 0])[1]} for person in counts]
    for row in per_annotator:
        row["share"] = row["agreed"] / row["pairs"] if row["pairs"] else None
    return AgreementFigures(raw=raw.share, pairs=raw.pairs, cohens=cohens,
                            fleiss=fleiss_kappa(judgements, raters=max(overlap, 2)),
                            alpha=krippendorff_alpha(judgements, missing=[CANT_TELL]), raters=max(overlap, 2),
                            per_annotator=sorted(per_annotator, key=lambda row: row["name"]))


def control_accuracy(labels: list) -> list[dict]:
    """Per annotator, how many hidden controls they labelled and how many they got right."""
    rows: dict[str, list[int]] = defaultdict(lambda: [0, 0])
    for label in labels:
        if label.control and label.answer:
            rows[label.annotator][0] += label.verdict == label.answer
            rows[label.annotator][1] += 1
    return [{"name": name, "right": right, "labelled": total, "share": right / total}
            for name, (right, total) in sorted(rows.items())]


SHOWN = 50  # rows of a list a page shows; the count says how many there are


@dataclass(frozen=True)
class Listed:
    """A list of candidates as a page shows it: how many, and the first SHOWN as (candidate id, task id,
    [(annotator, verdict)])."""

    count: int
    shown: tuple


def _listed(rows: list[LabelledCandidate]) -> Listed:
    return Listed(len(rows), tuple((row.id, row.task, tuple((label.annotator, label.verdict_said)
                                                            for label in row.labels)) for row in rows[:SHOWN]))


def disagreements(rows: list[LabelledCandidate]) -> Listed:
    """The candidates a curator settles: their annotators disagree and no settlement stands."""
    return _listed([row for row in rows if row.final.status == DISAGREE])


# --- people against the tests and the verifiers ---------------------------------------------------


@dataclass
class Confusion:
    """People's final labels (rows) against one other judge (columns)."""

    against: str
    cells: dict  # (people say, other says) -> count; each True/False
    unknown: int  # labelled candidates the other judge said nothing on
    kappa: object = None  # ChanceCorrected: Cohen's kappa of people and this judge, as of two annotators

    def cell(self, people: bool, other: bool) -> int:
        return self.cells.get((people, other), 0)

    @property
    def table(self) -> list:
        return [(people, [self.cell(people, other) for other in (True, False)]) for people in (True, False)]


def confusions(rows: list[LabelledCandidate]) -> list[Confusion]:
    judges = (("the hidden tests", lambda row: row.resolved), ("the execution verifier",
              lambda row: row.scores.execution_passes), ("the judge (P(YES) ≥ 0.5)", lambda row: row.judge_says))
    tables = []
    for name, says in judges:
        cells: Counter = Counter()
        unknown = 0
        paired = []
        for row in rows:
            if row.people_say is None:
                continue
            other = says(row)
            if other is None:
                unknown += 1
            else:
                cells[(row.people_say, other)] += 1
                paired += [Judgement(row.id, "people", row.people_say), Judgement(row.id, "other", other)]
        kappa = cohens_kappas(paired).get(("other", "people"))
        tables.append(Confusion(name, dict(cells), unknown, kappa))
    return tables


@dataclass
class LabelLists:
    weak_oracle: Listed  # tests say resolved, people say incorrect
    rejects_valid: Listed  # tests say not resolved (no, partial), people say correct
    both_verifiers_liked: Listed  # people say incorrect, the judge and the execution verifier both said yes


def label_lists(rows: list[LabelledCandidate]) -> LabelLists:
    return LabelLists(
        weak_oracle=_listed([row for row in rows if row.resolved is True and row.people_say is False]),
        rejects_valid=_listed([row for row in rows if row.resolved is False and row.people_say is True]),
        both_verifiers_liked=_listed([row for row in rows if row.people_say is False and row.judge_says is True
                                      and row.scores.execution_passes is True]))


def side_by_side(rows: list[LabelledCandidate]) -> list[tuple]:
    """Per labelled candidate, what each judge said, as the page's table shows it: (id, task, people's
    final label or where it stands, the hidden tests' grade, verifier tests passed, run, P(YES))."""
    return [(row.id, row.task, row.final.verdict or row.final.status, row.outcome, row.scores.execution_passed,
             row.scores.execution_tests, row.scores.p_yes) for row in rows]


@dataclass
class OracleErrorRate:
    scope: str  # the dataset, or a repository
    weak_oracle: object  # Share: of the resolved, people say incorrect
    rejects_valid: object  # Share: of the not resolved, people say correct


@dataclass
class OracleSample:
    """The uniform sample the oracle's error rate stands on, and what was left out of it."""

    rates: list  # [OracleErrorRate], the dataset's first
    items: int  # the agents' candidates in the queue
    sampled: int  # the first of them in the seeded random order, up to the first without a final label
    cant_tell: int  # in the sample, with a final label of can't tell
    inconclusive: int  # in the sample, with no grade that says resolved or not


def oracle_error_rates(dataset: Dataset, rows: list[LabelledCandidate]) -> OracleSample:
    """How often people overturn the hidden tests, from a uniform sample: the dataset's candidates in
    the seeded random order of its queue, up to the first one without a final label. Whatever order
    people labelled in, that prefix is a uniform sample (a random order's first items are labelled
    first; another order's fill it in as they go)."""
    seed = dataset_seed(dataset.pk)
    items = list(QueueItem.objects.filter(dataset=dataset, control=False, active=True)
                 .values_list("candidate_id", flat=True))
    by_id = {row.id: row for row in rows}
    sample = []
    for candidate_id in sorted(items, key=lambda i: uniform_share(seed, i)):
        row = by_id.get(candidate_id)
        if row is None or row.final.status not in (AGREED, SETTLED):
            break
        sample.append(row)
    counted = [row for row in sample if row.resolved is not None and row.people_say is not None]
    by_repository: dict[str, list] = defaultdict(list)
    for row in counted:
        by_repository[row.repository].append(row)
    rates = []
    for scope, chosen in [("the dataset", counted), *sorted(by_repository.items())]:
        found = overturns((row.resolved, row.people_say) for row in chosen)
        rates.append(OracleErrorRate(scope, found.weak_oracle, found.rejects_valid))
    return OracleSample(rates=rates, items=len(items), sampled=len(sample),
                        cant_tell=sum(row.final.verdict == CANT_TELL for row in sample),
                        inconclusive=sum(row.resolved is None and row.people_say is not None for row in sample))


# --- progress -----------------------------------------------------------------------------------


PROGRESS_DAYS = 14  # the days the per-annotator table shows, the latest


def label_progress(dataset: Dataset, labels: list, *, overlap: int) -> dict:
    """Labels per annotator per day (the latest PROGRESS_DAYS days with labels), the median seconds per
    item, and what is left in the queue."""
    per_day: Counter = Counter()
    for label in labels:
        per_day[(label.annotator, label.created_at.date())] += 1
    days = sorted({day for _, day in per_day})[-PROGRESS_DAYS:]
    names = sorted({name for name, _ in per_day})
    given = Counter(label.candidate_id for label in labels)
    items = list(QueueItem.objects.filter(dataset=dataset, active=True).values_list("candidate_id", flat=True))
    return {"days": days, "per_day": [(name, [per_day.get((name, day), 0) for day in days]) for name in names],
            "median_seconds": median([label.seconds for label in labels]) if labels else None,
            "items": len(items), "remaining_labels": sum(max(overlap - given.get(i, 0), 0) for i in items),
            "items_done": sum(1 for i in items if given.get(i, 0) >= overlap)}


def agreement_over_time(labels: list) -> dict:
    """Krippendorff's alpha of the agents' candidates' labels given up to the end of each day, as a
    chart (the product's chart helper) and the table beside it."""
    dated = [(label.created_at.date(), Judgement(label.candidate_id, label.annotator_id, label.verdict))
             for label in labels if not label.control]
    series = krippendorff_alpha_over_time(sorted(dated, key=lambda pair: pair[0]), missing=[CANT_TELL])
    given = Counter(day for day, _ in dated)
    rows, total = [], 0
    for day, alpha in series:
        total += given[day]
        rows.append({"day": day, "labels": total, "alpha": alpha.value, "items": alpha.items})
    if len(rows) < 2:
        return {"rows": rows, "chart": None}
    first = rows[0]["day"]
    chart = line_chart([Series("Krippendorff's alpha", [((row["day"] - first).days + 1, row["alpha"]) for row in rows])],
                       x_label=f"day (1 = {first:%Y-%m-%d})", y_label="alpha, labels so far",
                       x_range=(1, (rows[-1]["day"] - first).days + 1), title="Agreement over time")
    return {"rows": rows, "chart": chart}


FRESH_SECONDS = 30  # how long the figures may leave out labels given since they were computed


def dataset_label_figures(dataset: Dataset, *, user, fingerprint: Optional[list] = None,
                          label_settings: Optional[LabelSettings] = None) -> dict:
    """Everything the labels page shows of a dataset (a page over 20,000 labels reads them once, not on
    every request). A change of what a curator decides (a settlement, the settings) or of the
    candidates' grades and scores computes them again at once; labels given meanwhile join them at
    most FRESH_SECONDS later, so a page read while people label does not recompute on every label.
    `as_of` says when they were computed, `newer_labels` how many labels they leave out, `figures_key`
    which computation they are (what the page's rendering of them is cached under). `fingerprint`:
    the tasks' `scope_fingerprint`, where the caller has it already (the dataset page); `label_settings`,
    the dataset's, where the caller read them already."""
    tasks = dataset_tasks_visible(dataset, user=user)
    label_settings = label_settings or dataset_label_settings(dataset)
    overlap = label_settings.overlap
    decided = [*(fingerprint if fingerprint is not None else scope_fingerprint(tasks)), overlap,
               Settlement.objects.filter(candidate__task__in=tasks).order_by().aggregate(n=Count("id"), top=Max("id")),
               label_settings.updated_at]
    given = Label.objects.filter(dataset=dataset).order_by().aggregate(n=Count("id"), top=Max("id"))
    name = "label_figures:" + hashlib.sha256(json.dumps([dataset.pk, decided], default=str).encode()).hexdigest()
    kept = cache.get(name)
    if kept and (kept["given"] == given or time.time() - kept["at"] < FRESH_SECONDS):
        return {**kept["figures"], "as_of": kept["at"], "newer_labels": given["n"] - kept["given"]["n"],
                "figures_key": f"{name}:{kept['at']}"}

    def compute() -> dict:
        labels = label_rows(dataset_labels(dataset, user=user))
        rows = labelled_candidates(dataset, user=user, labels=labels)
        return {"agreement": agreement_figures(labels, overlap=overlap), "controls": control_accuracy(labels),
                "to_settle": disagreements(rows), "rows": side_by_side(rows), "confusions": confusions(rows),
                "lists": label_lists(rows), "oracle": oracle_error_rates(dataset, rows),
                "progress": label_progress(dataset, labels, overlap=overlap),
                "over_time": agreement_over_time(labels), "label_count": len(labels),
                "best_at_k": best_at_k_against_people(tasks, rows)}

    at = time.time()
    figures = scope_cached([*decided, given], compute, "label_figures", dataset.pk)  # one computation at a time
    cache.set(name, {"given": given, "at": at, "figures": figures}, CACHE_SECONDS)
    return {**figures, "as_of": at, "newer_labels": 0, "figures_key": f"{name}:{at}"}


def best_at_k_against_people(tasks, rows: list) -> dict:
    """best@k of every selector over the tasks whose agents' candidates all have a final label of
    correct or incorrect, against people and against the hidden tests on the same tasks (a task of
    several datasets counts here by the labels given through any of them)."""
    people = {row.id: row.people_say for row in rows if row.people_say is not None}
    in_scope = Candidate.objects.filter(task__in=tasks.filter(verdict="valid"), source__in=DEFAULT_SOURCES)
    # A prediction without a patch is in no queue and in no pool: it does not keep a task from counting.
    people.update(dict.fromkeys(in_scope.filter(EMPTY_PATCH).values_list("id", flat=True), False))
    unlabelled = in_scope.exclude(id__in=list(people)).values("task_id")
    full = tasks.filter(verdict="valid", candidates__id__in=list(people)).exclude(id__in=unlabelled).distinct()
    if not full.exists():
        return {"tasks": 0}
    by_tests = measures_compute(full, judge_mode="patch", bands=False)
    by_people = measures_compute(full, judge_mode="patch", bands=False, correct=people)
    k_max = by_tests.k_max
    table = [(name, [(k, _at(by_tests, name, k), _at(by_people, name, k)) for k in sorted({1, k_max})]) for name in SELECTORS]
    return {"tasks": by_tests.tasks, "k_max": k_max, "table": table}


def _at(measured, name: str, k: int):
    curve = measured.best_at_k.get(name)
    return float(curve[k - 1]) if curve and 0 < k <= len(curve) else None
