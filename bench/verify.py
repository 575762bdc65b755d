"""The measures: how fast best@k is computed exactly.

Goal (issue: the judge and the measures): best@k for 500 tasks x 26 candidates, for every selector that
ranks by a fixed score (random, judge, oracle; execution ranks the same way once it exists), k = 1..26,
in under 0.5 s. Baseline, in the same run: the Codex paper's float pass@k estimator (numpy) over the
same tasks and k, which is the oracle's curve alone, in floats.
"""

import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from _report import report  # noqa: E402

from worker.engine.verify.measures import best_at_k_curve, dataset_mean  # noqa: E402

TASKS, CANDIDATES = 500, 26


def pools(seed: int = 0):
    rng = np.random.default_rng(seed)
    for _ in range(TASKS):
        correct = [bool(c) for c in rng.random(CANDIDATES) < rng.random()]
        judge = [round(float(p), 3) for p in rng.random(CANDIDATES)]  # rounded: ties, as real P(YES) has
        yield correct, judge


def exact(tasks) -> list:
    curves = {"random": [], "judge": [], "oracle": []}
    for correct, judge in tasks:
        curves["random"].append(best_at_k_curve([0] * CANDIDATES, correct, CANDIDATES))
        curves["judge"].append(best_at_k_curve(judge, correct, CANDIDATES))
        curves["oracle"].append(best_at_k_curve([int(c) for c in correct], correct, CANDIDATES))
    return [dataset_mean(rows) for rows in curves.values()]


def estimator(tasks) -> np.ndarray:
    rows = []
    for correct, _ in tasks:
        n, c = CANDIDATES, sum(correct)
        rows.append([1.0 if n - c < k else 1.0 - np.prod(1.0 - k / np.arange(n - c + 1, n + 1))
                     for k in range(1, CANDIDATES + 1)])
    return np.mean(rows, axis=0)


def best_of(runs: int, work, tasks) -> float:
    times = []
    for _ in range(runs):
        started = time.perf_counter()
        work(tasks)
        times.append(time.perf_counter() - started)
    return min(times)


def main() -> None:
    tasks = list(pools())
    oracle_exact = exact(tasks)[2]
    assert np.allclose([float(v) for v in oracle_exact], estimator(tasks))
    report(f"best@k exact, {TASKS} tasks x {CANDIDATES} candidates, 3 selectors, k=1..{CANDIDATES}",
           best_of(3, exact, tasks), "s", best_of(3, estimator, tasks), "s (float pass@k estimator, oracle only)")


if __name__ == "__main__":
    main()
