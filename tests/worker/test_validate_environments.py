"""What an environment must give every run, validated for real in the local sandbox: the optional
dependency a commit's test needs, and runs that collect what the environment's check collected."""

import pytest

from tests.gitrepo import GitRepo
from tests.worker.test_validate_forgery import TEST_ADD, UV, validate_on_day
from worker.engine.env.builder import EnvironmentBuilder


@pytest.fixture(scope="module")
def builder(open_module_folder):
    return EnvironmentBuilder(env_root=open_module_folder / "envs", uv=UV)


WIDE_PYPROJECT = """[project]
name = "wide"
version = "1.0"
[project.optional-dependencies]
east-asian = ["wcwidth"]
"""
WIDE_BEFORE = "def width(text):\n    return len(text)\n"
WIDE_AFTER = """def width(text):
    try:
        from wcwidth import wcswidth
    except ImportError:
        return len(text)
    return wcswidth(text)
"""
WIDE_TEST = """import pytest

pytest.importorskip("wcwidth")

from wide import width


def test_wide_characters_take_two_columns():
    assert width("\\u65e5\\u672c") == 4
"""


def test_a_test_that_skips_without_an_optional_dependency_gets_it_from_the_packages_extras(
        builder, open_module_folder):
    repo = GitRepo(open_module_folder / "wide")
    parent = repo.commit("init", {"pyproject.toml": WIDE_PYPROJECT, "wide/__init__.py": WIDE_BEFORE,
                                  "tests/test_ascii.py": "from wide import width\n\n\ndef test_ascii():\n"
                                                         "    assert width('ab') == 2\n"})
    fix = repo.commit("Count wide characters as two columns", {"wide/__init__.py": WIDE_AFTER,
                                                               "tests/test_wide.py": WIDE_TEST})
    result = validate_on_day(repo, fix, parent, builder, open_module_folder)
    assert (result.verdict, result.reason) == ("valid", ""), [a.output[-800:] for a in result.attempts]
    assert result.oracle.fail_to_pass == ["tests/test_wide.py::test_wide_characters_take_two_columns"]
    found, added = result.attempts[-2:]
    assert found.status == "ok" and "could not import 'wcwidth'" in found.output
    assert added.status == "ok" and added.added == [{
        "requirement": "wcwidth",
        "why": "an extra of the package; tests skipped: could not import 'wcwidth': No module named 'wcwidth'"}]
    assert "wcwidth==" in result.environment.lock


def test_an_optional_dependency_that_changes_nothing_is_not_kept(builder, open_module_folder):
    repo = GitRepo(open_module_folder / "unhelped")
    skipping = ("import pytest\n\n\n@pytest.mark.skip(reason='no_such_module_xyz is not installed')\n"
                "def test_never():\n    pass\n")
    parent = repo.commit("init", {"calc.py": "def add(a, b):\n    return a - b\n"})
    fix = repo.commit("Fix add", {"calc.py": "def add(a, b):\n    return a + b\n",
                                  "tests/test_calc.py": TEST_ADD + "\n\n" + skipping})
    result = validate_on_day(repo, fix, parent, builder, open_module_folder)
    assert (result.verdict, result.reason) == ("valid", "")
    tried = [attempt for attempt in result.attempts if attempt.added]
    # The index has no such distribution: the attempt with it fails, and the environment without it stays.
    assert [(a.status, a.reason) for a in tried] == [("failed", "dependencies_unavailable")]
    assert "no-such-module-xyz" not in result.environment.lock


ISOLATION_REFUSING_CONFTEST = """import sys

if sys.flags.no_site:
    raise ImportError("this conftest does not load in an interpreter started without site")
"""


def test_runs_that_collect_nothing_the_check_collected_fail_the_environment_not_the_commit(
        builder, open_module_folder):
    repo = GitRepo(open_module_folder / "refusing")
    parent = repo.commit("init", {"calc.py": "def add(a, b):\n    return a - b\n",
                                  "conftest.py": ISOLATION_REFUSING_CONFTEST})
    fix = repo.commit("Fix add", {"calc.py": "def add(a, b):\n    return a + b\n", "tests/test_calc.py": TEST_ADD})
    result = validate_on_day(repo, fix, parent, builder, open_module_folder)
    assert result.attempts[-1].status == "ok"  # the environment's own check collected the test
    assert (result.verdict, result.reason) == ("environment_failed", "runs_do_not_collect")
    assert result.runs and all(record.run.collection_error for record in result.runs if record.side == "after")
