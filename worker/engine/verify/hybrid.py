"""The hybrid selector (the paper's): of the k candidates drawn, keep the judge's top max(3, ⌊k/2⌋)
by P(YES), breaking ties at the cut by P(YES), then regression passes, then reproduction passes
(candidates equal on all three at the cut are all kept); among those kept, choose the best
execution score (regression passes, then reproduction passes), ties broken by P(YES). Candidates
still equal share the choice evenly. With one candidate, it is chosen (⌊1/2⌋ = 0 keeps none in
the public code; here the cut is never below 3, nor above k).

And complementarity: per task, whether each verifier's top candidate is wrong, and how much their
failures overlap.
"""

from dataclasses import dataclass
from fractions import Fraction
from typing import Sequence


def hybrid_kept(k: int) -> int:
    return min(k, max(3, k // 2))


def hybrid_choose(subset: Sequence[int], p_yes: Sequence[float], execution: Sequence[tuple[int, int]]) -> tuple:
    """The candidates of `subset` (indexes into p_yes and execution) the hybrid chooses: one, or
    several equal ones that share the choice."""
    if not subset:
        return ()
    ranked = sorted(subset, key=lambda i: (p_yes[i], execution[i]), reverse=True)
    cut = hybrid_kept(len(subset))
    boundary = (p_yes[ranked[cut - 1]], execution[ranked[cut - 1]])
    kept = ranked[:cut] + [i for i in ranked[cut:] if (p_yes[i], execution[i]) == boundary]
    best = max((execution[i], p_yes[i]) for i in kept)
    return tuple(sorted(i for i in kept if (execution[i], p_yes[i]) == best))


def top_wrong_share(scores: Sequence, correct: Sequence[bool]) -> Fraction:
    """The chance that a selector ranking by `scores` (highest first, ties shared) picks a wrong
    candidate when it sees them all."""
    if not scores:
        return Fraction(1)
    top = max(scores)
    tied = [c for s, c in zip(scores, correct) if s == top]
    return Fraction(sum(not c for c in tied), len(tied))


@dataclass
class Complementarity:
    tasks: int  # tasks with at least one resolved candidate: where a verifier can be right
    execution_wrong: Fraction
    judge_wrong: Fraction
    both_wrong: Fraction

    @property
    def overlap(self) -> Fraction | None:
        """Of the tasks where either is wrong, the share where both are (ties broken independently)."""
        either = self.execution_wrong + self.judge_wrong - self.both_wrong
        return self.both_wrong / either if either else None


def complementarity(pools: Sequence[tuple[Sequence, Sequence[float], Sequence[bool]]]) -> Complementarity:
    """Each pool one task's (execution scores, P(YES), correct), over the same candidates. Counts are
    expected numbers of tasks (a tie at the top counts its share of wrong candidates)."""
    found = Complementarity(0, Fraction(0), Fraction(0), Fraction(0))
    for execution, p_yes, correct in pools:
        if not any(correct):
            continue
        by_tests, by_judge = top_wrong_share(execution, correct), top_wrong_share(p_yes, correct)
        found.tasks += 1
        found.execution_wrong += by_tests
        found.judge_wrong += by_judge
        found.both_wrong += by_tests * by_judge
    return found
