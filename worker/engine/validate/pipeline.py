"""Validate one mined commit: build (or reuse) its environment, find its Fail-to-Pass
oracle, and check that it grades consistently through the path candidates take.

Plain data in, plain data out; every run is kept in the result for the record.
"""

import shutil
import tempfile
import time
from dataclasses import dataclass, field, replace
from datetime import datetime
from functools import partial
from pathlib import Path
from typing import Literal, Optional, Sequence

from worker.engine.env.builder import Attempt, BuiltEnvironment, EnvironmentBuilder, EnvironmentFailed, failure_reason
from worker.engine.env.files import environment_files_lay
from worker.engine.env.recipes import ENV, WORKSPACE, install_recipe, recipe_key
from worker.engine.git.patches import commit_patches
from worker.engine.git.working_copy import patch_apply, tree_remove, working_copy_clone, working_copy_write
from worker.engine.run.patch_first import PatchFirst
from worker.engine.run.pytest_run import TestRun, pytest_run
from worker.engine.sandbox.base import Limits
from worker.engine.sandbox.disk import capped_folder
from worker.engine.test_files import TestFileRules
from worker.engine.validate.generated_tests import GeneratedFileVerdict, generated_file_verdicts, generated_file_write
from worker.engine.validate.oracle import (
    Oracle,
    Verdict,
    graded_files,
    oracle_from_runs,
    oracle_without,
    resolves,
    run_resolves,
    runs_filled,
    task_verdict,
)


@dataclass(frozen=True)
class ValidationSettings:
    runs_per_side: int = 3  # runs of the commit's test files before and after
    break_rechecks: int = 5  # runs a side of the tests the suite saw break (a flaky one fools fewer)
    per_test_timeout: float = 60
    suite_seconds: float = 600  # the rest of the suite runs once per side within this budget
    limits: Limits = Limits(wall_seconds=1800, cpu_seconds=1800)


@dataclass(frozen=True)
class CommitToValidate:
    mirror_dir: Path
    sha: str
    parent_sha: str
    committed_at: datetime
    rules: TestFileRules = TestFileRules()
    excluded_tests: frozenset[str] = frozenset()  # dropped from the oracle by reviewers as wrong


# Which copy of the repository a run tested: "before" (parent + test patch), "after" (the commit),
# "gold" (parent + both patches, graded as a candidate), "empty" (parent + test patch, graded).
Side = Literal["before", "after", "gold", "empty"]
# Which tests it ran: "selected" (the commit's test files), "suite" (everything), "breaks" (what
# the suite saw break, again), "graded" (the files of the F2P and P2P tests).
Scope = Literal["selected", "suite", "breaks", "graded"]


@dataclass(frozen=True)
class RunRecord:
    side: Side
    scope: Scope
    index: int
    run: TestRun


@dataclass
class ValidationResult:
    verdict: Verdict
    reason: str
    oracle: Optional[Oracle] = None
    environment: Optional[BuiltEnvironment] = None
    environment_reused: bool = False
    attempts: list[Attempt] = field(default_factory=list)
    runs: list[RunRecord] = field(default_factory=list)
    seconds: float = 0.0
    copy_seconds: float = 0.0  # of `seconds`, making the fresh copies the runs ran in


def test_files_present(paths: list[str], repo_dir: Path) -> list[str]:
    """The commit's test files that pytest runs (Python files other than conftest.py) present in a copy."""
    return sorted(path for path in paths
                  if path.endswith(".py") and Path(path).name != "conftest.py" and (repo_dir / path).is_file())


class _Validation:
    def __init__(self, commit: CommitToValidate, builder: EnvironmentBuilder, work_root: Path,
                 settings: ValidationSettings):
        self.commit, self.builder, self.settings = commit, builder, settings
        self.work = work_root / f"validate-{commit.sha[:12]}-{time.monotonic_ns()}"
        self.result = ValidationResult(verdict="invalid", reason="")
        self.environment: Optional[BuiltEnvironment] = None

    def copy(self, name: str, sha: str, *patches: str) -> Path:
        workdir = self.work / name
        working_copy_write(self.commit.mirror_dir, sha, workdir)
        for patch in patches:
            applied = patch_apply(self.builder.sandbox(), workdir, patch)
            if not applied.ok:
                output = applied.output[-500:].decode("utf-8", "replace").strip()
                raise RuntimeError(f"a patch of the commit does not apply to its parent: {output}")
        return workdir

    def environment_for(self, workdir: Path, reusable: list[BuiltEnvironment], probe: list[str] = ()) -> bool:
        """An environment whose tests collect on this commit: one built for another commit first, else
        a new one; False (the attempts recorded) when none can be had."""
        for candidate in reusable:
            if not self.builder.runs(candidate):
                continue  # its Python is no longer among this builder's runtimes
            check = self.builder.reuse_check(candidate, workdir, probe)
            self.result.attempts.append(check)
            if check.status == "ok":
                self.environment, self.result.environment_reused = candidate, True
                return True
        try:
            self.environment = self.builder.build(workdir, as_of=self.commit.committed_at, probe=probe)
        except EnvironmentFailed as failed:
            self.result.attempts += failed.attempts
            return False
        self.result.attempts += self.environment.attempts
        return True

    def runs(self, workdir: Path, side: Side, selection: list[str], scope: Scope = "selected",
             count: Optional[int] = None) -> list[dict[str, str]]:
        """The selected tests (the commit's test files, say), several times, ready for the oracle."""
        runs = [self.run(workdir, side, scope, i, selection) for i in range(count or self.settings.runs_per_side)]
        return runs_filled([run.outcomes for run in runs], [run.complete for run in runs])

    def run(self, workdir: Path, side: Side, scope: Scope, index: int, selection: list[str],
            wall_seconds: Optional[float] = None) -> TestRun:
        """One run, in a fresh copy of `workdir`'s repository: nothing a run writes is seen by the next."""
        limits = self.settings.limits
        if wall_seconds:
            limits = Limits(**{**limits.__dict__, "wall_seconds": wall_seconds})
        run, copy_seconds = fresh_copy_run(self.builder, self.environment, workdir / "repo", selection,
                                           scratch=self.work, limits=limits,
                                           per_test_timeout=self.settings.per_test_timeout)
        self.result.copy_seconds += copy_seconds
        self.result.runs.append(RunRecord(side=side, scope=scope, index=index, run=run))
        return run


def fresh_copy_run(builder: EnvironmentBuilder, environment: BuiltEnvironment, repo: Path, selection: list[str], *,
                   scratch: Path, limits: Limits, per_test_timeout: float,
                   first: Optional[PatchFirst] = None, runner=pytest_run,
                   untrusted: Sequence[str] = ()) -> tuple[TestRun, float]:
    """One pytest run of `selection` in the environment, in a fresh copy of the working copy `repo`
    made under `scratch` and thrown away after: nothing a run writes is seen by the next. With
    `first`, its patch is applied to the copy in the run's sandbox before the tests, and the
    environment's files are laid after its steps (a file the patch makes wins, as in any copy).
    `runner` runs the tests (pytest_run's arguments; run/plain_run.py for a second opinion).
    `untrusted`: the copy's files that are a candidate's own (pytest_run's; a patch applied first
    brings its own). Returns the run and the seconds the copy took."""
    sandbox = builder.sandbox([(environment.path, ENV)], image=environment.image)
    fresh = Path(tempfile.mkdtemp(prefix="run-", dir=scratch))
    try:
        # A file system of its own where the worker can: the run's writes stop at its disk limit.
        with capped_folder(fresh, holds=repo, limits=limits):
            copy_started = time.monotonic()
            working_copy_clone(repo, fresh / "repo")
            if first is None:
                environment_files_lay(environment.path, fresh / "repo")
            else:
                first.then.append(partial(environment_files_lay, environment.path))
            copy_seconds = time.monotonic() - copy_started
            run = runner(sandbox=sandbox, workdir=fresh, repo_dir=fresh / "repo", python=f"{ENV}/bin/python",
                         selection=selection, per_test_timeout=per_test_timeout, limits=limits,
                         mount_at=WORKSPACE, first=first, **({"untrusted": untrusted} if untrusted else {}))
    finally:
        tree_remove(fresh)  # a plain folder holds what the run made, thousands of folders deep maybe
    return run, copy_seconds


def task_validate(commit: CommitToValidate, *, builder: EnvironmentBuilder, work_root: Path,
                  settings: ValidationSettings = ValidationSettings(),
                  reusable: list[BuiltEnvironment] = ()) -> ValidationResult:
    """The verdict on one commit, with everything that led to it."""
    started = time.monotonic()
    validation = _Validation(commit, builder, work_root, settings)
    try:
        _validate(validation, list(reusable))
    finally:
        shutil.rmtree(validation.work, ignore_errors=True)
    untrusted_runs_refuse(validation.result)
    validation.result.seconds = time.monotonic() - started
    return validation.result


def untrusted_runs_refuse(result: "ValidationResult") -> bool:
    """A run whose report cannot be believed makes the task invalid, and no test of it F2P or P2P."""
    if not any(record.run.untrusted for record in result.runs):
        return False
    result.verdict, result.reason, result.oracle = "invalid", "untrusted_run", None
    return True


def _validate(v: _Validation, reusable: list[BuiltEnvironment]) -> None:
    commit, settings, result = v.commit, v.settings, v.result
    patches = commit_patches(commit.mirror_dir, commit.sha, commit.parent_sha, commit.rules)
    # Installing runs the repository's code: it gets a copy of its own, thrown away after.
    build = v.copy("build", commit.sha)
    recipe = recipe_key(install_recipe(build / "repo"))
    probe = test_files_present(patches.test_files, build / "repo")
    if not v.environment_for(build, [env for env in reusable if env.recipe_key == recipe], probe):
        result.verdict, result.reason = "environment_failed", failure_reason(result.attempts)
        return
    shutil.rmtree(build, ignore_errors=True)
    result.environment = v.environment
    after = v.copy("after", commit.sha)
    selection = test_files_present(patches.test_files, after / "repo")
    if not commit.parent_sha:
        result.reason = "no_fail_to_pass"
        return
    before = v.copy("before", commit.parent_sha, patches.test_patch)
    # Without test files of its own the commit still gets its suite run: the P2P tests that generated
    # tests will need, and whether it breaks anything.
    oracle = Oracle([], [], [], [])
    if selection:
        oracle = oracle_from_runs(*[v.runs(copy, side, selection)
                                    for copy, side in ((before, "before"), (after, "after"))])
    suite = list(v.environment.suite_args)
    suite_before = v.run(before, "before", "suite", 0, suite, wall_seconds=settings.suite_seconds)
    suite_after = v.run(after, "after", "suite", 0, suite, wall_seconds=settings.suite_seconds)
    if _collected_nothing(result.runs, side="after"):
        # The environment's check collected the commit's tests; runs that collect none of them say
        # the environment does not serve the runs, not that the commit has no oracle.
        result.verdict, result.reason = "environment_failed", "runs_do_not_collect"
        return
    if suite_before.complete and suite_after.complete:
        suite = oracle_from_runs([suite_before.outcomes], [suite_after.outcomes])
        oracle = _with_suite(oracle, breaks_confirmed(v, before, after, suite))
    result.oracle = oracle = oracle_without(oracle, commit.excluded_tests)
    if not oracle.fail_to_pass:
        result.reason = "no_fail_to_pass"
        return
    graded = graded_files(oracle.fail_to_pass, oracle.pass_to_pass)
    gold = v.run(v.copy("gold", commit.parent_sha, patches.source_patch, patches.test_patch), "gold", "graded", 0,
                 graded)
    empty = v.run(v.copy("empty", commit.parent_sha, patches.test_patch), "empty", "graded", 0, graded)
    grade = {"fail_to_pass": oracle.fail_to_pass, "pass_to_pass": oracle.pass_to_pass,
             "reference_xfail": {test for record in result.runs if record.side == "after"
                                 for test, status in record.run.outcomes.items() if status == "XFAIL"}}
    result.verdict, result.reason = task_verdict(
        oracle, gold_resolves=run_resolves(gold, **grade), empty_resolves=run_resolves(empty, **grade))


def _collected_nothing(records: list[RunRecord], *, side: Side) -> bool:
    """Every run of a side ended in a collection error with no test's outcome."""
    runs = [record.run for record in records if record.side == side]
    return bool(runs) and all(run.collection_error and not run.outcomes and not run.untrusted for run in runs)


def breaks_confirmed(v: _Validation, before: Path, after: Path, suite: Oracle) -> Oracle:
    """One run of the suite cannot tell a broken test from a flaky one: the tests it saw break run
    again, several times a side; those that do not break every time are flaky."""
    if not suite.breaks:
        return suite
    count = v.settings.break_rechecks
    again = oracle_from_runs(v.runs(before, "before", suite.breaks, scope="breaks", count=count),
                             v.runs(after, "after", suite.breaks, scope="breaks", count=count))
    return Oracle(suite.fail_to_pass, suite.pass_to_pass, sorted(set(suite.flaky) | set(again.flaky)),
                  again.breaks)


def _with_suite(selected: Oracle, suite: Oracle) -> Oracle:
    """The commit's own test files decide F2P (several runs); the suite adds the tests elsewhere
    that pass on both sides, or that the fix breaks (confirmed by runs of their own)."""
    flaky = set(selected.flaky) | set(suite.flaky)
    return Oracle(
        fail_to_pass=selected.fail_to_pass,
        pass_to_pass=sorted((set(selected.pass_to_pass) | set(suite.pass_to_pass)) - flaky),
        flaky=sorted(flaky),
        breaks=sorted((set(selected.breaks) | set(suite.breaks)) - flaky - set(selected.fail_to_pass)),
    )


@dataclass
class GeneratedValidationResult:
    result: ValidationResult
    files: list[GeneratedFileVerdict] = field(default_factory=list)


def task_validate_generated(commit: CommitToValidate, contents: list[str], *, builder: EnvironmentBuilder,
                            environment: BuiltEnvironment, work_root: Path,
                            settings: ValidationSettings = ValidationSettings(),
                            pass_to_pass: list[str] = ()) -> GeneratedValidationResult:
    """Check generated test files in the environment an earlier validation built: each runs several
    times on the parent (before) and on the commit (after); files with Fail-to-Pass tests are kept.
    The task grades through the same path as any other (the before side is the empty patch, the
    after side the gold patch), with the P2P tests found before."""
    started = time.monotonic()
    validation = _Validation(commit, builder, work_root, settings)
    validation.environment = validation.result.environment = environment
    if not builder.runs(environment):
        raise RuntimeError(f"the environment {environment.key} needs Python {environment.python_version}"
                           f"{' in ' + environment.image if environment.image else ''}, which this sandbox lacks")
    try:
        # The same sides as any validation: the parent with the commit's test files, and the commit.
        patches = commit_patches(commit.mirror_dir, commit.sha, commit.parent_sha, commit.rules)
        before = validation.copy("before", commit.parent_sha, patches.test_patch)
        after = validation.copy("after", commit.sha)
        paths = [generated_file_write(before / "repo", i, text) for i, text in enumerate(contents, 1)]
        if [generated_file_write(after / "repo", i, text) for i, text in enumerate(contents, 1)] != paths:
            raise RuntimeError("the generated files got different names before and after")
        before_runs, after_runs = validation.runs(before, "before", paths), validation.runs(after, "after", paths)
        oracle = oracle_from_runs(before_runs, after_runs)
        # A generated test that fails after the fix is a wrong test, dropped below, not a broken suite
        # (the earlier validation ran the suite).
        oracle = Oracle(oracle.fail_to_pass, sorted(set(pass_to_pass) - set(oracle.flaky)), oracle.flaky, [])
        validation.result.oracle = oracle = oracle_without(oracle, commit.excluded_tests)
        grade = {"fail_to_pass": oracle.fail_to_pass, "pass_to_pass": []}
        validation.result.verdict, validation.result.reason = task_verdict(
            oracle, gold_resolves=resolves(after_runs[-1], **grade), empty_resolves=resolves(before_runs[-1], **grade))
        files = generated_file_verdicts(paths, oracle, before_runs, after_runs)
    finally:
        shutil.rmtree(validation.work, ignore_errors=True)
    if untrusted_runs_refuse(validation.result):
        files = [replace(verdict, kept=False, reason="untrusted_run", fail_to_pass=[]) for verdict in files]
    validation.result.seconds = time.monotonic() - started
    return GeneratedValidationResult(validation.result, files)
