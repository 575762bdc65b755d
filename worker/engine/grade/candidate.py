"""A candidate patch's ground truth: does it resolve the task by the task's hidden tests?

The candidate is applied (inside the sandbox: the patch is anyone's) to a fresh copy of the task's
base commit with the task's test patch applied: that base is made once per task and kept by the
worker (`GradeSettings.bases`), as what is graded never sees it, only a copy. The candidate is
applied in the sandbox its tests then run in, before they start (run/patch_first.py). What it
changed is found by comparing the copy with the base, file by file, links never followed, while
nothing runs in the sandbox: whatever `git apply` did (renames, modes, links) is seen. Its changes to test
configuration and interpreter start-up files (PROTECTED_NAMES, `.pth` files, the pytest sections
of setup.cfg and pyproject.toml, package metadata that could declare a pytest plugin) and any link
it made are put back as they were (`tampering`); its changes to the test files that were there
(the task's test patch's, and every file the repository's rules call a test) give way to the task's
versions (`touches_tests`: an agent adding tests of its own is no cheat). A candidate that applies to the
base alone but not on top of the test patch (it edits the same lines) is applied to the base,
put right the same way, and the test patch applied after. Then the task's F2P and P2P test files
run in the task's environment, once, or several times for a task whose tests were ever flaky.
Outcomes come only from runs whose report is trusted (grade/oracle.py: run_outcome).
"""

import hashlib
import importlib.machinery
import os
import re
import shutil
import time
import tomllib
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Optional

import iniconfig
from unidiff import PatchSet
from unidiff.errors import UnidiffParseError

from worker.engine.env.builder import BuiltEnvironment, EnvironmentBuilder
from worker.engine.git.archive import archive_unpacked
from worker.engine.git.working_copy import (
    PATCH_FILE,
    TreeTooDeep,
    patch_apply,
    paths_changed,
    tree_remove,
    tree_state,
    working_copy_clone,
    working_copy_write,
)
from worker.engine.grade.fresh_copy import fresh_copy_run
from worker.engine.grade.oracle import graded_files, run_outcome, runs_outcome
from worker.engine.run.patch_first import PatchFirst
from worker.engine.run.pytest_run import TestRun
from worker.engine.sandbox.base import Limits, hand_over
from worker.engine.test_files import TestFileRules

# Names are matched in lower case: importlib.metadata and pkg_resources find package metadata so, and
# a name put back that needs no putting back costs nothing.
# Files whose changes decide how pytest runs or what Python does at start-up, wherever they are.
PROTECTED_NAMES = frozenset({"conftest.py", "pytest.ini", ".pytest.ini", "pytest.toml", ".pytest.toml",
                             "sitecustomize.py", "usercustomize.py"})
# What Python imports with no source to read (a patch shows them as binary blobs): bytecode and
# extension modules, by this interpreter's suffixes and those of the others environments run (.pyo:
# Python 2's and up to 3.4's optimised bytecode; .pyd: extension modules on Windows).
COMPILED_SUFFIXES = tuple(sorted({*importlib.machinery.BYTECODE_SUFFIXES, *importlib.machinery.EXTENSION_SUFFIXES,
                                  ".pyo", ".pyd"}))
PROTECTED_SUFFIXES = (".pth", ".egg-link", *COMPILED_SUFFIXES)
# Folders whose files declare what a package provides (a pytest11 entry point loads a plugin; an .egg
# holds its metadata in EGG-INFO), and Python's bytecode caches, loaded in place of their sources.
PROTECTED_FOLDER_SUFFIXES = (".dist-info", ".egg-info", ".egg")
PROTECTED_FOLDERS = frozenset({"__pycache__"})
CONFIG_BYTES = 1 << 20  # a setup.cfg, tox.ini or pyproject.toml larger than this is not parsed: any change to it counts
BINARY_BYTES = 64 << 20  # what a patch's binary hunks may write, at most (they are compressed in the patch)
# Files protected only in their pytest sections: a fix may change the rest (a dependency, say).
PYTEST_SECTION_FILES = ("setup.cfg", "tox.ini", "pyproject.toml")
BASE_IDLE_SECONDS = 24 * 3600
OUTPUT_KEPT = 2000  # characters of `git apply`'s output kept when a patch does not apply


@dataclass(frozen=True)
class TaskToGrade:
    mirror_dir: Path
    base_sha: str  # the commit the candidate is applied to (a mined task's parent, an instance's base)
    test_patch: str
    fail_to_pass: tuple[str, ...]
    pass_to_pass: tuple[str, ...]
    reference_xfail: frozenset[str] = frozenset()  # tests the reference runs saw XFAIL
    runs: int = 1  # more for a task whose tests were ever flaky
    rules: TestFileRules = TestFileRules()  # which of the repository's files are tests
    # What pytest runs: test files, node ids or the suite's arguments (() for pytest's own choice, the
    # whole suite); None: the files of the F2P and P2P tests.
    selection: Optional[tuple[str, ...]] = None
    # The base's tree as a release's source archive, where no mirror holds the base commit.
    source_archive: Optional[Path] = None


def base_written(task: TaskToGrade, workdir: Path) -> Path:
    """`<workdir>/repo` with the task's base tree: from its source archive, else from the mirror."""
    if task.source_archive is not None:
        return archive_unpacked(task.source_archive, workdir)
    return working_copy_write(task.mirror_dir, task.base_sha, workdir)


@dataclass(frozen=True)
class GradeSettings:
    per_test_timeout: float = 60
    limits: Limits = Limits(wall_seconds=1800, cpu_seconds=1800)
    bases: Optional[Path] = None  # where the worker keeps each task's base with its test patch (None: not kept)
    bases_kept: int = 32  # the newest, at most


@dataclass
class GradeResult:
    outcome: str  # one of GROUND_TRUTH_OUTCOMES
    tampering: list[str] = field(default_factory=list)  # paths whose changes were put back
    touches_tests: list[str] = field(default_factory=list)  # paths the task's test patch decided
    runs: list[TestRun] = field(default_factory=list)
    detail: str = ""  # why, for outcomes other than resolved, partial and no
    seconds: float = 0.0
    copy_seconds: float = 0.0  # of `seconds`, making the fresh copies the runs ran in


def candidate_grade(task: TaskToGrade, patch: Optional[str], *, builder: EnvironmentBuilder,
                    environment: BuiltEnvironment, work_root: Path,
                    settings: GradeSettings = GradeSettings()) -> GradeResult:
    """The ground truth of one candidate (`patch` None: the prediction had none)."""
    started = time.monotonic()
    if patch is None:
        return GradeResult("no_patch", detail="the candidate has no patch")
    binary = _binary_bytes(patch)
    if binary > BINARY_BYTES:
        return GradeResult("does_not_apply", detail=f"its binary hunks would write {binary >> 20} MB, over the "
                                                    f"{BINARY_BYTES >> 20} MB a candidate may")
    work = Path(work_root) / f"grade-{time.monotonic_ns()}"
    try:
        work.mkdir(parents=True)
        result = _grade(task, patch, builder, environment, work, settings)
    except TreeTooDeep as deep:
        result = GradeResult("error", detail=f"the working copy cannot be graded: {deep}")
    finally:
        tree_remove(work)
    result.seconds = time.monotonic() - started
    return result


def _grade(task: TaskToGrade, patch: str, builder: EnvironmentBuilder, environment: BuiltEnvironment, work: Path,
           settings: GradeSettings) -> GradeResult:
    result = GradeResult("")
    try:
        patched_paths(task.test_patch)
    except ValueError as unreadable:
        result.outcome, result.detail = "error", f"the task's test patch cannot be read: {unreadable}"
        return result
    tested = _tested_base(task, builder, work, settings)
    if tested is None:
        result.outcome, result.detail = "error", "the task's test patch does not apply to its base commit"
        return result
    selection = graded_files(task.fail_to_pass, task.pass_to_pass) if task.selection is None else list(task.selection)
    applied_first = bool(patch.strip())  # an empty patch has nothing to apply or put right
    before = tree_state(tested) if applied_first else {}  # read once: every run's copy comes from it
    for _ in range(max(task.runs, 1)):
        # Each run applies the candidate in its own sandbox, to a fresh copy of the tested base, and
        # the worker puts it right there before the tests start (run/patch_first.py).
        put_right, first = GradeResult(""), PatchFirst(patch) if applied_first else None
        if first is not None:  # what of the candidate it keeps, the run's plugin is told is the candidate's own
            first.then.append(partial(_put_right, put_right, task, tested, before, own=first.untrusted))
        run, copied = fresh_copy_run(builder, environment, tested, selection, scratch=work, limits=settings.limits,
                                     per_test_timeout=settings.per_test_timeout, first=first)
        result.copy_seconds += copied
        if first is not None and first.error is not None:
            raise first.error
        if first is not None and not first.applied:
            break  # git's own words come from the base's attempt below
        result.tampering, result.touches_tests = put_right.tampering, put_right.touches_tests
        result.runs.append(run)
    if not result.runs and not _applied_to_the_base(result, task, patch, builder, environment, work, settings,
                                                    selection):
        return result
    result.outcome, result.detail = runs_graded(task, result.runs)
    return result


def runs_graded(task: TaskToGrade, runs: list[TestRun]) -> tuple[str, str]:
    """A candidate's outcome from its runs by the task's tests, and its detail: why, when a run's
    report cannot be believed."""
    grade = {"fail_to_pass": task.fail_to_pass, "pass_to_pass": task.pass_to_pass,
             "reference_xfail": task.reference_xfail}
    outcome = runs_outcome([run_outcome(run, **grade) for run in runs])
    untrusted = next((run.untrusted for run in runs if run.untrusted), "")
    return outcome, f"a run's report cannot be believed: {untrusted}" if untrusted else ""


def _applied_to_the_base(result: GradeResult, task: TaskToGrade, patch: str, builder: EnvironmentBuilder,
                         environment: BuiltEnvironment, work: Path, settings: GradeSettings,
                         selection: list[str]) -> bool:
    """A candidate that does not apply on top of the test patch (written against the base's version
    of a file the test patch changes, say) is applied to the base alone, put right, and the test
    patch applied after; then its runs. False, with the outcome set, when that cannot be done."""
    base = base_written(task, work / "base")
    candidate = working_copy_clone(base, work / "candidate" / "repo")
    applied = patch_apply(builder.sandbox(), candidate.parent, patch)
    if not applied.ok:
        result.outcome, result.detail = "does_not_apply", _tail(applied.output)
        return False
    own: list[str] = []
    _put_right(result, task, base, tree_state(base), candidate, own)
    applied = patch_apply(builder.sandbox(), candidate.parent, task.test_patch)
    if not applied.ok:
        result.outcome, result.detail = "error", f"the task's test patch does not apply: {_tail(applied.output)}"
        return False
    for _ in range(max(task.runs, 1)):
        run, copied = fresh_copy_run(builder, environment, candidate, selection, scratch=work,
                                     limits=settings.limits, per_test_timeout=settings.per_test_timeout, untrusted=own)
        result.copy_seconds += copied
        result.runs.append(run)
    return True


def _put_right(result: GradeResult, task: TaskToGrade, origin: Path, before: dict, candidate: Path,
               own: Optional[list] = None) -> None:
    """Put back, from the copy the candidate was applied to (`origin`, whose `tree_state` is
    `before`), what it may not change; what it keeps goes on `own`."""
    test_paths = patched_paths(task.test_patch)
    for path in sorted(paths_changed(before, tree_state(candidate))):
        if _protected(path, origin, candidate):
            result.tampering.append(path)
        elif path in test_paths or (path in before and task.rules.kind(path) == "test"):
            result.touches_tests.append(path)
        else:
            if own is not None:
                own.append(path)
            continue
        _put_back(path, origin, candidate)


def _tested_base(task: TaskToGrade, builder: EnvironmentBuilder, work: Path, settings: GradeSettings
                 ) -> Optional[Path]:
    """The task's base commit with its test patch applied: kept in `settings.bases` (made there
    once, atomically), else made in `work`; None when the test patch does not apply."""
    key = hashlib.sha256(f"{task.source_archive or task.mirror_dir}\0{task.base_sha}\0{task.test_patch}".encode(
        "utf-8", "surrogatepass")).hexdigest()[:32]
    kept = settings.bases / key if settings.bases else None
    if kept is not None and (kept / "repo").is_dir():
        os.utime(kept)  # the newest are kept
        return kept / "repo"
    making = work / "tested"
    repo = base_written(task, making)
    if not patch_apply(builder.sandbox(), making, task.test_patch).ok:
        return None
    (making / PATCH_FILE).unlink(missing_ok=True)
    if kept is None:
        return repo
    hand_over(making, os.getuid())  # the worker's again: no sandbox user keeps a hand on what many grades copy
    settings.bases.mkdir(parents=True, exist_ok=True)
    try:
        making.rename(kept)
    except OSError:  # another job kept it first
        return repo
    _bases_prune(settings)
    return kept / "repo"


def _bases_prune(settings: GradeSettings) -> None:
    """Beyond the newest `bases_kept`, those no grade has used for a day (one may still copy it)."""
    used = {}
    for path in settings.bases.iterdir():
        try:
            if path.is_dir() and not path.is_symlink():
                used[path] = path.stat().st_mtime
        except OSError:
            continue  # another worker pruned it meanwhile
    idle_since = time.time() - BASE_IDLE_SECONDS
    for old in sorted(used, key=used.get, reverse=True)[settings.bases_kept:]:
        if used[old] < idle_since:
            shutil.rmtree(old, ignore_errors=True)


def _tail(output: bytes) -> str:
    return output[-OUTPUT_KEPT:].decode("utf-8", "replace").strip()


# --- what a candidate changed ----------------------------------------------------------------


def _protected(path: str, base: Path, candidate: Path) -> bool:
    *folders, name = path.lower().split("/")
    if name in PROTECTED_NAMES or name.endswith(PROTECTED_SUFFIXES):
        return True
    if any(part in PROTECTED_FOLDERS or part.endswith(PROTECTED_FOLDER_SUFFIXES) for part in (*folders, name)):
        return True
    if any(os.path.islink(root / path) for root in (base, candidate)):
        return True  # a link the candidate made or changed: nothing a fix needs, and it could point anywhere
    if name in PYTEST_SECTION_FILES:
        return _pytest_section(base / path, name) != _pytest_section(candidate / path, name)
    return False


def _pytest_section(path: Path, name: str):
    """The pytest configuration a setup.cfg, tox.ini or pyproject.toml holds (None without the
    file), read by the parsers pytest reads them with: iniconfig, as pytest calls it (values whole,
    continuation lines and comments in them), every section whose name says pytest (pytest reads
    one of them, which one depends on its version); tomllib, the tool.pytest table. A file too large,
    or that does not parse, gives its whole text: any change to it counts."""
    if not path.is_file() or path.is_symlink():
        return None
    if path.stat().st_size > CONFIG_BYTES:
        return ("too large", path.stat().st_size, hashlib.sha256(path.read_bytes()).hexdigest())
    text = path.read_bytes().decode("utf-8", "replace")
    try:
        if name == "pyproject.toml":
            return tomllib.loads(text).get("tool", {}).get("pytest")
        sections = iniconfig.IniConfig(name, text).sections
    except (ValueError, RecursionError, AttributeError, iniconfig.ParseError):
        return ("unparsed", text)
    return {section: dict(values) for section, values in sections.items() if "pytest" in section.lower()}


def _put_back(path: str, base: Path, candidate: Path) -> None:
    """The base's version of `path` in the candidate's copy (or none, where the base had none)."""
    target, source = candidate / path, base / path
    if not Path(os.path.realpath(target.parent)).is_relative_to(os.path.realpath(candidate)):
        raise RuntimeError(f"{path}: a folder above it leads out of the working copy")  # its parent comes first
    if target.is_symlink() or target.is_file():
        target.unlink()
    elif target.is_dir():
        shutil.rmtree(target)
    if source.is_symlink():
        target.parent.mkdir(parents=True, exist_ok=True)
        os.symlink(os.readlink(source), target)
    elif source.is_file():
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(source, target, follow_symlinks=False)
    elif source.is_dir():
        shutil.copytree(source, target, symlinks=True)


def _binary_bytes(patch: str) -> int:
    """What the patch's binary hunks say they write (`literal N`, `delta N`)."""
    return sum(int(size) for size in re.findall(r"^(?:literal|delta) (\d+)$", patch, flags=re.MULTILINE))


def patched_paths(patch: str) -> frozenset[str]:
    """The files a patch creates, changes or removes; ValueError when it cannot be read (which files
    a task's tests are must never be guessed)."""
    try:
        files = PatchSet(patch)
    except UnidiffParseError as error:
        raise ValueError(str(error)) from None
    paths = set()
    for patched in files:
        for name in (patched.source_file, patched.target_file):
            if name and name != "/dev/null":
                paths.add(name[2:] if name[:2] in ("a/", "b/") else name)
    return frozenset(paths)


# --- what a second opinion shares with grading (grade/second_opinion.py) ---------------------


def task_tested_base(task: TaskToGrade, builder: EnvironmentBuilder, work: Path, settings: GradeSettings
                     ) -> Optional[Path]:
    """The task's base with its test patch, as grading copies it (None: the test patch does not apply)."""
    return _tested_base(task, builder, work, settings)


def patch_first_put_right(task: TaskToGrade, patch: str, tested: Path, result: GradeResult) -> PatchFirst:
    """The candidate applied first in a run's sandbox to a copy of `tested`, and put right there as
    grading puts it right (what it put back goes on `result`)."""
    return PatchFirst(patch, then=[partial(_put_right, result, task, tested, tree_state(tested))])
