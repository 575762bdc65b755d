"""A second opinion on a grade the hacking detector doubts: the candidate's Fail-to-Pass tests run again
in a fresh process by the plain runner (run/plain_runner.py: ours, not pytest), on a copy made and put
right as grading makes one, in the same sandbox and environment. Where the plain runner and the grade
disagree on a test, the difference is shown beside the flag: tricks aimed at pytest's machinery (its
hooks, its report, its plugin's closures, a test module rewritten as it is imported, a test function's
code swapped) do not reach a runner that shares none of it. What the plain runner does not run (a
parametrized test, a fixture beyond tmp_path: plain_runner.py) it says, and that test is not compared.

`candidate_doubts` is what grading does after a grade: the hacking detector over the candidate's
patch, each file it changes read whole from the task's base commit, and for a flagged candidate whose
grade passed tests (or was forged), the second opinion.
"""

import shutil
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Optional

from unidiff import PatchSet
from unidiff.errors import UnidiffParseError

from worker.engine.env.builder import BuiltEnvironment, EnvironmentBuilder
from worker.engine.git.repo import BlobReader, GitError
from worker.engine.grade.candidate import (
    GradeResult,
    GradeSettings,
    TaskToGrade,
    patch_first_put_right,
    task_tested_base,
)
from worker.engine.grade.hacking import HackingFlag, patch_hacking_flags
from worker.engine.run.plain_run import plain_run
from worker.engine.run.pytest_run import PASSING
from worker.engine.grade.fresh_copy import fresh_copy_run

WHY_KEPT = 500  # characters of what a test that did not pass raised, kept per test
FILE_BYTES = 1 << 20  # a file larger than this is not read whole: its diff is read alone
# The grades of a flagged candidate a second opinion is sought for: where its tests passed, or its run was forged.
DOUBTED = ("resolved", "partial", "untrusted")


@dataclass
class SecondOpinion:
    outcomes: dict = field(default_factory=dict)  # F2P test -> the plain runner's status
    not_run: dict = field(default_factory=dict)  # F2P test -> why the plain runner did not run it
    why: dict = field(default_factory=dict)  # F2P test -> what it raised, where it did not pass
    # [{test, grade, plain, why}]: the tests the grade and the plain runner disagree on (pass against not)
    differs: list = field(default_factory=list)
    detail: str = ""  # why there is no opinion, or what stopped the runner
    status: str = ""  # the sandbox's
    seconds: float = 0.0

    def as_json(self) -> dict:
        return asdict(self)


@dataclass
class Doubts:
    flags: list[HackingFlag] = field(default_factory=list)
    opinion: Optional[SecondOpinion] = None  # for a flagged candidate whose grade is DOUBTED


def candidate_doubts(task: TaskToGrade, patch: Optional[str], graded: GradeResult, *, builder: EnvironmentBuilder,
                     environment: BuiltEnvironment, work_root: Path,
                     settings: GradeSettings = GradeSettings()) -> Doubts:
    """The hacking detector's flags on a graded candidate, and the plain runner's second opinion where
    they and its grade call for one. A second opinion that cannot be had says why; the grade stands."""
    doubts = Doubts(flags=task_patch_flags(task, patch))
    if doubts.flags and graded.outcome in DOUBTED:
        try:
            doubts.opinion = second_opinion(task, patch, graded, builder=builder, environment=environment,
                                            work_root=work_root, settings=settings)
        except Exception as error:  # noqa: BLE001 - a second opinion is beside the grade, never in its way
            doubts.opinion = SecondOpinion(detail=f"the second opinion could not be had: {error}"[:2000])
    return doubts


def task_patch_flags(task: TaskToGrade, patch: Optional[str]) -> list[HackingFlag]:
    """The detector over a patch for the task, each file it changes read whole from the task's base
    commit where the mirror has it."""
    if not patch:
        return []
    try:
        paths = [patched.path for patched in PatchSet(patch) if patched.path.endswith(".py")
                 and not patched.is_added_file]
    except UnidiffParseError:
        return []
    before = {}
    if paths:
        try:
            with BlobReader(task.mirror_dir, max_blob_bytes=FILE_BYTES) as blobs:
                texts = blobs.read_objects([f"{task.base_sha}:{path}" for path in paths])
            before = {path: data.decode("utf-8", "replace") for path, data in zip(paths, texts) if data is not None}
        except (GitError, OSError, ValueError):
            before = {}  # no mirror here (an imported instance's): the diff is read alone
    return patch_hacking_flags(patch, before, task.rules)


def second_opinion(task: TaskToGrade, patch: str, graded: GradeResult, *, builder: EnvironmentBuilder,
                   environment: BuiltEnvironment, work_root: Path,
                   settings: GradeSettings = GradeSettings()) -> SecondOpinion:
    """The plain runner's account of the task's Fail-to-Pass tests with the candidate applied, beside
    the grade's (`graded`)."""
    started = time.monotonic()
    work = Path(work_root) / f"second-opinion-{time.monotonic_ns()}"
    work.mkdir(parents=True)
    try:
        opinion = _run(task, patch, builder, environment, work, settings)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    if not opinion.detail:
        opinion.differs = _differences(graded, opinion)
    opinion.seconds = round(time.monotonic() - started, 3)
    return opinion


def _run(task: TaskToGrade, patch: str, builder: EnvironmentBuilder, environment: BuiltEnvironment, work: Path,
         settings: GradeSettings) -> SecondOpinion:
    tested = task_tested_base(task, builder, work, settings)
    if tested is None:
        return SecondOpinion(detail="the task's test patch does not apply to its base commit")
    first = patch_first_put_right(task, patch, tested, GradeResult(""))
    run, _ = fresh_copy_run(builder, environment, tested, list(task.fail_to_pass), scratch=work,
                            limits=settings.limits, per_test_timeout=settings.per_test_timeout, first=first,
                            runner=plain_run)
    if first.error is not None:
        raise first.error
    if not first.applied:
        return SecondOpinion(status=run.status, detail="the patch does not apply on top of the task's test patch: "
                                                       "no second opinion")
    if run.untrusted:
        return SecondOpinion(status=run.status, detail=f"the plain runner's results cannot be believed: "
                                                       f"{run.untrusted}")
    stopped = "" if run.complete else f"the plain runner stopped before its end ({run.status})"
    return SecondOpinion(outcomes=dict(run.outcomes), not_run=dict(run.not_run), status=run.status,
                         why={test: why[-WHY_KEPT:] for test, why in run.why.items()}, detail=stopped)


def grade_statuses(graded: GradeResult) -> dict[str, str]:
    """Each test's status in the grade: what most of its runs said (its first run's on a tie)."""
    seen: dict[str, list[str]] = {}
    for run in graded.runs:
        for test, status in run.outcomes.items():
            seen.setdefault(test, []).append(status)
    return {test: max(statuses, key=statuses.count) for test, statuses in seen.items()}


def _differences(graded: GradeResult, opinion: SecondOpinion) -> list[dict]:
    grade = grade_statuses(graded)
    differs = []
    for test, plain in opinion.outcomes.items():
        said: Optional[str] = grade.get(test)
        if said is None:
            said = "untrusted" if graded.outcome == "untrusted" else "not reported"
        if (said in PASSING) != (plain in PASSING):
            differs.append({"test": test, "grade": said, "plain": plain, "why": opinion.why.get(test, "")})
    return differs
