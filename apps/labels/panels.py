"""What the labels app shows on the pages of the apps below it, registered at `ready()`: the weak-oracle
flag on a task's review page, and on a dataset's page the oracle's error rate and best@k against
people beside best@k against the hidden tests."""

from apps.accounts.roles import user_can_review, user_roles
from apps.datasets.models import COUNTS_RESOLVED, Candidate
from apps.datasets.verifiers.measures import DEFAULT_SOURCES, SELECTORS, measures_compute

from . import selectors
from .models import Label, Verdict


def task_weak_oracle(task) -> dict:
    """The task's candidates its hidden tests pass and people's final label calls incorrect."""
    finals = selectors.final_labels(Label.objects.filter(candidate__task=task, control=False)
                                    .values_list("candidate_id", flat=True).distinct())
    if not finals:
        return {}
    resolved = (Candidate.objects.filter(id__in=list(finals)).annotate(counted=COUNTS_RESOLVED).filter(counted=True)
                .values_list("id", flat=True))
    weak = sorted(i for i in resolved if finals[i][0].verdict == Verdict.INCORRECT)
    return {"weak_oracle": weak} if weak else {}


def best_at_k_against_people(tasks, rows: list) -> dict:
    """best@k of every selector over the tasks whose agents' candidates all have a final label of
    correct or incorrect, against people and against the hidden tests on the same tasks (a task of
    several datasets counts here by the labels given through any of them)."""
    people = {row.id: row.people_say for row in rows if row.people_say is not None}
    in_scope = Candidate.objects.filter(task__in=tasks.filter(verdict="valid"), source__in=DEFAULT_SOURCES)
    # A prediction without a patch is in no queue and fixes nothing: people would call it incorrect.
    people.update(dict.fromkeys(in_scope.filter(no_patch=True).values_list("id", flat=True), False))
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


def dataset_labels_panel(*, dataset, tasks, user) -> dict:
    """The labels' figures on the dataset page, for curators; a way in for everyone who labels."""
    if not user_roles(user):
        return {}
    panel = {"dataset": dataset, "curator": user_can_review(user)}
    if panel["curator"]:
        labels = list(selectors.dataset_labels(dataset, user=user))
        rows = selectors.labelled_candidates(dataset, user=user, labels=labels)
        panel.update(labels=len(labels), labelled=len(rows), error_rate=selectors.oracle_error_rates(rows)[0],
                     best_at_k=best_at_k_against_people(tasks, rows))
    return {"labels_panel": panel}
