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
from functools import lru_cache
from math import comb, lcm
from typing import Callable, Optional, Sequence


# A subset of candidate indexes -> the indexes chosen: one, or several equal ones sharing the choice evenly.
Choose = Callable[[tuple[int, ...]], Sequence[int]]


def best_at_k_curve(scores: Sequence[float], correct: Sequence[bool], k_max: int) -> list[Fraction]:
    """One task, k = 1..k_max: the probability that ranking a uniform k-subset by `scores` (highest
    first, ties shared) picks a correct candidate."""
    return [Fraction(numerator, denominator) for numerator, denominator in _curve_parts(scores, correct, k_max)]


def best_at_k_over_tasks(pools: Sequence[tuple[Sequence[float], Sequence[bool]]],
                         k_max: int) -> tuple[list[Fraction], list[list[float]]]:
    """(the mean over tasks per k, exactly; each task's curve in floats). Each pool is one task's
    (scores, correct). The mean adds numerators over each distinct denominator first, so it makes a
    Fraction per denominator, not per task."""
    by_denominator: list[dict[int, int]] = [{} for _ in range(k_max)]
    floats = []
    for scores, correct in pools:
        parts = _curve_parts(scores, correct, k_max)
        floats.append([numerator / denominator for numerator, denominator in parts])
        for sums, (numerator, denominator) in zip(by_denominator, parts):
            sums[denominator] = sums.get(denominator, 0) + numerator
    if not pools:
        return [], []
    mean = [sum((Fraction(n, d) for d, n in sums.items()), Fraction(0)) / len(pools) for sums in by_denominator]
    return mean, floats


def _curve_parts(scores: Sequence[float], correct: Sequence[bool], k_max: int) -> list[tuple[int, int]]:
    """best_at_k_curve as (numerator, denominator) pairs, not reduced."""
    n = len(scores)
    if n == 0:
        return [(0, 1)] * k_max
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
    # The groups' shares over a common denominator (the lcm of their sizes), a whole row of k at a time.
    common = lcm(*(g for _, g, _ in layout)) if layout else 1
    ks = min(k_max, n)
    numerators = [0] * ks
    for a, g, right in layout:
        weight, chosen, rest = right * (common // g), _comb_row(n - a, ks), _comb_row(n - a - g, ks)
        numerators = [total + (x - y) * weight for total, x, y in zip(numerators, chosen, rest)]
    parts = [(numerator, total * common) for numerator, total in zip(numerators, _comb_row(n, ks))]
    return parts + [parts[-1]] * (k_max - ks)  # k beyond n: all of its own


@lru_cache(maxsize=4096)
def _comb_row(m: int, ks: int) -> tuple[int, ...]:
    """C(m, k) for k = 1..ks."""
    return tuple(comb(m, k) for k in range(1, ks + 1))


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
        hits = sum((_share(correct, choose(subset)) for subset in subsets), Fraction(0))
        return Estimate(hits / len(subsets), True, subsets=len(subsets))
    draw = random.Random(seed)
    hits = [float(_share(correct, choose(tuple(sorted(draw.sample(range(n), k)))))) for _ in range(samples)]
    share = sum(hits) / samples
    spread = sum((h - share) ** 2 for h in hits) / max(1, samples - 1)
    return Estimate(share, False, error=(spread / samples) ** 0.5, subsets=samples)


def _share(correct: Sequence[bool], chosen: Sequence[int]) -> Fraction:
    return Fraction(sum(bool(correct[i]) for i in chosen), len(chosen))


def bootstrap_bands(per_task: dict[str, Sequence[Sequence[float]]], *, resamples: int = 1000,
                    level: float = 0.95, seed: int = 0) -> dict[str, list[tuple[float, float]]]:
    """Per selector and k, a percentile band of the dataset mean over tasks drawn again with
    replacement. Every selector sees the same resamples (each one as how many times it draws each
    task), so all of them cost one matrix product."""
    import numpy as np  # at call: importing it costs a command's start 0.3 s

    names = [name for name, rows in per_task.items() if len(rows)]
    if not names:
        return {name: [] for name in per_task}
    blocks = [np.asarray(per_task[name], dtype=float) for name in names]
    tasks = len(blocks[0])
    draws = np.random.default_rng(seed).multinomial(tasks, np.full(tasks, 1 / tasks), size=resamples)
    means = draws @ np.hstack(blocks) / tasks
    tail = (1 - level) / 2 * 100
    low, high = np.percentile(means, [tail, 100 - tail], axis=0)
    bands, start = {name: [] for name in per_task}, 0
    for name, block in zip(names, blocks):
        width = block.shape[1]
        bands[name] = [(float(a), float(b)) for a, b in zip(low[start:start + width], high[start:start + width])]
        start += width
    return bands


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
    import numpy as np  # at call: importing it costs a command's start 0.3 s

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
