"""Histories whose tests lie, validated for real in the local sandbox: a forged report never makes
a task valid, and nothing one run writes is seen by the next."""

from datetime import datetime, timezone
from pathlib import Path

import pytest

from tests.gitrepo import GitRepo
from worker.engine.env.builder import EnvironmentBuilder
from worker.engine.validate.pipeline import CommitToValidate, ValidationSettings, task_validate

UV = Path(__file__).resolve().parents[2] / ".venv" / "bin" / "uv"
FAST = ValidationSettings(reruns=2, per_test_timeout=20, suite_seconds=120)
TEST_ADD = "from calc import add\n\n\ndef test_add():\n    assert add(2, 3) == 5\n"


@pytest.fixture(scope="module")
def builder(open_module_folder):
    return EnvironmentBuilder(env_root=open_module_folder / "envs", uv=UV)


def validate_on_day(repo: GitRepo, sha: str, parent: str, builder, place: Path):
    target = CommitToValidate(mirror_dir=repo.path, sha=sha, parent_sha=parent,
                              committed_at=datetime(2026, 6, 1, tzinfo=timezone.utc))
    return task_validate(target, builder=builder, work_root=place, settings=FAST)


FORGING_CONFTEST = '''
import pytest
import calc

@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    if calc.VERSION == 2:
        outcome.get_result().outcome = "passed"
'''


def test_a_commit_whose_hook_forges_passes_after_the_fix_is_invalid_untrusted(builder, open_module_folder):
    repo = GitRepo(open_module_folder / "forger")
    parent = repo.commit("init", {"calc.py": "VERSION = 1\n\n\ndef add(a, b):\n    return a - b\n"})
    # The "fix" changes only the value the hook is keyed on: the test fails on every side in truth.
    fix = repo.commit("Fix add", {"calc.py": "VERSION = 2\n\n\ndef add(a, b):\n    return a - b\n",
                                  "tests/test_calc.py": TEST_ADD, "tests/conftest.py": FORGING_CONFTEST})
    result = validate_on_day(repo, fix, parent, builder, open_module_folder)
    assert (result.verdict, result.reason, result.oracle) == ("invalid", "untrusted_run", None)
    forged = [record for record in result.runs if record.run.untrusted]
    assert forged and all(record.side in ("after", "gold") for record in forged)
    assert forged[0].run.untrusted.startswith("forged_result: tests/test_calc.py::test_add: the call phase failed")


MARKER_TEST = '''
import os


def test_leaves_a_marker():
    assert not os.path.exists("marker"), "a run before this one left its marker"
    open("marker", "w").close()
'''


def test_each_run_gets_a_fresh_copy(builder, open_module_folder):
    repo = GitRepo(open_module_folder / "marker")
    parent = repo.commit("init", {"calc.py": "def add(a, b):\n    return a - b\n"})
    fix = repo.commit("Fix add", {"calc.py": "def add(a, b):\n    return a + b\n",
                                  "tests/test_calc.py": TEST_ADD, "tests/test_marker.py": MARKER_TEST})
    result = validate_on_day(repo, fix, parent, builder, open_module_folder)
    assert (result.verdict, result.reason) == ("valid", ""), [r.run.output[-2000:] for r in result.runs]
    assert result.oracle.flaky == [] and "tests/test_marker.py::test_leaves_a_marker" in result.oracle.pass_to_pass
    assert result.oracle.fail_to_pass == ["tests/test_calc.py::test_add"]
    assert 0 < result.copy_seconds < result.seconds
