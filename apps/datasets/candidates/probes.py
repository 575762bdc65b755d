"""The judge's style probe: candidates rewritten to read differently and do the same (engine:
verify/probes.py) become probe candidates; each rewrite is graded, and kept only where it grades as
its candidate did. Per judge model, how far P(YES) moves across a candidate and its rewrites: a
judge whose score moves with formatting is judging style."""

from dataclasses import asdict, dataclass
from statistics import mean
from typing import Optional

from django.db.models import QuerySet
from unidiff import PatchSet
from unidiff.errors import UnidiffParseError

from apps.tasks.models import Task
from apps.tasks.selectors import task_base_sha
from worker.engine.git.repo import GitError
from worker.engine.grade.source_edits import patch_applied
from worker.engine.verify.probes import style_rewrites

from ..verifiers.judging import STYLE_PROBE_MODE
from ..verifiers.measures import DEFAULT_SOURCES, scope_cached, scope_fingerprint
from ..models import Candidate, JudgeScore
from .mutants import TESTS_RAN, files_at_commits

PROBE = Candidate.Source.PROBE
JUDGE_MODE = STYLE_PROBE_MODE  # a rewrite changes the patch alone: the judge is asked about the patch alone
YES_AT = 0.5  # a verdict is YES at this P(YES) or above


def task_style_probes_make(task: Task, *, sources=DEFAULT_SOURCES) -> tuple[int, str]:
    """A probe candidate for each rewrite of each of the task's candidates of `sources` with a patch
    and no probe yet: (how many made, "" or why none could be)."""
    if task.imported:
        return 0, "an imported instance has no mirror to read its files from"
    touched = {candidate: paths for candidate in _unprobed(task, sources) if (paths := _rewritable_paths(candidate))}
    if not touched:
        return 0, ""
    paths = sorted({path for found in touched.values() for path in found})
    try:
        base = {path: texts[0] for path, texts in files_at_commits(task, paths, (task_base_sha(task),)).items()}
    except (GitError, OSError) as error:
        return 0, f"the task's files cannot be read from the mirror ({error})"
    probes = [probe for candidate, found in touched.items()
              for probe in _probes_of(candidate, {path: base[path] for path in found})]
    Candidate.objects.bulk_create(probes)
    return len(probes), ""


def _unprobed(task: Task, sources) -> list[Candidate]:
    probed = {(made or {}).get("of") for made in Candidate.objects.filter(task=task, source=PROBE)
              .values_list("made", flat=True)}
    candidates = Candidate.objects.filter(task=task, source__in=sources, no_patch=False).exclude(source=PROBE) \
        .exclude(patch="").order_by("id")
    return [candidate for candidate in candidates if candidate.id not in probed]


def _rewritable_paths(candidate: Candidate) -> list[str]:
    """The files the candidate's patch changes, when it changes a Python file and a rewrite can carry
    the whole of it; none when it renames, removes or changes a binary file, or names a file twice."""
    try:
        files = list(PatchSet(candidate.patch))
    except UnidiffParseError:
        return []
    paths = [patched.path for patched in files]
    if any(f.is_rename or f.is_removed_file or f.is_binary_file for f in files) or len(set(paths)) != len(paths):
        return []
    return paths if any(path.endswith(".py") for path in paths) else []


def _probes_of(candidate: Candidate, base: dict[str, Optional[str]]) -> list[Candidate]:
    applied = patch_applied(candidate.patch, base)
    if any(text is None for text in applied.values()):  # a hunk that does not match, or a file too large
        return []
    files = {path: (base[path], applied[path]) for path in base}
    return [Candidate(task_id=candidate.task_id, source=PROBE, kind=rewrite.kind, patch=rewrite.patch,
                      made={"of": candidate.id, "rewrite": rewrite.kind, "files": rewrite.files})
            for rewrite in style_rewrites(candidate.patch, files)]


def style_probe_candidates(tasks, *, sources=DEFAULT_SOURCES) -> QuerySet:
    """The probes of the tasks made from candidates of `sources`, and those candidates: what the probe
    grades and judges."""
    originals = set(Candidate.objects.filter(task__in=tasks, source__in=sources).exclude(source=PROBE)
                    .values_list("id", flat=True))
    probes = [(probe_id, (made or {}).get("of")) for probe_id, made in Candidate.objects.filter(
        task__in=tasks, source=PROBE).values_list("id", "made")]
    ids = {i for probe_id, of in probes if of in originals for i in (probe_id, of)}
    return Candidate.objects.filter(id__in=ids)


@dataclass
class JudgeStyleFigures:
    model: str
    prompt_version: int
    originals: int  # candidates it scored with at least one rewrite that grades the same, scored too
    rewrites: int  # those rewrites
    mean_spread: float  # of P(YES): the largest less the smallest over a candidate and its rewrites
    max_spread: float
    mean_shift_by_kind: dict  # rewrite kind -> mean |P(rewrite) - P(candidate)|
    flip_share: float  # share of the candidates whose verdict (YES at YES_AT) differs from a rewrite's

    def shifts_in_words(self) -> list[tuple[str, float]]:
        return [(kind.replace("_", " "), shift) for kind, shift in self.mean_shift_by_kind.items()]


@dataclass
class StyleProbe:
    rewrites_kept: int  # graded as their candidate did
    graded_differently: int  # left out: a rewrite that grades otherwise changed what the candidate does
    ungraded: int  # rewrites (of graded candidates) without a ground truth yet
    judges: list  # JudgeStyleFigures per judge model and prompt version with scores in JUDGE_MODE

    def as_json(self) -> dict:
        return {"rewrites_kept": self.rewrites_kept, "graded_differently": self.graded_differently,
                "ungraded": self.ungraded, "judges": [asdict(judge) for judge in self.judges]}


def style_probe(tasks: QuerySet, *, sources=DEFAULT_SOURCES,
                fingerprint: Optional[list] = None) -> Optional[StyleProbe]:
    """The style probe's figures over the valid tasks in scope; None until a rewrite of a graded
    candidate has a ground truth."""
    figures = scope_cached(fingerprint or scope_fingerprint(tasks), lambda: style_probe_compute(tasks, sources=sources),
                           "style_probe", sorted(map(str, sources)))
    return figures if figures.rewrites_kept or figures.graded_differently else None


def style_probe_compute(tasks: QuerySet, *, sources=DEFAULT_SOURCES) -> StyleProbe:
    valid = tasks.filter(verdict="valid")
    outcomes = dict(Candidate.objects.filter(task__in=valid, source__in=sources, outcome__in=TESTS_RAN)
                    .exclude(source=PROBE).values_list("id", "outcome"))
    kept, differently, ungraded = [], 0, 0  # kept: (candidate id, rewrite id, rewrite kind)
    for rewrite_id, kind, outcome, made in Candidate.objects.filter(task__in=valid, source=PROBE).values_list(
            "id", "kind", "outcome", "made"):
        of = (made or {}).get("of")
        if of not in outcomes:
            continue
        if not outcome:
            ungraded += 1
        elif outcome == outcomes[of]:
            kept.append((of, rewrite_id, kind))
        else:
            differently += 1
    judges = [figures for (model, version), scores in sorted(_scores_by_judge(kept).items())
              if (figures := _judge_figures(model, version, scores, kept))]
    return StyleProbe(len(kept), differently, ungraded, judges)


def _scores_by_judge(kept: list) -> dict[tuple[str, int], dict[int, float]]:
    """(model, prompt version) -> {candidate id: P(YES)} over the kept rewrites and their candidates."""
    wanted = {i for of, rewrite_id, _ in kept for i in (of, rewrite_id)}
    scores: dict = {}
    for candidate_id, model, version, p_yes in JudgeScore.objects.filter(
            candidate_id__in=wanted, mode=JUDGE_MODE).values_list("candidate_id", "model", "prompt_version", "p_yes"):
        scores.setdefault((model, version), {})[candidate_id] = p_yes
    return scores


def _judge_figures(model: str, version: int, scores: dict[int, float], kept: list) -> Optional[JudgeStyleFigures]:
    rewrites: dict = {}  # candidate id -> [(kind, P(YES))] of its kept rewrites, where both are scored
    for of, rewrite_id, kind in kept:
        if of in scores and rewrite_id in scores:
            rewrites.setdefault(of, []).append((kind, scores[rewrite_id]))
    if not rewrites:
        return None
    spreads, shifts, flips = [], {}, 0
    for of, scored in rewrites.items():
        values = [scores[of], *(p_yes for _, p_yes in scored)]
        spreads.append(max(values) - min(values))
        flips += len({p_yes >= YES_AT for p_yes in values}) > 1
        for kind, p_yes in scored:
            shifts.setdefault(kind, []).append(abs(p_yes - scores[of]))
    return JudgeStyleFigures(model, version, len(rewrites), sum(map(len, rewrites.values())), mean(spreads),
                             max(spreads), {kind: mean(shifts[kind]) for kind in sorted(shifts)}, flips / len(rewrites))
