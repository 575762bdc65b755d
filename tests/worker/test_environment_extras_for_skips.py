"""Tests that skip with a reason naming no module: the package's extras are tried whatever the skip
says, and kept if fewer tests skip. The build is real, in the local sandbox."""

from datetime import datetime, timezone

from tests.worker.test_environment import PYTHON, UV
from worker.engine.env.builder import EnvironmentBuilder
from worker.engine.env.skips import extras_requirements

SKIPS = "SKIPPED [1] tests/test_wide.py:9: wide characters are skipped\n"


def test_every_extra_the_attempt_did_not_install_is_wanted_where_tests_skip():
    pyproject = ('[project]\nname = "wide"\n[project.optional-dependencies]\nwidechars = ["wcwidth>=0.2"]\n'
                 'test = ["pytest", "hypothesis"]\nall = ["wide[widechars,test]", "colorama"]\n')
    recipe = {"pyproject.toml": pyproject}
    assert extras_requirements(recipe, ["test"], SKIPS) == [
        ("wcwidth>=0.2", "the package's extra [widechars]; tests skipped: wide characters are skipped"),
        ("colorama", "the package's extra [all]; tests skipped: wide characters are skipped")]
    assert extras_requirements(recipe, [], "1 passed\n") == []  # nothing skipped: nothing wanted
    assert extras_requirements({"setup.py": "setup(name='x')"}, [], SKIPS) == []


WIDE_PYPROJECT = """[build-system]
requires = ["setuptools"]
build-backend = "setuptools.build_meta"

[project]
name = "wide"
version = "1.0"

[project.optional-dependencies]
widechars = ["wcwidth>=0.2"]
"""
WIDE = """def width(text):
    try:
        from wcwidth import wcswidth
    except ImportError:
        return len(text)
    return wcswidth(text)
"""
# The skip says nothing of a module: pytest's importorskip is not used.
WIDE_TEST = """import pytest

try:
    import wcwidth
except ImportError:
    wcwidth = None

from wide import width


@pytest.mark.skipif(wcwidth is None, reason="wide characters are skipped")
def test_wide_characters_take_two_columns():
    assert width("\\u65e5\\u672c") == 4


def test_ascii():
    assert width("ab") == 2
"""


def _wide_built(folder, test: str):
    work = folder / "wide"
    (work / "repo" / "tests").mkdir(parents=True)
    (work / "repo" / "pyproject.toml").write_text(WIDE_PYPROJECT)
    (work / "repo" / "wide.py").write_text(WIDE)
    (work / "repo" / "tests" / "test_wide.py").write_text(test)
    return EnvironmentBuilder(env_root=folder / "envs", uv=UV).build(
        work, as_of=datetime(2024, 3, 1, tzinfo=timezone.utc), probe=["tests/test_wide.py"])


def test_a_test_skipped_with_a_reason_naming_no_module_runs_with_the_packages_extra(open_module_folder):
    built = _wide_built(open_module_folder, WIDE_TEST)
    assert "wcwidth==" in built.lock, [a.strategy for a in built.attempts]
    found, kept = built.attempts[-2:]
    assert found.status == "ok" and "wide characters are skipped" in found.output
    assert kept.status == "ok" and kept.strategy == f"{PYTHON} editable wcwidth>=0.2"
    assert kept.added == [{"requirement": "wcwidth>=0.2",
                           "why": "the package's extra [widechars]; tests skipped: wide characters are skipped"}]
    assert "2 passed" in kept.output


def test_an_extra_after_which_no_fewer_tests_skip_is_not_kept(open_folder):
    # The test skips whatever is installed: the extra is tried, and the environment found stays.
    built = _wide_built(open_folder, WIDE_TEST.replace("wcwidth is None, reason", "True, reason"))
    assert "wcwidth==" not in built.lock
    found, tried = built.attempts[-2:]
    assert found.status == "ok" and "1 skipped" in found.output
    assert tried.strategy == f"{PYTHON} editable wcwidth>=0.2" and "1 skipped" in tried.output
    assert (tried.status, tried.reason) == ("failed", "no_fewer_skips")
