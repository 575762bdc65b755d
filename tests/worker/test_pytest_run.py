"""pytest runs in the local sandbox, read through our report plugin, across pytest versions.

Real runs: a virtualenv per pytest version (built once per module with uv), bubblewrap
as on the workers, a small generated repository with one test of each kind.
"""

import ast
import json
import os
import shutil
import subprocess
import tempfile
from pathlib import Path

import pytest

from worker.engine.run.pytest_run import outcomes_from_report, pytest_run
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


@pytest.fixture(scope="module", params=PYTEST_VERSIONS)
def venv(request, shared_dir) -> Path:
    folder = shared_dir / f"venv-{PYTEST_VERSIONS.index(request.param)}"
    env = {**os.environ, "SSL_CERT_FILE": "/etc/ssl/certs/ca-certificates.crt"}
    subprocess.run([UV, "venv", "-q", "--python", "/usr/bin/python3", str(folder)], check=True, env=env)
    subprocess.run([UV, "pip", "install", "-q", "--python", str(folder / "bin" / "python"), request.param],
                   check=True, env=env)
    return folder


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
    }, result.output.decode()
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


def test_the_plugin_is_python_3_7_syntax():
    source = (Path(__file__).parents[2] / "worker" / "engine" / "run" / "report_plugin.py").read_text()
    ast.parse(source, feature_version=(3, 7))


def line(**event) -> str:
    return json.dumps(event)


def test_results_are_read_by_node_id():
    lines = [line(event="start", nodeid="t.py::a"),
             line(event="result", nodeid="t.py::a", status="PASSED", seconds=0.1),
             line(event="start", nodeid="t.py::b[x y]"),
             line(event="result", nodeid="t.py::b[x y]", status="XFAIL", seconds=0.2),
             line(event="end", exitstatus=0)]
    assert outcomes_from_report(lines) == {"t.py::a": "PASSED", "t.py::b[x y]": "XFAIL"}


def test_a_test_started_without_a_result_failed_and_later_ones_are_absent():
    lines = [line(event="start", nodeid="t.py::a"), line(event="result", nodeid="t.py::a", status="SKIPPED", seconds=0),
             line(event="start", nodeid="t.py::hangs")]
    assert outcomes_from_report(lines) == {"t.py::a": "SKIPPED", "t.py::hangs": "FAILED"}


def test_a_repeated_start_does_not_undo_a_result():
    """pytest-xdist's workers and controller may both write; a rerun plugin starts a test again."""
    lines = [line(event="start", nodeid="t.py::a"), line(event="result", nodeid="t.py::a", status="PASSED", seconds=0),
             line(event="start", nodeid="t.py::a")]
    assert outcomes_from_report(lines) == {"t.py::a": "PASSED"}


def test_a_truncated_last_line_is_skipped():
    lines = [line(event="start", nodeid="t.py::a"), line(event="result", nodeid="t.py::a", status="PASSED", seconds=0),
             line(event="start", nodeid="t.py::b"), '{"event": "result", "nodeid": "t.py::b", "sta']
    assert outcomes_from_report(lines) == {"t.py::a": "PASSED", "t.py::b": "FAILED"}


def test_an_empty_report_has_no_outcomes():
    assert outcomes_from_report([]) == {}
    assert outcomes_from_report(["", "not json", "[1, 2]"]) == {}
