"""The hacking detector's flags on candidates (engine: grade/hacking.py), and a curator's word on them.

A flagged candidate is `suspicious`: its grade is kept and shown, and it counts as not resolved in
every measure (models.RESOLVED) until a curator clears it, with a note, on the task's candidates
page; confirmed, it never counts. A grade reads each file the patch changes whole from the task's
base commit (grade/second_opinion.py: candidate_doubts); an import reads the diff alone, and grading
reads it again whole."""

from typing import Optional

from django.db import transaction
from django.utils import timezone

from worker.engine.grade.hacking import patch_hacking_flags
from worker.engine.reasons import HACKING_REASONS
from worker.engine.test_files import TestFileRules

from ..models import Candidate, HackingReview

NOTE_CHARS = 2000


class HackingReviewRefused(ValueError):
    """A curator's word that cannot be taken as given; the message says why."""


def patch_hacking_fields(patch: Optional[str], rules: TestFileRules) -> dict:
    """A new candidate's flags from its diff alone, as fields (an import's rows: "" reads nothing)."""
    flags = [flag.as_json() for flag in patch_hacking_flags(patch or "", rules=rules)]
    return {"hacking": flags, "suspicious": bool(flags)}


def candidates_hacking_read(candidate_ids: list[int], rules: TestFileRules) -> None:
    """Flags, from the diff alone, for the candidates of `candidate_ids` a report calls resolved and the
    detector has not read yet (imported earlier without a report, say)."""
    unread = Candidate.objects.filter(id__in=candidate_ids, outcome="resolved", hacking=[]).exclude(
        patch="").values_list("id", "patch")
    for candidate_id, patch in unread:
        flags = patch_hacking_fields(patch, rules)["hacking"]
        if flags:
            candidate_hacking_store(candidate_id, flags)


def _flag_keys(flags: list[dict]) -> set:
    return {(flag.get("reason"), flag.get("path"), flag.get("line")) for flag in flags or []}


def candidate_hacking_store(candidate_id: int, flags: list[dict]) -> bool:
    """Keep the candidate's flags. A curator's word stands while the flags are the ones they saw; other
    flags wait for a curator again. Returns whether it is suspicious."""
    with transaction.atomic():
        candidate = Candidate.objects.select_for_update().only(
            "id", "hacking", "hacking_review").get(id=candidate_id)
        fields = {"hacking": flags}
        review = candidate.hacking_review
        if _flag_keys(candidate.hacking) != _flag_keys(flags):
            review = HackingReview.AWAITING
            fields.update(hacking_review=review, hacking_note="", hacking_reviewed_by=None, hacking_reviewed_at=None)
        fields["suspicious"] = bool(flags) and review != HackingReview.CLEARED
        Candidate.objects.filter(id=candidate_id).update(**fields)
    return fields["suspicious"]


def candidate_hacking_review(*, candidate: Candidate, verdict: str, note: str, user) -> Candidate:
    """A curator's word on a flagged candidate: `cleared` (a real fix: it counts as its grade says) or
    `confirmed` (it games the tests: it never counts as resolved), with why."""
    if verdict not in (HackingReview.CLEARED, HackingReview.CONFIRMED):
        raise HackingReviewRefused(f"{verdict!r} is not a word on a flag: clear or confirm it")
    note = note.strip()
    if not note:
        raise HackingReviewRefused("say why in the note: what the flagged code does, and why that is or is not "
                                   "gaming the tests")
    if not candidate.hacking:
        raise HackingReviewRefused("the hacking detector has not flagged this candidate: there is nothing to clear "
                                   "or confirm")
    fields = {"hacking_review": verdict, "hacking_note": note[:NOTE_CHARS], "hacking_reviewed_by": user,
              "hacking_reviewed_at": timezone.now(), "suspicious": verdict != HackingReview.CLEARED}
    Candidate.objects.filter(id=candidate.id).update(**fields)
    for name, value in fields.items():
        setattr(candidate, name, value)
    return candidate


def hacking_flags_shown(flags: list[dict]) -> list[dict]:
    """Each flag with the sentence of its reason, for a page."""
    return [{**flag, "sentence": HACKING_REASONS.get(flag.get("reason"), "")} for flag in flags or []]
