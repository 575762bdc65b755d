"""pytest runs in the local sandbox, read through our report plugin, across pytest versions.

Real runs: a virtualenv per pytest version (built once per module with uv), bubblewrap
as on the workers, a small generated repository with one test of each kind. The forgeries run
in the docker sandbox too, in an environment its builder made.
"""

import ast
import hashlib
import hmac
import json
import os
import shlex
import shutil
import subprocess
import tempfile
import time
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Callable, Optional

import pytest

from worker.engine.env.recipes import ENV, WORKSPACE
from worker.engine.env.runtimes import default_images, docker_runtimes
from worker.engine.git.working_copy import PATCH_APPLY_ARGV
from worker.engine.run.patch_first import PatchFirst
from worker.engine.run.pytest_run import outcomes_from_events, pytest_run, report_check
from worker.engine.sandbox.base import Limits
from worker.engine.sandbox.local import LocalSandbox

UV = str(Path(__file__).resolve().parents[2] / ".venv" / "bin" / "uv")
PYTEST_VERSIONS = ["pytest==6.2.5", "pytest>=8,<9"]  # the oldest we test and the newest 8.x
LIMITS = Limits(wall_seconds=60, cpu_seconds=60, memory_bytes=2 << 30, processes=64,
                file_bytes=16 << 20, output_bytes=256 << 10)

OUTCOMES_FILE = '''
import pytest

@pytest.fixture
def broken_setup():
    raise RuntimeError("setup fails")

@pytest.fixture
def broken_teardown():
    yield
    raise RuntimeError("teardown fails")

def test_passes():
    assert True

def test_fails():
    assert 1 == 2

def test_setup_error(broken_setup):
    pass

def test_teardown_error(broken_teardown):
    pass

def test_skipped():
    pytest.skip("not here")

@pytest.mark.xfail(reason="known bug")
def test_xfail():
    assert False

@pytest.mark.xfail(reason="fixed already")
def test_xpass():
    pass

@pytest.mark.xfail(strict=True, reason="fixed already")
def test_strict_xpass():
    pass

@pytest.mark.parametrize("word, number", [("a b", 1), pytest.param("c", 2, id="odd [id] here")])
def test_x(word, number):
    assert number == 1
'''

HANG_FILE = '''
import time

def test_before():
    pass

def test_hangs():
    while True:
        try:
            time.sleep(0.1)
        except Exception:  # a loop that swallows errors is still stopped
            pass

def test_after():
    pass
'''

EXIT_FILE = '''
import os

def test_first():
    pass

def test_exits():
    os._exit(1)

def test_never_runs():
    pass
'''


@pytest.fixture(scope="module", autouse=True)
def _bubblewrap_is_here():
    if not LocalSandbox.available():
        pytest.fail("these tests need bubblewrap (make test installs it)")


@pytest.fixture(scope="module")
def shared_dir():
    """World-traversable (pytest's own tmp dirs are private to root, the sandbox user is not root)."""
    base = Path(tempfile.mkdtemp(prefix="commitgym-test-run-"))
    base.chmod(0o755)
    yield base
    shutil.rmtree(base, ignore_errors=True)


def venv_with(folder: Path, *requirements: str) -> Path:
    """A virtualenv of the host's Python at `folder` (made once) with `requirements`."""
    if not folder.exists():
        env = {**os.environ, "SSL_CERT_FILE": "/etc/ssl/certs/ca-certificates.crt"}
        subprocess.run([UV, "venv", "-q", "--python", "/usr/bin/python3", str(folder)], check=True, env=env)
        subprocess.run([UV, "pip", "install", "-q", "--python", str(folder / "bin" / "python"), *requirements],
                       check=True, env=env)
    return folder


@pytest.fixture(scope="module", params=PYTEST_VERSIONS)
def venv(request, shared_dir) -> Path:
    return venv_with(shared_dir / f"venv-{PYTEST_VERSIONS.index(request.param)}", request.param)


@dataclass
class Sandboxed:
    """Runs pytest in one sandbox with one environment, as validation does: `(workdir, repo, selection)`."""
    environment: Path  # on the host
    sandbox: Callable[[], object]
    mount_at: Optional[str] = None  # where the sandbox sees the working folder; None: at its own path

    def __call__(self, workdir: Path, repo: Path, selection: list):
        python = f"{ENV}/bin/python" if self.mount_at else str(self.environment / "bin" / "python")
        return pytest_run(sandbox=self.sandbox(), workdir=workdir, repo_dir=repo, python=python,
                          selection=selection, per_test_timeout=10.0, limits=LIMITS, mount_at=self.mount_at)

    def inside(self, workdir: Path, path: Path) -> str:
        return f"{self.mount_at}/{path.relative_to(workdir)}" if self.mount_at else str(path)


@pytest.fixture(scope="module", params=[*PYTEST_VERSIONS, "docker", "docker-python2"])
def sandboxed(request, shared_dir, docker_builder_make) -> Sandboxed:
    """Every forgery is tried in the local sandbox with each pytest, and in the docker sandbox with
    an environment its builder made: the newest pytest, and Python 2.7 with pytest 4.6."""
    return _sandboxed(request.param, shared_dir, docker_builder_make)


@pytest.fixture(scope="module")
def sandboxed_python2(shared_dir, docker_builder_make) -> Sandboxed:
    """Python 2.7 alone, for what only it allows (raising an old-style class)."""
    return _sandboxed("docker-python2", shared_dir, docker_builder_make)


@pytest.fixture(scope="module", params=[*PYTEST_VERSIONS, "docker"])
def sandboxed_python3(request, shared_dir, docker_builder_make) -> Sandboxed:
    """The same, for what only Python 3 has (asyncio)."""
    return _sandboxed(request.param, shared_dir, docker_builder_make)


def _sandboxed(param: str, shared_dir: Path, docker_builder_make) -> Sandboxed:
    if not param.startswith("docker"):
        environment = venv_with(shared_dir / f"venv-{PYTEST_VERSIONS.index(param)}", param)
        return Sandboxed(environment, lambda: LocalSandbox(read_only=[environment]))
    runtimes = docker_runtimes(default_images())
    runtimes = [r for r in runtimes if r.python2] if param == "docker-python2" else runtimes[:1]
    assert runtimes, "make test builds commitgym-base:bullseye with Python 2.7 (deploy/dev/docker.sh)"
    builder = docker_builder_make(shared_dir / f"envs-{param}", runtimes=runtimes)
    work = Path(tempfile.mkdtemp(prefix="build-", dir=shared_dir))
    work.chmod(0o755)
    make_repo(work, {"tests/test_x.py": "def test_x():\n    pass\n"})
    built = builder.build(work, as_of=datetime.now(timezone.utc))
    return Sandboxed(built.path, lambda: builder.sandbox([(built.path, ENV)], image=built.image), WORKSPACE)


@pytest.fixture
def workdir(shared_dir) -> Path:
    work = Path(tempfile.mkdtemp(prefix="work-", dir=shared_dir))
    work.chmod(0o755)
    yield work
    shutil.rmtree(work, ignore_errors=True)


def make_repo(workdir: Path, files: dict) -> Path:
    repo = workdir / "repo"
    for name, text in files.items():
        (repo / name).parent.mkdir(parents=True, exist_ok=True)
        (repo / name).write_text(text)
    return repo


def run(venv, workdir, repo, selection, per_test_timeout=10.0, limits=LIMITS):
    return pytest_run(sandbox=LocalSandbox(read_only=[venv]), workdir=workdir, repo_dir=repo,
                      python=str(venv / "bin" / "python"), selection=selection,
                      per_test_timeout=per_test_timeout, limits=limits)


def test_each_kind_of_outcome_under_its_whole_node_id(venv, workdir):
    repo = make_repo(workdir, {"tests/test_outcomes.py": OUTCOMES_FILE})
    result = run(venv, workdir, repo, ["tests/test_outcomes.py"])
    name = "tests/test_outcomes.py::"
    assert result.outcomes == {
        name + "test_passes": "PASSED",
        name + "test_fails": "FAILED",
        name + "test_setup_error": "ERROR",
        name + "test_teardown_error": "ERROR",
        name + "test_skipped": "SKIPPED",
        name + "test_xfail": "XFAIL",
        name + "test_xpass": "PASSED",
        name + "test_strict_xpass": "FAILED",
        name + "test_x[a b-1]": "PASSED",
        name + "test_x[odd [id] here]": "FAILED",
    }, (result.untrusted, result.output.decode())
    assert result.status == "failed" and result.exit_code == 1 and not result.collection_error
    assert b"setup fails" in result.output
    assert [path.name for path in repo.rglob("*") if "commitgym" in path.name or "report" in path.name] == []
    assert sorted(path.name for path in workdir.iterdir()) == ["repo"]  # the plugin's folder is gone


def test_the_whole_suite_runs_when_nothing_is_selected(venv, workdir):
    repo = make_repo(workdir, {"test_top.py": "def test_one():\n    pass\n",
                               "pkg/tests/test_deep.py": "def test_two():\n    pass\n"})
    result = run(venv, workdir, repo, [])
    assert result.outcomes == {"test_top.py::test_one": "PASSED", "pkg/tests/test_deep.py::test_two": "PASSED"}
    assert result.status == "ok" and result.exit_code == 0 and not result.collection_error


def test_node_ids_are_relative_to_the_repository_even_when_pytests_rootdir_is_below_it(venv, workdir):
    """pytest's rootdir is where it finds its ini file, pkg/ here, and its node ids start there."""
    repo = make_repo(workdir, {"pkg/pytest.ini": "[pytest]\n", "pkg/tests/test_deep.py": "def test_two():\n    pass\n",
                               "other/test_outside.py": "def test_three():\n    pass\n"})
    result = run(venv, workdir, repo, ["pkg/tests/test_deep.py"])
    assert result.outcomes == {"pkg/tests/test_deep.py::test_two": "PASSED"}
    # A file outside pytest's rootdir gets the id "::test_three" from pytest; ours keeps its path.
    result = run(venv, workdir, repo, ["pkg/tests/test_deep.py", "other/test_outside.py"])
    assert result.outcomes == {"pkg/tests/test_deep.py::test_two": "PASSED",
                               "other/test_outside.py::test_three": "PASSED"}


def test_a_suite_of_unittest_cases_and_plain_tests_runs_trusted(venv, workdir):
    """pytest 7+ marks a node class the first time it makes an item of it (nodes.py): made first, the
    flag set on TestCaseFunction shadows the one set on Function later, and is pytest's own."""
    repo = make_repo(workdir, {
        "tests/__init__.py": "",
        "tests/test_cases.py": "import unittest\n\n\nclass Case(unittest.TestCase):\n"
                               "    def test_method(self):\n        self.assertEqual(1, 1)\n",
        "tests/test_plain.py": "def test_plain():\n    pass\n"})
    result = run(venv, workdir, repo, [])
    assert result.untrusted == ""
    assert result.outcomes == {"tests/test_cases.py::Case::test_method": "PASSED",
                               "tests/test_plain.py::test_plain": "PASSED"}


def test_a_candidates_module_importing_asyncio_runs_trusted(venv, workdir):
    """asyncio's import sets a function's __code__ (types.coroutine): the standard library's doing,
    though the candidate's import started it; a fix that imports asyncio is graded like any other."""
    repo = make_repo(workdir, {"pkg/__init__.py": "", "pkg/mod.py": "import asyncio\n\n\ndef value():\n    return 2\n",
                               "tests/test_mod.py": "from pkg.mod import value\n\n\ndef test_value():\n"
                                                    "    assert value() == 2\n"})
    result = pytest_run(sandbox=LocalSandbox(read_only=[venv]), workdir=workdir, repo_dir=repo,
                        python=str(venv / "bin" / "python"), selection=["tests/test_mod.py"], per_test_timeout=10.0,
                        limits=LIMITS, untrusted=["pkg/mod.py"])
    assert (result.untrusted, result.outcomes) == ("", {"tests/test_mod.py::test_value": "PASSED"})


def test_one_test_selected_by_its_node_id(venv, workdir):
    repo = make_repo(workdir, {"tests/test_outcomes.py": OUTCOMES_FILE})
    for node_id in ["tests/test_outcomes.py::test_x[odd [id] here]", "tests/test_outcomes.py::test_x[a b-1]"]:
        result = run(venv, workdir, repo, [node_id])
        assert list(result.outcomes) == [node_id], result.output.decode()


def test_a_hanging_test_fails_at_its_timeout_and_the_run_goes_on(venv, workdir):
    repo = make_repo(workdir, {"tests/test_hang.py": HANG_FILE})
    result = run(venv, workdir, repo, ["tests/test_hang.py"], per_test_timeout=2)
    assert result.outcomes == {"tests/test_hang.py::test_before": "PASSED",
                               "tests/test_hang.py::test_hangs": "FAILED",
                               "tests/test_hang.py::test_after": "PASSED"}, result.output.decode()
    assert result.status == "failed" and b"timeout of 2 seconds" in result.output
    assert 2 <= result.seconds < 30


def test_a_hang_stopped_only_by_the_wall_clock_fails_the_test_it_was_in(venv, workdir):
    repo = make_repo(workdir, {"tests/test_hang.py": HANG_FILE})
    result = run(venv, workdir, repo, ["tests/test_hang.py"], per_test_timeout=0,
                 limits=Limits(wall_seconds=8, cpu_seconds=60, processes=64))
    assert result.status == "timeout" and result.exit_code is None
    assert result.outcomes == {"tests/test_hang.py::test_before": "PASSED",
                               "tests/test_hang.py::test_hangs": "FAILED"}
    assert not result.collection_error


def test_a_test_that_exits_the_interpreter_fails_and_the_report_up_to_it_survives(venv, workdir):
    repo = make_repo(workdir, {"tests/test_exit.py": EXIT_FILE})
    result = run(venv, workdir, repo, [])
    assert result.outcomes == {"tests/test_exit.py::test_first": "PASSED",
                               "tests/test_exit.py::test_exits": "FAILED"}
    assert result.status == "failed" and result.exit_code == 1 and not result.collection_error


def test_a_file_that_does_not_collect_is_a_collection_error(venv, workdir):
    repo = make_repo(workdir, {"tests/test_fine.py": "def test_one():\n    pass\n",
                               "tests/test_broken.py": "import no_such_module\n"})
    result = run(venv, workdir, repo, [])
    assert result.collection_error and result.exit_code == 1, result.output.decode()
    # The other files still run: one file's import error must not turn the others' tests into failures.
    assert result.outcomes == {"tests/test_fine.py::test_one": "PASSED"}
    assert b"no_such_module" in result.output


def test_a_selected_node_id_that_does_not_exist_is_a_collection_error(venv, workdir):
    repo = make_repo(workdir, {"tests/test_fine.py": "def test_one():\n    pass\n"})
    result = run(venv, workdir, repo, ["tests/test_fine.py::test_missing"])
    assert result.collection_error and result.exit_code == 4 and result.outcomes == {}


def test_the_repository_must_be_inside_the_working_folder(venv, workdir, shared_dir):
    outside = make_repo(Path(tempfile.mkdtemp(dir=shared_dir)), {"test_a.py": "def test_a():\n    pass\n"})
    with pytest.raises(ValueError, match="inside the sandbox's working folder"):
        run(venv, workdir, outside, [])


# the plugin's source, and outcomes_from_report with plain data


FIXED_TEST = ("def test_value():\n    import fixed\n    open('ran', 'w').close()\n"
              "    with open('fixed.py', 'a') as source:  # the run's user owns what the worker's steps wrote\n"
              "        source.write('# touched by the test')\n    assert fixed.VALUE == 2\n")
VALUE_TO_2 = ("diff --git a/fixed.py b/fixed.py\n--- a/fixed.py\n+++ b/fixed.py\n@@ -1 +1 @@\n-VALUE = 1\n"
              "+VALUE = 2\n")


def first_run(sandboxed: Sandboxed, workdir: Path, repo: Path, first: PatchFirst):
    python = f"{ENV}/bin/python" if sandboxed.mount_at else str(sandboxed.environment / "bin" / "python")
    return pytest_run(sandbox=sandboxed.sandbox(), workdir=workdir, repo_dir=repo, python=python,
                      selection=["test_fixed.py"], per_test_timeout=10.0, limits=LIMITS, mount_at=sandboxed.mount_at,
                      first=first)


def test_a_patch_applied_first_is_looked_at_before_the_tests_start_and_its_time_is_not_theirs(
        sandboxed_python3, workdir):
    repo = make_repo(workdir, {"fixed.py": "VALUE = 1\n", "test_fixed.py": FIXED_TEST})
    seen = []

    def look(copy: Path) -> None:
        seen.append(((copy / "fixed.py").read_text(), (copy / "ran").exists()))
        (copy / "fixed.py").unlink()  # put back as root, as grading puts files back: handed to the run after
        (copy / "fixed.py").write_text("VALUE = 2\n")
        time.sleep(3)

    first = PatchFirst(VALUE_TO_2, then=[look])
    result = first_run(sandboxed_python3, workdir, repo, first)
    assert seen == [("VALUE = 2\n", False)]  # patched, and no test had run
    assert first.applied and first.error is None
    assert result.outcomes == {"test_fixed.py::test_value": "PASSED"}, (result.untrusted, result.output.decode())
    assert (repo / "fixed.py").read_text() == "VALUE = 2\n# touched by the test"
    assert result.seconds < 3, result.seconds  # the tests' own time, from the moment they were let start


def test_a_patch_that_does_not_apply_or_a_step_that_fails_ends_the_run_before_its_tests(venv, workdir):
    sandboxed = Sandboxed(venv, lambda: LocalSandbox(read_only=[venv]))
    repo = make_repo(workdir, {"fixed.py": "VALUE = 1\n", "test_fixed.py": FIXED_TEST})
    steps = []
    for patch in (VALUE_TO_2.replace("-VALUE = 1", "-VALUE = 7"),  # not what the file says
                  "diff --git a/../go b/../go\nnew file mode 100644\n--- /dev/null\n+++ b/../go\n@@ -0,0 +1 @@\n+go\n"):
        first = PatchFirst(patch, then=[steps.append])
        result = first_run(sandboxed, workdir, repo, first)
        assert first.applied is False and not first.released_at and steps == []
        assert result.outcomes == {} and not (repo / "ran").exists()

    def refuse(copy: Path) -> None:
        raise RuntimeError("a folder above it leads out of the working copy")

    first = PatchFirst(VALUE_TO_2, then=[refuse, steps.append])
    result = first_run(sandboxed, workdir, repo, first)
    assert first.applied and isinstance(first.error, RuntimeError) and steps == []
    assert result.outcomes == {} and not (repo / "ran").exists()


# A copy laid out as a bare repository whose config has a filter for every file: a git that looked
# for a repository in it would run the filter on each file it reads or writes.
AS_A_REPOSITORY = {"HEAD": "ref: refs/heads/main\n", "objects/keep": "", "refs/keep": "",
                   ".gitattributes": "* filter=x\n",
                   "config": "[core]\n\tbare = false\n\tworktree = .\n[filter \"x\"]\n"
                             "\tclean = touch filtered; cat\n\tsmudge = touch filtered; cat\n"}


def test_a_copy_laid_out_as_a_repository_runs_nothing_while_the_patch_is_applied(sandboxed_python3, workdir):
    repo = make_repo(workdir, {"fixed.py": "VALUE = 1\n", "test_fixed.py": FIXED_TEST, **AS_A_REPOSITORY})
    seen = []
    first = PatchFirst(VALUE_TO_2, then=[lambda copy: seen.append(((copy / "fixed.py").read_text(),
                                                                   (copy / "filtered").exists()))])
    result = first_run(sandboxed_python3, workdir, repo, first)
    assert first.applied and seen == [("VALUE = 2\n", False)]
    assert result.outcomes == {"test_fixed.py::test_value": "PASSED"}, (result.untrusted, result.output.decode())
    assert not (repo / "filtered").exists()


def test_a_patch_whose_applying_left_a_process_running_counts_as_not_applied(sandboxed_python3, workdir,
                                                                               monkeypatch):
    from worker.engine.run import patch_first

    git_apply = shlex.join(PATCH_APPLY_ARGV)
    assert git_apply in patch_first.DRIVER
    monkeypatch.setattr(patch_first, "DRIVER", patch_first.DRIVER.replace(git_apply, f"(sleep 30 &); {git_apply}"))
    repo = make_repo(workdir, {"fixed.py": "VALUE = 1\n", "test_fixed.py": FIXED_TEST})
    steps = []
    first = PatchFirst(VALUE_TO_2, then=[steps.append])
    result = first_run(sandboxed_python3, workdir, repo, first)
    assert first.applied is False and steps == [] and result.outcomes == {}
    assert not (repo / "ran").exists()


def test_tests_that_write_to_the_runs_pipes_change_nothing_the_worker_decided(venv, workdir):
    hostile = ("import glob, os\n\ndef test_value():\n    import fixed\n"
               "    for pipe in glob.glob('../commitgym-pytest-*/applied') + glob.glob('../commitgym-pytest-*/go'):\n"
               "        fd = os.open(pipe, os.O_RDWR | os.O_NONBLOCK)\n"
               "        try:\n            while True:\n                os.write(fd, b'0\\ngo\\n' * 4096)\n"
               "        except BlockingIOError:\n            pass  # full: nobody reads it any more\n"
               "    assert fixed.VALUE == 2\n")
    repo = make_repo(workdir, {"fixed.py": "VALUE = 1\n", "test_fixed.py": hostile})
    steps = []
    first = PatchFirst(VALUE_TO_2, then=[steps.append])
    result = first_run(Sandboxed(venv, lambda: LocalSandbox(read_only=[venv])), workdir, repo, first)
    assert first.applied and len(steps) == 1
    assert result.outcomes == {"test_fixed.py::test_value": "PASSED"}, (result.untrusted, result.output.decode())
    assert result.status == "ok"


def test_the_plugin_is_python_3_7_syntax():
    source = (Path(__file__).parents[2] / "worker" / "engine" / "run" / "report_plugin.py").read_text()
    ast.parse(source, feature_version=(3, 7))


def signed(key: bytes, *events: dict, tail: bytes = b"") -> bytes:
    """A report as the plugin writes it: each line MAC'd under the key, numbered from 0."""
    lines = []
    for number, event in enumerate(events):
        body = json.dumps({**event, "seq": number}, sort_keys=True).encode()
        lines.append(hmac.new(key, body, hashlib.sha256).hexdigest().encode() + b" " + body + b"\n")
    return b"".join(lines) + tail


KEY = b"k" * 32


def outcomes(*events: dict, tail: bytes = b"", exit_code=0):
    checked = report_check(signed(KEY, *events, tail=tail), KEY, exit_code=exit_code)
    assert checked.untrusted == "", checked.untrusted
    return outcomes_from_events(checked.events)


def untrusted(data: bytes, exit_code=1) -> str:
    return report_check(data, KEY, exit_code=exit_code).untrusted


def collected(*nodeids):
    return {"event": "collected", "nodeids": list(nodeids)}


def start(nodeid):
    return {"event": "start", "nodeid": nodeid}


def result(nodeid, status, **forged):
    """The events a test with this status leaves (its start not included): what the plugin saw each
    phase raise and pytest's report of it, and its function's call. `forged` sets pytest's report of
    a phase apart from what the plugin saw (`call="passed"`), or the function's call (`called=...`)."""
    saw = {"PASSED": ("passed", "passed", "passed"), "FAILED": ("passed", "failed", "passed"),
           "ERROR": ("failed", None, "passed"), "SKIPPED": ("skipped", None, "passed"),
           "XFAIL": ("passed", "failed", "passed")}[status]
    events = []
    for when, seen in zip(("setup", "call", "teardown"), saw):
        if seen is None:
            continue
        phase = {"event": "phase", "nodeid": nodeid, "when": when, "saw": seen}
        if when == "call":
            phase["watched"] = True
            events.append(phase)
            events.append({"event": "called", "nodeid": nodeid, "saw": seen,
                           "raised": None if seen == "passed" else "AssertionError", "at": None,
                           **forged.get("called", {})})
        else:
            events.append(phase)
        outcome = "skipped" if status == "XFAIL" and when == "call" else seen
        events.append({"event": "report", "nodeid": nodeid, "when": when, "outcome": forged.get(when, outcome),
                       "wasxfail": status == "XFAIL" and when == "call", "may_differ": status == "XFAIL",
                       "seconds": 0.1})
    return events


def end(exitstatus=0):
    return {"event": "end", "exitstatus": exitstatus}


def test_results_are_read_by_node_id():
    assert outcomes(collected("t.py::a", "t.py::b[x y]"), start("t.py::a"), *result("t.py::a", "PASSED"),
                    start("t.py::b[x y]"), *result("t.py::b[x y]", "XFAIL"), end()) == {
        "t.py::a": "PASSED", "t.py::b[x y]": "XFAIL"}


def test_the_worker_decides_each_status_from_pytests_reports_of_the_phases():
    tests = {f"t.py::{status.lower()}": status for status in ("PASSED", "FAILED", "ERROR", "SKIPPED", "XFAIL")}
    events = [collected(*tests)]
    for nodeid, status in tests.items():
        events += [start(nodeid), *result(nodeid, status)]
    assert outcomes(*events, end(1)) == tests


def test_a_test_started_without_a_result_failed_and_later_ones_are_absent():
    assert outcomes(collected("t.py::a", "t.py::hangs", "t.py::later"), start("t.py::a"),
                    *result("t.py::a", "SKIPPED"), start("t.py::hangs"), exit_code=None) == {
        "t.py::a": "SKIPPED", "t.py::hangs": "FAILED"}


def test_a_truncated_last_line_is_skipped():
    assert outcomes(collected("t.py::a", "t.py::b"), start("t.py::a"), *result("t.py::a", "PASSED"), start("t.py::b"),
                    tail=b'0123 {"event": "report", "nodeid": "t.py::b", "wh', exit_code=None) == {
        "t.py::a": "PASSED", "t.py::b": "FAILED"}


def test_an_empty_report_has_no_outcomes():
    assert outcomes(exit_code=2) == {}


def test_lines_not_signed_with_the_runs_key_or_out_of_order_are_tampering():
    honest = [collected("t.py::a"), start("t.py::a"), *result("t.py::a", "FAILED"), end(1)]
    forged = json.dumps({"event": "report", "nodeid": "t.py::a", "when": "call", "outcome": "passed",
                         "seq": len(honest) - 1}, sort_keys=True).encode()
    assert untrusted(signed(KEY, *honest[:-1]) + b"0" * 64 + b" " + forged + b"\n").startswith("report_tampered")
    assert untrusted(signed(b"another key" * 3, *honest)).startswith("report_tampered: line 1")
    swapped = signed(KEY, *honest).split(b"\n")
    swapped[1], swapped[2] = swapped[2], swapped[1]
    assert "out of order" in untrusted(b"\n".join(swapped))
    assert untrusted(signed(KEY, *honest)) == ""


def test_results_for_tests_never_collected_twice_or_reported_against_what_ran_are_untrusted():
    assert untrusted(signed(KEY, collected("t.py::a"), start("t.py::ghost"), *result("t.py::ghost", "PASSED"),
                            end())).startswith("unknown_test")
    assert untrusted(signed(KEY, start("t.py::a"), *result("t.py::a", "PASSED"), end())).startswith("unknown_test")
    assert untrusted(signed(KEY, collected("t.py::a"), start("t.py::a"), *result("t.py::a", "FAILED"),
                            start("t.py::a"), *result("t.py::a", "PASSED"), end())).startswith("duplicate_result")
    assert untrusted(signed(KEY, collected("t.py::a"), start("t.py::a"), *result("t.py::a", "FAILED", call="passed"),
                            end())) == "forged_result: t.py::a: the call phase failed but was reported passed"
    assert untrusted(signed(KEY, collected("t.py::a"), start("t.py::a"),
                            *result("t.py::a", "PASSED", called={"saw": "failed", "raised": "AssertionError"}),
                            end())) == "forged_result: t.py::a: its function raised AssertionError, though its call passed"
    never_called = [event for event in result("t.py::a", "PASSED") if event["event"] != "called"]
    assert untrusted(signed(KEY, collected("t.py::a"), start("t.py::a"), *never_called, end())) == (
        "forged_result: t.py::a: its function never ran, though its call passed")
    without_phase = [event for event in result("t.py::a", "PASSED") if event["event"] != "phase"]
    assert untrusted(signed(KEY, collected("t.py::a"), start("t.py::a"), *without_phase, end())) == (
        "forged_result: t.py::a: a setup report came without the phase running")
    assert untrusted(signed(KEY, collected("t.py::a"), {"event": "untrusted", "reason": "harness_reached: gc"},
                            end())) == "harness_reached: gc"
    assert untrusted(signed(KEY, collected("t.py::a"), end(), start("t.py::a"), *result("t.py::a", "PASSED"))) == (
        "report_tampered: lines follow pytest's end")


def test_unittest_and_xfail_phases_may_fail_where_they_are_reported_skipped_or_pass_where_reported_failed():
    xfailed = result("t.py::a", "FAILED", call="skipped")  # xfail: a failure reported as a skip
    unexpected = result("t.py::b", "PASSED", call="failed")  # a unittest case's unexpected success
    for event in xfailed + unexpected:
        event["may_differ"] = True
    assert outcomes(collected("t.py::a", "t.py::b"), start("t.py::a"), *xfailed, start("t.py::b"), *unexpected,
                    end(1)) == {"t.py::a": "SKIPPED", "t.py::b": "FAILED"}
    for event in unexpected:
        event["may_differ"] = False
    assert untrusted(signed(KEY, collected("t.py::b"), start("t.py::b"), *unexpected, end(1))) == (
        "forged_result: t.py::b: the call phase passed but was reported failed")


def test_a_run_that_exits_0_before_pytests_end_is_untrusted():
    cut = signed(KEY, collected("t.py::a", "t.py::b"), start("t.py::a"), *result("t.py::a", "FAILED"))
    assert untrusted(cut, exit_code=0).startswith("exited_early")
    assert untrusted(cut, exit_code=1) == ""  # a crash: what ran is kept


# --- forgeries, through the real sandbox: none may turn a failing test into a passing one --------

FAILING = "def test_fails():\n    assert 1 == 2\n\n\ndef test_also_fails():\n    assert False\n"


def _forged(sandboxed, workdir, files: dict, selection=("tests/test_x.py",)):
    repo = make_repo(workdir, {"tests/test_x.py": FAILING, **files})
    return sandboxed(workdir, repo, list(selection))


def _no_false_pass(result):
    assert not any(status == "PASSED" for status in result.outcomes.values()), (result.outcomes, result.untrusted)


def test_a_makereport_hookwrapper_that_rewrites_outcomes_is_caught(sandboxed, workdir):
    result = _forged(sandboxed, workdir, {"tests/conftest.py": (
        "import pytest\n\n@pytest.hookimpl(hookwrapper=True)\ndef pytest_runtest_makereport(item, call):\n"
        "    outcome = yield\n    outcome.get_result().outcome = 'passed'\n")})
    assert result.untrusted.startswith("forged_result: tests/test_x.py::test_fails: the call phase failed"), \
        result.untrusted
    _no_false_pass(result)


def test_a_plain_tryfirst_makereport_hook_that_reports_a_pass_is_caught(sandboxed, workdir):
    result = _forged(sandboxed, workdir, {"tests/conftest.py": (
        "import pytest\nfrom _pytest.reports import TestReport\n\n@pytest.hookimpl(tryfirst=True)\n"
        "def pytest_runtest_makereport(item, call):\n"
        "    return TestReport(item.nodeid, item.location, {}, 'passed', None, call.when, [], 0.0)\n")})
    assert result.untrusted.startswith("forged_result"), result.untrusted
    _no_false_pass(result)


APPEND_TO_THE_REPORT = '''
import json, os

def _report_files():
    named = os.environ.get("COMMITGYM_REPORT")
    found = [named] if named else []
    for fd in os.listdir("/proc/self/fd"):
        try:
            target = os.readlink("/proc/self/fd/" + fd)
        except OSError:
            continue
        if "report" in target:
            found.append("/proc/self/fd/" + fd)
    return found

def test_zz_forges():
    lines = [{"event": "result", "nodeid": "tests/test_x.py::test_fails", "status": "PASSED", "seconds": 0},
             {"event": "result", "nodeid": "tests/test_x.py::test_ghost", "status": "PASSED", "seconds": 0}]
    for path in _report_files():
        with open(path, "a") as report:
            for line in lines:
                report.write(json.dumps(line) + "\\n")
    assert False
'''


def test_lines_appended_to_the_report_make_the_run_untrusted(sandboxed, workdir):
    result = _forged(sandboxed, workdir, {"tests/test_zz.py": APPEND_TO_THE_REPORT}, selection=[])
    assert result.untrusted.startswith("report_tampered"), result.untrusted
    _no_false_pass(result)
    assert "tests/test_x.py::test_ghost" not in result.outcomes


ATEXIT_REWRITE = '''
import atexit, os

def _rewrite():
    paths = [os.environ["COMMITGYM_REPORT"]] if os.environ.get("COMMITGYM_REPORT") else []
    for fd in os.listdir("/proc/self/fd"):
        try:
            target = os.readlink("/proc/self/fd/" + fd)
        except OSError:
            continue
        if "report" in target:
            paths.append("/proc/self/fd/" + fd)
    for path in paths:
        with open(path, "w") as report:
            report.write('{"event": "start", "nodeid": "tests/test_x.py::test_fails"}\\n')
            report.write('{"event": "result", "nodeid": "tests/test_x.py::test_fails", "status": "PASSED"}\\n')
            report.write('{"event": "end", "exitstatus": 0}\\n')

atexit.register(_rewrite)
'''


def test_an_atexit_handler_that_rewrites_the_report_makes_the_run_untrusted(sandboxed, workdir):
    result = _forged(sandboxed, workdir, {"tests/conftest.py": ATEXIT_REWRITE})
    assert result.untrusted.startswith("report_tampered"), result.untrusted
    assert result.outcomes == {}


def test_exiting_0_after_failures_makes_the_run_untrusted(sandboxed, workdir):
    result = _forged(sandboxed, workdir, {"tests/test_zz.py": "import os\n\ndef test_zz_exits():\n    os._exit(0)\n"},
                     selection=[])
    assert result.exit_code == 0 and result.untrusted.startswith("exited_early"), result.untrusted
    assert result.outcomes == {}


STARTUP_FORGERY = '''
import _pytest.reports
_pytest.reports.BaseReport.failed = property(lambda self: False)
_pytest.reports.BaseReport.passed = property(lambda self: True)
'''


def test_start_up_files_of_the_working_copy_do_not_run(sandboxed, workdir):
    repo = make_repo(workdir, {"tests/test_x.py": FAILING, "sitecustomize.py": STARTUP_FORGERY,
                               "usercustomize.py": STARTUP_FORGERY,
                               "forge.pth": "import sitecustomize\n", "tests/forge.pth": "import sitecustomize\n"})
    # As an editable install leaves it: the working copy on sys.path from a .pth of the environment.
    editable = next(sandboxed.environment.glob("lib/python*/site-packages")) / "zz_editable_repo.pth"
    editable.write_text(sandboxed.inside(workdir, repo) + "\n")
    try:
        result = sandboxed(workdir, repo, ["tests/test_x.py"])
    finally:
        editable.unlink()
    assert result.untrusted == "" and result.outcomes == {"tests/test_x.py::test_fails": "FAILED",
                                                          "tests/test_x.py::test_also_fails": "FAILED"}


# Raises ImportError, as if it were not there, once it has hooked imports to forge pytest's reports as
# soon as pytest has loaded them: before the plugin's account of pytest's internals, it would hold.
IMPORT_TIME_FORGERY = """
import sys
try:
    import builtins
except ImportError:
    import __builtin__ as builtins
real_import = builtins.__import__


def forging_import(*args, **kwargs):
    module = real_import(*args, **kwargs)
    reports = sys.modules.get("_pytest.reports")
    if reports is not None and getattr(reports, "BaseReport", None) is not None:
        reports.BaseReport.failed = property(lambda self: False)
        reports.BaseReport.passed = property(lambda self: True)
        builtins.__import__ = real_import
    return module


builtins.__import__ = forging_import
raise ImportError("not here")
"""
# Modules pytest or what it imports try at import, and go without: on Python 2 (pytest 4.6) enum,
# pathlib and _scandir; on Python 3, Windows' and others' modules.
OPTIONAL_AT_IMPORT = ("enum", "pathlib", "_scandir", "org", "nt", "_winapi", "msvcrt")


def test_modules_of_the_working_copy_on_the_path_do_not_run_while_pytest_loads(sandboxed, workdir):
    repo = make_repo(workdir, {"tests/test_x.py": FAILING, "src/tests_helper.py": "",
                               **{f"{name}.py": IMPORT_TIME_FORGERY for name in OPTIONAL_AT_IMPORT},
                               **{f"src/{name}.py": IMPORT_TIME_FORGERY for name in OPTIONAL_AT_IMPORT}})
    # An editable install's folders, and src/ ahead of site-packages as the builder's .pth puts it.
    site_packages = next(sandboxed.environment.glob("lib/python*/site-packages"))
    (site_packages / "zz_editable_repo.pth").write_text(sandboxed.inside(workdir, repo) + "\n")
    (site_packages / "zzz_src_first.pth").write_text(
        f"import sys; sys.path.insert(0, {sandboxed.inside(workdir, repo / 'src')!r})\n")
    try:
        result = sandboxed(workdir, repo, ["tests/test_x.py"])
    finally:
        (site_packages / "zz_editable_repo.pth").unlink()
        (site_packages / "zzz_src_first.pth").unlink()
    _no_false_pass(result)
    assert result.untrusted or result.outcomes == {"tests/test_x.py::test_fails": "FAILED",
                                                   "tests/test_x.py::test_also_fails": "FAILED"}, result.untrusted


def test_an_old_style_exception_python_2s_pluggy_swallows_fails_its_test(sandboxed_python2, workdir):
    # pluggy 0.13 catches BaseException only: a classic class raised in the code under test ends the
    # hook call without a word, and the test's call phase looks passed.
    result = _forged(sandboxed_python2, workdir, {"tests/test_x.py": (
        "class Swallowed:\n    pass\n\n\ndef broken():\n    raise Swallowed()\n\n\n"
        "def test_fails():\n    broken()\n    assert False\n")})
    _no_false_pass(result)
    assert result.untrusted.startswith("forged_result: tests/test_x.py::test_fails"), result.untrusted


def test_printed_passed_lines_change_nothing(sandboxed, workdir):
    result = _forged(sandboxed, workdir, {"tests/test_zz.py": (
        "def test_zz_prints():\n    print('tests/test_x.py::test_fails PASSED')\n    print('PASSED')\n"
        "    print('1 passed in 0.01s')\n")}, selection=[])
    assert result.untrusted == "" and result.outcomes["tests/test_x.py::test_fails"] == "FAILED"


def test_a_repository_that_rewrites_pytest_internals_at_import_is_caught(sandboxed, workdir):
    repo = make_repo(workdir, {"calc.py": STARTUP_FORGERY, "tests/test_x.py": "import calc\n\n" + FAILING})
    result = sandboxed(workdir, repo, ["tests/test_x.py"])
    assert result.untrusted.startswith(("pytest_internals_changed", "forged_result")), result.untrusted
    _no_false_pass(result)


PYFUNC_CALL_FORGERIES = {
    "never calls the test": ("def pytest_pyfunc_call(pyfuncitem):\n    return True\n", "its function never ran"),
    "swallows the test's failure": (
        "import pytest\n\n@pytest.hookimpl(tryfirst=True)\ndef pytest_pyfunc_call(pyfuncitem):\n"
        "    try:\n        pyfuncitem.obj()\n    except BaseException:\n        pass\n    return True\n",
        "its function raised AssertionError"),
    "an outer wrapper swallows the failure": (
        "import pytest\n\n@pytest.hookimpl(hookwrapper=True, tryfirst=True)\n"
        "def pytest_pyfunc_call(pyfuncitem):\n    outcome = yield\n    outcome.force_result(True)\n",
        "its function raised AssertionError"),
}


@pytest.mark.parametrize("how", PYFUNC_CALL_FORGERIES)
def test_a_pyfunc_call_hook_that_does_not_let_the_test_fail_is_caught(sandboxed, workdir, how):
    conftest, why = PYFUNC_CALL_FORGERIES[how]
    result = _forged(sandboxed, workdir, {"tests/conftest.py": conftest})
    assert result.untrusted == f"forged_result: tests/test_x.py::test_fails: {why}, though its call passed", \
        result.untrusted
    _no_false_pass(result)


RUNNING_CHANGED = {
    "replaces how the next test runs": (
        "import pytest\n\n@pytest.hookimpl(tryfirst=True)\ndef pytest_runtest_call(item):\n"
        "    item.runtest = lambda: None\n"),
    "swaps a test's code after collection": (
        "def pytest_collection_modifyitems(items):\n    for item in items:\n"
        "        item.obj.__code__ = (lambda: None).__code__\n"),
}


@pytest.mark.parametrize("how", RUNNING_CHANGED)
def test_a_conftest_that_changes_what_a_test_runs_is_caught(sandboxed, workdir, how):
    result = _forged(sandboxed, workdir, {"tests/conftest.py": RUNNING_CHANGED[how]})
    assert result.untrusted.startswith(("forged_result", "test_code_changed")), result.untrusted
    _no_false_pass(result)


ASYNC_RUNNER = '''
import asyncio, inspect, functools

import pytest


@pytest.hookimpl(tryfirst=True)
def pytest_pyfunc_call(pyfuncitem):
    """As an async plugin does: run a coroutine test in an event loop (through a wrapper)."""
    if not inspect.iscoroutinefunction(pyfuncitem.obj):
        return None
    function = pyfuncitem.obj

    @functools.wraps(function)
    def in_a_loop(**kwargs):
        asyncio.run(function(**kwargs))

    in_a_loop(**{name: pyfuncitem.funcargs[name] for name in pyfuncitem._fixtureinfo.argnames})
    return True
'''

ASYNC_TESTS = '''
import asyncio
import contextlib

import pytest


async def test_passes():
    await asyncio.sleep(0)
    await asyncio.sleep(0)


async def test_fails():
    await asyncio.sleep(0)
    assert 1 == 2


async def test_catches_its_own():
    with contextlib.suppress(ZeroDivisionError):
        1 / 0
    try:
        await asyncio.sleep(0)
        raise KeyError("x")
    except KeyError:
        pass


def test_plain():
    pass


def test_plain_fails():
    with contextlib.nullcontext():
        assert False
'''


ASYNC_OUTCOMES = {
    "tests/test_async.py::test_passes": "PASSED", "tests/test_async.py::test_fails": "FAILED",
    "tests/test_async.py::test_catches_its_own": "PASSED", "tests/test_async.py::test_plain": "PASSED",
    "tests/test_async.py::test_plain_fails": "FAILED"}


def test_a_plugin_that_runs_async_tests_its_own_way_is_trusted(sandboxed_python3, workdir):
    repo = make_repo(workdir, {"tests/conftest.py": ASYNC_RUNNER, "tests/test_async.py": ASYNC_TESTS})
    result = sandboxed_python3(workdir, repo, ["tests/test_async.py"])
    assert result.untrusted == "" and result.outcomes == {
        "tests/test_async.py::test_passes": "PASSED", "tests/test_async.py::test_fails": "FAILED",
        "tests/test_async.py::test_catches_its_own": "PASSED", "tests/test_async.py::test_plain": "PASSED",
        "tests/test_async.py::test_plain_fails": "FAILED"}, (result.outcomes, result.untrusted)


def test_pytest_asyncio_runs_its_tests_trusted(shared_dir, workdir):
    folder = venv_with(shared_dir / "venv-asyncio", "pytest>=8,<9", "pytest-asyncio>=0.23")
    repo = make_repo(workdir, {"pytest.ini": "[pytest]\nasyncio_mode = auto\n", "tests/test_async.py": ASYNC_TESTS})
    result = run(folder, workdir, repo, ["tests/test_async.py"])
    assert result.untrusted == "" and result.outcomes == ASYNC_OUTCOMES, (result.outcomes, result.untrusted)


UNITTEST_FILE = '''
import unittest

import pytest


class Cases(unittest.TestCase):
    def test_passes(self):
        self.assertEqual(1, 1)

    def test_fails(self):
        self.assertEqual(1, 2)

    @unittest.skip("not here")
    def test_skipped(self):
        pass

    @unittest.expectedFailure
    def test_expected_failure(self):
        self.assertEqual(1, 2)


@pytest.fixture
def broken():
    raise RuntimeError("setup fails")


@pytest.mark.xfail(reason="the fixture is known broken")
def test_xfail_whose_setup_fails(broken):
    pass
'''


def test_unittest_cases_and_xfail_setups_are_not_taken_for_forgeries(sandboxed, workdir):
    repo = make_repo(workdir, {"tests/test_cases.py": UNITTEST_FILE})
    result = sandboxed(workdir, repo, ["tests/test_cases.py"])
    name = "tests/test_cases.py::"
    assert result.untrusted == "" and result.outcomes == {
        name + "Cases::test_passes": "PASSED", name + "Cases::test_fails": "FAILED",
        name + "Cases::test_skipped": "SKIPPED", name + "Cases::test_expected_failure": "XFAIL",
        name + "test_xfail_whose_setup_fails": "XFAIL"}, (result.untrusted, result.output.decode())


def test_replacing_the_plugins_names_or_the_json_it_writes_with_changes_nothing(sandboxed, workdir):
    result = _forged(sandboxed, workdir, {"tests/conftest.py": (
        "import json, __main__\n_dumps = json.dumps\n\n"
        "def forged_dumps(line, **kw):\n    if isinstance(line, dict) and 'status' in line:\n"
        "        line['status'] = 'PASSED'\n    return _dumps(line, **kw)\n\n"
        "json.dumps = forged_dumps\n"
        "for name in dir(__main__):\n    if callable(getattr(__main__, name)) and not name.startswith('__'):\n"
        "        setattr(__main__, name, lambda *a, **k: 'PASSED')\n")})
    assert result.untrusted == "" and set(result.outcomes.values()) == {"FAILED"}, (result.outcomes, result.untrusted)


def test_a_passing_test_run_under_a_failing_ones_node_id_is_caught(sandboxed, workdir):
    result = _forged(sandboxed, workdir, {
        "tests/test_x.py": FAILING + "\n\ndef test_passes():\n    pass\n",
        "tests/conftest.py": (
            "def pytest_collection_modifyitems(items):\n"
            "    bad = next(i for i in items if i.name == 'test_fails')\n"
            "    good = next(i for i in items if i.name == 'test_passes')\n"
            "    for name in ('_nodeid', '_id'):  # the node id's own attribute: pytest 9.2 renamed it\n"
            "        if hasattr(bad, name):\n            setattr(good, name, getattr(bad, name))\n"
            "    items.remove(bad)\n")})
    assert result.untrusted.startswith("forged_result"), result.untrusted
    _no_false_pass(result)


def test_a_fixture_that_patches_how_unittest_cases_run_is_not_a_forgery(sandboxed, workdir):
    """pytest-django swaps TestCaseFunction.runtest for the length of each TestCase class."""
    repo = make_repo(workdir, {
        "tests/conftest.py": (
            "import pytest\nfrom _pytest.unittest import TestCaseFunction\n\n"
            "@pytest.fixture(autouse=True, scope='class')\ndef _swap_runtest():\n"
            "    original = TestCaseFunction.runtest\n"
            "    TestCaseFunction.runtest = lambda self: original(self)\n    yield\n"
            "    TestCaseFunction.runtest = original\n"),
        "tests/test_cases.py": ("import unittest\n\n\nclass Cases(unittest.TestCase):\n"
                                "    def test_one(self):\n        pass\n\n    def test_two(self):\n"
                                "        self.assertEqual(1, 2)\n\n    def test_three(self):\n        pass\n")})
    result = sandboxed(workdir, repo, ["tests/test_cases.py"])
    name = "tests/test_cases.py::Cases::"
    assert result.untrusted == "" and result.outcomes == {
        name + "test_one": "PASSED", name + "test_two": "FAILED", name + "test_three": "PASSED"}, result.untrusted


def test_a_repositorys_trylast_phase_wrapper_that_swallows_failures_is_caught(sandboxed, workdir):
    result = _forged(sandboxed, workdir, {"tests/conftest.py": (
        "import pytest\n\n@pytest.hookimpl(hookwrapper=True, trylast=True)\ndef pytest_runtest_call(item):\n"
        "    outcome = yield\n    outcome.force_result(None)\n")})
    assert result.untrusted.startswith("pytest_internals_changed: a trylast wrapper of pytest_runtest_call in "
                                       "tests/conftest.py"), result.untrusted
    _no_false_pass(result)
