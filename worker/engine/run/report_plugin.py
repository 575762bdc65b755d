"""A pytest plugin that writes each test's outcome to a report file as the run goes.

It is loaded inside the sandbox with `-p commitgym_pytest_report` (pytest_run.py copies this
file under that name into a folder outside the repository and puts the folder on
PYTHONPATH), so it must run wherever an old commit's tests run: Python 3.7 to 3.13,
pytest 4.6 to 8.x, standard library only.

Environment:
  COMMITGYM_REPORT        the report's path: JSON lines, each flushed and fsynced when written
  COMMITGYM_TEST_TIMEOUT  seconds each phase of a test (setup, call, teardown) may take; 0 = none

Lines:
  {"event": "start", "nodeid"}                       before a test runs
  {"event": "result", "nodeid", "status", "seconds"} when it has ended
  {"event": "collect_error", "nodeid"}               a file or class that failed to collect
  {"event": "end", "exitstatus"}                     when the session ends

Statuses: PASSED, FAILED, ERROR (setup or teardown failed), SKIPPED, XFAIL. An unexpected
pass is PASSED, or FAILED when the xfail is strict (pytest reports it failed).
Node ids are relative to the directory pytest was started in (the repository's root),
even when pytest's rootdir is below it.
"""

import json
import os
import posixpath
import signal
import threading
from contextlib import contextmanager

import pytest

_report_path = os.environ.get("COMMITGYM_REPORT", "")
_test_timeout = float(os.environ.get("COMMITGYM_TEST_TIMEOUT", "0") or 0)
_started_in = os.getcwd()  # the repository's root
_nodeid_prefix = ""  # pytest's rootdir relative to _started_in, with a trailing "/"
_repo_ids = {}  # pytest's node id -> ours, for each collected test
_phases = {}  # node id -> the reports of its phases so far


def _write(line):
    if not _report_path:
        return
    with open(_report_path, "a") as report:
        report.write(json.dumps(line) + "\n")
        report.flush()
        os.fsync(report.fileno())


def pytest_configure(config):
    global _started_in, _nodeid_prefix
    invocation = getattr(config, "invocation_params", None)  # pytest 5.1+
    if invocation is not None:
        _started_in = str(invocation.dir)
    rootdir = str(getattr(config, "rootpath", None) or config.rootdir)
    relative = os.path.relpath(rootdir, _started_in).replace(os.sep, "/")
    _nodeid_prefix = "" if relative == "." or relative.startswith("..") else relative + "/"


def pytest_itemcollected(item):
    """pytest's node ids start at its rootdir, which is below the repository's root when
    the ini file is (and a file outside the rootdir loses its path: "::test_x"); ours
    start at the root: the item's file from there, then the rest of pytest's id."""
    path, separator, rest = item.nodeid.partition("::")
    if separator:
        relative = os.path.relpath(str(getattr(item, "path", None) or item.fspath), _started_in)
        if not relative.startswith(".."):
            _repo_ids[item.nodeid] = relative.replace(os.sep, "/") + separator + rest


def _repo_nodeid(nodeid):
    """Ours for a collected test; otherwise (a collector, xdist's controller) pytest's,
    moved under the rootdir's folder."""
    if nodeid in _repo_ids:
        return _repo_ids[nodeid]
    if not _nodeid_prefix:
        return nodeid
    path, separator, rest = nodeid.partition("::")
    return posixpath.normpath(_nodeid_prefix + path) + separator + rest


def pytest_collectreport(report):
    if report.failed:
        _write({"event": "collect_error", "nodeid": _repo_nodeid(report.nodeid)})


def pytest_runtest_logstart(nodeid, location):
    _phases[nodeid] = []
    _write({"event": "start", "nodeid": _repo_nodeid(nodeid)})


def pytest_runtest_logreport(report):
    phases = _phases.setdefault(report.nodeid, [])
    phases.append(report)
    if report.when == "teardown":  # always the last phase, run even when setup failed
        del _phases[report.nodeid]
        seconds = sum(getattr(phase, "duration", 0) or 0 for phase in phases)
        _write({"event": "result", "nodeid": _repo_nodeid(report.nodeid), "status": _status(phases),
                "seconds": round(seconds, 6)})


def _status(phases):
    by_phase = dict((phase.when, phase) for phase in phases)
    setup, call, teardown = by_phase.get("setup"), by_phase.get("call"), by_phase.get("teardown")
    if (setup is not None and setup.failed) or (teardown is not None and teardown.failed):
        return "ERROR"
    for phase in (setup, call):
        if phase is not None and phase.skipped:
            return "XFAIL" if hasattr(phase, "wasxfail") else "SKIPPED"
    if call is not None and call.failed:
        return "FAILED"
    return "PASSED"  # a non-strict unexpected pass included


def pytest_sessionfinish(session, exitstatus):
    _write({"event": "end", "exitstatus": int(exitstatus)})


class PerTestTimeout(BaseException):
    """Raised inside a test that ran past COMMITGYM_TEST_TIMEOUT (a BaseException, so the
    test's own `except Exception` does not swallow it)."""


def _on_alarm(signum, frame):
    raise PerTestTimeout("the test ran past its timeout of %g seconds" % _test_timeout)


@contextmanager
def _alarm_after_timeout():
    """SIGALRM raises PerTestTimeout in the test; only where signals reach us (POSIX, main thread)."""
    if not (_test_timeout > 0 and hasattr(signal, "setitimer")
            and threading.current_thread() is threading.main_thread()):
        yield
        return
    previous = signal.signal(signal.SIGALRM, _on_alarm)
    signal.setitimer(signal.ITIMER_REAL, _test_timeout)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_setup(item):
    with _alarm_after_timeout():
        yield


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_call(item):
    with _alarm_after_timeout():
        yield


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_teardown(item):
    with _alarm_after_timeout():
        yield
