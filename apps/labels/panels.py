"""What the labels app shows on the pages of the apps below it, registered at `ready()`: the weak-oracle
flag on a task's review page, and on a dataset's page the oracle's error rate and best@k against
people beside best@k against the hidden tests (selectors.dataset_label_figures)."""

from apps.accounts.roles import user_can_review, user_roles
from apps.datasets.models import COUNTS_RESOLVED, Candidate

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


def dataset_labels_panel(*, dataset, tasks, user, fingerprint) -> dict:
    """The labels' figures on the dataset page, for curators; a way in for everyone who labels."""
    if not user_roles(user):
        return {}
    panel = {"dataset": dataset, "curator": user_can_review(user)}
    if panel["curator"] and Label.objects.filter(dataset=dataset).exists():
        figures = selectors.dataset_label_figures(dataset, user=user, fingerprint=fingerprint)
        panel.update(labels=figures["label_count"], labelled=len(figures["rows"]),
                     error_rate=figures["oracle"].rates[0], best_at_k=figures["best_at_k"])
    return {"labels_panel": panel}
