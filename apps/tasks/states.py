"""A task's states, their groups, every move between them, and the summary the task list reads.

    mined ─► building ─► validating ─► valid | invalid | environment_failed
                                         └─► needs_review ─► accepted | rejected

A mined commit that passes the filters becomes a task in `mined` at once. Every move goes through
`task_state_move`, a conditional update that records a TaskStateChange: a move asked twice, or
from a state the task has left, changes nothing. Services call these; nothing else defines a
group of states.
"""

import re
from dataclasses import replace
from itertools import islice
from typing import Optional

from django.db import transaction
from django.utils import timezone

from apps.bulk_insert import rows_insert
from apps.repositories.models import Commit
from worker.engine.curate.rubric import Merged, Scores, scores_merge

from .models import GeneratedTest, IssueVersion, Review, Task, TaskChange, TaskStateChange, Validation, current_issue

State = Task.State

TASKS_AT_ONCE = 5000  # well under the parameters one statement may carry (SQLite: 32,766)

# No job works on the task and no person has decided it: it may be validated (again).
VALIDATABLE_STATES = (State.MINED, State.VALID, State.INVALID, State.ENVIRONMENT_FAILED)
# A validation job holds the task.
VALIDATING_STATES = (State.BUILDING, State.VALIDATING)
# A task that passed validation keeps counting as valid while people review it.
VALID_OR_LATER = (State.VALID, State.NEEDS_REVIEW, State.ACCEPTED, State.REJECTED)
REVIEWED_STATES = (State.ACCEPTED, State.REJECTED)
# A review is taken while the task waits for one; a settling review also on a decided task.
REVIEWABLE_STATES = (State.NEEDS_REVIEW,)
SETTLEABLE_STATES = (State.NEEDS_REVIEW, *REVIEWED_STATES)
# Rejecting is possible from any state where no job is working on the task.
REJECTABLE_STATES = (State.MINED, State.VALID, State.INVALID, State.ENVIRONMENT_FAILED, State.NEEDS_REVIEW,
                     State.ACCEPTED)
# A reviewer's change to the oracle validates the task again from these.
REVALIDATE_FROM = (State.VALID, State.NEEDS_REVIEW, State.ACCEPTED, State.INVALID)
# The reviews decide a task waiting for review; a settling review may also overturn a decision.
ACCEPT_FROM = (State.NEEDS_REVIEW, State.REJECTED)
REJECT_FROM_REVIEW = (State.NEEDS_REVIEW, State.ACCEPTED)

# Every move the machine has: the states a task may move to each state from. A bulk action's undo
# is not a move: it puts back the state the action found.
MOVES = {
    State.BUILDING: frozenset(VALIDATABLE_STATES + REVALIDATE_FROM),
    State.VALIDATING: frozenset({State.BUILDING}),
    State.VALID: frozenset(VALIDATING_STATES),
    State.INVALID: frozenset(VALIDATING_STATES),
    State.ENVIRONMENT_FAILED: frozenset(VALIDATING_STATES),
    State.MINED: frozenset(VALIDATING_STATES),  # the validation failed, or its worker was lost
    State.NEEDS_REVIEW: frozenset({State.VALID, *REVIEWED_STATES}),  # an issue; a change or a reopen after review
    State.ACCEPTED: frozenset(ACCEPT_FROM),
    State.REJECTED: frozenset(REJECTABLE_STATES),
}


def moves_check(*, to_state: str, from_states) -> None:
    """ValueError for a move the machine does not have: a bug in the caller, never a user's error."""
    if to_state not in MOVES or not set(from_states) <= MOVES[to_state]:
        raise ValueError(f"no move to {to_state!r} from {sorted(set(from_states) - MOVES.get(to_state, set()))}")


def task_state_move(*, task_id: int, to_state: str, from_states, reason: str = "", actor=None) -> bool:
    """Move a task's state forward if it is in one of `from_states`, and record the change."""
    from_states = tuple(from_states)
    moves_check(to_state=to_state, from_states=from_states)
    with transaction.atomic():
        task = Task.objects.select_for_update().filter(id=task_id, state__in=list(from_states)).first()
        if task is None:
            return False
        TaskStateChange.objects.create(task=task, from_state=task.state, to_state=to_state, reason=reason,
                                       actor=actor)
        Task.objects.filter(id=task_id).update(state=to_state, reason=reason, updated_at=timezone.now())
    return True


# --- into existence and out ---------------------------------------------------------------------


@transaction.atomic
def tasks_create_for_commits(*, repository, commits) -> None:
    """Kept commits become tasks in state `mined` at once; commits that already have one are left as they are."""
    owner, name = repository.owner_and_name
    ids = {task_instance_id(owner=owner, name=name, sha=c.sha): c.id for c in commits}
    rows_insert(Task, [dict(instance_id=iid, repository_id=repository.id, commit_id=commit_id)
                       for iid, commit_id in ids.items()])
    created = Task.objects.filter(instance_id__in=ids, state_changes__isnull=True).values_list("id", flat=True)
    rows_insert(TaskStateChange, [dict(task_id=task_id, from_state="", to_state=State.MINED)
                                  for task_id in created], conflicts=False)  # a log: nothing unique in it


def tasks_create_for_kept_commits(repository, stored_after: Optional[int] = None) -> None:
    """Every kept commit without a task gets one; only those stored after the commit row with
    id `stored_after`, where given (a batch mining just stored). Without it, also those of an
    earlier job that stopped before this step (a worker that died). Registered with repositories
    (COMMITS_KEPT)."""
    kept = Commit.objects.filter(repository=repository, drop_reason="", tasks__isnull=True)
    if stored_after is not None:
        kept = kept.filter(id__gt=stored_after)
    waiting = iter(kept.only("id", "sha"))
    while commits := list(islice(waiting, TASKS_AT_ONCE)):
        tasks_create_for_commits(repository=repository, commits=commits)


def tasks_delete_unstarted(commit_ids) -> int:
    """Tasks of commits the filters now drop go away while nothing has been done with them yet.
    Registered with repositories (COMMITS_DROPPED)."""
    deleted, _ = Task.objects.filter(commit_id__in=commit_ids, state=State.MINED).delete()
    return deleted


def task_instance_id(*, owner: str, name: str, sha: str) -> str:
    """SWE-bench's `owner__repo-N` shape, with the first 10 hex of the sha as N."""
    return f"{_id_part(owner)}__{_id_part(name)}-{sha[:10]}"


def _id_part(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]+", "-", text).strip("-") or "repo"


# --- into review and back -----------------------------------------------------------------------


def task_review_open(*, task_id: int, actor=None) -> bool:
    """A valid task with an issue waits for review."""
    if not IssueVersion.objects.filter(task_id=task_id).exists():
        return False
    return task_state_move(task_id=task_id, to_state=State.NEEDS_REVIEW, from_states=[State.VALID], actor=actor)


def reviews_retire(task: Task, actor, why: str) -> None:
    """The task's current reviews no longer count (they judged what it was before)."""
    retired = Review.objects.filter(task=task, current=True).update(current=False)
    if retired:
        TaskChange.objects.create(task=task, kind=TaskChange.Kind.REVIEWS_RETIRED, actor=actor,
                                  before={"reviews": retired}, after={"reviews": 0}, note=why)


def task_changed_back_to_review(*, task: Task, actor, why: str) -> None:
    """The issue or the tests changed: reviews of what was there before no longer count, and an
    accepted task goes back to review."""
    reviews_retire(task, actor, why)
    task_state_move(task_id=task.id, to_state=State.NEEDS_REVIEW, from_states=[State.ACCEPTED],
                    reason="changed_after_review", actor=actor)
    task_summary_refresh(task.id)


def task_state_label(task: Task) -> str:
    """The task's state now, as the page words it (lower case)."""
    return State(Task.objects.values_list("state", flat=True).get(id=task.id)).label.lower()


# --- the summary the list filters on ------------------------------------------------------------


def reviews_merged(reviews) -> Merged:
    """The reviews' merged scores; a curator's settling review ends any disagreement."""
    reviews = list(reviews)
    merged = scores_merge([Scores(r.decision, r.underspecified, r.false_negative, r.difficulty) for r in reviews])
    if any(r.settles for r in reviews):
        merged = replace(merged, disagree=False)
    return merged


def task_merged_scores(task_id: int) -> Merged:
    return reviews_merged(Review.objects.filter(task_id=task_id, current=True))


def _latest_done(task_id: int) -> Optional[Validation]:
    """The latest validation with a verdict: its results are stored in the transaction that ends its
    job, so within that transaction its job is not yet marked succeeded."""
    return (Validation.objects.filter(task_id=task_id).exclude(verdict="")
            .only("verdict", "fail_to_pass", "flaky").order_by("-created_at", "-id").first())


def task_summary_refresh(task_id: int) -> None:
    """Recompute the task's summary columns from its validations, issue and reviews."""
    latest = _latest_done(task_id)
    issue = current_issue(list(IssueVersion.objects.filter(task_id=task_id).only(
        "number", "author", "leak_score", "problems", "admitted_at")))
    merged = task_merged_scores(task_id)
    Task.objects.filter(id=task_id).update(
        verdict=latest.verdict if latest else "",
        fail_to_pass_count=len(latest.fail_to_pass) if latest else 0,
        flaky_count=len(latest.flaky) if latest else 0,
        has_generated_tests=GeneratedTest.objects.filter(task_id=task_id, state=GeneratedTest.State.KEPT).exists(),
        leak_score=issue.leak_score if issue else None, issue_held_back=bool(issue and issue.held_back),
        review_count=merged.reviews, underspecified=merged.underspecified, false_negative=merged.false_negative,
        disagree=merged.disagree)
