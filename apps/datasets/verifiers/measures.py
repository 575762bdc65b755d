"""best@k of every selector over the tasks in scope, with bands, from candidates' ground truth and the
verifiers' scores. Only tasks with an oracle (valid) count, every one of them in the denominator,
candidates or not. Candidates without a ground truth yet are left out and counted."""

import hashlib
import json
import threading
from dataclasses import asdict, dataclass, field
from fractions import Fraction
from typing import Callable, Optional

from django.core.cache import cache
from django.db.models import Count, Max, Q, QuerySet, Sum

from apps.charts import Series, line_chart
from worker.engine.llm.clients import ModelError
from worker.engine.verify.hybrid import complementarity, hybrid_curve
from worker.engine.verify.matrix import distinguishing_share, execution_scalar, execution_score, verifier_tests_judged
from worker.engine.verify.measures import best_at_k_over_tasks, bootstrap_bands, calibration

from .judging import judge_identity
from .matrices import task_matrices
from ..models import COUNTS_RESOLVED, RESOLVED, Candidate, Execution, JudgeScore, MeasuresSnapshot

SELECTORS = ("random", "execution", "judge", "hybrid", "oracle")
DEFAULT_SOURCES = Candidate.AGENTS
NO_PATCH = "no_patch"  # named among the sources: predictions without a patch join the pools


@dataclass
class Measures:
    tasks: int = 0
    candidates: int = 0
    resolved_candidates: int = 0
    ungraded: int = 0  # candidates in scope with no ground truth yet, left out
    no_patch: int = 0  # predictions without a patch, counted beside the pools (no selector chooses one)
    k_max: int = 0
    best_at_k: dict = field(default_factory=dict)  # selector -> [Fraction per k] or None
    bands: dict = field(default_factory=dict)  # selector -> [(low, high) per k]
    skipped: dict = field(default_factory=dict)  # selector or measure -> why it is None
    judge: dict = field(default_factory=dict)  # mode, model, brier, ece, uncertain, unscored, calibration
    # tasks, tests, unrun, distinguishing_share (over distinguishing_tasks: those with a right and a wrong
    # candidate run), toxic (VerifierTest ids)
    execution: dict = field(default_factory=dict)
    complementarity: Optional[dict] = None  # tasks, execution_wrong, judge_wrong, both_wrong, overlap
    tasks_with_candidates: int = 0  # of `tasks`, those with a graded candidate in scope
    # selector -> the tasks with candidates where it has a score for each candidate (elsewhere it picks at random)
    scored_tasks: dict = field(default_factory=dict)

    def as_json(self) -> dict:
        return {"tasks": self.tasks, "candidates": self.candidates, "resolved_candidates": self.resolved_candidates,
                "ungraded": self.ungraded, "no_patch": self.no_patch, "k_max": self.k_max,
                "best_at_k": {name: None if curve is None else [float(v) for v in curve]
                              for name, curve in self.best_at_k.items()},
                "bands": {name: [list(band) for band in bands] for name, bands in self.bands.items()},
                "skipped": self.skipped,
                "judge": {key: self.judge.get(key) for key in ("mode", "model", "brier", "ece", "uncertain",
                                                              "unscored")},
                "distinguishing_share": self.execution.get("distinguishing_share"),
                "toxic_tests": None if "toxic" not in self.execution else len(self.execution["toxic"]),
                "complementarity": self.complementarity, "tasks_with_candidates": self.tasks_with_candidates,
                "scored_tasks": self.scored_tasks}


@dataclass
class _Pool:
    correct: list = field(default_factory=list)
    ids: list = field(default_factory=list)  # the candidates', in the same order


UNSCORED = -1.0  # a candidate the judge has not scored ranks below every scored one
UNRUN = (-1, -1)  # a candidate not run against the verifier tests ranks below every one that was


def measures_compute(tasks: QuerySet, *, sources=DEFAULT_SOURCES, judge_mode: Optional[str] = None,
                     execution: bool = True, bands: bool = True, correct: Optional[dict[int, bool]] = None) -> Measures:
    """best@k per selector; with `judge_mode`, the judge ranks by its scores in that mode (from the
    judge model and prompt in use) and its calibration is measured; with `execution`, the candidates'
    runs against their task's verifier tests rank them too. `correct` puts another truth (people's
    final labels, by candidate id) in place of the hidden tests' where it has one."""
    valid = tasks.filter(verdict="valid")
    pools = _pools(valid, sources, correct or {})
    measured = Measures(tasks=len(pools))
    judge_scores = _judge_scores(valid, sources, pools, judge_mode, measured) if judge_mode else {}
    measured.candidates = sum(len(pool.correct) for pool in pools.values())
    measured.resolved_candidates = sum(sum(pool.correct) for pool in pools.values())
    measured.ungraded = Candidate.objects.filter(task__in=valid, source__in=sources, outcome="").count()
    if NO_PATCH not in sources:
        measured.no_patch = (Candidate.objects.filter(task__in=valid, source__in=sources, no_patch=True)
                             .exclude(outcome="").count())  # an ungraded one is counted as ungraded
    measured.k_max = max((len(pool.correct) for pool in pools.values()), default=0)
    matrices = task_matrices(pools) if execution else {}
    executed = _execution_scores(matrices, pools, measured)
    rankers = {"random": lambda pool: [0] * len(pool.correct),
               "oracle": lambda pool: [int(c) for c in pool.correct],
               "judge": lambda pool: [judge_scores.get(i, UNSCORED) for i in pool.ids],
               "execution": lambda pool: execution_scalar([executed.get(i, UNRUN) for i in pool.ids])}
    curves = {}  # selector -> per task, its curve in floats (for the bands)
    for name in SELECTORS:
        why = _why_not(name, pools, measured, judge_scores, executed)
        if why:
            measured.best_at_k[name] = None
            measured.skipped.setdefault(name, why)
        elif name == "hybrid":
            measured.best_at_k[name], curves[name] = _hybrid(pools, judge_scores, executed, measured)
        else:
            measured.best_at_k[name], curves[name] = best_at_k_over_tasks(
                [(rankers[name](pool), pool.correct) for pool in pools.values()], measured.k_max)
    _what_each_gets_wrong(matrices, pools, judge_scores, executed, measured)
    _scored_tasks(pools, judge_scores, executed, measured)
    if bands:
        measured.bands = bootstrap_bands(curves)
    return measured


def _why_not(name: str, pools: dict, measured: Measures, judge_scores: dict, execution: dict) -> str:
    """Why a selector's curve cannot be drawn ("" when it can)."""
    if name in ("judge", "hybrid") and not judge_scores:
        return measured.skipped.get("judge", "no judge score in scope")
    if name in ("execution", "hybrid") and not execution:
        return "no candidate in scope has run against verifier tests"
    if not pools or not measured.k_max:
        return "no graded candidate in scope"
    return ""


def _scored_tasks(pools: dict, judge_scores: dict, execution: dict, measured: Measures) -> None:
    """How many of the tasks with candidates each selector scores: has a score for each candidate."""
    with_candidates = [pool.ids for pool in pools.values() if pool.ids]
    judged = sum(all(i in judge_scores for i in ids) for ids in with_candidates)
    executed = sum(all(i in execution for i in ids) for ids in with_candidates)
    both = sum(all(i in judge_scores and i in execution for i in ids) for ids in with_candidates)
    measured.tasks_with_candidates = len(with_candidates)
    measured.scored_tasks = {"random": len(with_candidates), "execution": executed, "judge": judged, "hybrid": both,
                             "oracle": len(with_candidates)}
    if measured.judge:
        measured.judge["scored_tasks"] = judged


def _execution_scores(matrices: dict, pools: dict, measured: Measures) -> dict[int, tuple[int, int]]:
    """{candidate id: (regression passes, counting reproduction passes)} of the candidates in scope
    that ran against their task's current verifier tests."""
    scores = {}
    for task_id, entry in matrices.items():
        for candidate_id in pools[task_id].ids:
            if candidate_id in entry.executions:
                scores[candidate_id] = execution_score(entry.matrix, candidate_id)
    in_scope = sum(len(pool.ids) for pool in pools.values())
    measured.execution = {"tasks": len(matrices), "tests": sum(len(e.tests) for e in matrices.values()),
                          "unrun": in_scope - len(scores)}
    return scores


def _hybrid(pools: dict, judge_scores: dict, execution: dict, measured: Measures) -> tuple[list, list]:
    """The hybrid's curve, exactly (each task's from worker/engine/verify/hybrid.py), and each task's."""
    per_task = [hybrid_curve([judge_scores.get(i, UNSCORED) for i in pool.ids],
                             [execution.get(i, UNRUN) for i in pool.ids], pool.correct, measured.k_max)
                for pool in pools.values()]
    curve = [sum(values, Fraction(0)) / len(per_task) for values in zip(*per_task)]
    return curve, [[float(v) for v in values] for values in per_task]


def _what_each_gets_wrong(matrices: dict, pools: dict, judge_scores: dict, execution: dict,
                          measured: Measures) -> None:
    """Per verifier test, distinguishing or toxic against the ground truth; and complementarity: per
    task, whether each verifier's top candidate is wrong, and how often both are."""
    shares, toxic = [], []
    for task_id, entry in matrices.items():
        resolved = {i: c for i, c in zip(pools[task_id].ids, pools[task_id].correct) if i in entry.executions}
        verdicts = verifier_tests_judged(entry.matrix, resolved)
        toxic += [test.id for test, verdict in zip(entry.tests, verdicts) if verdict.toxic]
        if len(set(resolved.values())) == 2:  # a test can distinguish only where some are right and some wrong
            share = distinguishing_share(verdicts)
            shares += [] if share is None else [share]
    if matrices:
        measured.execution.update(distinguishing_share=sum(shares) / len(shares) if shares else None, toxic=toxic,
                                  distinguishing_tasks=len(shares))
    else:
        no_tests = "no task in scope has verifier tests"
        measured.skipped["distinguishing_share"] = measured.skipped["toxic_tests"] = no_tests
    if not (judge_scores and execution):
        measured.skipped["complementarity"] = "it needs both verifiers' scores"
        return
    # Only the tasks both verifiers have looked at: elsewhere a "top pick" would be a tie of unscored candidates.
    found = complementarity([(execution_scalar([execution.get(i, UNRUN) for i in pool.ids]),
                              [judge_scores.get(i, UNSCORED) for i in pool.ids], pool.correct)
                             for pool in pools.values()
                             if any(i in execution for i in pool.ids) and any(i in judge_scores for i in pool.ids)])
    measured.complementarity = {"tasks": found.tasks, "execution_wrong": float(found.execution_wrong),
                                "judge_wrong": float(found.judge_wrong), "both_wrong": float(found.both_wrong),
                                "overlap": None if found.overlap is None else float(found.overlap)}


CACHE_SECONDS = 24 * 3600
MEASURES_SHAPE = 4  # in the cache key: Measures kept in an older shape are not read back


def scope_fingerprint(tasks: QuerySet) -> list:
    """What can change figures over these tasks: the tasks, their candidates (how many, the newest,
    which are resolved, which are flagged and which a curator has looked at, when a ground truth last
    came), the newest judge score and the newest run against verifier tests. A new grade, report,
    candidate, score, run or word on a flag changes it, so a page never shows stale figures."""
    return [tasks.order_by().aggregate(n=Count("id"), ids=Sum("id"), valid=Sum("id", filter=Q(verdict="valid"))),
            Candidate.objects.filter(task__in=tasks).order_by().aggregate(
                n=Count("id"), top=Max("id"), graded=Count("id", filter=~Q(outcome="")),
                resolved=Sum("id", filter=RESOLVED), suspicious=Sum("id", filter=Q(suspicious=True)),
                reviewed=Sum("id", filter=~Q(hacking_review="")), last=Max("graded_at")),
            JudgeScore.objects.aggregate(top=Max("id")),
            Execution.objects.filter(job__state=Execution.State.SUCCEEDED).aggregate(
                n=Count("id"), last=Max("job__finished_at"))]


def scope_key(fingerprint: list, *key) -> str:
    """A cache key for what is computed from a scope with this fingerprint (and `key`)."""
    return "scope:" + hashlib.sha256(json.dumps([key, fingerprint], sort_keys=True, default=str).encode()).hexdigest()


def scope_cached(fingerprint: list, compute: Callable[[], object], *key) -> object:
    """What `compute` gives, kept in the cache under `key` and the scope's fingerprint. Requests that
    miss together in one process wait for the first one's result rather than each computing it."""
    name = scope_key(fingerprint, *key)
    found = cache.get(name, _MISSING)
    if found is not _MISSING:
        return found
    with _computing_lock:
        lock = _computing.setdefault(name, threading.Lock())
    try:
        with lock:
            found = cache.get(name, _MISSING)
            if found is _MISSING:
                found = compute()
                cache.set(name, found, CACHE_SECONDS)
    finally:
        with _computing_lock:
            _computing.pop(name, None)
    return found


_MISSING = object()  # a value computed may be None: kept all the same
_computing: dict[str, threading.Lock] = {}
_computing_lock = threading.Lock()


def measures_cached(tasks: QuerySet, *, sources=DEFAULT_SOURCES, judge_mode: Optional[str] = None,
                    fingerprint: Optional[list] = None) -> Measures:
    try:
        judge = list(judge_identity()) if judge_mode else None
    except ModelError as error:
        judge = str(error)
    return scope_cached(fingerprint or scope_fingerprint(tasks),
                        lambda: measures_compute(tasks, sources=sources, judge_mode=judge_mode),
                        "measures", MEASURES_SHAPE, sorted(map(str, sources)), judge_mode, judge)


def _pools(tasks: QuerySet, sources, correct: dict[int, bool]) -> dict[int, _Pool]:
    """Each task's graded candidates of the sources; a prediction without a patch only when the sources
    name `no_patch` (every real selector passes over an empty patch)."""
    pools = {task_id: _Pool() for task_id in tasks.values_list("id", flat=True)}
    rows = Candidate.objects.filter(task__in=tasks, source__in=sources).exclude(outcome="")
    if NO_PATCH not in sources:
        rows = rows.exclude(no_patch=True)
    rows = rows \
        .annotate(counted=COUNTS_RESOLVED).order_by("task_id", "id").values_list("task_id", "id", "counted")
    for task_id, candidate_id, counted in rows:
        pools[task_id].correct.append(correct.get(candidate_id, counted))
        pools[task_id].ids.append(candidate_id)
    return pools


def _judge_scores(tasks: QuerySet, sources, pools: dict, mode: str, measured: Measures) -> dict[int, float]:
    """{candidate id: P(YES)} in `mode` from the judge in use; the judge's line (calibration, how many
    scores are uncertain or missing) goes on `measured`."""
    try:
        model, version = judge_identity()
    except ModelError as error:
        measured.skipped["judge"] = f"the judge model cannot be used: {error}"
        return {}
    rows = JudgeScore.objects.filter(candidate__task__in=tasks, candidate__source__in=sources, mode=mode, model=model,
                                     prompt_version=version).exclude(candidate__outcome="") \
        .values_list("candidate_id", "p_yes", "uncertain")
    correct = {i: c for pool in pools.values() for i, c in zip(pool.ids, pool.correct)}
    rows = [row for row in rows if row[0] in correct]  # graded meanwhile: not in the pools read
    scores = {candidate_id: p for candidate_id, p, _ in rows}
    fit = calibration([scores[i] for i in scores], [correct[i] for i in scores])
    measured.judge = {"mode": mode, "model": model, "prompt_version": version, "brier": fit.brier, "ece": fit.ece,
                      "uncertain": sum(uncertain for _, _, uncertain in rows), "unscored": len(correct) - len(scores),
                      "scored_candidates": len(scores), "calibration": [asdict(b) for b in fit.bins]}
    if not scores:
        measured.skipped["judge"] = f"no candidate in scope has a judge score in mode {mode!r}"
    return scores


# A selector scores a task when it has a score for each of the task's candidates; on a task it does not score,
# it picks at random. Scoring fewer than half the tasks with candidates, its curve says more about the random
# selector than about it: it is left out of the chart, its numbers greyed in the table.
MIN_SCORED_SHARE = 0.5
# A calibration bin of fewer candidates than this says little: with 4, one candidate moves its share
# resolved by 0.25. Such a bin is drawn hollow and off the line, with its count beside it like every bin's.
MIN_BIN_CANDIDATES = 5


@dataclass
class MeasuresPage:
    measured: Measures
    best_at_k_chart: str
    columns: list  # [(selector, why it is greyed or "")]: the selectors with a curve
    best_at_k_rows: list  # [(k, [(value, greyed) per column])]
    shown: list  # the selectors drawn in the chart
    scored: list  # [(selector, tasks it scores, why it is greyed or "")]: those that need scores
    calibration_chart: str = ""
    calibration_thin: str = ""  # why the judge's calibration speaks for too few tasks, or ""
    min_bin_candidates: int = MIN_BIN_CANDIDATES


def measures_page(measured: Measures) -> MeasuresPage:
    """The charts and tables of a dataset page's measures."""
    curves = [name for name in SELECTORS if measured.best_at_k.get(name) is not None]
    thin = {name: _too_few_scored(measured, name) for name in curves}
    shown = [name for name in curves if not thin[name]]
    ks = list(range(1, measured.k_max + 1))
    series = [Series(name, [(k, float(v)) for k, v in zip(ks, measured.best_at_k[name])],
                     band=measured.bands.get(name, []), style=SELECTORS.index(name)) for name in shown]
    chart = line_chart(series, x_label="k (candidates drawn)", y_label="best@k", x_range=(1, max(ks, default=1)),
                       title="best@k per selector, with 95% bootstrap bands") if shown else ""
    rows = [(k, [(float(measured.best_at_k[name][k - 1]), bool(thin[name])) for name in curves]) for k in ks]
    scored = [(name, measured.scored_tasks[name], thin.get(name, "")) for name in ("execution", "judge", "hybrid")
              if name in measured.scored_tasks]
    page = MeasuresPage(measured, chart, [(name, thin[name]) for name in curves], rows, shown, scored)
    bins = [b for b in measured.judge.get("calibration", []) if b["count"]]
    if bins:
        page.calibration_chart = line_chart(
            [Series("judge", [(b["mean_predicted"], b["observed"]) for b in bins],
                    notes=[str(b["count"]) for b in bins], faint=[b["count"] < MIN_BIN_CANDIDATES for b in bins],
                    style=SELECTORS.index("judge"))],
            x_label="P(YES)", y_label="share resolved", x_range=(0, 1), diagonal=True,
            title="The judge's reliability diagram (beside each point: its bin's candidates)")
        page.calibration_thin = _too_few_scored(measured, "judge")
    return page


def _too_few_scored(measured: Measures, name: str) -> str:
    """Why a selector's figures are greyed ("" when they are not): it scores too few of the tasks."""
    of = measured.tasks_with_candidates
    scored = measured.scored_tasks.get(name, of)
    if not of or scored >= MIN_SCORED_SHARE * of:
        return ""
    return (f"scored on {scored} of the {of} tasks with candidates, it picks at random on the rest: too few "
            f"(under {MIN_SCORED_SHARE:.0%}) to speak for the dataset")


@dataclass
class SelfAssessmentProbe:
    candidates: int  # scored in both modes
    mean_shift: float  # mean P(YES) with the agent's claims minus without them
    best_at_k_max: dict  # mode -> the judge's best@k_max over the scope


def self_assessment_probe(tasks: QuerySet, *, sources=DEFAULT_SOURCES,
                          fingerprint: Optional[list] = None) -> Optional[SelfAssessmentProbe]:
    """The same candidates judged with the agent's trajectory and with its claims of success left out:
    how far P(YES) moves, and the judge's best@k_max each way. None until both modes have scores."""
    try:
        model, version = judge_identity()
    except ModelError:
        return None
    rows = JudgeScore.objects.filter(candidate__task__in=tasks.filter(verdict="valid"), candidate__source__in=sources,
                                     model=model, prompt_version=version,
                                     mode__in=("trajectory", "no-self-assessment")).values_list(
        "candidate_id", "mode", "p_yes")
    by_candidate: dict = {}
    for candidate_id, mode, p in rows:
        by_candidate.setdefault(candidate_id, {})[mode] = p
    pairs = [(s["trajectory"], s["no-self-assessment"]) for s in by_candidate.values() if len(s) == 2]
    if not pairs:
        return None
    best = {}
    for mode in ("trajectory", "no-self-assessment"):
        curve = measures_cached(tasks, sources=sources, judge_mode=mode, fingerprint=fingerprint).best_at_k.get("judge")
        best[mode] = float(curve[-1]) if curve else None
    return SelfAssessmentProbe(len(pairs), sum(a - b for a, b in pairs) / len(pairs), best)


def measures_snapshot_keep(line: dict, *, scope: str, dataset=None) -> MeasuresSnapshot:
    """Keep what verify printed, for the figures over time."""
    judge = line.get("judge") or {}
    return MeasuresSnapshot.objects.create(dataset=dataset, scope=scope[:255], judge_mode=judge.get("mode") or "",
                                           judge_model=(judge.get("model") or "")[:255], line=line)


@dataclass
class OverlapOverTime:
    chart: str
    rows: list  # [(snapshot, its complementarity)], oldest first


SNAPSHOTS_SHOWN = 50  # of a dataset's, on its page
SNAPSHOTS_READ = 1000  # of every dataset's, for the dashboard


def overlap_over_time(dataset, judge_mode: str = "patch") -> Optional[OverlapOverTime]:
    """The verifiers' overlap (of the tasks where either top pick is wrong, the share where both are) at
    each verify run over the dataset with the judge in `judge_mode` and the default sources, oldest
    first; None before two runs measured it."""
    snapshots = [snapshot for snapshot in reversed(list(_comparable(dataset.snapshots.all(), judge_mode)
                                                        [:SNAPSHOTS_SHOWN]))
                 if (snapshot.line.get("complementarity") or {}).get("overlap") is not None]
    if len(snapshots) < 2:
        return None
    points = [(number, snapshot.line["complementarity"]["overlap"]) for number, snapshot in enumerate(snapshots, 1)]
    chart = line_chart([Series("overlap", points)], x_label="verify run", y_label="both wrong / either wrong",
                       x_range=(1, len(points)), title="The verifiers' overlap over time")
    return OverlapOverTime(chart, [(snapshot, snapshot.line["complementarity"]) for snapshot in snapshots])


def _comparable(snapshots: QuerySet, judge_mode: str) -> QuerySet:
    """The runs that measured the same thing: this judge mode, the default sources."""
    return snapshots.filter(judge_mode=judge_mode, line__sources=sorted(DEFAULT_SOURCES))


@dataclass
class OverlapRow:
    dataset: object
    latest: dict  # the newest run's complementarity
    runs: int  # verify runs over the dataset that measured it
    first_overlap: Optional[float]  # the oldest of those runs' overlap, to compare with


def verifier_overlaps(datasets) -> list[OverlapRow]:
    """Per dataset whose verify runs (judge mode `patch`, the default sources) measured complementarity:
    the newest overlap and the first of the runs read."""
    found = {}
    newest = _comparable(MeasuresSnapshot.objects.filter(dataset__in=datasets), "patch").exclude(
        line__complementarity=None).order_by("-created_at", "-id").values("id")[:SNAPSHOTS_READ]
    for snapshot in MeasuresSnapshot.objects.filter(id__in=newest).select_related("dataset").order_by("created_at",
                                                                                                      "id"):
        complementarity = snapshot.line["complementarity"]
        row = found.setdefault(snapshot.dataset_id, OverlapRow(snapshot.dataset, complementarity, 0,
                                                               complementarity.get("overlap")))
        row.latest, row.runs = complementarity, row.runs + 1
    return sorted(found.values(), key=lambda row: row.dataset.name)
