"""A task's history and reviews in words, for the task page and the review page: who did what,
when, and why, never a stored record as it is kept."""

from dataclasses import dataclass
from datetime import datetime

from worker.engine.reasons import reason_sentence

from .models import Review, Task, TaskChange, TaskStateChange
from .review import reject_reason_sentences


@dataclass
class HistoryRow:
    at: datetime
    actor: object  # a user, or None for commitgym itself
    what: str  # a sentence
    detail: str = ""  # the person's note, or the reason in words
    before_text: str = ""  # for an edited issue: the text before and after
    after_text: str = ""


def scores_in_words(record: dict) -> str:
    """A review's rubric: "issue underspecified 0/3, tests could reject a valid fix 1/3, <15 min fix"."""
    parts = []
    if record.get("underspecified") is not None:
        parts.append(f"issue underspecified {record['underspecified']}/3")
    if record.get("false_negative") is not None:
        parts.append(f"tests could reject a valid fix {record['false_negative']}/3")
    if record.get("difficulty"):
        parts.append(record["difficulty"])
    return ", ".join(parts)


def _decision_in_words(record: dict, reasons: dict[str, str]) -> str:
    if record.get("decision") == Review.Decision.REJECT:
        reason = record.get("reject_reason", "")
        words = f"rejected it ({reasons.get(reason, reason) or 'no reason given'})"
    else:
        words = "accepted it"
    scores = scores_in_words(record)
    return f"{words}{'; ' + scores if scores else ''}{', settling the disagreement' if record.get('settles') else ''}"


def _change_in_words(change: TaskChange, reasons: dict[str, str]) -> HistoryRow:
    row = HistoryRow(at=change.at, actor=change.actor, what=change.get_kind_display(), detail=change.note)
    before, after = change.before or {}, change.after or {}
    if change.kind == TaskChange.Kind.REVIEWED:
        row.what = f"reviewed: {_decision_in_words(after, reasons)}"
        if before:
            row.what += f" (their earlier review had {_decision_in_words(before, reasons)})"
    elif change.kind == TaskChange.Kind.ISSUE_EDITED:
        row.what = (f"edited the issue (version {before['version']} → {after.get('version')})" if before.get("version")
                    else f"wrote the issue (version {after.get('version')})")
        row.before_text, row.after_text = before.get("text", ""), after.get("text", "")
    elif change.kind in (TaskChange.Kind.TEST_DROPPED, TaskChange.Kind.TEST_RESTORED):
        was, now = set(before.get("excluded_tests", [])), set(after.get("excluded_tests", []))
        tests = ", ".join(sorted(now - was if change.kind == TaskChange.Kind.TEST_DROPPED else was - now))
        verb = "dropped" if change.kind == TaskChange.Kind.TEST_DROPPED else "put back"
        row.what = f"{verb} the test {tests} from the oracle"
    elif change.kind == TaskChange.Kind.REVIEWS_RETIRED:
        count = before.get("reviews", 0)
        row.what = f"{count} review{'s' if count != 1 else ''} no longer count{'s' if count == 1 else ''}"
    elif change.kind == TaskChange.Kind.TESTS_FLAGGED_WEAK:
        survivors = after.get("survivors", [])
        row.what = (f"flagged the tests as too weak: {len(survivors)} mutant{'s' if len(survivors) != 1 else ''} of "
                    f"the fix survive{'s' if len(survivors) == 1 else ''} them")
        row.detail = "; ".join(survivors)
    return row


def _state_in_words(change: TaskStateChange) -> HistoryRow:
    def label(state: str) -> str:
        return Task.State(state).label.lower() if state in Task.State.values else state

    what = f"moved it from {label(change.from_state)} to {label(change.to_state)}" if change.from_state else \
        f"made the task ({label(change.to_state)})"
    return HistoryRow(at=change.at, actor=change.actor, what=what,
                      detail=reason_sentence(change.reason) if change.reason else "")


def task_history(task: Task) -> list[HistoryRow]:
    """Every state change and every other change of the task, oldest first, in words."""
    reasons = reject_reason_sentences()
    rows = [_state_in_words(change) for change in TaskStateChange.objects.filter(task=task).select_related("actor")]
    rows += [_change_in_words(change, reasons) for change in
             TaskChange.objects.filter(task=task).select_related("actor")]
    return sorted(rows, key=lambda row: row.at)


@dataclass
class ReviewRow:
    review: Review
    decision: str  # in words, with the reason of a rejection
    scores: str


def task_reviews(task: Task) -> list[ReviewRow]:
    """Every review of the task, newest first (those that no longer count included, marked)."""
    reasons = reject_reason_sentences()
    rows = []
    for review in Review.objects.filter(task=task).select_related("reviewer").order_by("-created_at", "-id"):
        record = {"decision": review.decision, "reject_reason": review.reject_reason, "settles": review.settles}
        decision = _decision_in_words(record, reasons).removesuffix(", settling the disagreement")
        rows.append(ReviewRow(review, decision[:1].upper() + decision[1:],
                              scores_in_words({"underspecified": review.underspecified,
                                               "false_negative": review.false_negative,
                                               "difficulty": review.difficulty})))
    return rows

