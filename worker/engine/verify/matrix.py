"""The execution verifier's matrix: every candidate run against every verifier test, and what it says.

Verifier tests are of two kinds: reproduction tests (written from the issue alone) and regression
tests (at the base commit, passing there). A reproduction test that passes on the base commit
reproduces nothing: it stays in the matrix but does not count. A candidate's execution score is the
pair (regression tests passed, counting reproduction tests passed), compared in that order, as the
paper aggregates it.

Against the ground truth, a test is **distinguishing** when it passes every resolved candidate and
fails at least one unresolved one, and **toxic** when it passes an unresolved candidate while
failing a resolved one.
"""

from dataclasses import dataclass, field
from typing import Hashable

PASSED = "passed"


@dataclass(frozen=True)
class VerifierTest:
    test_id: str
    kind: str  # "reproduction" | "regression"
    passes_on_base: bool = False  # a reproduction test that passes before any fix reproduces nothing

    @property
    def counts(self) -> bool:
        return self.kind == "regression" or not self.passes_on_base


@dataclass
class Matrix:
    tests: list[VerifierTest]
    outcomes: dict = field(default_factory=dict)  # (candidate, test_id) -> outcome ("passed", "failed", ...)

    def passed(self, candidate: Hashable, test_id: str) -> bool:
        return self.outcomes.get((candidate, test_id)) == PASSED


def execution_score(matrix: Matrix, candidate: Hashable) -> tuple[int, int]:
    """(regression tests passed, counting reproduction tests passed)."""
    regression = sum(matrix.passed(candidate, t.test_id) for t in matrix.tests if t.kind == "regression")
    reproduction = sum(matrix.passed(candidate, t.test_id) for t in matrix.tests
                       if t.kind == "reproduction" and t.counts)
    return regression, reproduction


def execution_scalar(scores: list[tuple[int, int]]) -> list[int]:
    """The pairs as numbers that order the same way (regression first), for ranking by a fixed score."""
    width = max((reproduction for _, reproduction in scores), default=0) + 1
    return [regression * width + reproduction for regression, reproduction in scores]


@dataclass(frozen=True)
class VerifierTestVerdict:
    test_id: str
    distinguishing: bool
    toxic: bool
    counts: bool = True  # False: a reproduction test that passes on the base commit, judged as nothing


def verifier_tests_judged(matrix: Matrix, resolved: dict[Hashable, bool]) -> list[VerifierTestVerdict]:
    """Each test against the ground truth of the candidates it ran on (`resolved`: candidate -> bool)."""
    right = [c for c, ok in resolved.items() if ok]
    wrong = [c for c, ok in resolved.items() if not ok]
    verdicts = []
    for test in matrix.tests:
        if not test.counts:
            verdicts.append(VerifierTestVerdict(test.test_id, False, False, counts=False))
            continue
        passes_right = [matrix.passed(c, test.test_id) for c in right]
        passes_wrong = [matrix.passed(c, test.test_id) for c in wrong]
        distinguishing = bool(right) and all(passes_right) and not all(passes_wrong) and bool(wrong)
        toxic = any(passes_wrong) and not all(passes_right)
        verdicts.append(VerifierTestVerdict(test.test_id, distinguishing, toxic))
    return verdicts


def distinguishing_share(verdicts: list[VerifierTestVerdict]) -> float | None:
    """The share of a task's counting verifier tests that distinguish (None without any)."""
    counting = [v for v in verdicts if v.counts]
    return sum(v.distinguishing for v in counting) / len(counting) if counting else None
