"""Bulk actions: one action on every task a list query matches, run as a background job, undoable
(the undo a job of its own).

The tasks are fixed when the person confirms (the count they saw); the job moves each one only
if it is still in a state the action applies to, so running it twice changes nothing more.
"""

import hashlib

from django.db import transaction
from django.db.models import Count, Sum
from django.utils import timezone

from apps.accounts.roles import ADMIN, user_roles
from apps.jobs.models import Job
from apps.jobs.registry import MODEL_CALLS, job_kind
from apps.jobs.services import job_start
from apps.tasks.language_jobs import language_job_start

from .generation import generation_source
from .models import BulkAction, Review, Task, TaskChange, TaskStateChange
from .review import ReviewRefused, reject_reason_offered, reviewer_required
from .selectors import tasks_filtered
from .services import task_validation_start
from .states import REJECTABLE_STATES, REVIEWED_STATES, VALIDATABLE_STATES, moves_check, task_summary_refresh

CHUNK = 500
FROM_STATES = {
    BulkAction.Action.REJECT: REJECTABLE_STATES,
    BulkAction.Action.REOPEN: REVIEWED_STATES,
    BulkAction.Action.VALIDATE: VALIDATABLE_STATES,
    BulkAction.Action.WRITE_ISSUES: (Task.State.VALID,),
    BulkAction.Action.GENERATE_TESTS: (Task.State.INVALID,),
}
PAST = {BulkAction.Action.REJECT: "rejected", BulkAction.Action.REOPEN: "reopened",
        BulkAction.Action.VALIDATE: "validated", BulkAction.Action.WRITE_ISSUES: "given an issue",
        BulkAction.Action.GENERATE_TESTS: "given generated tests"}
# Actions that start a job per task (the bulk job ends once they are queued): the kind they start.
STARTS_JOBS = {BulkAction.Action.VALIDATE: "validation", BulkAction.Action.WRITE_ISSUES: "backtranslate",
               BulkAction.Action.GENERATE_TESTS: "generate_tests"}
TO_STATE = {BulkAction.Action.REJECT: Task.State.REJECTED, BulkAction.Action.REOPEN: Task.State.NEEDS_REVIEW}
UNDOABLE = tuple(TO_STATE)
# An action may be undone once its job ended, or after an undo of it failed.
UNDO_FROM = ("succeeded", "failed", "cancelled", "undo_failed")


def bulk_action_targets(*, user, action: str, filters: dict):
    """The ids of the tasks the action would touch: those the query matches, in a state it applies to."""
    tasks = tasks_filtered(user=user, **filters).filter(state__in=FROM_STATES[action])
    if action == BulkAction.Action.WRITE_ISSUES:
        tasks = tasks.filter(issue_versions__isnull=True)
    elif action == BulkAction.Action.GENERATE_TESTS:
        tasks = tasks.filter(reason="no_fail_to_pass", has_generated_tests=False)
    return list(tasks.order_by("id").values_list("id", flat=True))


def bulk_targets_digest(ids: list[int]) -> str:
    """A short fingerprint of a set of task ids: the confirmation carries it, so that a run on other
    tasks than those counted (some left the query, as many others came in) is refused."""
    return hashlib.sha256(",".join(map(str, sorted(ids))).encode()).hexdigest()[:16]


def bulk_action_start(*, user, action: str, filters: dict, query: str, expected: int, targets_digest: str = "",
                      reject_reason: str = "", note: str = "") -> BulkAction:
    """Queue the action on the tasks the query matches now, if they are the ones the person saw
    counted: their number, and with `targets_digest` the tasks themselves."""
    reviewer_required(user)
    if action == BulkAction.Action.REJECT and not reject_reason_offered(reject_reason):
        raise ReviewRefused("Pick a reason for rejecting the tasks.")
    ids = bulk_action_targets(user=user, action=action, filters=filters)
    verb = BulkAction.Action(action).label.lower()
    if len(ids) != expected:
        raise ReviewRefused(f"The query now matches {len(ids):,} tasks it can {verb}, not {expected:,}: check the list "
                            "and confirm again.")
    if targets_digest and targets_digest != bulk_targets_digest(ids):
        raise ReviewRefused(f"The query still matches {len(ids):,} tasks it can {verb}, but not the same ones as when "
                            "you confirmed: check the list and confirm again.")
    if not ids:
        raise ReviewRefused(f"No task of this query can be {PAST[action]}.")
    with transaction.atomic():
        bulk = BulkAction.objects.create(user=user, action=action, query=query, task_ids=ids, task_count=len(ids),
                                         reject_reason=reject_reason if action == BulkAction.Action.REJECT else "",
                                         note=note)
        bulk.job, _ = job_start(kind="bulk_action", subject=bulk, user=user)
        bulk.save(update_fields=["job"])
    return bulk


def bulk_action_mine(*, bulk: BulkAction, user) -> bool:
    """Who may see and undo a bulk action: the person who ran it, and admins."""
    return bulk.user_id == user.id or ADMIN in user_roles(user)


def bulk_action_undo(*, bulk: BulkAction, user) -> None:
    """Queue moving back every task the action moved that nobody changed since, as a job of its
    own. An action that failed part way can be undone too: what it moved is recorded as it goes."""
    reviewer_required(user)
    if not bulk_action_mine(bulk=bulk, user=user):
        raise ReviewRefused("Only the person who ran a bulk action, or an admin, can undo it.")
    if bulk.action not in UNDOABLE:
        raise ReviewRefused(f"A bulk {bulk.action} cannot be undone.")
    with transaction.atomic():
        locked = BulkAction.objects.select_for_update(of=("self",)).select_related("job", "undo_job").get(pk=bulk.pk)
        if locked.state not in UNDO_FROM:
            raise ReviewRefused(f"Bulk action {bulk.pk} is {locked.state}: only a finished action can be undone.")
        undo, _ = job_start(kind="bulk_undo", subject=locked, user=user)
        BulkAction.objects.filter(pk=bulk.pk).update(undo_job=undo, undone_by=user)


def bulk_action_work(job, progress) -> None:
    """The registered `run` of a bulk action. A redelivery after a worker died goes on from where
    it stopped (tasks already moved are not in the states the action moves from any more)."""
    bulk = BulkAction.objects.select_related("user").get(job=job)
    _forward(bulk, progress)
    if progress.holding():
        BulkAction.objects.filter(pk=bulk.pk).update(skipped=len(bulk.task_ids) - len(bulk.changed))


def bulk_undo_work(job, progress) -> None:
    """The registered `run` of an undo."""
    bulk = BulkAction.objects.select_related("undone_by", "job").get(undo_job=job)
    _backward(bulk, progress)
    if progress.holding():
        BulkAction.objects.filter(pk=bulk.pk).update(undone_at=timezone.now())


def bulk_undo_retry(job, user):
    """The registered `retry` of an undo that failed: the same undo, again."""
    bulk = BulkAction.objects.get(undo_job=job)
    bulk_action_undo(bulk=bulk, user=user)
    return BulkAction.objects.get(pk=bulk.pk).undo_job


def _forward(bulk: BulkAction, progress) -> None:
    done = {row[0] for row in bulk.changed}
    progress.report(len(done), len(bulk.task_ids))
    for start in range(0, len(bulk.task_ids), CHUNK):
        chunk = [task_id for task_id in bulk.task_ids[start:start + CHUNK] if task_id not in done]
        if bulk.action == BulkAction.Action.VALIDATE:
            _validate_chunk(bulk, chunk)
        elif bulk.action in STARTS_JOBS:
            _language_chunk(bulk, chunk)
        else:
            _move_chunk(bulk, chunk)
        progress.report(min(start + CHUNK, len(bulk.task_ids)))


def _validate_chunk(bulk: BulkAction, chunk: list[int]) -> None:
    for task in Task.objects.filter(id__in=chunk, state__in=VALIDATABLE_STATES):
        if task_validation_start(task=task, actor=bulk.user) is not None:
            with transaction.atomic():
                _changed_add(bulk, [[task.id, task.state, task.reason, []]])


def _language_chunk(bulk: BulkAction, chunk: list[int]) -> None:
    """Start the issue writer or the test writer on each task it applies to still."""
    kind = STARTS_JOBS[bulk.action]
    for task in Task.objects.filter(id__in=chunk, state__in=FROM_STATES[bulk.action]).select_related("commit"):
        if bulk.action == BulkAction.Action.GENERATE_TESTS and generation_source(task) is None:
            continue
        language_job_start(task=task, kind=kind, user=bulk.user)
        with transaction.atomic():
            _changed_add(bulk, [[task.id, task.state, task.reason, []]])


def _move_chunk(bulk: BulkAction, chunk: list[int]) -> None:
    to_state, reason = TO_STATE[bulk.action], bulk.reject_reason
    moves_check(to_state=to_state, from_states=FROM_STATES[bulk.action])
    with transaction.atomic():
        rows = list(Task.objects.select_for_update().filter(id__in=chunk, state__in=FROM_STATES[bulk.action])
                    .values_list("id", "state", "reason"))
        ids = [row[0] for row in rows]
        retired: dict[int, list[int]] = {}
        if bulk.action == BulkAction.Action.REOPEN:
            for review_id, task_id in Review.objects.filter(task_id__in=ids, current=True).values_list("id", "task_id"):
                retired.setdefault(task_id, []).append(review_id)
            Review.objects.filter(task_id__in=ids, current=True).update(current=False)
            Task.objects.filter(id__in=ids).update(review_count=0, underspecified=None, false_negative=None,
                                                   disagree=False)
        Task.objects.filter(id__in=ids).update(state=to_state, reason=reason, updated_at=timezone.now())
        TaskStateChange.objects.bulk_create([
            TaskStateChange(task_id=task_id, from_state=state, to_state=to_state, reason=reason or f"bulk_{bulk.action}",
                            actor=bulk.user) for task_id, state, _ in rows])
        _changed_add(bulk, [[task_id, state, old_reason, retired.get(task_id, [])] for task_id, state, old_reason in rows])


def _changed_add(bulk: BulkAction, rows: list) -> None:
    """Record moved tasks, under the action's row lock: a redelivered job running beside this one
    must not overwrite what this one recorded."""
    locked = BulkAction.objects.select_for_update().get(pk=bulk.pk)
    bulk.changed = locked.changed + rows
    BulkAction.objects.filter(pk=bulk.pk).update(changed=bulk.changed)


def _backward(bulk: BulkAction, progress) -> None:
    to_state = TO_STATE[bulk.action]
    progress.report(0, len(bulk.changed))
    for start in range(0, len(bulk.changed), CHUNK):
        chunk = bulk.changed[start:start + CHUNK]
        with transaction.atomic():
            ids = [row[0] for row in chunk]
            still = set(Task.objects.select_for_update().filter(id__in=ids, state=to_state)
                        .values_list("id", flat=True))
            still -= _changed_since(ids, bulk.job.finished_at or bulk.created_at)
            for task_id, state, reason, reviews in chunk:
                if task_id not in still:
                    continue  # someone moved it since: their change stands
                Task.objects.filter(id=task_id).update(state=state, reason=reason, updated_at=timezone.now())
                Review.objects.filter(id__in=reviews).update(current=True)
            TaskStateChange.objects.bulk_create([
                TaskStateChange(task_id=task_id, from_state=to_state, to_state=state, reason=f"undo_bulk_{bulk.action}",
                                actor=bulk.undone_by) for task_id, state, _, _ in chunk if task_id in still])
        for task_id, *_ in chunk:
            if task_id in still and bulk.action == BulkAction.Action.REOPEN:
                task_summary_refresh(task_id)
        progress.report(min(start + CHUNK, len(bulk.changed)))


def _changed_since(task_ids: list[int], since) -> set[int]:
    """Tasks someone moved, edited or reviewed after the action ended: their change stands."""
    return {*TaskStateChange.objects.filter(task_id__in=task_ids, at__gt=since).values_list("task_id", flat=True),
            *TaskChange.objects.filter(task_id__in=task_ids, at__gt=since).values_list("task_id", flat=True),
            *Review.objects.filter(task_id__in=task_ids, created_at__gt=since).values_list("task_id", flat=True)}


def bulk_started_jobs(bulk: BulkAction) -> dict[str, int]:
    """The jobs a bulk action started (validations, issue or test writers), counted by state ({} for
    actions that start none): the action's own job ends as soon as they are queued, they run long
    after. Model jobs add their calls: `calls_done` of `calls_planned` (by the jobs started so far)."""
    if bulk.action not in STARTS_JOBS or not bulk.changed:
        return {}
    jobs = Job.objects.filter(kind=STARTS_JOBS[bulk.action], subject_type="tasks.task",
                              subject_id__in=[row[0] for row in bulk.changed], created_at__gte=bulk.created_at)
    counts = dict(jobs.values_list("state").annotate(n=Count("id")).values_list("state", "n"))
    started = {state: counts.get(state, 0) for state in Job.State.values} | {"total": sum(counts.values())}
    if job_kind(STARTS_JOBS[bulk.action]).progress_unit == MODEL_CALLS:
        calls = jobs.aggregate(done=Sum("progress_done"), planned=Sum("progress_total"))
        started |= {"calls_done": calls["done"] or 0, "calls_planned": calls["planned"] or 0}
    return started


def bulk_action_state(bulk: BulkAction, started: dict[str, int]) -> str:
    """Where the action is, for people: its own job's state, but "running its jobs" while the jobs
    it started (`bulk_started_jobs`) are queued or running: its own job ended as soon as they were queued."""
    if not bulk.is_active and started.get("queued", 0) + started.get("running", 0):
        return "running its jobs"
    return bulk.state


def bulk_action_summary(bulk: BulkAction) -> str:
    """The state, and for an action that started jobs how many of them ended and failed: a line for lists."""
    started = bulk_started_jobs(bulk)
    state = bulk_action_state(bulk, started)
    if not started:
        return state
    ended = started["total"] - started.get("queued", 0) - started.get("running", 0)
    failed = started.get("failed", 0) + started.get("cancelled", 0)
    return f"{state}: {ended:,} of {started['total']:,} jobs ended" + (f", {failed:,} failed" if failed else "")


# What a repository's page offers to do to its tasks at once.
REPOSITORY_ACTIONS = [
    (BulkAction.Action.VALIDATE, "Validate waiting tasks", "tasks mined and not validated yet", {"state": "mined"}),
    (BulkAction.Action.WRITE_ISSUES, "Write issues for valid tasks", "valid tasks without an issue", {}),
    (BulkAction.Action.GENERATE_TESTS, "Generate tests where none were found",
     "invalid tasks whose validation found no Fail-to-Pass test", {}),
]


def repository_actions(*, user, repository) -> list[dict]:
    """Each repository action with the tasks it would touch now, and its latest run by this person."""
    recent = {bulk.action: bulk for bulk in BulkAction.objects.filter(user=user, query=f"repository={repository.pk}")
              .select_related("job").order_by("created_at", "id")}
    rows = [{"action": action, "label": label, "what": what, "count": len(bulk_action_targets(
        user=user, action=action, filters={"repository": repository.pk, **extra})), "latest": recent.get(action)}
            for action, label, what, extra in REPOSITORY_ACTIONS]
    for row in rows:
        row["latest_summary"] = bulk_action_summary(row["latest"]) if row["latest"] else ""
    return rows


def repository_action_start(*, user, repository, action: str, expected: int) -> BulkAction:
    extra = next((extra for known, _, _, extra in REPOSITORY_ACTIONS if known == action), None)
    if extra is None:
        raise ReviewRefused(f"{action!r} is not an action on a repository's tasks")
    return bulk_action_start(user=user, action=action, filters={"repository": repository.pk, **extra},
                             query=f"repository={repository.pk}", expected=expected)
