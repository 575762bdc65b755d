"""best@k and calibration on cases worked out by hand, against every subset drawn one by one, and against
published formulas (the unbiased pass@k estimator of the Codex paper, Brier's score as scikit-learn
computes it)."""

import itertools
from fractions import Fraction
from math import comb

import numpy as np
import pytest
from sklearn.calibration import calibration_curve
from sklearn.metrics import brier_score_loss

from worker.engine.verify.measures import (
    best_at_k_by_subsets,
    best_at_k_curve,
    best_at_k_over_tasks,
    bootstrap_bands,
    calibration,
)


def by_every_subset(scores, correct, k):
    """best@k the slow way: every k-subset, the highest score chosen, a tie shared evenly."""
    n = len(scores)
    k = min(k, n)
    total = Fraction(0)
    for subset in itertools.combinations(range(n), k):
        top = max(scores[i] for i in subset)
        tied = [i for i in subset if scores[i] == top]
        total += Fraction(sum(correct[i] for i in tied), len(tied))
    return total / comb(n, k)


def test_worked_by_hand_without_ties():
    # Four candidates ranked 0.9 (wrong), 0.6 (right), 0.3 (wrong), 0.1 (right).
    # k=1: a single draw, right half the time: 1/2.
    # k=2: 6 pairs. The 3 holding 0.9 pick it (wrong); {0.3, 0.1} picks 0.3 (wrong);
    #      {0.6, 0.3} and {0.6, 0.1} pick 0.6 (right): 2 of 6 = 1/3.
    # k=3: 4 triples; without 0.9 only {0.6,0.3,0.1}, which picks 0.6: 1/4.
    # k=4: 0.9 is always there: 0.
    scores, correct = [0.9, 0.6, 0.3, 0.1], [False, True, False, True]
    assert best_at_k_curve(scores, correct, 4) == [Fraction(1, 2), Fraction(1, 3), Fraction(1, 4), Fraction(0)]
    # The closed form by rank: C(n-1-r, k-1) of C(n, k) for rank r = 1 and r = 3 at k = 2: (C(2,1) + C(0,1)) / 6.
    assert best_at_k_curve(scores, correct, 2)[1] == Fraction(comb(2, 1) + comb(0, 1), comb(4, 2))


def test_worked_by_hand_with_ties():
    # a (right), b, c tied at the top; d (right) below them.
    # k=1: 2 of 4 right: 1/2.
    # k=2: {a,b} and {a,c} give 1/2 each, {b,c} 0, {a,d} 1, {b,d} 0, {c,d} 0: 2 over 6 pairs = 1/3.
    # k=4: the tie always wins, and a is its choice a third of the time: 1/3.
    scores, correct = [1.0, 1.0, 1.0, 0.2], [True, False, False, True]
    curve = best_at_k_curve(scores, correct, 4)
    assert curve[0] == Fraction(1, 2) and curve[1] == Fraction(1, 3) and curve[3] == Fraction(1, 3)
    assert curve == [by_every_subset(scores, correct, k) for k in range(1, 5)]


def test_random_is_the_share_and_the_oracle_is_the_pass_at_k_estimator():
    correct = [True, False, False, True, False, False, False]
    n, m = len(correct), sum(correct)
    assert best_at_k_curve([0] * n, correct, 9) == [Fraction(m, n)] * 9
    oracle = best_at_k_curve([float(c) for c in correct], correct, n)
    assert oracle == [1 - Fraction(comb(n - m, k), comb(n, k)) for k in range(1, n + 1)]
    # The Codex paper's numerically stable form: 1 - prod(1 - k / arange(n - c + 1, n + 1)).
    for k in range(1, n + 1):
        published = 1.0 if n - m < k else 1.0 - np.prod(1.0 - k / np.arange(n - m + 1, n + 1))
        assert float(oracle[k - 1]) == pytest.approx(published, abs=1e-12)


def test_fewer_candidates_than_k_use_all_and_a_task_without_candidates_counts_zero():
    assert best_at_k_curve([0.5, 0.4], [False, True], 4)[2:] == [Fraction(0)] * 2
    assert best_at_k_curve([], [], 3) == [Fraction(0)] * 3
    # No correct candidate: still Fractions, so a mean over tasks stays exact.
    assert all(type(value) is Fraction for value in best_at_k_curve([0.1, 0.2], [False, False], 2))
    assert all(type(value) is Fraction for value in best_at_k_over_tasks([([0.1], [False])], 2)[0])
    # A task of two, the right one ranked first: 1/2 at k=1 (one drawn), 1 at k=2; tied: 1/2 at both.
    # Beside a task with no candidate, each counts half.
    mean, floats = best_at_k_over_tasks([([1, 0], [True, False]), ([], [])], 2)
    assert mean == [Fraction(1, 4), Fraction(1, 2)] and floats == [[0.5, 1.0], [0.0, 0.0]]
    mean, _ = best_at_k_over_tasks([([0, 0], [True, False]), ([], [])], 2)
    assert mean == [Fraction(1, 4), Fraction(1, 4)]
    assert best_at_k_over_tasks([], 3) == ([], [])


@pytest.mark.parametrize("seed", range(20))
def test_the_closed_form_agrees_with_every_subset(seed):
    rng = np.random.default_rng(seed)
    n = int(rng.integers(1, 9))
    scores = [float(s) for s in rng.integers(0, 4, n)]  # few values: many ties
    correct = [bool(c) for c in rng.integers(0, 2, n)]
    assert best_at_k_curve(scores, correct, n) == [by_every_subset(scores, correct, k) for k in range(1, n + 1)]


def test_a_subset_dependent_selector_is_enumerated_when_few_and_estimated_when_many():
    correct = [True, False, True, False, False]

    def lowest_index(subset):
        return (min(subset),)

    exact = best_at_k_by_subsets(5, correct, 2, lowest_index)
    # Pairs whose lowest index is 0 (4 of them) or 2 with a higher one ({2,3}, {2,4}): 6 of 10.
    assert (exact.value, exact.exact, exact.subsets) == (Fraction(6, 10), True, 10)
    # The same selector ranks by a fixed score (minus the index): the closed form agrees.
    assert exact.value == best_at_k_curve([-i for i in range(5)], correct, 2)[1]
    estimated = best_at_k_by_subsets(5, correct, 2, lowest_index, limit=5, samples=4000, seed=7)
    assert not estimated.exact and 0 < estimated.error < 0.01
    assert abs(estimated.value - 0.6) < 4 * estimated.error
    assert best_at_k_by_subsets(5, correct, 2, lowest_index, limit=5, samples=4000, seed=7) == estimated


def test_bands_hold_the_mean_and_narrow_with_agreeing_tasks():
    mixed = [[0.0], [1.0]] * 20
    bands = bootstrap_bands({"mixed": mixed, "agreeing": [[1.0]] * 40}, seed=1)
    (low, high), = bands["mixed"]
    assert low < 0.5 < high
    assert bands["agreeing"] == [(1.0, 1.0)]
    assert bootstrap_bands({"none": []}) == {"none": []}


def test_calibration_worked_by_hand_and_as_scikit_learn_computes_the_brier_score():
    predicted = [0.05, 0.15, 0.18, 0.55, 0.95, 0.97, 1.0]
    actual = [False, False, True, True, True, False, True]
    result = calibration(predicted, actual)
    assert [b.count for b in result.bins] == [1, 2, 0, 0, 0, 1, 0, 0, 0, 3]
    assert result.bins[1].mean_predicted == pytest.approx(0.165) and result.bins[1].observed == 0.5
    assert result.bins[9].observed == pytest.approx(2 / 3) and result.bins[2].observed is None
    brier = sum((p - y) ** 2 for p, y in zip(predicted, actual)) / 7
    assert result.brier == pytest.approx(brier)
    # ECE: |0-0.05|*1 + |0.5-0.165|*2 + |1-0.55|*1 + |2/3 - 0.9733...|*3, over 7.
    ece = (0.05 + 0.335 * 2 + 0.45 + abs(2 / 3 - (0.95 + 0.97 + 1.0) / 3) * 3) / 7
    assert result.ece == pytest.approx(ece)
    assert result.brier == pytest.approx(brier_score_loss(actual, predicted))
    observed, mean_predicted = calibration_curve(actual, predicted, n_bins=10)
    filled = [b for b in result.bins if b.count]
    assert [b.observed for b in filled] == pytest.approx(list(observed))
    assert [b.mean_predicted for b in filled] == pytest.approx(list(mean_predicted))
    assert calibration([], []).brier is None
