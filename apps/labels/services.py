"""Labelling: a dataset's queue of candidates in the order in force, holds on items, labels, and a
curator's settlement where annotators disagree. Every refusal says why in words and writes nothing.

Controls (the gold patch, and mutants the hidden tests catch) give themselves away when labelled openly:
they reach the queue only as hidden controls, mixed in at the share a curator set, their answer known."""

import hashlib
import json
from dataclasses import dataclass
from datetime import timedelta
from typing import Optional

from django.db import IntegrityError, transaction
from django.db.models import Count, Exists, IntegerField, OuterRef, Subquery, Sum
from django.db.models.functions import Coalesce
from django.utils import timezone

from apps.accounts.roles import user_can_review, user_roles
from apps.datasets.models import RESOLVED, Candidate, Dataset
from apps.datasets.selectors import dataset_tasks, dataset_tasks_visible
from apps.datasets.verifiers.measures import scope_fingerprint
from apps.tasks.models import CurationSettings, Task
from apps.tasks.states import task_changed_back_to_review
from worker.engine.label import queue as queue_order
from worker.engine.label.final import PENDING, FinalLabel

from .models import Label, LabelHold, LabelSettings, QueueItem, Settlement, Verdict
from .selectors import (
    EMPTY_PATCH,
    NOT_RESOLVED,
    dataset_label_settings,
    dataset_seed,
    final_labels,
    verifier_scores,
)

MAX_OVERLAP = 10
MAX_CONTROL_SHARE = 0.5
RATIONALE_CHARS = 10_000


class LabelRefused(Exception):
    """An action the rules do not allow; the message says why, for the person who tried."""


def _curator_required(user, what: str) -> None:
    if not user_can_review(user):
        raise LabelRefused(f"Only curators and admins can {what}.")


# --- the queue ----------------------------------------------------------------------------------


def _queue_fingerprint(candidates, settings: LabelSettings) -> str:
    """What the queue is built from: the candidates, their grades and scores (scope_fingerprint), the
    mutants marked equivalent, and the settings."""
    tasks = dataset_tasks(settings.dataset).filter(verdict="valid")
    equivalent = candidates.filter(made__equivalent=True).order_by().aggregate(n=Count("id"), ids=Sum("id"))
    return hashlib.sha256(json.dumps([scope_fingerprint(tasks), equivalent, settings.updated_at.isoformat()],
                                     sort_keys=True, default=str).encode()).hexdigest()


CONTROL_SOURCES = (Candidate.Source.GOLD, Candidate.Source.MUTANT)


def _answer_of_control(candidate: Candidate) -> str:
    """A control's known answer: the gold patch is correct; a mutant the hidden tests catch (no, or
    partial) is not. A mutant they pass may be an equivalent one, and one whose run said nothing
    either way is no control; nor is the empty patch (with nothing to read, it gives itself away)."""
    if candidate.source == Candidate.Source.GOLD:
        return Verdict.CORRECT
    if candidate.outcome in NOT_RESOLVED and not (candidate.made or {}).get("equivalent"):
        return Verdict.INCORRECT
    return ""


def _scored(candidates: list[Candidate]) -> list[queue_order.Scored]:
    ids = [c.id for c in candidates]
    scores = verifier_scores(ids)
    resolved = set(Candidate.objects.filter(RESOLVED, id__in=ids).values_list("id", flat=True))
    return [queue_order.Scored(c.id, (c.id in resolved) if c.outcome else None, scores[c.id].p_yes,
                               scores[c.id].execution_passes) for c in candidates]


def _queue_wanted(dataset: Dataset, settings: LabelSettings, candidates) -> dict[int, QueueItem]:
    """The items the queue should hold: the agents' candidates with a patch at their place in the order
    in force, and hidden controls at the share asked for, spread over the whole queue."""
    agents = list(candidates.filter(source__in=Candidate.AGENTS).exclude(EMPTY_PATCH).only("id", "outcome"))
    answers = {c.id: _answer_of_control(c) for c in candidates.filter(source__in=CONTROL_SOURCES)
               .only("id", "source", "outcome", "made")}
    seed = dataset_seed(dataset.pk)
    controls = queue_order.controls_chosen([i for i, answer in answers.items() if answer],
                                           share=settings.control_share, agents=len(agents), seed=seed)
    placed = queue_order.priorities(_scored(agents), settings.order, seed=seed)
    span = 3.0 if settings.order == queue_order.DISAGREEMENT else 1.0
    for control in controls:
        placed[control] = queue_order.uniform_share(seed + ":control", control) * span
    return {candidate_id: QueueItem(dataset=dataset, candidate_id=candidate_id, priority=priority,
                                    control=candidate_id in answers, answer=answers.get(candidate_id, ""),
                                    order=settings.order, active=True)
            for candidate_id, priority in placed.items()}


def label_queue_refresh(dataset: Dataset, *, force: bool = False) -> int:
    """Put the dataset's candidates (of its valid tasks) in its queue at their place in the order in
    force, with hidden controls at the share asked for; an item no longer wanted leaves the queue
    (kept, inactive, where it has labels). Does nothing when nothing it is built from changed since
    the last time. Returns how many items the queue holds."""
    settings = dataset_label_settings(dataset)
    candidates = Candidate.objects.filter(task__in=dataset_tasks(dataset).filter(verdict="valid"))
    fingerprint = _queue_fingerprint(candidates, settings)
    if not force and settings.queue_fingerprint == fingerprint:
        return QueueItem.objects.filter(dataset=dataset, active=True).count()
    wanted = _queue_wanted(dataset, settings, candidates)
    with transaction.atomic():
        LabelSettings.objects.select_for_update().filter(pk=settings.pk).first()  # one refresh at a time
        existing = {item.candidate_id: item for item in QueueItem.objects.filter(dataset=dataset)}
        labelled = set(Label.objects.filter(dataset=dataset).values_list("candidate_id", flat=True))
        QueueItem.objects.filter(dataset=dataset, candidate_id__in=[
            i for i in existing if i not in wanted and i not in labelled]).delete()
        QueueItem.objects.filter(dataset=dataset, candidate_id__in=[
            i for i in existing if i not in wanted and i in labelled]).update(active=False)
        changed = []
        for candidate_id, item in wanted.items():
            if candidate_id in existing:
                old = existing[candidate_id]
                old.priority, old.control, old.answer, old.order = item.priority, item.control, item.answer, item.order
                old.active = True
                changed.append(old)
        QueueItem.objects.bulk_update(changed, ["priority", "control", "answer", "order", "active"], batch_size=1000)
        QueueItem.objects.bulk_create([item for i, item in wanted.items() if i not in existing], batch_size=1000,
                                      ignore_conflicts=True)
        LabelSettings.objects.filter(pk=settings.pk).update(queue_fingerprint=fingerprint)
    return len(wanted)


def _hold_minutes() -> int:
    return CurationSettings.current().hold_minutes


def queue_items_open(dataset: Dataset, *, user):
    """The items the user may take now: in a task they see, not labelled by them, and with fewer
    labels and others' live holds than the overlap asks for; free ones first, then in order."""
    settings = dataset_label_settings(dataset)
    now = timezone.now()
    others_holding = LabelHold.objects.filter(candidate=OuterRef("candidate"), expires_at__gt=now).exclude(annotator=user)
    taken = (Label.objects.filter(candidate=OuterRef("candidate")).values("candidate")
             .annotate(n=Count("id")).values("n"))
    held = (LabelHold.objects.filter(candidate=OuterRef("candidate"), expires_at__gt=now).exclude(annotator=user)
            .values("candidate").annotate(n=Count("id")).values("n"))
    return (QueueItem.objects.filter(dataset=dataset, active=True,
                                     candidate__task__in=dataset_tasks_visible(dataset, user=user))
            .exclude(candidate__labels__annotator=user)
            .annotate(taken=Coalesce(Subquery(taken, output_field=IntegerField()), 0)
                      + Coalesce(Subquery(held, output_field=IntegerField()), 0),
                      held_by_other=Exists(others_holding))
            .filter(taken__lt=settings.overlap)
            .order_by("held_by_other", "priority", "id"))


def label_queue_next(*, dataset: Dataset, user, skip: Optional[int] = None) -> Optional[Candidate]:
    """The user's next item, held for them: the one they hold already, else the first open one. `skip`
    passes over a candidate (its hold released). Two people asking at once get different items when
    another is free."""
    if not user_roles(user):
        raise LabelRefused("Only annotators, curators and admins label candidates.")
    label_queue_refresh(dataset)
    now = timezone.now()
    if skip:
        LabelHold.objects.filter(dataset=dataset, annotator=user, candidate_id=skip).delete()
    mine = (LabelHold.objects.filter(dataset=dataset, annotator=user, expires_at__gt=now)
            .exclude(candidate__labels__annotator=user).select_related("candidate").first())
    if mine:
        return mine.candidate
    queue = queue_items_open(dataset, user=user)
    if skip:
        queue = queue.exclude(candidate_id=skip)
    passed: list[int] = []
    for _ in range(5):
        with transaction.atomic():
            item = queue.exclude(id__in=passed).select_for_update(skip_locked=True, of=("self",)).first()
            if item is None:
                return None
            # Someone may have taken the last free place between the snapshot and the lock: pass over it.
            holders = (LabelHold.objects.filter(candidate_id=item.candidate_id, expires_at__gt=timezone.now())
                       .exclude(annotator=user).count())
            if holders + Label.objects.filter(candidate_id=item.candidate_id).count() < dataset_label_settings(dataset).overlap:
                LabelHold.objects.filter(dataset=dataset, annotator=user).delete()  # one item at a time
                LabelHold.objects.update_or_create(
                    candidate_id=item.candidate_id, annotator=user,
                    defaults={"dataset": dataset, "taken_at": timezone.now(),
                              "expires_at": timezone.now() + timedelta(minutes=_hold_minutes())})
                return Candidate.objects.get(pk=item.candidate_id)
        passed.append(item.id)
    return None


def label_hold_of(*, dataset: Dataset, candidate: Candidate, user) -> Optional[LabelHold]:
    return LabelHold.objects.filter(dataset=dataset, candidate=candidate, annotator=user).first()


# --- labels -------------------------------------------------------------------------------------


@dataclass(frozen=True)
class LabelForm:
    verdict: str
    confidence: Optional[int]
    rationale: str = ""
    lines: tuple = ()  # ({"path", "line"}, ...) the rationale is pinned to


def _label_check(form: LabelForm) -> None:
    if form.verdict not in Verdict.values:
        raise LabelRefused("Choose correct, incorrect or can't tell.")
    if form.confidence not in (1, 2, 3):
        raise LabelRefused("Give a confidence of 1 (a guess), 2 or 3 (sure).")
    if form.verdict == Verdict.INCORRECT and not form.rationale.strip():
        raise LabelRefused("Say what is wrong with the patch: an incorrect label needs a rationale.")
    if len(form.rationale) > RATIONALE_CHARS:
        raise LabelRefused(f"The rationale is longer than {RATIONALE_CHARS:,} characters.")


def label_submit(*, dataset: Dataset, candidate: Candidate, user, form: LabelForm) -> Label:
    """Record the user's label of an item they hold; the time spent runs from taking it."""
    _label_check(form)
    if not dataset_tasks_visible(dataset, user=user).filter(id=candidate.task_id).exists():
        raise LabelRefused("This candidate is not in a repository you can see.")
    with transaction.atomic():
        was = candidate_final_label(candidate)
        item = QueueItem.objects.filter(dataset=dataset, candidate=candidate).first()
        earlier = Label.objects.filter(candidate=candidate, annotator=user).first()
        if earlier:
            raise LabelRefused(f"You labelled this candidate already ({earlier.get_verdict_display()}, "
                               f"{timezone.localtime(earlier.created_at):%Y-%m-%d %H:%M}): a label is given once.")
        hold = LabelHold.objects.select_for_update().filter(dataset=dataset, candidate=candidate, annotator=user).first()
        if item is None or not item.active or hold is None:
            raise LabelRefused("This candidate is not assigned to you: take your next item from the queue.")
        now = timezone.now()
        if hold.expires_at <= now:
            raise LabelRefused(f"Your hold on this item expired at {timezone.localtime(hold.expires_at):%H:%M}: "
                               f"take it again from the queue (your answers are still in the form).")
        try:
            with transaction.atomic():
                label = Label.objects.create(
                    candidate=candidate, annotator=user, dataset=dataset, verdict=form.verdict,
                    confidence=form.confidence, rationale=form.rationale.strip(), lines=list(form.lines),
                    seconds=(now - hold.taken_at).total_seconds(), control=item.control, answer=item.answer,
                    order=item.order)
        except IntegrityError:
            raise LabelRefused("You labelled this candidate already: a label is given once.") from None
        hold.delete()
        _weak_oracle_send_back(candidate, was=was)
    return label


def candidate_final_label(candidate: Candidate) -> FinalLabel:
    final = final_labels([candidate.pk]).get(candidate.pk)
    return final[0] if final else FinalLabel(None, PENDING)


def _weak_oracle_send_back(candidate: Candidate, *, was: FinalLabel) -> None:
    """Tests that pass a patch people call incorrect are a weak oracle: when a candidate's final label
    becomes incorrect (not again on later labels) and its hidden tests resolve it, an accepted task
    goes back to curation, its review page saying why. No person moved it: the labels did."""
    final = candidate_final_label(candidate)
    if was.verdict == Verdict.INCORRECT or final.verdict != Verdict.INCORRECT:
        return
    if Candidate.objects.filter(RESOLVED, pk=candidate.pk).exists():
        task_changed_back_to_review(task=Task.objects.get(pk=candidate.task_id), actor=None,
                                    why=f"people call candidate {candidate.pk} incorrect; its hidden tests pass it")


# --- settling -----------------------------------------------------------------------------------


def label_settle(*, candidate: Candidate, user, verdict: str, note: str) -> Settlement:
    """A curator's final label of a candidate whose annotators disagree, with a note saying why."""
    _curator_required(user, "settle a disagreement")
    if verdict not in Verdict.values:
        raise LabelRefused("Choose correct, incorrect or can't tell as the final label.")
    if not note.strip():
        raise LabelRefused("Say in the note why this is the final label.")
    with transaction.atomic():
        Candidate.objects.select_for_update().filter(pk=candidate.pk).first()
        was = candidate_final_label(candidate)
        labels = list(Label.objects.filter(candidate=candidate, control=False).values_list("id", "verdict"))
        settled_before = Settlement.objects.filter(candidate=candidate).exists()
        if len({verdict for _, verdict in labels}) < 2 and not settled_before:
            raise LabelRefused("Its annotators agree (or have not answered yet): there is nothing to settle.")
        settlement = Settlement.objects.create(candidate=candidate, verdict=verdict, note=note.strip(), settled_by=user,
                                               labels_seen=[label_id for label_id, _ in labels])
        _weak_oracle_send_back(candidate, was=was)
    return settlement


# --- settings -----------------------------------------------------------------------------------


def label_settings_save(*, dataset: Dataset, user, overlap: int, control_share: float, order: str,
                        hide_trajectory: bool) -> LabelSettings:
    _curator_required(user, "change how a dataset is labelled")
    if not 1 <= overlap <= MAX_OVERLAP:
        raise LabelRefused(f"Each candidate goes to 1 to {MAX_OVERLAP} annotators.")
    if not 0 <= control_share <= MAX_CONTROL_SHARE:
        raise LabelRefused(f"The share of hidden controls is between 0 and {MAX_CONTROL_SHARE:.0%}.")
    if order not in queue_order.ORDERS:
        raise LabelRefused("Choose an order the queue knows.")
    settings = dataset_label_settings(dataset)
    settings.overlap, settings.control_share, settings.order = overlap, control_share, order
    settings.hide_trajectory = hide_trajectory
    settings.save()
    label_queue_refresh(dataset, force=True)
    return settings
