"""A history from 2013 to 2026, one packaging style per era (worker/demo/era_repo.py): every era's
fix gets an environment and validates, through the real sandbox and the package index, with no
per-repository script."""

from datetime import datetime, timezone

import pytest

from tests.worker.test_validate import UV
from worker.demo.era_repo import ERA_STYLES, era_repo_write
from worker.demo.history import Author, author_env, git, git_env
from worker.engine.env.builder import EnvironmentBuilder
from worker.engine.validate.pipeline import CommitToValidate, ValidationSettings, task_validate

FAST = ValidationSettings(reruns=1, per_test_timeout=20, suite_seconds=120)


@pytest.fixture(scope="module")
def place(open_module_folder):
    return open_module_folder


@pytest.fixture(scope="module")
def eras(place):
    commits = era_repo_write(place / "eras")
    parents = {later.sha: earlier.sha for earlier, later in zip(commits, commits[1:])}
    return place / "eras", commits, parents


@pytest.fixture(scope="module")
def docker_builder(place, docker_builder_make):
    return docker_builder_make(place / "envs-docker", round_days=7)


def _validate(eras, builder, place, style):
    repo, commits, parents = eras
    fix = next(commit for commit in commits if commit.style == style and commit.fail_to_pass)
    target = CommitToValidate(mirror_dir=repo, sha=fix.sha, parent_sha=parents[fix.sha], committed_at=fix.committed_at)
    return fix, task_validate(target, builder=builder, work_root=place, settings=FAST)


def _story(result) -> str:
    return "\n".join(f"{a.strategy}: {a.status} at {a.step or '-'} ({a.reason}) {a.lifted}\n{a.output[-1500:]}"
                     for a in result.attempts)


@pytest.mark.parametrize("style", ERA_STYLES)
def test_every_era_validates_in_docker(eras, docker_builder, place, style):
    fix, result = _validate(eras, docker_builder, place, style)
    assert (result.verdict, result.reason) == ("valid", ""), _story(result)
    assert set(fix.fail_to_pass) <= set(result.oracle.fail_to_pass)
    built = [attempt for attempt in result.attempts if attempt.status == "ok"][-1]
    assert built.pytest and result.environment.python_version.startswith(("3.9.", "3.11.", "3.13."))
    if fix.committed_at.year < 2020:
        # What builds a package of 2013-2019 is not held to its date, and says so.
        assert built.lifted, _story(result)
    if style == "scm_version_file":
        # The version file the build wrote reached every run's fresh copy.
        assert "src/eralib/_version.py" in result.environment.generated, _story(result)


@pytest.mark.parametrize("style", ["distutils", "scm_version_file"])
def test_the_oldest_and_a_generated_version_file_validate_in_the_local_sandbox(eras, place, style):
    builder = EnvironmentBuilder(env_root=place / "envs-local", uv=UV)
    fix, result = _validate(eras, builder, place, style)
    assert (result.verdict, result.reason) == ("valid", ""), _story(result)
    assert set(fix.fail_to_pass) <= set(result.oracle.fail_to_pass)


# A package of 2012 in Python 2 only: its code and its tests say so (`except E, e`, `print x`).
_PY2_CODE = """\
def clamp(value, low, high):
    try:
        value = int(value)
    except ValueError, error:
        raise TypeError("not a number: %s" % error)
    if value < low:
        return low
{fix}    return value
"""
_PY2_TESTS = """\
import oldclamp


def test_low():
    print "clamping", -5
    assert oldclamp.clamp(-5, 0, 10) == 0
{more}"""
_PY2_TEST_HIGH = """

def test_high():
    assert oldclamp.clamp(50, 0, 10) == 10
"""


def _python2_history(repo):
    """Two commits of 2012: the package, then a fix with its test; (parent sha, fix sha, fix date)."""
    env, author = git_env(), Author("Ana Lima", "ana.lima@example.org", "+0000")
    repo.mkdir(parents=True)
    git(repo, "init", "-q", env=env)
    (repo / "tests").mkdir()
    (repo / "setup.py").write_text("from setuptools import setup\n\nsetup(name='oldclamp', version='0.1', "
                                   "py_modules=['oldclamp'])\n")
    (repo / "oldclamp.py").write_text(_PY2_CODE.format(fix=""))
    (repo / "tests" / "test_oldclamp.py").write_text(_PY2_TESTS.format(more=""))
    git(repo, "add", "-A", env=env)
    git(repo, "commit", "-q", "-m", "Clamp numbers", env=author_env(env, author, "2012-03-01T10:00:00+0000"))
    parent = git(repo, "rev-parse", "HEAD", env=env)
    (repo / "oldclamp.py").write_text(_PY2_CODE.format(fix="    if value > high:\n        return high\n"))
    (repo / "tests" / "test_oldclamp.py").write_text(_PY2_TESTS.format(more=_PY2_TEST_HIGH))
    git(repo, "add", "-A", env=env)
    git(repo, "commit", "-q", "-m", "Clamp from above too", env=author_env(env, author, "2012-04-01T10:00:00+0000"))
    return parent, git(repo, "rev-parse", "HEAD", env=env), datetime(2012, 4, 1, 10, tzinfo=timezone.utc)


def test_python_2_code_gets_python_2_7_in_docker_and_validates(place, docker_builder):
    parent, fix, fixed_at = _python2_history(place / "python2")
    target = CommitToValidate(mirror_dir=place / "python2", sha=fix, parent_sha=parent, committed_at=fixed_at)
    result = task_validate(target, builder=docker_builder, work_root=place, settings=FAST)
    assert (result.verdict, result.reason) == ("valid", ""), _story(result)
    assert result.oracle.fail_to_pass == ["tests/test_oldclamp.py::test_high"]
    assert result.environment.python_version.startswith("2.7."), _story(result)
    assert "pytest==4.6." in result.environment.lock
    # Python 3 was tried first, and told the code's era by what it printed; then Python 2 alone.
    tried = [attempt.strategy.split(" ")[0] for attempt in result.attempts]
    assert tried[0] != "python2.7" and tried[-1] == "python2.7", tried
