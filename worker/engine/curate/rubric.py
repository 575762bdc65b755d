"""SWE-bench Verified's annotation rubric: how several reviewers' scores of one task merge, when
the merged scores let the task in, and when reviewers disagree enough for a curator to settle it.

Scores are 0-3, higher is worse: `underspecified` (is the issue well specified?) and
`false_negative` (could the tests reject a valid solution?). Merging keeps the most severe.
"""

from dataclasses import dataclass
from typing import Optional

# From the quickest fix to the slowest; a merged difficulty is the slowest any reviewer gave.
DIFFICULTIES = ("<15 min fix", "15 min - 1 hour", "1-4 hours", ">4 hours")
# Two reviewers this far apart on a question disagree, even when both decided the same.
SCORE_GAP_DISAGREES = 2


@dataclass(frozen=True)
class Scores:
    decision: str  # "accept" | "reject"
    underspecified: Optional[int]  # None: a rejection that did not score it (only accepting needs the rubric)
    false_negative: Optional[int]
    difficulty: str


@dataclass(frozen=True)
class Thresholds:
    underspecified_below: int = 2
    false_negative_below: int = 2

    def problems(self, underspecified: int, false_negative: int) -> list[str]:
        """Why scores like these keep a task out (empty when they let it in)."""
        problems = []
        if underspecified >= self.underspecified_below:
            problems.append(f"the issue is scored {underspecified} for being underspecified "
                            f"(accepted below {self.underspecified_below})")
        if false_negative >= self.false_negative_below:
            problems.append(f"the tests are scored {false_negative} for rejecting valid solutions "
                            f"(accepted below {self.false_negative_below})")
        return problems


@dataclass(frozen=True)
class Merged:
    reviews: int
    underspecified: Optional[int]
    false_negative: Optional[int]
    difficulty: str
    rejected: bool  # some reviewer rejected the task
    disagree: bool


def scores_merge(reviews: list[Scores]) -> Merged:
    if not reviews:
        return Merged(0, None, None, "", False, False)
    underspecified = [review.underspecified for review in reviews if review.underspecified is not None]
    false_negative = [review.false_negative for review in reviews if review.false_negative is not None]
    difficulty = max((review.difficulty for review in reviews if review.difficulty in DIFFICULTIES),
                     key=DIFFICULTIES.index, default="")
    disagree = (len({review.decision for review in reviews}) > 1 or _spread(underspecified) >= SCORE_GAP_DISAGREES
                or _spread(false_negative) >= SCORE_GAP_DISAGREES)
    return Merged(len(reviews), max(underspecified, default=None), max(false_negative, default=None), difficulty,
                  any(review.decision == "reject" for review in reviews), disagree)


def _spread(scores: list[int]) -> int:
    return max(scores) - min(scores) if scores else 0


def review_outcome(merged: Merged, *, required: int, thresholds: Thresholds) -> str:
    """"rejected" when any reviewer rejected, "accepted" once the required reviews are in and the
    merged scores pass, "pending" while reviews are missing, "failing" when all accepted but the
    merged scores keep the task out."""
    if merged.rejected:
        return "rejected"
    if merged.reviews < max(required, 1):
        return "pending"
    if thresholds.problems(merged.underspecified, merged.false_negative):
        return "failing"
    return "accepted"
