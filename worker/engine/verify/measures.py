"""best@k, exactly, and the judge's calibration.

best@k is the share of tasks whose selected candidate, out of k drawn uniformly without replacement
from the task's n candidates, is correct. For a selector that ranks by a fixed score (highest first),
the group of candidates tied at score s is where the choice falls in C(n−a, k) − C(n−a−g, k) of the
C(n, k) subsets (a candidates score higher, g share s): the subset holds one of them and none above.
Within the group the choice is uniform, so each member gets an equal share. Without ties that is
C(n−1−r, k−1) for the candidate of rank r. Random is the selector where all candidates tie; the oracle
ranks by correctness. Everything stays a Fraction until the caller asks for floats.

A task with fewer than k candidates uses all of its own (k = n); a task with none scores 0 and still
counts: the denominator is every task in scope, as SWE-bench's resolved rate counts every instance.
"""

import itertools
import random
from dataclasses import dataclass
from fractions import Fraction
from math import comb, lcm
from typing import Callable, Optional, Sequence

import numpy as np

Choose = Callable[[tuple[int, ...]], int]  # a subset of candidate indexes -> the index chosen


def best_at_k_curve(scores: Sequence[float], correct: Sequence[bool], k_max: int) -> list[Fraction]:
    """One task, k = 1..k_max: the probability that ranking a uniform k-subset by `scores` (highest
    first, ties shared) picks a correct candidate."""
    n = len(scores)
    if n == 0:
        return [Fraction(0)] * k_max
    groups: dict[float, list[int]] = {}
    for value, is_correct in zip(scores, correct):
        tally = groups.setdefault(value, [0, 0])
        tally[0] += 1
        tally[1] += bool(is_correct)
    layout = []  # (candidates above the group, group size, correct in the group), correct groups only
    above = 0
    for value in sorted(groups, reverse=True):
        size, right = groups[value]
        if right:
            layout.append((above, size, right))
        above += size
    # One Fraction per k: the groups' shares over a common denominator (the lcm of their sizes).
    common = lcm(*(g for _, g, _ in layout)) if layout else 1
    weights = [(a, g, right * (common // g)) for a, g, right in layout]
    curve = []
    for k in range(1, k_max + 1):
        k = min(k, n)
        numerator = sum((comb(n - a, k) - comb(n - a - g, k)) * weight for a, g, weight in weights)
        curve.append(Fraction(numerator, comb(n, k) * common))
    return curve


@dataclass(frozen=True)
class Estimate:
    value: Fraction | float
    exact: bool
    error: float = 0.0  # the Monte-Carlo standard error, when estimated
    subsets: int = 0


def best_at_k_by_subsets(n: int, correct: Sequence[bool], k: int, choose: Choose, *, limit: int = 2000,
                         samples: int = 2000, seed: int = 0) -> Estimate:
    """A selector whose choice depends on the subset drawn: every subset when there are at most `limit`
    of them, else `samples` seeded subsets, with the estimate's standard error."""
    if n == 0:
        return Estimate(Fraction(0), True)
    k = min(k, n)
    if comb(n, k) <= limit:
        subsets = list(itertools.combinations(range(n), k))
        hits = sum(bool(correct[choose(subset)]) for subset in subsets)
        return Estimate(Fraction(hits, len(subsets)), True, subsets=len(subsets))
    draw = random.Random(seed)
    hits = [bool(correct[choose(tuple(sorted(draw.sample(range(n), k))))]) for _ in range(samples)]
    share = sum(hits) / samples
    return Estimate(share, False, error=(share * (1 - share) / samples) ** 0.5, subsets=samples)


def dataset_mean(per_task: Sequence[Sequence[Fraction]]) -> list[Fraction]:
    """Per k, the mean over tasks (each row one task's curve)."""
    if not per_task:
        return []
    return [sum(column, Fraction(0)) / len(per_task) for column in zip(*per_task)]


def bootstrap_bands(per_task: Sequence[Sequence[float]], *, resamples: int = 1000, level: float = 0.95,
                    seed: int = 0) -> list[tuple[float, float]]:
    """Per k, a percentile band of the dataset mean over tasks drawn again with replacement."""
    values = np.asarray(per_task, dtype=float)
    if values.size == 0:
        return []
    rows = np.random.default_rng(seed).integers(0, len(values), size=(resamples, len(values)))
    means = values[rows].mean(axis=1)
    tail = (1 - level) / 2 * 100
    low, high = np.percentile(means, [tail, 100 - tail], axis=0)
    return [(float(a), float(b)) for a, b in zip(low, high)]


# --- calibration ---------------------------------------------------------------------------------------


@dataclass(frozen=True)
class CalibrationBin:
    low: float
    high: float
    count: int
    mean_predicted: Optional[float]
    observed: Optional[float]


@dataclass(frozen=True)
class Calibration:
    bins: list[CalibrationBin]
    brier: Optional[float]
    ece: Optional[float]
    count: int


def calibration(predicted: Sequence[float], actual: Sequence[bool], bins: int = 10) -> Calibration:
    """Reliability diagram over equal-width bins (the last one closed: p = 1 falls in it), the Brier
    score, and the expected calibration error (bins weighted by their share of the predictions)."""
    p = np.asarray(predicted, dtype=float)
    y = np.asarray(actual, dtype=float)
    if p.size == 0:
        return Calibration([CalibrationBin(i / bins, (i + 1) / bins, 0, None, None) for i in range(bins)],
                           None, None, 0)
    index = np.minimum((p * bins).astype(int), bins - 1)
    table, ece = [], 0.0
    for b in range(bins):
        inside = index == b
        count = int(inside.sum())
        mean_p = float(p[inside].mean()) if count else None
        observed = float(y[inside].mean()) if count else None
        if count:
            ece += count / p.size * abs(observed - mean_p)
        table.append(CalibrationBin(b / bins, (b + 1) / bins, count, mean_p, observed))
    return Calibration(table, float(((p - y) ** 2).mean()), ece, int(p.size))
