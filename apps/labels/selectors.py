"""What a dataset's labels say: agreement between annotators, the items a curator settles, people
against the hidden tests and both verifiers, the oracle's error rate, controls and progress. The
figures are the engine's (worker.engine.label); this reads the rows they stand on, once per page."""

from collections import Counter, defaultdict
from dataclasses import dataclass, field
from statistics import median
from typing import Optional

from django.db.models import QuerySet

from apps.datasets.models import COUNTS_RESOLVED, Candidate, Dataset, Execution, JudgeScore
from apps.datasets.selectors import dataset_tasks_visible
from apps.datasets.verifiers.judging import judge_identity
from worker.engine.label.agreement import (
    Judgement,
    cohens_kappas,
    fleiss_kappa,
    krippendorff_alpha,
    pairwise_agreement,
)
from worker.engine.label.final import DISAGREE, FinalLabel, final_label
from worker.engine.label.overturns import overturns
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


def verifier_scores(candidate_ids) -> dict[int, VerifierScores]:
    """Per candidate: the judge's P(YES) and what its latest execution passed."""
    ids = list(candidate_ids)
    try:
        model, version = judge_identity()
    except ModelError:
        model, version = "", 0
    p_yes = dict(JudgeScore.objects.filter(candidate_id__in=ids, mode="patch", model=model, prompt_version=version)
                 .values_list("candidate_id", "p_yes"))
    executed = {}
    for candidate_id, outcomes in (Execution.objects.filter(candidate_id__in=ids, job__state="succeeded")
                                   .order_by("created_at", "id").values_list("candidate_id", "outcomes")):
        executed[candidate_id] = (sum(status in PASSING for status in outcomes.values()), len(outcomes))
    return {i: VerifierScores(p_yes.get(i), *executed.get(i, (None, None))) for i in ids}


def dataset_label_settings(dataset: Dataset) -> LabelSettings:
    return LabelSettings.objects.get_or_create(dataset=dataset)[0]


def dataset_labels(dataset: Dataset, *, user) -> QuerySet:
    """Every label of a candidate in the dataset's tasks the user sees, with its annotator."""
    return (Label.objects.filter(candidate__task__in=dataset_tasks_visible(dataset, user=user))
            .select_related("annotator").order_by("created_at", "id"))


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
    resolved: Optional[bool] = None  # what the measures count as resolved; None ungraded
    scores: VerifierScores = VerifierScores(None, None, None)
    uniform: bool = False  # labelled from a uniformly random queue

    @property
    def people_say(self) -> Optional[bool]:
        """Correct, incorrect, or None (no final label, or can't tell)."""
        return {Verdict.CORRECT: True, Verdict.INCORRECT: False}.get(self.final.verdict)

    @property
    def judge_says(self) -> Optional[bool]:
        return None if self.scores.p_yes is None else self.scores.p_yes >= 0.5


def final_labels(candidate_ids, *, labels: Optional[list] = None) -> dict[int, tuple[FinalLabel, list, Optional[Settlement]]]:
    """Per candidate with labels (controls' left out): its final label, its labels, and the settlement
    that stands if any. The overlap asked for is that of the dataset it was first labelled through."""
    ids = list(candidate_ids)
    if labels is None:
        labels = list(Label.objects.filter(candidate_id__in=ids, control=False).select_related("annotator")
                      .order_by("created_at", "id"))
    by_candidate: dict[int, list] = defaultdict(list)
    for label in labels:
        if not label.control:
            by_candidate[label.candidate_id].append(label)
    settlements = {}
    for settlement in (Settlement.objects.filter(candidate_id__in=list(by_candidate)).select_related("settled_by")
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


def labelled_candidates(dataset: Dataset, *, user, labels: Optional[list] = None) -> list[LabelledCandidate]:
    """The dataset's labelled agent candidates (controls are not among them), each with its final
    label and its grade and scores."""
    labels = labels if labels is not None else list(dataset_labels(dataset, user=user))
    finals = final_labels({label.candidate_id for label in labels if not label.control}, labels=labels)
    scores = verifier_scores(finals)
    rows = []
    for candidate in (Candidate.objects.filter(id__in=list(finals)).annotate(counted=COUNTS_RESOLVED)
                      .values("id", "outcome", "counted", "task__instance_id", "task__repository__name")):
        final, given, settlement = finals[candidate["id"]]
        rows.append(LabelledCandidate(
            id=candidate["id"], task=candidate["task__instance_id"], repository=candidate["task__repository__name"],
            labels=given, settlement=settlement, final=final, outcome=candidate["outcome"],
            resolved=candidate["counted"] if candidate["outcome"] else None, scores=scores[candidate["id"]],
            uniform=given[0].uniform))
    return sorted(rows, key=lambda row: (row.task, row.id))


def people_final_labels(*, task_ids) -> dict[int, tuple[bool, str]]:
    """For the judge-training export: {candidate id: (people say correct, the label's source)} of the
    tasks' candidates with a final label of correct or incorrect."""
    candidate_ids = Label.objects.filter(candidate__task_id__in=list(task_ids), control=False).values_list(
        "candidate_id", flat=True).distinct()
    return {candidate_id: (final.verdict == Verdict.CORRECT, f"people:{final.status}")
            for candidate_id, (final, _, _) in final_labels(candidate_ids).items()
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
    names = {label.annotator_id: label.annotator.username for label in labels}
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
            rows[label.annotator.username][0] += label.verdict == label.answer
            rows[label.annotator.username][1] += 1
    return [{"name": name, "right": right, "labelled": total, "share": right / total}
            for name, (right, total) in sorted(rows.items())]


def disagreements(rows: list[LabelledCandidate]) -> list[LabelledCandidate]:
    """The candidates a curator settles: their annotators disagree and no settlement stands."""
    return [row for row in rows if row.final.status == DISAGREE]


# --- people against the tests and the verifiers ---------------------------------------------------


@dataclass
class Confusion:
    """People's final labels (rows) against one other judge (columns)."""

    against: str
    cells: dict  # (people say, other says) -> count; each True/False
    unknown: int  # labelled candidates the other judge said nothing on

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
        for row in rows:
            if row.people_say is None:
                continue
            other = says(row)
            if other is None:
                unknown += 1
            else:
                cells[(row.people_say, other)] += 1
        tables.append(Confusion(name, dict(cells), unknown))
    return tables


@dataclass
class LabelLists:
    weak_oracle: list  # tests say resolved, people say incorrect
    rejects_valid: list  # tests say not resolved, people say correct
    both_verifiers_liked: list  # people say incorrect, the judge and the execution verifier both said yes


def label_lists(rows: list[LabelledCandidate]) -> LabelLists:
    return LabelLists(
        weak_oracle=[row for row in rows if row.resolved is True and row.people_say is False],
        rejects_valid=[row for row in rows if row.resolved is False and row.people_say is True],
        both_verifiers_liked=[row for row in rows if row.people_say is False and row.judge_says is True
                              and row.scores.execution_passes is True])


@dataclass
class OracleErrorRate:
    scope: str  # the dataset, or a repository
    weak_oracle: object  # Share: of the resolved, people say incorrect
    rejects_valid: object  # Share: of the not resolved, people say correct


def oracle_error_rates(rows: list[LabelledCandidate]) -> list[OracleErrorRate]:
    """From the candidates labelled while the queue was uniformly random (a uniform sample), graded
    and with a final correct or incorrect label: the dataset's first, then each repository's."""
    sample = [row for row in rows if row.uniform and row.resolved is not None and row.people_say is not None]
    by_repository: dict[str, list] = defaultdict(list)
    for row in sample:
        by_repository[row.repository].append(row)
    rates = []
    for scope, chosen in [("the dataset", sample), *sorted(by_repository.items())]:
        found = overturns((row.resolved, row.people_say) for row in chosen)
        rates.append(OracleErrorRate(scope, found.weak_oracle, found.rejects_valid))
    return rates


# --- progress -----------------------------------------------------------------------------------


def label_progress(dataset: Dataset, labels: list, *, overlap: int) -> dict:
    """Labels per annotator per day, the median seconds per item, and what is left in the queue."""
    per_day: Counter = Counter()
    for label in labels:
        per_day[(label.created_at.date(), label.annotator.username)] += 1
    given = Counter(label.candidate_id for label in labels)
    items = list(QueueItem.objects.filter(dataset=dataset).values_list("candidate_id", flat=True))
    remaining = sum(max(overlap - given.get(candidate, 0), 0) for candidate in items)
    return {"per_day": [{"day": day, "name": name, "labels": n} for (day, name), n in sorted(per_day.items())],
            "median_seconds": median([label.seconds for label in labels]) if labels else None,
            "items": len(items), "remaining_labels": remaining,
            "items_done": sum(1 for candidate in items if given.get(candidate, 0) >= overlap)}
