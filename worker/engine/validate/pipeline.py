"""Validate one mined commit: build (or reuse) its environment, find its Fail-to-Pass
oracle, and check that it grades consistently through the path candidates take.

Plain data in, plain data out; every run is kept in the result for the record.
"""

import shutil
import time
from dataclasses import dataclass, field, replace
from datetime import datetime
from pathlib import Path
from typing import Literal, Optional

from worker.engine.env.builder import Attempt, BuiltEnvironment, EnvironmentBuilder, EnvironmentFailed, failure_reason
from worker.engine.env.recipes import install_recipe, recipe_key
from worker.engine.git.patches import commit_patches
from worker.engine.git.working_copy import patch_apply, working_copy_write
from worker.engine.grade.candidate import GradeResult, GradeSettings, TaskToGrade, candidate_grade, runs_graded
from worker.engine.grade.fresh_copy import fresh_copy_run
from worker.engine.grade.oracle import (
    UNKNOWN,
    Oracle,
    Verdict,
    graded_files,
    oracle_from_runs,
    oracle_without,
    resolves,
    runs_filled,
    task_verdict,
)
from worker.engine.run.pytest_run import PASSING, TestRun
from worker.engine.sandbox.base import Limits
from worker.engine.test_files import TestFileRules
from worker.engine.validate.generated_tests import GeneratedFileVerdict, generated_file_verdicts, generated_file_write


@dataclass(frozen=True)
class ValidationSettings:
    # More runs, on the after side, of the tests whose outcome decides something: with one run a
    # side first, a test failing half the time is caught 15 times in 16 with two.
    reruns: int = 2
    # Runs a side of the tests that still break after those: one more flaky test taken for a break
    # would make the task invalid, or keep generated tests from it.
    break_rechecks: int = 5
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


# Which copy of the repository a run tested: "before" (parent + test patch: the empty patch's grade),
# "after" (parent + test patch + the commit's other changes: the gold patch's grade).
Side = Literal["before", "after"]
# Which tests it ran: "suite" (everything), "selected" (the commit's test files, where the suite's
# run did not run them all), "rerun" (the tests whose outcome decides something, again).
Scope = Literal["suite", "selected", "rerun"]


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
    # The gold and empty patches' grades, made by validation's own runs with the suite as the
    # grade's selection (None where those runs could not stand in for them).
    gold: Optional[GradeResult] = None
    empty: Optional[GradeResult] = None


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

    def runs(self, workdir: Path, side: Side, selection: list[str]) -> list[dict[str, str]]:
        """The selected tests (generated test files, say), once and then `reruns` times, ready for the oracle."""
        runs = [self.run(workdir, side, "selected", i, selection) for i in range(1 + self.settings.reruns)]
        return runs_filled([run.outcomes for run in runs], [run.complete for run in runs])

    def grade(self, task: TaskToGrade, patch: str, side: Side, scope: Scope) -> GradeResult:
        """A grade of `patch`, as candidate_grade makes any, its runs kept for the record."""
        limits = self.settings.limits
        if scope == "suite":
            limits = Limits(**{**limits.__dict__, "wall_seconds": self.settings.suite_seconds})
        grading = GradeSettings(per_test_timeout=self.settings.per_test_timeout, limits=limits,
                                bases=self.work / "bases")
        graded = candidate_grade(task, patch, builder=self.builder, environment=self.environment,
                                 work_root=self.work, settings=grading)
        if not graded.runs:
            raise RuntimeError(f"a patch of the commit does not apply to its parent: {graded.detail}")
        self.result.copy_seconds += graded.copy_seconds
        first = sum(record.side == side and record.scope == scope for record in self.result.runs)
        self.result.runs += [RunRecord(side=side, scope=scope, index=first + i, run=run)
                             for i, run in enumerate(graded.runs)]
        return graded

    def run(self, workdir: Path, side: Side, scope: Scope, index: int, selection: list[str]) -> TestRun:
        """One run, in a fresh copy of `workdir`'s repository: nothing a run writes is seen by the next."""
        run, copy_seconds = fresh_copy_run(self.builder, self.environment, workdir / "repo", selection,
                                           scratch=self.work, limits=self.settings.limits,
                                           per_test_timeout=self.settings.per_test_timeout)
        self.result.copy_seconds += copy_seconds
        self.result.runs.append(RunRecord(side=side, scope=scope, index=index, run=run))
        return run


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
    selection = test_files_present(patches.test_files, build / "repo")
    reusable = [env for env in reusable if env.recipe_key == recipe]
    if not commit.parent_sha:  # nothing to grade against: the environment is all there is to find
        if v.environment_for(build, reusable, selection):
            result.environment, result.reason = v.environment, "no_fail_to_pass"
        else:
            result.verdict, result.reason = "environment_failed", failure_reason(result.attempts)
        return
    # Both sides are grades, made the way any candidate's is: the empty patch on the parent with
    # the commit's test files, the gold patch (the commit's other changes) applied there in the run's
    # sandbox and put right as any candidate's. What validation finds is then what grading sees.
    task = TaskToGrade(mirror_dir=commit.mirror_dir, base_sha=commit.parent_sha, test_patch=patches.test_patch,
                       fail_to_pass=(), pass_to_pass=(), rules=commit.rules)
    sides = _sides_in_an_environment(v, build, task, patches.source_patch, selection, reusable)
    if sides is None:
        result.verdict, result.reason = "environment_failed", failure_reason(result.attempts)
        return
    shutil.rmtree(build, ignore_errors=True)
    result.environment = v.environment
    task, (empty, gold) = replace(task, selection=v.environment.suite_args), sides
    suite_whole = bool(empty.runs and gold.runs) and empty.runs[0].complete and gold.runs[0].complete
    # The suite's runs stand for the commit's test files only where they ran all of them; the others
    # run on their own, and the suite's runs say nothing of them.
    uncovered = tuple(path for path in selection if not (suite_whole and _ran_file(gold, path)))
    before, after = _side_runs(empty, Reach(uncovered, but=True)), _side_runs(gold, Reach(uncovered, but=True))
    if uncovered:
        files = replace(task, selection=uncovered)
        before += _side_runs(v.grade(files, "", "before", "selected"), Reach(uncovered))
        after += _side_runs(v.grade(files, patches.source_patch, "after", "selected"), Reach(uncovered))
    if _collected_nothing(result.runs, side="after"):
        # The environment's check collected the commit's tests; runs that collect none of them say
        # the environment does not serve the runs, not that the commit has no oracle.
        result.verdict, result.reason = "environment_failed", "runs_do_not_collect"
        return
    if any(record.run.untrusted for record in result.runs):
        return  # task_validate refuses the task
    tests = _tests_seen(before + after, selection, suite_whole)
    first = commit_oracle(before, after, tests, selection, commit.excluded_tests)
    if not first.fail_to_pass and not first.breaks:
        result.oracle, result.reason = first, "no_fail_to_pass"
        return
    # One run a side cannot tell a flaky test from a real one: on the after side, the files of the
    # tests that flipped (F2P candidates, breaks) and the commit's own test files run again. The
    # rest of the suite's P2P tests stand on their one run a side.
    again = tuple(sorted({*selection, *graded_files(first.fail_to_pass, first.breaks)}))
    if settings.reruns:
        reruns = replace(task, selection=again, runs=settings.reruns)
        after += _side_runs(v.grade(reruns, patches.source_patch, "after", "rerun"), Reach(again))
    oracle = commit_oracle(before, after, tests, selection, commit.excluded_tests)
    if oracle.breaks and settings.break_rechecks:
        broken = tuple(graded_files(oracle.breaks, []))
        rechecks = replace(task, selection=broken, runs=settings.break_rechecks)
        before += _side_runs(v.grade(rechecks, "", "before", "rerun"), Reach(broken))
        after += _side_runs(v.grade(rechecks, patches.source_patch, "after", "rerun"), Reach(broken))
        oracle = commit_oracle(before, after, tests, selection, commit.excluded_tests)
    result.oracle = oracle
    if not oracle.fail_to_pass:
        result.reason = "no_fail_to_pass"
        return
    reference_xfail = frozenset(test for record in result.runs if record.side == "after"
                                for test, status in record.run.outcomes.items() if status == "XFAIL")
    graded = replace(task, fail_to_pass=tuple(oracle.fail_to_pass), pass_to_pass=tuple(oracle.pass_to_pass),
                     reference_xfail=reference_xfail)
    if not uncovered:  # the suite's runs were made with the grade's selection: they are the grades
        result.gold, result.empty = _regraded(gold, graded), _regraded(empty, graded)
    graded_tests = [*oracle.fail_to_pass, *oracle.pass_to_pass]
    result.verdict, result.reason = task_verdict(oracle, gold_resolves=_side_resolves(after, tests, graded_tests),
                                                 empty_resolves=_side_resolves(before, tests, graded_tests))


def commit_oracle(before: list[tuple[TestRun, "Reach"]], after: list[tuple[TestRun, "Reach"]], tests: list[str],
                  selection: list[str], excluded: frozenset[str]) -> Oracle:
    """The tests' classes by the runs of both sides. F2P tests are the commit's own (a test elsewhere
    that the fix makes pass says what it fixes no more than the issue will); the suite adds the P2P
    tests and the breaks; the tests reviewers dropped are left out."""
    found = oracle_from_runs(outcomes_within_reach(before, tests), outcomes_within_reach(after, tests))
    own = [test for test in found.fail_to_pass if _in_files(test, selection)]
    return oracle_without(replace(found, fail_to_pass=own), excluded)


def _side_resolves(runs: list[tuple[TestRun, "Reach"]], tests: list[str], graded: list[str]) -> bool:
    """Every run of a side passed every graded test it ran."""
    return all(outcomes[test] in PASSING or outcomes[test] == UNKNOWN
               for outcomes in outcomes_within_reach(runs, tests) for test in graded)


def _regraded(grade: GradeResult, task: TaskToGrade) -> GradeResult:
    """A grade made before the oracle was known, its outcome given by the oracle found since."""
    outcome, detail = runs_graded(task, grade.runs)
    return replace(grade, outcome=outcome, detail=detail)


def _sides_in_an_environment(v: _Validation, build: Path, task: TaskToGrade, gold_patch: str, selection: list[str],
                             reusable: list[BuiltEnvironment]) -> Optional[tuple[GradeResult, GradeResult]]:
    """The empty and gold patches' grades in the first reusable environment that serves the commit,
    else in one built for it; None (the attempts recorded) when none can be had."""
    for environment in reusable:
        sides = _sides_reusing(v, environment, build, task, gold_patch, selection)
        if sides is not None:
            return sides
    if not v.environment_for(build, [], selection):
        return None
    return _sides(v, task, gold_patch)


def _sides(v: _Validation, task: TaskToGrade, gold_patch: str) -> tuple[GradeResult, GradeResult]:
    """The empty and gold patches' grades, running the suite, in the validation's environment."""
    task = replace(task, selection=v.environment.suite_args)
    return v.grade(task, "", "before", "suite"), v.grade(task, gold_patch, "after", "suite")


def _sides_reusing(v: _Validation, environment: BuiltEnvironment, build: Path, task: TaskToGrade, gold_patch: str,
                   selection: list[str]) -> Optional[tuple[GradeResult, GradeResult]]:
    """The sides' runs in an environment built for another commit, which are its check: it serves
    this commit if the gold patch's run ran the commit's test files (where the suite does not reach
    them, their collection is checked on its own). None, the runs forgotten, when it does not serve."""
    if not v.builder.runs(environment):
        return None  # its Python is no longer among this builder's runtimes
    kept, v.environment = len(v.result.runs), environment
    empty, gold = _sides(v, task, gold_patch)
    run = gold.runs[0]
    if all(_ran_file(gold, path) for path in selection) and (run.outcomes or not run.collection_error):
        check = Attempt("reuse", [f"the gold patch's run: pytest {' '.join(environment.suite_args)}".rstrip()], "ok",
                        "", "", run.seconds)
    else:
        check = v.builder.reuse_check(environment, build, selection)
    v.result.attempts.append(check)
    if check.status == "ok":
        v.result.environment_reused = True
        return empty, gold
    del v.result.runs[kept:]
    v.environment = None
    return None


@dataclass(frozen=True)
class Reach:
    """Which tests a run ran: those in `files` (test files, folders or node ids), or, with `but`,
    every other."""

    files: tuple[str, ...] = ()
    but: bool = False

    def __contains__(self, test: str) -> bool:
        return _in_files(test, self.files) != self.but


def _side_runs(grade: GradeResult, reach: Reach) -> list[tuple[TestRun, Reach]]:
    return [(run, reach) for run in grade.runs]


def _in_files(test: str, scope: list[str]) -> bool:
    """Whether a run of `scope` (test files, folders or node ids) runs `test`."""
    path = test.split("::")[0]
    return any(test == item or path == item or test.startswith(item + "::") or path.startswith(item.rstrip("/") + "/")
               for item in scope)


def _ran_file(grade: GradeResult, path: str) -> bool:
    return any(test.split("::")[0] == path for run in grade.runs for test in run.outcomes)


def _tests_seen(runs: list[tuple[TestRun, Reach]], selection: list[str], suite_whole: bool) -> list[str]:
    """The tests the oracle classifies: all that any run saw, or, when the suite's runs did not
    reach their end, only the commit's own (a suite cut short says nothing reliable elsewhere)."""
    seen = {test for run, _ in runs for test in run.outcomes}
    return sorted(seen if suite_whole else {test for test in seen if _in_files(test, selection)})


def outcomes_within_reach(runs: list[tuple[TestRun, Reach]], tests: list[str]) -> list[dict[str, str]]:
    """Each run's outcome of each test, UNKNOWN where the run did not run it (another scope) or
    stopped before it; a test it ran and does not report failed there (it did not collect)."""
    filled = []
    for run, reach in runs:
        missing = "FAILED" if run.complete else UNKNOWN
        filled.append({test: run.outcomes.get(test, missing) if test in reach else UNKNOWN for test in tests})
    return filled


def _collected_nothing(records: list[RunRecord], *, side: Side) -> bool:
    """Every run of a side ended in a collection error with no test's outcome."""
    runs = [record.run for record in records if record.side == side]
    return bool(runs) and all(run.collection_error and not run.outcomes and not run.untrusted for run in runs)


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
