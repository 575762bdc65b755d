"""Environments built for real in the local sandbox, with packages from the index."""

import os
import stat
import subprocess
from datetime import datetime, timezone
from pathlib import Path

import pytest

from worker.engine.environment import (
    EnvironmentBuilder,
    EnvironmentFailed,
    install_strategies,
    recipe_key,
)
from worker.engine.sample_repo import sample_repo_write

UV = Path(__file__).resolve().parents[2] / ".venv" / "bin" / "uv"
AS_OF = datetime(2026, 6, 1, tzinfo=timezone.utc)


def _names(recipe):
    return [strategy.name for strategy in install_strategies(recipe)]


def test_strategies_follow_what_the_repository_declares():
    pyproject = '[project]\nname = "x"\n[project.optional-dependencies]\ntest = ["pytest"]\ndocs = ["sphinx"]\n'
    assert _names({"pyproject.toml": pyproject}) == ["editable[test]", "editable"]
    setup_py = "setup(name='x', extras_require={'testing': ['pytest'], 'dev': ['tox']})"
    assert _names({"setup.py": setup_py}) == ["editable[testing]", "editable[dev]", "editable"]
    setup_cfg = "[options.extras_require]\ntests = pytest\n"
    assert _names({"setup.cfg": setup_cfg, "setup.py": "setup()", "requirements-dev.txt": "mock\n"}) == [
        "editable[tests]", "editable+requirements", "editable", "requirements"]
    assert _names({"requirements.txt": "six\n"}) == ["requirements"]
    assert _names({}) == ["tests-only"]
    assert _names({"pyproject.toml": "not [toml"}) == ["editable"]


def test_the_recipe_key_follows_the_install_files_only():
    assert recipe_key({"setup.py": "a"}) == recipe_key({"setup.py": "a"}) != recipe_key({"setup.py": "b"})


@pytest.fixture(scope="module")
def place(open_module_folder):
    return open_module_folder


@pytest.fixture(scope="module")
def sample(place):
    return place / "sample", sample_repo_write(place / "sample")


def _working_copy(place: Path, repo: Path, sha: str, name: str) -> Path:
    work = place / name
    (work / "repo").mkdir(parents=True)
    subprocess.run(f"git -C {repo} archive {sha} | tar -x -C {work / 'repo'}", shell=True, check=True)
    return work


def _builder(place: Path) -> EnvironmentBuilder:
    return EnvironmentBuilder(env_root=place / "envs", uv=UV)


def test_the_sample_repository_builds_and_its_environment_is_shared(place, sample):
    repo, commits = sample
    built = _builder(place).build(_working_copy(place, repo, commits[-1].sha, "last"), as_of=AS_OF)
    assert [(a.strategy, a.status) for a in built.attempts] == [("editable[test]", "ok")]
    assert "pytest==" in built.lock and built.python_version.startswith("3.")
    assert (built.path / "bin" / "python").exists() and built.path.parent == place / "envs"

    again = _builder(place).build(_working_copy(place, repo, commits[-1].sha, "last-again"), as_of=AS_OF)
    assert again.key == built.key and again.path == built.path

    earlier = [c for c in commits if c.kind == "fix_with_test"][2]
    reuse = _builder(place).reuse_check(built.path, _working_copy(place, repo, earlier.sha, "earlier"))
    assert reuse.status == "ok", reuse.output
    assert "collected" in reuse.output or "tests collected" in reuse.output or "::" in reuse.output


def test_an_install_that_fails_records_every_attempt(place):
    work = place / "broken"
    (work / "repo").mkdir(parents=True)
    (work / "repo" / "setup.py").write_text("raise SystemExit('this package refuses to install')\n")
    with pytest.raises(EnvironmentFailed) as failed:
        _builder(place).build(work, as_of=AS_OF)
    attempts = failed.value.attempts
    assert [a.strategy for a in attempts] == ["editable"]
    assert attempts[0].step == "install" and attempts[0].status == "failed"
    assert "this package refuses to install" in attempts[0].output


def test_tests_that_do_not_collect_fail_the_attempt(place):
    work = place / "uncollectable"
    (work / "repo" / "tests").mkdir(parents=True)
    (work / "repo" / "tests" / "test_x.py").write_text("def test_x(:\n")
    with pytest.raises(EnvironmentFailed) as failed:
        _builder(place).build(work, as_of=AS_OF)
    (attempt,) = failed.value.attempts
    assert attempt.strategy == "tests-only" and attempt.step == "collect"
    assert "SyntaxError" in attempt.output or "error" in attempt.output.lower()


def test_a_build_that_swaps_its_environment_for_a_link_is_refused(place):
    secret = place / "secret-folder"
    secret.mkdir(mode=0o700)
    os.chown(secret, 4242, 4242)
    work = place / "swapper"
    (work / "repo" / "tests").mkdir(parents=True)
    (work / "repo" / "tests" / "conftest.py").write_text(
        "import os, shutil\nshutil.rmtree('/workspace/env', ignore_errors=True)\n"
        f"os.symlink({str(secret)!r}, '/workspace/env')\n")
    (work / "repo" / "tests" / "test_x.py").write_text("def test_x():\n    pass\n")
    with pytest.raises(EnvironmentFailed) as failed:
        _builder(place).build(work, as_of=AS_OF)
    assert failed.value.attempts[-1].step in {"collect", "keep"}
    assert os.stat(secret).st_uid == 4242 and stat.S_IMODE(os.stat(secret).st_mode) == 0o700
    assert not any(path.is_symlink() for path in (place / "envs").glob("*")) if (place / "envs").exists() else True


def test_a_file_hard_linked_into_the_working_copy_is_copied_when_the_environment_is_kept(place):
    from worker.engine.environment import _give_back

    env = place / "linked-env"
    (env / "lib").mkdir(parents=True)
    outside = place / "linked-outside.py"
    outside.write_text("original\n")
    os.link(outside, env / "lib" / "sitecustomize.py")
    _give_back(env)
    outside.write_text("changed from the working copy\n")
    assert (env / "lib" / "sitecustomize.py").read_text() == "original\n"
    assert os.stat(env / "lib" / "sitecustomize.py").st_nlink == 1
