"""Curation: people review valid tasks with SWE-bench Verified's rubric, accept or reject them, fix
their oracle, and take them one at a time from a queue that skips tasks someone else holds.

Every change is recorded: state moves as TaskStateChange, everything else as TaskChange.
"""

from dataclasses import dataclass
from datetime import timedelta
from typing import Optional

from django.core.cache import cache
from django.db import transaction
from django.db.models import Q, QuerySet
from django.utils import timezone

from apps.accounts.roles import user_can_review
from worker.engine.curate.rubric import Thresholds, review_outcome
from worker.engine.reasons import REJECT_REASONS

from .models import (
    CurationSettings,
    GeneratedTest,
    RejectReason,
    Review,
    Task,
    TaskChange,
    TaskHold,
    Validation,
)
from .services import generated_tests_check_start, task_validation_start
from .states import (
    ACCEPT_FROM,
    REJECT_FROM_REVIEW,
    REVALIDATE_FROM,
    REVIEWABLE_STATES,
    REVIEWED_STATES,
    SETTLEABLE_STATES,
    reviews_retire,
    task_changed_back_to_review,
    task_merged_scores,
    task_state_label,
    task_state_move,
    task_summary_refresh,
)


class ReviewRefused(Exception):
    """An action the rules do not allow now; the message says why, for the person who tried."""


def reviewer_required(user) -> None:
    """ReviewRefused unless the user may decide tasks."""
    if not user_can_review(user):
        raise ReviewRefused("Only curators and admins can accept, reject or change tasks.")


REJECT_REASONS_CACHE_KEY = "tasks:reject_reasons"


def active_reject_reasons() -> list[RejectReason]:
    """The reasons offered when rejecting. An empty table gets the default list (REJECT_REASONS).
    Kept for 30 s by each process; a change in the admin clears them in the process that made it."""
    return [reason for reason in _reject_reasons() if reason.active]


def _reject_reasons() -> list[RejectReason]:
    reasons = cache.get(REJECT_REASONS_CACHE_KEY)
    if reasons is None:
        reasons = _reject_reasons_read()
        cache.set(REJECT_REASONS_CACHE_KEY, reasons, 30)
    return reasons


def _reject_reasons_read() -> list[RejectReason]:
    reasons = list(RejectReason.objects.all())
    if not reasons:
        for order, (code, sentence) in enumerate(REJECT_REASONS.items()):
            RejectReason.objects.get_or_create(code=code, defaults={"sentence": sentence, "order": order})
        reasons = list(RejectReason.objects.all())
    return reasons


def reject_reason_sentences() -> dict[str, str]:
    """Every reject reason's sentence by its code, offered now or not (old rejections keep theirs)."""
    return {reason.code: reason.sentence for reason in _reject_reasons()}


def reject_reason_offered(code: str) -> bool:
    return any(reason.code == code for reason in active_reject_reasons())


def thresholds(curation: CurationSettings) -> Thresholds:
    return Thresholds(curation.underspecified_below, curation.false_negative_below)


def task_reopen(*, task: Task, user) -> None:
    """An accepted or rejected task goes back to review, its reviews retired."""
    reviewer_required(user)
    with transaction.atomic():
        if not task_state_move(task_id=task.id, to_state=Task.State.NEEDS_REVIEW, from_states=REVIEWED_STATES,
                               actor=user):
            raise ReviewRefused(f"{task.instance_id} is {task_state_label(task)}: only accepted or rejected tasks "
                                f"reopen.")
        reviews_retire(task, user, "reopened")
    task_summary_refresh(task.id)


# --- reviewing --------------------------------------------------------------------------------


@dataclass(frozen=True)
class ReviewForm:
    decision: str
    underspecified: Optional[int] = None  # the rubric: accepting needs it, rejecting only a reason
    false_negative: Optional[int] = None
    difficulty: str = ""
    other_problems: str = ""
    reject_reason: str = ""
    note: str = ""
    settle: bool = False


def _review_check(task: Task, form: ReviewForm, curation: CurationSettings) -> None:
    if form.decision == Review.Decision.REJECT:
        if not reject_reason_offered(form.reject_reason):
            raise ReviewRefused("Pick a reason for rejecting the task.")
        if form.reject_reason == "other" and not form.note.strip():
            raise ReviewRefused("Say in the note what the other problem is.")
        return
    missing = [question for question, value in (("is the issue well specified", form.underspecified),
                                                 ("could the tests reject a valid solution", form.false_negative),
                                                 ("how long would a fix take", form.difficulty))
               if value is None or value == ""]
    if missing:
        raise ReviewRefused(f"Accepting needs the whole rubric: answer {'; '.join(missing)}.")
    problems = thresholds(curation).problems(form.underspecified, form.false_negative)
    if problems:
        raise ReviewRefused(f"Your scores keep {task.instance_id} out: {'; '.join(problems)}. Reject it, "
                            f"or change the scores.")


def task_review_submit(*, task: Task, user, form: ReviewForm) -> str:
    """Record the reviewer's scores and decision, then move the task if the reviews decide it.
    Returns the outcome: accepted, rejected, pending (more reviews needed) or failing.

    A settling review (a curator's last word on a disagreement) decides alone."""
    reviewer_required(user)
    curation = CurationSettings.current()
    _review_check(task, form, curation)
    allowed = SETTLEABLE_STATES if form.settle else REVIEWABLE_STATES
    with transaction.atomic():
        locked = Task.objects.select_for_update().get(id=task.id)
        if locked.state not in allowed:
            raise ReviewRefused(f"{task.instance_id} is {Task.State(locked.state).label.lower()}: "
                                f"{'only tasks under review or decided can be settled' if form.settle else 'only tasks waiting for review are reviewed'}.")
        if form.settle and not _needs_settling(locked, curation):
            raise ReviewRefused(f"{task.instance_id}'s reviewers agree: there is nothing to settle.")
        earlier = Review.objects.filter(task=task, reviewer=user, current=True).first()
        if earlier:
            Review.objects.filter(pk=earlier.pk).update(current=False)
        review = Review.objects.create(
            task=task, reviewer=user, decision=form.decision, underspecified=form.underspecified,
            false_negative=form.false_negative, difficulty=form.difficulty, other_problems=form.other_problems,
            reject_reason=form.reject_reason if form.decision == Review.Decision.REJECT else "", note=form.note,
            settles=form.settle)
        TaskChange.objects.create(task=task, kind=TaskChange.Kind.REVIEWED, actor=user, note=form.note,
                                  before=_review_record(earlier) if earlier else {}, after=_review_record(review))
        outcome = _decide(locked, review, user, curation)
        TaskHold.objects.filter(task=task, user=user).delete()
    task_summary_refresh(task.id)
    return outcome


def _needs_settling(task: Task, curation: CurationSettings) -> bool:
    """Its reviewers disagree, or they all accepted but their merged scores keep it out."""
    merged = task_merged_scores(task.id)
    return merged.disagree or review_outcome(merged, required=curation.required_reviews,
                                             thresholds=thresholds(curation)) == "failing"


def _review_record(review: Review) -> dict:
    return {"decision": review.decision, "underspecified": review.underspecified,
            "false_negative": review.false_negative, "difficulty": review.difficulty,
            "other_problems": review.other_problems, "reject_reason": review.reject_reason,
            **({"settles": True} if review.settles else {})}


def _decide(task: Task, review: Review, user, curation: CurationSettings) -> str:
    if review.settles:
        outcome = "accepted" if review.decision == Review.Decision.ACCEPT else "rejected"
    else:
        outcome = review_outcome(task_merged_scores(task.id), required=curation.required_reviews,
                                 thresholds=thresholds(curation))
    if outcome == "accepted":
        task_state_move(task_id=task.id, to_state=Task.State.ACCEPTED, actor=user, from_states=ACCEPT_FROM)
    elif outcome == "rejected":
        reason = review.reject_reason or _first_reject_reason(task)
        task_state_move(task_id=task.id, to_state=Task.State.REJECTED, reason=reason, actor=user,
                        from_states=REJECT_FROM_REVIEW)
    return outcome


def _first_reject_reason(task: Task) -> str:
    return (Review.objects.filter(task=task, current=True, decision=Review.Decision.REJECT)
            .order_by("created_at", "id").values_list("reject_reason", flat=True).first() or "other")


# --- fixing the oracle ------------------------------------------------------------------------


def oracle_tests(task: Task) -> set[str]:
    """The tests of the task's current oracle (F2P and P2P of its latest valid validation)."""
    latest = (Validation.objects.filter(task=task, job__state=Validation.State.SUCCEEDED, verdict="valid")
              .only("fail_to_pass", "pass_to_pass").order_by("-created_at", "-id").first())
    return set(latest.fail_to_pass) | set(latest.pass_to_pass) if latest else set()


def task_test_drop(*, task: Task, user, test: str, note: str = "") -> Validation:
    """Take a wrong test out of the task's oracle and re-validate it in the background without it."""
    reviewer_required(user)
    with transaction.atomic():
        locked = Task.objects.select_for_update().get(id=task.id)
        if locked.state not in REVALIDATE_FROM:
            raise ReviewRefused(f"{task.instance_id} is {Task.State(locked.state).label.lower()}: its tests can be "
                                f"changed once it is valid and no job is running on it.")
        if test in locked.excluded_tests:
            raise ReviewRefused(f"{test} was dropped already.")
        if test not in oracle_tests(locked):
            raise ReviewRefused(f"{test} is not among {task.instance_id}'s Fail-to-Pass or Pass-to-Pass tests.")
        excluded = sorted({*locked.excluded_tests, test})
        TaskChange.objects.create(task=locked, kind=TaskChange.Kind.TEST_DROPPED, actor=user, note=note,
                                  before={"excluded_tests": locked.excluded_tests},
                                  after={"excluded_tests": excluded})
        Task.objects.filter(id=task.id).update(excluded_tests=excluded)
        task_changed_back_to_review(task=locked, actor=user, why=f"test dropped: {test}")
        return _revalidate(locked, user)


def task_test_restore(*, task: Task, user, test: str) -> Validation:
    """Put a dropped test back and re-validate."""
    reviewer_required(user)
    with transaction.atomic():
        locked = Task.objects.select_for_update().get(id=task.id)
        if test not in locked.excluded_tests:
            raise ReviewRefused(f"{test} is not among the dropped tests.")
        if locked.state not in REVALIDATE_FROM:
            raise ReviewRefused(f"{task.instance_id} is {Task.State(locked.state).label.lower()}: wait for the job "
                                f"on it to end.")
        excluded = [t for t in locked.excluded_tests if t != test]
        TaskChange.objects.create(task=locked, kind=TaskChange.Kind.TEST_RESTORED, actor=user,
                                  before={"excluded_tests": locked.excluded_tests},
                                  after={"excluded_tests": excluded})
        Task.objects.filter(id=task.id).update(excluded_tests=excluded)
        task_changed_back_to_review(task=locked, actor=user, why=f"test restored: {test}")
        return _revalidate(locked, user)


def _revalidate(task: Task, user) -> Validation:
    """A validation of the same kind as the one that made the task valid: of the commit's own tests,
    or of its kept generated tests in the environment they were checked in."""
    latest = (Validation.objects.filter(task=task, job__state=Validation.State.SUCCEEDED)
              .order_by("-created_at", "-id").first())
    if latest is not None and latest.generated:
        source = (Validation.objects.filter(task=task, generated=False, job__state=Validation.State.SUCCEEDED,
                                            environment__isnull=False).order_by("-created_at", "-id").first())
        if source is None:
            raise ReviewRefused(f"The environment {task.instance_id}'s generated tests ran in is gone: validate the "
                                f"task again from its page first.")
        kept = (GeneratedTest.objects.filter(validation=latest, state=GeneratedTest.State.KEPT).order_by("index")
                .values_list("content", "model_call_id"))
        validation = generated_tests_check_start(task=task, source=source, tests=list(kept), actor=user,
                                                 backend=latest.backend, from_states=REVALIDATE_FROM)
    else:
        validation = task_validation_start(task=task, actor=user, from_states=REVALIDATE_FROM)
    if validation is None:
        raise ReviewRefused(f"{task.instance_id} is being validated already.")
    return validation


# --- the queue --------------------------------------------------------------------------------


def _hold_expiry(curation: CurationSettings):
    return timezone.now() + timedelta(minutes=curation.hold_minutes)


def review_queue(*, user, tasks) -> QuerySet:
    """Tasks waiting for review that the user has not reviewed and no one else holds, oldest first;
    not those whose issue is held back (cut off or degenerate) until a curator lets it in."""
    now = timezone.now()
    return (tasks.filter(state=Task.State.NEEDS_REVIEW, issue_held_back=False)
            .exclude(id__in=Review.objects.filter(reviewer=user, current=True).values("task_id"))
            .exclude(Q(hold__expires_at__gt=now) & ~Q(hold__user=user))
            .order_by("updated_at", "id"))


def review_queue_next(*, user, tasks, skip: Optional[int] = None) -> Optional[Task]:
    """Take the next task from the queue and hold it for the user. `skip` passes over a task (the one
    the reviewer is leaving). Two reviewers asking at once get different tasks."""
    curation = CurationSettings.current()
    queue = review_queue(user=user, tasks=tasks)
    if skip:
        queue = queue.exclude(id=skip)
    passed = []
    for _ in range(5):
        with transaction.atomic():
            task = queue.exclude(id__in=passed).select_for_update(skip_locked=True, of=("self",)).first()
            if task is None:
                return None
            # Someone may have taken it between the query's snapshot and the lock: pass over it.
            if not TaskHold.objects.filter(task=task, expires_at__gt=timezone.now()).exclude(user=user).exists():
                TaskHold.objects.filter(user=user).exclude(task=task).delete()  # one hold per reviewer
                TaskHold.objects.update_or_create(task=task, defaults={"user": user,
                                                                       "expires_at": _hold_expiry(curation)})
                return task
        passed.append(task.id)
    return None


def task_hold_take(*, task: Task, user, curation: Optional[CurationSettings] = None) -> Optional[TaskHold]:
    """Hold the task for the user when it waits for review and no one else holds it. Returns the
    hold someone else has, if any (the page says so), else None."""
    if task.state != Task.State.NEEDS_REVIEW or not user_can_review(user):
        return None
    curation = curation or CurationSettings.current()
    hold = TaskHold.objects.select_related("user").filter(task=task).first()
    if hold and hold.expires_at > timezone.now():
        if hold.user_id != user.id:
            return hold
        if hold.expires_at < timezone.now() + timedelta(minutes=curation.hold_minutes / 2):  # still theirs
            TaskHold.objects.filter(pk=hold.pk, user=user).update(expires_at=_hold_expiry(curation))
        return None
    with transaction.atomic():
        Task.objects.select_for_update().filter(id=task.id).first()
        hold = TaskHold.objects.select_related("user").filter(task=task).first()
        if hold and hold.user_id != user.id and hold.expires_at > timezone.now():
            return hold
        TaskHold.objects.filter(user=user).exclude(task=task).delete()
        TaskHold.objects.update_or_create(task=task, defaults={"user": user, "expires_at": _hold_expiry(curation)})
    return None


def task_hold_other(*, task: Task, user) -> Optional[TaskHold]:
    """The hold someone else has on the task now, if any."""
    return (TaskHold.objects.select_related("user").filter(task=task, expires_at__gt=timezone.now())
            .exclude(user=user).first())


def task_hold_release(*, task_id: int, user) -> None:
    """The reviewer leaves the task (j in the queue): others may take it."""
    TaskHold.objects.filter(task_id=task_id, user=user).delete()
