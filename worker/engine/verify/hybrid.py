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
from functools import lru_cache
from math import comb
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


def hybrid_curve(p_yes: Sequence[float], execution: Sequence[tuple[int, int]], correct: Sequence[bool],
                 k_max: int) -> list[Fraction]:
    """One task, k = 1..k_max: the chance the hybrid picks a correct candidate from a uniform k-subset
    (a task with fewer than k candidates uses all of its own), exactly, by counting subsets.

    Candidates equal in (P(YES), execution score) form a class; the hybrid always chooses the members of
    one class the subset holds, each as likely to be right as any other of the class. Class c is chosen
    when the subset holds s ≥ 1 of its members, none of the classes above it by (P(YES), execution)
    that the tests would prefer ("beaters"), and a < m of the others above it (so c is kept); and, when
    a + s < m keeps t = m − a − s more from below c, no beater below c is among them: the subset holds
    no beater below c, or holds at least t members below c before the first beater it holds."""
    n = len(correct)
    classes: dict = {}
    for key, right in zip(zip(p_yes, execution), correct):
        size, hits = classes.get(key, (0, 0))
        classes[key] = (size + 1, hits + bool(right))
    order = sorted(classes, reverse=True)  # by P(YES), then execution: the order the judge keeps them in
    # A class with no right member adds nothing: only the others are counted.
    shapes = {key: _class_shape(order, index, classes) for index, key in enumerate(order) if classes[key][1]}
    curve = []
    for k in range(1, k_max + 1):
        drawn = min(k, n)
        if not drawn:
            curve.append(Fraction(0))
            continue
        kept = hybrid_kept(drawn)
        chosen_right = sum((Fraction(_subsets_choosing(shape, drawn, kept) * classes[key][1], classes[key][0])
                            for key, shape in shapes.items()), Fraction(0))
        curve.append(chosen_right / comb(n, drawn))
    return curve


def _class_shape(order: list, index: int, classes: dict) -> tuple:
    """(its size, members of the classes above it that are no beaters, members of the classes below it
    that are no beaters, and per beater below it: (members before it that are no beaters, its size,
    members after it))."""
    key = order[index]
    beats = lambda other: (other[1], other[0]) > (key[1], key[0])  # noqa: E731 - the tests prefer it
    above = sum(classes[other][0] for other in order[:index] if not beats(other))
    below = order[index + 1:]
    beaters, plain_before = [], 0
    for position, other in enumerate(below):
        if beats(other):
            after = sum(classes[later][0] for later in below[position + 1:])
            beaters.append((plain_before, classes[other][0], after))
        else:
            plain_before += classes[other][0]
    return classes[key][0], above, plain_before, tuple(beaters)


def _subsets_choosing(shape: tuple, drawn: int, kept: int) -> int:
    """How many `drawn`-subsets of the task's candidates make the hybrid choose this class."""
    size, above, plain_below, beaters = shape
    total = 0
    for s in range(1, min(size, drawn) + 1):
        for a in range(0, min(kept - 1, above, drawn - s) + 1):
            total += comb(size, s) * comb(above, a) * _below_safe(plain_below, beaters, drawn - s - a, kept - a - s)
    return total


@lru_cache(maxsize=100_000)
def _below_safe(plain_below: int, beaters: tuple, drawn: int, needed: int) -> int:
    """Ways to draw `drawn` members below the class keeping no beater: none drawn, or at least `needed`
    drawn before the first beater drawn."""
    if needed <= 0:  # nothing below is kept: any draw will do
        before, size, after = beaters[0] if beaters else (plain_below, 0, 0)
        return comb(before + size + after, drawn)
    ways = comb(plain_below, drawn)
    for before, size, after in beaters:
        ways += sum(comb(before, x) * (comb(size + after, drawn - x) - comb(after, drawn - x))
                    for x in range(max(0, needed), min(before, drawn) + 1))
    return ways


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
