"""best@k of every selector over the tasks in scope, with bands, from candidates' ground truth and the
verifiers' scores. Only tasks with an oracle (valid) count, every one of them in the denominator,
candidates or not. Candidates without a ground truth yet are left out and counted."""

from dataclasses import dataclass, field
from fractions import Fraction
from typing import Optional

from django.db.models import QuerySet

from worker.engine.verify.measures import best_at_k_curve, bootstrap_bands, dataset_mean

from .models import Candidate

SELECTORS = ("random", "execution", "judge", "hybrid", "oracle")
DEFAULT_SOURCES = (Candidate.Source.IMPORT, Candidate.Source.SAMPLER)
NOT_YET = "the execution verifier is not built yet"


@dataclass
class Measures:
    tasks: int = 0
    candidates: int = 0
    resolved_candidates: int = 0
    ungraded: int = 0  # candidates in scope with no ground truth yet, left out
    k_max: int = 0
    best_at_k: dict = field(default_factory=dict)  # selector -> [Fraction per k] or None
    bands: dict = field(default_factory=dict)  # selector -> [(low, high) per k]
    skipped: dict = field(default_factory=dict)  # selector or measure -> why it is None

    def as_json(self) -> dict:
        return {"tasks": self.tasks, "candidates": self.candidates, "resolved_candidates": self.resolved_candidates,
                "ungraded": self.ungraded, "k_max": self.k_max,
                "best_at_k": {name: None if curve is None else [float(v) for v in curve]
                              for name, curve in self.best_at_k.items()},
                "bands": {name: [list(band) for band in bands] for name, bands in self.bands.items()},
                "skipped": self.skipped}


@dataclass
class _Pool:
    correct: list = field(default_factory=list)
    scores: dict = field(default_factory=dict)  # selector -> [score per candidate]


def measures_compute(tasks: QuerySet, *, sources=DEFAULT_SOURCES, bands: bool = True) -> Measures:
    pools = _pools(tasks.filter(verdict="valid"), sources)
    measured = Measures(tasks=len(pools))
    measured.candidates = sum(len(pool.correct) for pool in pools.values())
    measured.resolved_candidates = sum(sum(pool.correct) for pool in pools.values())
    measured.ungraded = Candidate.objects.filter(task__in=tasks.filter(verdict="valid"), source__in=sources,
                                                 outcome="").count()
    measured.k_max = max((len(pool.correct) for pool in pools.values()), default=0)
    rankers = {"random": lambda pool: [0] * len(pool.correct),
               "oracle": lambda pool: [int(c) for c in pool.correct]}
    for name in SELECTORS:
        if name in ("execution", "hybrid"):
            measured.best_at_k[name], measured.skipped[name] = None, NOT_YET
            continue
        if name == "judge":
            measured.best_at_k[name], measured.skipped[name] = None, "no judge scores in scope (run the judge)"
            continue
        if not pools or not measured.k_max:
            measured.best_at_k[name], measured.skipped[name] = None, "no graded candidate in scope"
            continue
        per_task = [best_at_k_curve(rankers[name](pool), pool.correct, measured.k_max) for pool in pools.values()]
        measured.best_at_k[name] = dataset_mean(per_task)
        if bands:
            measured.bands[name] = bootstrap_bands([[float(v) for v in row] for row in per_task])
    return measured


def _pools(tasks: QuerySet, sources) -> dict[int, _Pool]:
    pools = {task_id: _Pool() for task_id in tasks.values_list("id", flat=True)}
    rows = Candidate.objects.filter(task__in=tasks, source__in=sources).exclude(outcome="") \
        .order_by("task_id", "id").values_list("task_id", "outcome")
    for task_id, outcome in rows:
        pools[task_id].correct.append(outcome == "resolved")
    return pools


def fraction_text(value: Optional[Fraction]) -> str:
    return "—" if value is None else f"{float(value) * 100:.1f}%"
