"""Agreement statistics over many labels, for 20,000 labels by 50 annotators (two labels a candidate, a
tenth of them "can't tell"): Krippendorff's alpha against the `krippendorff` package's on the same
labels in the same run (goal: at most 3x), and all three figures (Cohen's kappa of every pair of
annotators, Fleiss' kappa, alpha) against the same (goal: under 1 s).
"""

import random
import statistics
import sys
import time
from pathlib import Path

import krippendorff
import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from _report import report  # noqa: E402

from worker.engine.label.agreement import Judgement, cohens_kappas, fleiss_kappa, krippendorff_alpha  # noqa: E402

LABELS, ANNOTATORS, OVERLAP = 20_000, 50, 2
ANSWERS = ("correct", "incorrect", "can't tell")


def labels(seed: int = 3) -> list[Judgement]:
    rng = random.Random(seed)
    judgements = []
    for item in range(LABELS // OVERLAP):
        truth = rng.choice(ANSWERS[:2])
        for person in rng.sample(range(ANNOTATORS), OVERLAP):
            answer = ANSWERS[2] if rng.random() < 0.1 else truth if rng.random() < 0.8 else rng.choice(ANSWERS[:2])
            judgements.append(Judgement(item, person, answer))
    return judgements


def ours(judgements: list[Judgement], *, alpha_only: bool = False) -> float:
    started = time.perf_counter()
    if not alpha_only:
        cohens_kappas(judgements)
        fleiss_kappa(judgements, raters=OVERLAP)
    krippendorff_alpha(judgements, missing={ANSWERS[2]})
    return time.perf_counter() - started


def package_alpha(judgements: list[Judgement]) -> float:
    """The package's alpha alone, from its reliability matrix (annotators x items, NaN where missing)."""
    started = time.perf_counter()
    matrix = np.full((ANNOTATORS, LABELS // OVERLAP), np.nan)
    for judgement in judgements:
        if judgement.answer != ANSWERS[2]:
            matrix[judgement.person, judgement.item] = ANSWERS.index(judgement.answer)
    krippendorff.alpha(reliability_data=matrix, level_of_measurement="nominal")
    return time.perf_counter() - started


def main() -> None:
    judgements = labels()
    alpha_seconds, all_seconds, package_seconds = [], [], []
    for _ in range(5):  # in turn, so all see the same machine
        alpha_seconds.append(ours(judgements, alpha_only=True))
        all_seconds.append(ours(judgements))
        package_seconds.append(package_alpha(judgements))
    package = statistics.median(package_seconds)
    report("label.krippendorff_alpha_20000_labels", statistics.median(alpha_seconds), "s", package,
           "s by the krippendorff package")
    ours_median = statistics.median(all_seconds)
    report("label.agreement_20000_labels_50_annotators", ours_median, "s", package, "s by the krippendorff package")
    print(f"label.agreement_20000_labels_50_annotators.goal: under 1 s: {'met' if ours_median < 1 else 'NOT met'}",
          flush=True)


if __name__ == "__main__":
    main()
