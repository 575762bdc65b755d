"""The order a dataset's candidates are labelled in, and the hidden controls mixed among them.

Only a uniformly random order makes the labels of its first items a uniform sample, which the oracle's
error rate needs; the other orders put first where people's labels say the most. Every order breaks
ties by the same seeded hash, so a queue's order does not change between refreshes."""

import hashlib
from dataclasses import dataclass
from typing import Hashable, Optional, Sequence

RANDOM, DISAGREEMENT, UNCERTAIN = "random", "disagreement", "uncertain"
ORDERS = (RANDOM, DISAGREEMENT, UNCERTAIN)


@dataclass(frozen=True)
class Scored:
    """What the order reads of one candidate."""

    candidate: Hashable
    resolved: Optional[bool] = None  # the hidden tests' grade, None when ungraded
    p_yes: Optional[float] = None  # the judge's
    execution_passes: Optional[bool] = None  # every counted verifier test passed; None when not run


def uniform_share(seed: str, candidate: Hashable) -> float:
    """A number in [0, 1) fixed by the seed and the candidate, uniform over candidates."""
    digest = hashlib.sha256(f"{seed}:{candidate}".encode()).digest()
    return int.from_bytes(digest[:8], "big") / 2 ** 64


def _disagreements(item: Scored) -> int:
    """How many of the two verifiers disagree with the hidden tests (0 where either is unknown)."""
    if item.resolved is None:
        return 0
    said = [item.p_yes >= 0.5 if item.p_yes is not None else None, item.execution_passes]
    return sum(1 for verdict in said if verdict is not None and verdict != item.resolved)


def priorities(items: Sequence[Scored], order: str, *, seed: str) -> dict[Hashable, float]:
    """Each candidate's place in the queue: lower is labelled first."""
    if order not in ORDERS:
        raise ValueError(f"no queue order {order!r}")
    placed = {}
    for item in items:
        tie = uniform_share(seed, item.candidate)
        if order == DISAGREEMENT:
            placed[item.candidate] = (2 - _disagreements(item)) + tie
        elif order == UNCERTAIN:
            placed[item.candidate] = (abs(item.p_yes - 0.5) if item.p_yes is not None else 1.0) + tie * 1e-3
        else:
            placed[item.candidate] = tie
    return placed


def controls_chosen(controls: Sequence[Hashable], *, share: float, agents: int, seed: str) -> list[Hashable]:
    """The controls to mix in so that they are `share` of the queue (agents' candidates the rest), as
    many as there are; chosen by the seeded hash."""
    if not 0 <= share < 1:
        raise ValueError("the share of controls is at least 0 and below 1")
    wanted = round(share * agents / (1 - share))
    return sorted(controls, key=lambda control: uniform_share(seed, control))[:wanted]
