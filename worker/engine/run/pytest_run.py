"""Run a repository's pytest tests in a sandbox and read each test's outcome.

Outcomes are decided here, in the worker, from the raw facts our plugin (report_plugin.py) writes
as the run goes (pytest's report of each phase, what the phase raised, what the test's own function
did), never from pytest's output or exit status. The report comes through a named pipe this
process reads as it is written, so a line, once written, is out of the run's reach. It is checked
before a word of it is believed: every line signed with the run's key (a nonce issued here), in
order, reports only for collected tests and one result each, every reported phase matched by what
the plugin saw it raise, a passing call matched by its function returning, and no line of the
plugin's saying the run reached into the harness or ran test code other than its source compiles
to. A run that fails a check is `untrusted`, with the reason, and its outcomes say nothing. A run
killed in the middle of a test (the wall clock, a crash) still has the report up to there: the
test that had started and has no result counts as FAILED, the tests never started are absent.
"""

import hashlib
import hmac
import json
import os
import re
import secrets
import select
import shutil
import tempfile
import threading
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterator, Literal, Optional, Sequence

from worker.engine.git.working_copy import tree_remove
from worker.engine.run.patch_first import PatchFirst, patch_first_served, untrusted_files_tell
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
               mount_at: Optional[str] = None, first: Optional[PatchFirst] = None,
               untrusted: Sequence[str] = ()) -> TestRun:
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
    `untrusted` (or `first.untrusted`, filled by its steps): the repository's files that are a
    candidate's own, relative to its root; the plugin watches what their code does to the run.
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
        key = secrets.token_bytes(32)
        (plugin_dir / "key").write_text(f"{key.hex()}\n{inside(report)}\n")
        if untrusted:
            untrusted_files_tell(plugin_dir, untrusted)
        env = dict(extra_env or {})
        env["COMMITGYM_TEST_TIMEOUT"] = str(per_test_timeout or 0)
        env["PYTHONDONTWRITEBYTECODE"] = "1"  # for the interpreters the tests start (ours has -B)
        # -B -E -s -S: nothing compiled written, nothing of the working copy run at start-up (report_plugin.py).
        argv = [python, "-B", "-E", "-s", "-S", inside(plugin), "-p", "no:cacheprovider", "-q",
                "--continue-on-collection-errors", *selection]
        with ExitStack() as stack:
            received = stack.enter_context(_pipe_read(report))
            if first is not None:
                argv = [*stack.enter_context(patch_first_served(first, plugin_dir, repo_dir, inside)), *argv]
            result = sandbox.run(argv, workdir=workdir, network=False, limits=limits, env=env,
                                 mount_at=mount_at, cwd=inside(repo_dir))
        data = b"".join(received)
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


@contextmanager
def _pipe_read(path: Path) -> Iterator[list[bytes]]:
    """A named pipe at `path` and a thread that reads it into the list yielded as the run writes, up to
    REPORT_BYTES kept (the rest read and dropped, so the writer never waits). Our own end is open for
    writing too: no open of the run's waits, and no read sees an end before the block does."""
    os.mkfifo(path, 0o600)
    fd = os.open(path, os.O_RDWR | os.O_NONBLOCK)
    ended_read, ended_write = os.pipe()
    received: list[bytes] = []
    kept = [0]

    def drain() -> None:
        while True:
            try:
                chunk = os.read(fd, 1 << 16)
            except BlockingIOError:
                return
            if not chunk:
                return
            if kept[0] < REPORT_BYTES:
                received.append(chunk[:REPORT_BYTES - kept[0]])
                kept[0] += len(received[-1])

    def read() -> None:
        poller = select.poll()
        poller.register(fd, select.POLLIN)
        poller.register(ended_read, select.POLLIN)
        while True:
            ready = dict(poller.poll())
            if fd in ready:
                drain()
            if ended_read in ready:
                drain()
                return

    reader = threading.Thread(target=read, name="report-reader", daemon=True)
    reader.start()
    try:
        yield received
    finally:
        os.write(ended_write, b"x")
        reader.join()
        for descriptor in (fd, ended_read, ended_write):
            os.close(descriptor)


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


@dataclass
class _TestFacts:
    """What the report says of one test: pytest's report of each phase, what the plugin saw each
    phase raise, and what the test's function did (its last call)."""
    reports: dict[str, dict] = field(default_factory=dict)  # when -> report event
    phases: dict[str, dict] = field(default_factory=dict)  # when -> phase event
    called: Optional[dict] = None
    subtest_failed: bool = False
    ended: bool = False  # its teardown was reported


def _tests_of(events: list[dict]) -> Iterator[tuple[dict, str, Optional[_TestFacts], bool]]:
    """Each event, with the node id it concerns, that test's facts so far (this event's included; a
    new test's from its start), and whether the test had already ended before this event."""
    tests: dict[str, _TestFacts] = {}
    for event in events:
        nodeid, kind = event.get("nodeid", ""), event.get("event")
        if kind not in ("start", "phase", "called", "report", "subtest_failed"):
            yield event, nodeid, None, False
            continue
        if kind == "start":
            tests[nodeid] = _TestFacts()
        facts = tests.setdefault(nodeid, _TestFacts())
        ended = facts.ended
        if kind == "phase":
            facts.phases[event.get("when")] = event
        elif kind == "called":
            facts.called = event
        elif kind == "subtest_failed":
            facts.subtest_failed = True
        elif kind == "report":
            facts.reports[event.get("when")] = event
            facts.ended = ended or event.get("when") == "teardown"
        yield event, nodeid, facts, ended


def _status(facts: _TestFacts) -> str:
    """SWE-bench's status of a test from pytest's reports of its phases: ERROR (setup or teardown
    failed), SKIPPED or XFAIL, FAILED (its call or a subtest failed), PASSED (a non-strict unexpected
    pass included; a strict one pytest reports failed)."""
    setup, call, teardown = (facts.reports.get(when) for when in ("setup", "call", "teardown"))
    if any(phase is not None and phase.get("outcome") == "failed" for phase in (setup, teardown)):
        return "ERROR"
    for phase in (setup, call):
        if phase is not None and phase.get("outcome") == "skipped":
            return "XFAIL" if phase.get("wasxfail") else "SKIPPED"
    if (call is not None and call.get("outcome") == "failed") or facts.subtest_failed:
        return "FAILED"
    if call is None:
        return "ERROR"  # set up and torn down, never run (--setup-only, --setup-plan)
    return "PASSED"


def _forgery(facts: _TestFacts) -> str:
    """Why pytest's reports of a test are not what the plugin saw happen in it ("" when they are)."""
    for when, report in facts.reports.items():
        seen = (facts.phases.get(when) or {}).get("saw")
        outcome = report.get("outcome")
        if seen is None:
            return f"a {when} report came without the phase running"
        if outcome == seen:
            continue
        # xfail turns a failure (of any phase) into a skip and a strict unexpected pass into a
        # failure; a unittest case's unexpected success fails it without an exception.
        if report.get("may_differ") and ((seen, outcome) == ("failed", "skipped")
                                         or (when == "call" and (seen, outcome) == ("passed", "failed"))):
            continue
        return f"the {when} phase {seen} but was reported {outcome}"
    call = facts.reports.get("call")
    if call is not None and call.get("outcome") == "passed" and facts.phases.get("call", {}).get("watched"):
        if facts.called is None:
            return "its function never ran, though its call passed"
        if facts.called.get("saw") != "passed":
            return f"its function raised {facts.called.get('raised')}, though its call passed"
    return ""


def _untrusted_why(events: list[dict], exit_code: Optional[int]) -> str:
    collected, ended, results = None, False, set()
    for event, nodeid, facts, repeated in _tests_of(events):
        kind = event.get("event")
        if ended:
            return "report_tampered: lines follow pytest's end"
        if kind == "collected":
            collected = set(event.get("nodeids") or ())
        elif kind == "untrusted":
            return event.get("reason") or "report_tampered: a line says the run cannot be believed"
        elif kind == "report":
            if collected is None or nodeid not in collected:
                return f"unknown_test: a result for {nodeid}, which was never collected"
            if repeated or (event.get("when") == "teardown" and nodeid in results):
                return f"duplicate_result: {nodeid} has more than one result"
            if event.get("when") == "teardown":
                results.add(nodeid)
                forged = _forgery(facts)
                if forged:
                    return f"forged_result: {nodeid}: {forged}"
        elif kind == "end":
            ended = True
    if not ended and exit_code == 0:
        return "exited_early: the run exited with status 0 before pytest's end"
    return ""


def outcomes_from_events(events: list[dict]) -> dict[str, str]:
    """Node id -> status from the report's events; a test that started and has no result (the run
    died in it) is FAILED."""
    outcomes = {}
    for event, nodeid, facts, _ in _tests_of(events):
        if event.get("event") == "start":
            outcomes.setdefault(nodeid, "FAILED")  # until its result comes
        elif event.get("event") == "report" and event.get("when") == "teardown":
            outcomes[nodeid] = _status(facts)
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

