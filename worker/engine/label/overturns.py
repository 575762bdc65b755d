"""How often people overturn the hidden tests' grade: from the final human labels of candidates sampled
uniformly, the share of those the tests call resolved that people call incorrect (a weak oracle), and
of those the tests call not resolved that people call correct (tests that reject valid fixes), each
with a 95% interval. Plain data in, figures out.

The interval is Wilson's score interval; where n is small (under 30) or nearly every candidate went
one way (fewer than 5 either way), the normal approximation behind it is poor and the exact
(Clopper-Pearson) interval is given instead, its bounds found on the binomial distribution itself."""

from dataclasses import dataclass
from math import comb, sqrt
from typing import Iterable, Optional

Z_95 = 1.959963984540054  # the standard normal's 97.5% quantile
SMALL = 30  # fewer candidates than this: the exact interval
FEW = 5  # fewer than this either way: the exact interval


@dataclass(frozen=True)
class Share:
    """`count` of `total`, with a 95% interval on the share."""

    count: int
    total: int
    low: Optional[float]  # None when total is 0
    high: Optional[float]
    method: str  # "wilson" or "exact"

    @property
    def value(self) -> Optional[float]:
        return self.count / self.total if self.total else None


def share_interval(count: int, total: int) -> Share:
    """The share count/total with its 95% interval (Wilson's, or the exact one where n is small)."""
    if not 0 <= count <= total:
        raise ValueError(f"a count of {count} out of {total}")
    if total == 0:
        return Share(count, total, None, None, "exact")
    if total < SMALL or min(count, total - count) < FEW:
        return Share(count, total, *_exact(count, total), "exact")
    return Share(count, total, *_wilson(count, total), "wilson")


def _wilson(count: int, total: int) -> tuple[float, float]:
    share, z2 = count / total, Z_95 ** 2
    centre = (share + z2 / (2 * total)) / (1 + z2 / total)
    half = Z_95 * sqrt(share * (1 - share) / total + z2 / (4 * total ** 2)) / (1 + z2 / total)
    return max(0.0, centre - half), min(1.0, centre + half)


def _probability(k: int, total: int, share: float) -> float:
    return comb(total, k) * share ** k * (1 - share) ** (total - k)


def _at_most(count: int, total: int, share: float) -> float:
    """P(X <= count) for X ~ Binomial(total, share), summed on the side with fewer terms (the exact
    interval is used where one side is short, however large `total` is)."""
    if count >= total:
        return 1.0
    if count < total - count:
        return sum(_probability(k, total, share) for k in range(count + 1))
    return 1 - sum(_probability(k, total, share) for k in range(count + 1, total + 1))


def _at_least(count: int, total: int, share: float) -> float:
    return 1 - _at_most(count - 1, total, share) if count > 0 else 1.0


def _exact(count: int, total: int) -> tuple[float, float]:
    """Clopper-Pearson: the shares at which seeing `count` or more (for the low bound), or `count` or
    fewer (the high one), has a probability of 2.5%; found by halving on the binomial tails."""

    def solve(too_low) -> float:
        low, high = 0.0, 1.0
        for _ in range(60):  # 2^-60: below a float's resolution near 1
            middle = (low + high) / 2
            low, high = (middle, high) if too_low(middle) else (low, middle)
        return (low + high) / 2

    lower = 0.0 if count == 0 else solve(lambda share: _at_least(count, total, share) < 0.025)
    upper = 1.0 if count == total else solve(lambda share: _at_most(count, total, share) > 0.025)
    return lower, upper


@dataclass(frozen=True)
class Overturns:
    weak_oracle: Share  # of the candidates the tests call resolved, those people call incorrect
    rejects_valid: Share  # of those the tests call not resolved, those people call correct


def overturns(labelled: Iterable[tuple[bool, bool]]) -> Overturns:
    """From (tests say resolved, people say correct) for each labelled candidate of a uniform sample
    (candidates people could not tell about are left out by the caller)."""
    pairs = list(labelled)
    resolved = [correct for tests, correct in pairs if tests]
    unresolved = [correct for tests, correct in pairs if not tests]
    return Overturns(weak_oracle=share_interval(resolved.count(False), len(resolved)),
                     rejects_valid=share_interval(unresolved.count(True), len(unresolved)))
