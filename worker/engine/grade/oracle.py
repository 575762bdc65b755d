"""From test outcomes to a task's oracle and verdict (SWE-bench's grading).

Outcomes are {test id: status} per run. PASSED and XFAIL count as pass, FAILED and
ERROR as fail, SKIPPED as neither; a test missing from a run of its file counts as
failing there (a test a fix brings often cannot even be collected before it), unless
the run was cut short: then it is UNKNOWN and that run says nothing about it.
"""

from dataclasses import dataclass
from typing import Iterable, Literal, Optional

from worker.engine.run.pytest_run import PASSING

# A validation's end: "environment_failed" when no environment could be built for the commit.
Verdict = Literal["valid", "invalid", "environment_failed"]
UNKNOWN = "UNKNOWN"  # not run: its run ended before reaching it


def runs_filled(runs: list[dict[str, str]], complete: list[bool]) -> list[dict[str, str]]:
    """Mark tests missing from runs that were cut short as UNKNOWN (absent from a complete run, a
    test did not exist or did not collect there, which counts as failing)."""
    tests = {test for run in runs for test in run}
    return [run if whole else {test: run.get(test, UNKNOWN) for test in tests} for run, whole in zip(runs, complete)]


def _kind(status: Optional[str]) -> str:
    if status == UNKNOWN:
        return "unknown"
    if status in PASSING:
        return "pass"
    if status == "SKIPPED":
        return "skip"
    return "fail"  # FAILED, ERROR, or absent


@dataclass(frozen=True)
class Oracle:
    fail_to_pass: list[str]  # fails in every run before, passes in every run after
    pass_to_pass: list[str]  # passes in every run on both sides
    flaky: list[str]  # changes outcome between identical runs (excluded from everything else)
    breaks: list[str]  # passes in every run before, fails in every run after


def oracle_from_runs(before: list[dict[str, str]], after: list[dict[str, str]]) -> Oracle:
    """Classify every test seen in any run. Each side needs at least one run."""
    if not before or not after:
        raise ValueError("each side needs at least one run")
    tests = sorted({test for run in [*before, *after] for test in run})
    f2p, p2p, flaky, breaks = [], [], [], []
    for test in tests:
        before_kinds = {_kind(run.get(test)) for run in before} - {"unknown"}
        after_kinds = {_kind(run.get(test)) for run in after} - {"unknown"}
        if not before_kinds or not after_kinds:
            continue  # no run on one side reached it
        if len(before_kinds) > 1 or len(after_kinds) > 1:
            flaky.append(test)
            continue
        pair = (before_kinds.pop(), after_kinds.pop())
        if pair == ("fail", "pass"):
            f2p.append(test)
        elif pair == ("pass", "pass"):
            p2p.append(test)
        elif pair == ("pass", "fail"):
            breaks.append(test)
    return Oracle(fail_to_pass=f2p, pass_to_pass=p2p, flaky=flaky, breaks=breaks)


def oracle_without(oracle: Oracle, excluded: Iterable[str]) -> Oracle:
    """The oracle with the tests reviewers dropped as wrong taken out of every list."""
    dropped = set(excluded)
    if not dropped:
        return oracle
    return Oracle(*[[test for test in tests if test not in dropped]
                    for tests in (oracle.fail_to_pass, oracle.pass_to_pass, oracle.flaky, oracle.breaks)])


def resolves(outcomes: dict[str, str], *, fail_to_pass: Iterable[str], pass_to_pass: Iterable[str]) -> bool:
    """SWE-bench's grade: resolved only if every F2P and every P2P test passes."""
    return all(outcomes.get(test) in PASSING for test in [*fail_to_pass, *pass_to_pass])


def run_resolves(run, *, fail_to_pass: Iterable[str], pass_to_pass: Iterable[str],
                 reference_xfail: Iterable[str] = ()) -> bool:
    """The grade of one run (a TestRun): never resolved when its report cannot be believed. An
    XFAIL counts as passing only for a test the reference (the commit's own runs) saw XFAIL: code
    under grading that calls pytest.xfail() does not pass a test that way."""
    if run.untrusted:
        return False
    allowed = set(reference_xfail)
    outcomes = {test: "FAILED" if status == "XFAIL" and test not in allowed else status
                for test, status in run.outcomes.items()}
    return resolves(outcomes, fail_to_pass=fail_to_pass, pass_to_pass=pass_to_pass)


def graded_files(fail_to_pass: Iterable[str], pass_to_pass: Iterable[str]) -> list[str]:
    """The test files a grade runs: those of the F2P and P2P tests."""
    return sorted({test.split("::")[0] for test in [*fail_to_pass, *pass_to_pass]})


# A candidate's grade from one run, SWE-bench's way, beside the runs that say nothing of the code.
RUN_OUTCOMES = ("resolved", "partial", "no", "error", "timeout", "untrusted")
_CUT_SHORT = ("out_of_memory", "output_limit", "disk_limit", "killed")


def run_outcome(run, *, fail_to_pass: Iterable[str], pass_to_pass: Iterable[str],
                reference_xfail: Iterable[str] = ()) -> str:
    """resolved (every F2P and P2P test passes), partial (some F2P pass, every P2P passes), no;
    untrusted (the report was forged), timeout, error (the tests did not collect, or the sandbox
    stopped the run on a limit)."""
    if run.untrusted:
        return "untrusted"
    if run.status == "timeout":
        return "timeout"
    if run.status in _CUT_SHORT or (run.collection_error and not run.outcomes):
        return "error"
    fail_to_pass, pass_to_pass = list(fail_to_pass), list(pass_to_pass)
    if run_resolves(run, fail_to_pass=fail_to_pass, pass_to_pass=pass_to_pass, reference_xfail=reference_xfail):
        return "resolved"
    allowed = set(reference_xfail)
    passing = {test for test, status in run.outcomes.items()
               if status in PASSING and (status != "XFAIL" or test in allowed)}
    if any(test in passing for test in fail_to_pass) and all(test in passing for test in pass_to_pass):
        return "partial"
    return "no"


def runs_outcome(outcomes: list[str]) -> str:
    """The grade of several runs of one candidate (a task whose tests were ever flaky): untrusted if
    any run was; else the outcome most runs had, a tie going to the worse."""
    if "untrusted" in outcomes:
        return "untrusted"
    worst_first = ("error", "timeout", "no", "partial", "resolved")
    return max(worst_first, key=lambda outcome: (outcomes.count(outcome), -worst_first.index(outcome)))


def task_verdict(oracle: Oracle, *, gold_resolves: bool, empty_resolves: bool) -> tuple[Verdict, str]:
    """("valid", "") or ("invalid", reason code), checks in a fixed order."""
    if not oracle.fail_to_pass:
        return "invalid", "no_fail_to_pass"
    if oracle.breaks:
        return "invalid", "breaks_other_tests"
    if not gold_resolves:
        return "invalid", "gold_patch_fails"
    if empty_resolves:
        return "invalid", "empty_patch_resolves"
    return "valid", ""
