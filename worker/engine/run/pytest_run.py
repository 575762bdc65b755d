"""Run a repository's pytest tests in a sandbox and read each test's outcome.

Outcomes come from a report pytest writes outside the repository as it goes (our plugin,
report_plugin.py), never from parsing its output. A run killed in the middle of a test
(the wall clock, os._exit, a segfault) still has the report up to there: the test that
had started and has no result counts as FAILED, the tests never started are absent.
"""

import json
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Literal, Optional

from worker.engine.sandbox.base import Limits, RunStatus, sandbox_file_read

PLUGIN_SOURCE = Path(__file__).with_name("report_plugin.py")
PLUGIN_MODULE = "commitgym_pytest_report"

# A test's outcome in a run, as the report plugin writes it (SWE-bench's statuses).
TestStatus = Literal["PASSED", "FAILED", "ERROR", "SKIPPED", "XFAIL"]
STATUSES: tuple[TestStatus, ...] = ("PASSED", "FAILED", "ERROR", "SKIPPED", "XFAIL")
PASSING = frozenset({"PASSED", "XFAIL"})
FAILING = frozenset({"FAILED", "ERROR"})
# pytest's exit codes: 2 interrupted (a collection error among others), 4 usage error
# (a selected node id not found included), 5 no tests collected.
_NOT_COLLECTED_EXIT_CODES = (2, 4, 5)


@dataclass(frozen=True)
class TestRun:
    outcomes: dict[str, str]  # node id (relative to the repository's root, whole) -> PASSED/FAILED/ERROR/SKIPPED/XFAIL
    status: RunStatus  # the sandbox's
    exit_code: Optional[int]  # pytest's; None when the sandbox stopped it at the deadline
    output: bytes
    seconds: float
    collection_error: bool  # the tests did not collect, so the outcomes say nothing of the code
    complete: bool = True  # pytest reached its end: a test missing from `outcomes` did not run at all

    __test__ = False  # a result, not a test class for pytest


def pytest_run(*, sandbox, workdir: Path, repo_dir: Path, python: str, selection: list[str],
               per_test_timeout: float, limits: Limits, extra_env: Optional[dict] = None,
               mount_at: Optional[str] = None) -> TestRun:
    """Run `python -m pytest` in `repo_dir`, inside `sandbox`, with no network.

    `repo_dir` must be below `workdir`: the sandbox can write only there (the working
    copy, the plugin and its report live in it; the report beside the repository, not in
    it). `python` is the environment's interpreter, readable in the sandbox (its
    virtualenv among the sandbox's read-only paths). `selection` holds test files or node
    ids, empty for the whole suite. `per_test_timeout` (seconds, 0 = none) fails a test
    that hangs and lets the run go on; `limits.wall_seconds` bounds the whole run.
    With `mount_at`, the sandbox sees `workdir` there (and `python` is a path inside it).
    """
    workdir, repo_dir = Path(workdir).resolve(), Path(repo_dir).resolve()
    if workdir not in repo_dir.parents:
        raise ValueError(f"the repository {repo_dir} must be inside the sandbox's working folder {workdir}")
    plugin_dir = Path(tempfile.mkdtemp(prefix="commitgym-pytest-", dir=workdir))

    def inside(path: Path) -> str:
        return f"{mount_at}/{path.relative_to(workdir)}" if mount_at else str(path)

    try:
        shutil.copyfile(PLUGIN_SOURCE, plugin_dir / f"{PLUGIN_MODULE}.py")
        report = plugin_dir / "report.jsonl"
        report.touch()
        env = dict(extra_env or {})
        env["PYTHONPATH"] = ":".join(filter(None, [inside(plugin_dir), env.get("PYTHONPATH")]))
        env["COMMITGYM_REPORT"] = inside(report)
        env["COMMITGYM_TEST_TIMEOUT"] = str(per_test_timeout or 0)
        argv = [python, "-m", "pytest", "-p", PLUGIN_MODULE, "-p", "no:cacheprovider", "-q",
                "--continue-on-collection-errors", *selection]
        result = sandbox.run(argv, workdir=workdir, network=False, limits=limits, env=env,
                             mount_at=mount_at, cwd=inside(repo_dir))
        lines = sandbox_file_read(report).decode("utf-8", "replace").splitlines()
    finally:
        shutil.rmtree(plugin_dir, ignore_errors=True)
    return TestRun(outcomes=outcomes_from_report(lines), status=result.status, exit_code=result.exit_code,
                   output=result.output, seconds=result.seconds,
                   collection_error=_collection_error(lines, result.exit_code),
                   complete=any(event.get("event") == "end" for event in _events(lines)))


def outcomes_from_report(lines: list[str]) -> dict[str, str]:
    """Node id -> status from the plugin's report lines; a test that started and has no
    result (the run died in it) is FAILED. Lines that are not whole JSON (the last one,
    cut off by a kill) are skipped."""
    outcomes = {}
    for event in _events(lines):
        if event.get("event") == "start":
            outcomes.setdefault(event["nodeid"], "FAILED")  # until its result comes
        elif event.get("event") == "result":
            outcomes[event["nodeid"]] = event["status"]
    return outcomes


def _collection_error(lines: list[str], exit_code: Optional[int]) -> bool:
    """A file failed to collect; or pytest stopped before any test started, with an exit
    code that says so or without finishing at all (pytest missing, a crash at import)."""
    events = [event.get("event") for event in _events(lines)]
    if "collect_error" in events:
        return True
    if "start" in events:
        return False
    return exit_code in _NOT_COLLECTED_EXIT_CODES or "end" not in events


def _events(lines: list[str]) -> list[dict]:
    events = []
    for line in lines:
        try:
            event = json.loads(line)
        except ValueError:
            continue
        if isinstance(event, dict):
            events.append(event)
    return events
