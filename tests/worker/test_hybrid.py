"""The execution verifier's matrix (execution score, distinguishing and toxic tests), the hybrid's
choice and complementarity, on hand-built cases worked out in the comments."""

import itertools
import random
from fractions import Fraction

from worker.engine.verify.hybrid import Complementarity, complementarity, hybrid_choose, hybrid_curve, hybrid_kept
from worker.engine.verify.matrix import (
    Matrix,
    VerifierTest,
    distinguishing_share,
    execution_scalar,
    execution_score,
    verifier_tests_judged,
)
from worker.engine.verify.measures import best_at_k_by_subsets, best_at_k_curve

# A is resolved, B and C are not.
#   r1 reproduction:                  A pass, B fail, C pass -> distinguishing (every resolved passes, B fails)
#   r2 reproduction, passes on base:  all pass               -> reproduces nothing: does not count
#   g1 regression:                    A fail, B pass, C pass -> toxic (B, unresolved, passes; A, resolved, fails)
#   g2 regression:                    all pass               -> neither
TESTS = [VerifierTest("r1", "reproduction"), VerifierTest("r2", "reproduction", passes_on_base=True),
         VerifierTest("g1", "regression"), VerifierTest("g2", "regression")]
PASSING = {"A": {"r1", "r2", "g2"}, "B": {"r2", "g1", "g2"}, "C": {"r1", "r2", "g1", "g2"}}
MATRIX = Matrix(TESTS, {(c, t.test_id): "passed" if t.test_id in PASSING[c] else "failed"
                        for c in PASSING for t in TESTS})


def test_execution_scores_count_regression_first_and_only_reproducing_tests():
    # A: regression g2 (1); reproduction r1 (1; r2 passes on the base commit). B: g1, g2 (2); none. C: 2; r1 (1).
    assert [execution_score(MATRIX, c) for c in "ABC"] == [(1, 1), (2, 0), (2, 1)]
    # As numbers ordering the same way (reproduction counts at most 1 here, so regression weighs 2).
    assert execution_scalar([(1, 1), (2, 0), (2, 1)]) == [3, 4, 5]
    # Ranked by it, C wins alone: wrong. With all three drawn, the execution-only selector scores 0.
    assert best_at_k_curve(execution_scalar([(1, 1), (2, 0), (2, 1)]), [True, False, False], 3)[2] == 0


def test_distinguishing_and_toxic_tests_against_the_ground_truth():
    verdicts = {v.test_id: (v.distinguishing, v.toxic) for v in verifier_tests_judged(MATRIX, {"A": True, "B": False,
                                                                                      "C": False})}
    assert verdicts == {"r1": (True, False), "r2": (False, False), "g1": (False, True), "g2": (False, False)}
    # r2 reproduces nothing: it is neither, and not counted. One of the three others distinguishes.
    assert distinguishing_share(verifier_tests_judged(MATRIX, {"A": True, "B": False, "C": False})) == 1 / 3
    # Had r2 failed B it would distinguish, but a test passing before any fix is judged as nothing.
    failing_b = Matrix(TESTS, {**MATRIX.outcomes, ("B", "r2"): "failed"})
    assert {v.test_id: v.counts for v in verifier_tests_judged(failing_b, {"A": True, "B": False})}["r2"] is False
    assert not any(v.distinguishing for v in verifier_tests_judged(failing_b, {"A": True, "B": False})
                   if v.test_id == "r2")
    # With no resolved candidate, nothing distinguishes and nothing is toxic.
    assert not any(v.distinguishing or v.toxic for v in verifier_tests_judged(MATRIX, {"B": False, "C": False}))
    assert distinguishing_share([]) is None


def test_the_hybrid_keeps_the_judges_top_then_picks_by_tests():
    p_yes = [0.9, 0.8, 0.8, 0.3, 0.1]
    execution = [(1, 0), (2, 1), (2, 0), (5, 5), (0, 0)]
    # k=5 keeps max(3, 5 // 2) = 3: candidates 0, 1, 2 by P(YES); of those, 1 has the best execution score.
    # Candidate 3 passes the most tests but the judge cut it.
    assert hybrid_choose(range(5), p_yes, execution) == (1,)
    assert [hybrid_kept(k) for k in (1, 2, 3, 6, 8, 26)] == [1, 2, 3, 3, 4, 13]


def test_the_hybrid_with_ties_at_the_cut_and_in_the_choice_and_with_one_candidate():
    # Ranked: 0 (0.9), then 1 and 2 (0.5, (1, 0)), then 3 (0.5, (0, 0)). The cut at 3 falls in the tie of 1 and 2,
    # which P(YES) does not break but the execution score does against 3: kept 0, 1, 2. Best execution: 1 and 2,
    # equal in P(YES) too: they share the choice.
    assert hybrid_choose(range(4), [0.9, 0.5, 0.5, 0.5], [(0, 0), (1, 0), (1, 0), (0, 0)]) == (1, 2)
    # Equal on all three at the cut: all kept. 1, 2 and 3 tie at the cut of 3, so all four are kept, and
    # 1, 2 and 3 share the choice (cutting at exactly 3 would keep only two of them).
    assert hybrid_choose(range(4), [0.9, 0.5, 0.5, 0.5], [(0, 0), (1, 0), (1, 0), (1, 0)]) == (1, 2, 3)
    assert hybrid_choose([0], [0.2], [(0, 0)]) == (0,)
    assert hybrid_choose([], [], []) == ()


def test_the_hybrids_best_at_k_is_exact_over_every_subset():
    # Four candidates; 3 is right. k=2 keeps both drawn (min(k, 3)), so the hybrid ranks by execution, then P(YES).
    p_yes = [0.9, 0.7, 0.5, 0.1]
    execution = [(0, 0), (1, 0), (0, 1), (2, 0)]
    correct = [False, False, False, True]

    def choose(subset):
        return hybrid_choose(subset, p_yes, execution)

    # Pairs with 3 ({0,3}, {1,3}, {2,3}) pick 3 (best execution): right. The other three pick a wrong one: 3/6.
    exact = best_at_k_by_subsets(4, correct, 2, choose)
    assert exact.exact and exact.value == Fraction(1, 2)
    # k=4 keeps the top 3 by P(YES) (0, 1, 2): 3 is cut, so the hybrid is wrong whatever.
    assert best_at_k_by_subsets(4, correct, 4, choose).value == 0
    # Against a count of every subset one by one.
    for k in range(1, 5):
        subsets = list(itertools.combinations(range(4), k))
        by_hand = sum(Fraction(sum(correct[i] for i in choose(s)), len(choose(s))) for s in subsets) / len(subsets)
        assert best_at_k_by_subsets(4, correct, k, choose).value == by_hand


def test_complementarity_worked_by_hand():
    pools = [
        # Tests pick 0 (right); the judge picks 1 (wrong).
        ([(1, 0), (0, 0)], [0.2, 0.9], [True, False]),
        # Tests tie 0 and 1: wrong half the time; the judge picks 0 (wrong). Both wrong: 1/2.
        ([(1, 0), (1, 0)], [0.5, 0.4], [False, True]),
        # Nothing right: no verifier can be, so the task does not count.
        ([(1, 0)], [0.9], [False]),
    ]
    found = complementarity(pools)
    assert found == Complementarity(2, Fraction(1, 2), Fraction(2), Fraction(1, 2))
    # Either wrong: 1/2 + 2 - 1/2 = 2 tasks; both: 1/2 -> overlap 1/4.
    assert found.overlap == Fraction(1, 4)
    assert complementarity([]).overlap is None


def test_the_hybrids_curve_per_k_with_one_candidate_and_with_many_candidates():
    # One candidate, right: chosen at every k (the public code's k // 2 = 0 would keep none).
    assert hybrid_curve([0.1], [(0, 0)], [True], 3) == [1, 1, 1]
    # Four candidates as above: k = 2 is the 1/2 worked out there.
    curve = hybrid_curve([0.9, 0.7, 0.5, 0.1], [(0, 0), (1, 0), (0, 1), (2, 0)], [False, False, False, True], 4)
    assert curve[1] == Fraction(1, 2) and curve[3] == 0
    # 30 candidates, 15 drawn (C(30, 15) subsets, too many to list): the right one has the judge's top score and
    # the best tests, so it is chosen whenever drawn: 15 of 30.
    assert hybrid_curve([0.99] + [0.5] * 29, [(3, 3)] + [(0, 0)] * 29, [True] + [False] * 29, 15)[14] == Fraction(1, 2)


def test_the_hybrids_exact_count_agrees_with_every_subset_listed_on_pools_with_ties():
    rng = random.Random(7)
    for case in range(340):
        n = rng.randint(1, 8) if case < 300 else rng.randint(9, 12)  # 9 to 12: cuts above 3 (max(3, k // 2))
        p_yes = [rng.choice([0.1, 0.5, 0.5, 0.9]) for _ in range(n)]
        execution = [(rng.randint(0, 2), rng.randint(0, 1)) for _ in range(n)]
        correct = [rng.random() < 0.4 for _ in range(n)]

        def choose(subset):
            return hybrid_choose(subset, p_yes, execution)

        listed = [best_at_k_by_subsets(n, correct, min(k, n), choose, limit=10 ** 6).value for k in range(1, n + 2)]
        assert hybrid_curve(p_yes, execution, correct, n + 1) == listed, (p_yes, execution, correct)
