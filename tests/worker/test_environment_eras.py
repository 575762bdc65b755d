"""A history from 2013 to 2026, one packaging style per era (worker/demo/era_repo.py): every era's
fix gets an environment and validates, through the real sandbox and the package index, with no
per-repository script."""

import pytest

from tests.worker.test_validate import UV
from worker.demo.era_repo import ERA_STYLES, era_repo_write
from worker.engine.env.builder import EnvironmentBuilder
from worker.engine.validate.pipeline import CommitToValidate, ValidationSettings, task_validate

FAST = ValidationSettings(runs_per_side=2, per_test_timeout=20, suite_seconds=120)


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
