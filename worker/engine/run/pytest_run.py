"""Run a repository's pytest tests in a sandbox and read each test's outcome.

Outcomes come from a report our plugin (report_plugin.py) writes as the run goes, never from
pytest's output or exit status. The report is checked before a word of it is believed: every
line signed with the run's key, in order, one result per collected test, no test the plugin saw
reported other than it ran, pytest's internals as they were. A run that fails a check is
`untrusted`, with the reason, and its outcomes say nothing. A run killed in the middle of a test
(the wall clock, a crash) still has the report up to there: the test that had started and has no
result counts as FAILED, the tests never started are absent.
"""

import hashlib
import hmac
import json
import os
import re
import secrets
import shutil
import stat
import tempfile
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path
from typing import Literal, Optional

from worker.engine.git.working_copy import tree_remove
from worker.engine.run.patch_first import PatchFirst, patch_first_served
from worker.engine.sandbox.base import Limits, RunStatus

PLUGIN_SOURCE = Path(__file__).with_name("report_plugin.py")
PLUGIN_MODULE = "commitgym_pytest_report"
REPORT_BYTES = 64 << 20  # read of a report at most

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
    untrusted: str = ""  # why the report cannot be believed ("code: detail"); its outcomes are then empty

    __test__ = False  # a result, not a test class for pytest


def pytest_run(*, sandbox, workdir: Path, repo_dir: Path, python: str, selection: list[str],
               per_test_timeout: float, limits: Limits, extra_env: Optional[dict] = None,
               mount_at: Optional[str] = None, first: Optional[PatchFirst] = None) -> TestRun:
    """Run `python -m pytest` in `repo_dir`, inside `sandbox`, with no network.

    `repo_dir` must be below `workdir`: the sandbox can write only there (the working
    copy, the plugin and its report live in it; the report beside the repository, not in
    it). `python` is the environment's interpreter, readable in the sandbox (its
    virtualenv among the sandbox's read-only paths). `selection` holds test files or node
    ids, empty for the whole suite. `per_test_timeout` (seconds, 0 = none) fails a test
    that hangs and lets the run go on; `limits.wall_seconds` bounds the whole run.
    With `mount_at`, the sandbox sees `workdir` there (and `python` is a path inside it).
    With `first`, its patch is applied in the same sandbox before the tests, and its steps done
    (patch_first.py); a patch that does not apply, or a step that fails, ends the run before its
    tests (`first` says which). The run's `seconds` are then counted from the tests' start.
    """
    workdir, repo_dir = Path(workdir).resolve(), Path(repo_dir).resolve()
    if workdir not in repo_dir.parents:
        raise ValueError(f"the repository {repo_dir} must be inside the sandbox's working folder {workdir}")
    plugin_dir = Path(tempfile.mkdtemp(prefix="commitgym-pytest-", dir=workdir))

    def inside(path: Path) -> str:
        return f"{mount_at}/{path.relative_to(workdir)}" if mount_at else str(path)

    try:
        plugin = plugin_dir / f"{PLUGIN_MODULE}.py"
        shutil.copyfile(PLUGIN_SOURCE, plugin)
        report = plugin_dir / "report.jsonl"
        report.touch()
        key = secrets.token_bytes(32)
        (plugin_dir / "key").write_text(f"{key.hex()}\n{inside(report)}\n")
        # Our own handle: the plugin removes the report's name as it takes it.
        report_fd = os.open(report, os.O_RDONLY | os.O_NOFOLLOW)
        try:
            env = dict(extra_env or {})
            env["COMMITGYM_TEST_TIMEOUT"] = str(per_test_timeout or 0)
            # -E -s -S: nothing of the working copy runs at start-up (report_plugin.py's docstring).
            argv = [python, "-E", "-s", "-S", inside(plugin), "-p", "no:cacheprovider", "-q",
                    "--continue-on-collection-errors", *selection]
            with ExitStack() as stack:
                if first is not None:
                    argv = [*stack.enter_context(patch_first_served(first, plugin_dir, repo_dir, inside)), *argv]
                result = sandbox.run(argv, workdir=workdir, network=False, limits=limits, env=env,
                                     mount_at=mount_at, cwd=inside(repo_dir))
            data = _read_all(report_fd)
        finally:
            os.close(report_fd)
    finally:
        tree_remove(plugin_dir)  # the run can write in it: thousands of folders deep, say
    checked = report_check(data, key, exit_code=result.exit_code)
    events = [] if checked.untrusted else checked.events
    seconds = result.seconds
    if first is not None and first.released_at:  # the tests' own time: from the moment they were let start
        seconds = max(0.0, seconds - (first.released_at - result.started_at))
    return TestRun(outcomes=outcomes_from_events(events), status=result.status, exit_code=result.exit_code,
                   output=result.output, seconds=seconds,
                   collection_error=_collection_error(events, result.exit_code),
                   complete=any(event.get("event") == "end" for event in events), untrusted=checked.untrusted)


def _read_all(fd: int) -> bytes:
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        return b""
    os.lseek(fd, 0, os.SEEK_SET)
    chunks, size = [], 0
    while size < REPORT_BYTES:
        chunk = os.read(fd, min(1 << 20, REPORT_BYTES - size))
        if not chunk:
            break
        chunks.append(chunk)
        size += len(chunk)
    return b"".join(chunks)


@dataclass(frozen=True)
class CheckedReport:
    events: list[dict]
    untrusted: str = ""


def report_check(data: bytes, key: bytes, *, exit_code: Optional[int]) -> CheckedReport:
    """The report's events, if it is what the plugin wrote and nothing says a result was forged;
    otherwise why not. The last line may be cut off (the run was killed while it was written)."""
    lines = data.split(b"\n")
    events = []
    for number, line in enumerate(lines[:-1]):
        mac, _, body = line.partition(b" ")
        expected = hmac.new(key, body, hashlib.sha256).hexdigest().encode()
        if not hmac.compare_digest(mac, expected):
            return CheckedReport(events, f"report_tampered: line {number + 1} was not written by the plugin")
        event = json.loads(body)
        if event.get("seq") != number:
            return CheckedReport(events, f"report_tampered: line {number + 1} is out of order")
        events.append(event)
    return CheckedReport(events, _untrusted_why(events, exit_code))


def _untrusted_why(events: list[dict], exit_code: Optional[int]) -> str:
    collected, results, ended = None, set(), False
    for event in events:
        kind = event.get("event")
        if ended:
            return "report_tampered: lines follow pytest's end"
        if kind == "collected":
            collected = set(event.get("nodeids") or ())
        elif kind == "tampered":
            return f"pytest_internals_changed: {event.get('what')}"
        elif kind == "result":
            nodeid = event.get("nodeid")
            if event.get("forged"):
                return f"forged_result: {nodeid}: {event['forged']}"
            if collected is None or nodeid not in collected:
                return f"unknown_test: a result for {nodeid}, which was never collected"
            if nodeid in results:
                return f"duplicate_result: {nodeid} has more than one result"
            results.add(nodeid)
        elif kind == "end":
            ended = True
            if event.get("results") != len(results):
                return (f"report_tampered: the end counts {event.get('results')} results, the report holds "
                        f"{len(results)}")
    if not ended and exit_code == 0:
        return "exited_early: the run exited with status 0 before pytest's end"
    return ""


def outcomes_from_events(events: list[dict]) -> dict[str, str]:
    """Node id -> status from the report's events; a test that started and has no result (the run
    died in it) is FAILED."""
    outcomes = {}
    for event in events:
        if event.get("event") == "start":
            outcomes.setdefault(event["nodeid"], "FAILED")  # until its result comes
        elif event.get("event") == "result":
            outcomes[event["nodeid"]] = event["status"]
    return outcomes


def _collection_error(events: list[dict], exit_code: Optional[int]) -> bool:
    """A file failed to collect; or pytest stopped before any test started, with an exit
    code that says so or without finishing at all (pytest missing, a crash at import)."""
    events = [event.get("event") for event in events]
    if "collect_error" in events:
        return True
    if "start" in events:
        return False
    return exit_code in _NOT_COLLECTED_EXIT_CODES or "end" not in events


_SECTION = re.compile(r"^_{3,} (.+?) _{3,}$", re.M)
_SUMMARY = re.compile(r"^={3,}", re.M)


def output_section_of(output: str, test_id: str) -> Optional[str]:
    """The part of a run's output pytest wrote about one test (its failure's traceback and captured
    output), found by the section title pytest gives it; None when there is none (a test that passed)."""
    _, _, name = test_id.partition("::")
    title = name.replace("::", ".")
    for found in _SECTION.finditer(output):
        if found.group(1) == title:
            following = [m.start() for m in (_SECTION.search(output, found.end()), _SUMMARY.search(output, found.end()))
                         if m is not None]
            return output[found.start():min(following, default=len(output))].rstrip()
    return None

