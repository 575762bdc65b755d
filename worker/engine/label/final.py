"""A candidate's final human label: what the measures use, never a vote. Annotators who all gave the
same answer, once as many as the overlap asks for have answered, decide it; where they differ, a
curator settles it, and the settlement stands."""

from dataclasses import dataclass
from typing import Optional, Sequence

AGREED, SETTLED, DISAGREE, PENDING = "agreed", "settled", "disagree", "pending"


@dataclass(frozen=True)
class FinalLabel:
    verdict: Optional[str]  # None until agreed or settled
    status: str  # agreed | settled | disagree (a curator settles it) | pending (more labels to come)


def final_label(verdicts: Sequence[str], *, settled: Optional[str], required: int) -> FinalLabel:
    """From the annotators' verdicts on one candidate, the settlement if any, and the overlap asked for."""
    if settled:
        return FinalLabel(settled, SETTLED)
    if len(set(verdicts)) > 1:
        return FinalLabel(None, DISAGREE)
    if not verdicts or len(verdicts) < required:
        return FinalLabel(None, PENDING)
    return FinalLabel(verdicts[0], AGREED)
