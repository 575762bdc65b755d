"""Environments built for real in the local sandbox, with packages from the index."""

import os
import stat
import subprocess
from datetime import datetime, timezone
from pathlib import Path

import pytest

from worker.demo.sample_repo import sample_repo_write
from worker.engine.env.builder import EnvironmentBuilder, EnvironmentFailed
from worker.engine.env.recipes import ENV, REPO, WORKSPACE, declared_python, install_strategies, recipe_key
from worker.engine.env.runtimes import Runtime, default_images, docker_runtimes, local_runtimes, python_order
from worker.engine.sandbox.docker import DockerSandbox

UV = Path(__file__).resolve().parents[2] / ".venv" / "bin" / "uv"
AS_OF = datetime(2026, 6, 1, tzinfo=timezone.utc)
PYTHON = local_runtimes()[0].interpreter  # attempts are named after the Python they used


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


def _versions(recipe, as_of, available=("3.13", "3.11", "3.9", "3.8")):
    return [runtime.version for runtime in python_order([Runtime(v) for v in available], recipe, as_of)]


def test_pythons_are_searched_from_the_one_of_the_commits_day():
    assert _versions({}, datetime(2026, 1, 1)) == ["3.13", "3.11", "3.9", "3.8"]
    # In mid-2021 the newest Python was 3.9: try it, then older ones, then those that came later.
    assert _versions({}, datetime(2021, 6, 1)) == ["3.9", "3.8", "3.11", "3.13"]
    assert _versions({}, datetime(2015, 1, 1)) == ["3.8", "3.9", "3.11", "3.13"]


def test_the_pythons_a_repository_declares_come_first_and_alone():
    pyproject = '[project]\nname = "x"\nrequires-python = ">=3.8,<3.10"\n'
    assert _versions({"pyproject.toml": pyproject}, datetime(2026, 1, 1)) == ["3.9", "3.8"]
    setup_cfg = "[options]\npython_requires = >=3.10\n"
    assert _versions({"setup.cfg": setup_cfg}, datetime(2021, 6, 1)) == ["3.11", "3.13"]
    setup_py = "setup(name='x', python_requires='>=3.9.1')"
    assert _versions({"setup.py": setup_py}, datetime(2026, 1, 1)) == ["3.13", "3.11", "3.9"]
    # Nothing available fits: every Python is tried rather than none.
    assert _versions({"setup.py": "setup(python_requires='<3')"}, datetime(2026, 1, 1)) == [
        "3.13", "3.11", "3.9", "3.8"]
    assert declared_python({"setup.py": "setup(python_requires='not a specifier')"}) is None
    assert declared_python({"pyproject.toml": "[project\n"}) is None


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
    assert [(a.strategy, a.status) for a in built.attempts] == [(f"{PYTHON} editable[test]", "ok")]
    assert "pytest==" in built.lock and built.python_version.startswith("3.")
    assert (built.path / "bin" / "python").exists() and built.path.parent == place / "envs"

    again = _builder(place).build(_working_copy(place, repo, commits[-1].sha, "last-again"), as_of=AS_OF)
    assert again.key == built.key and again.path == built.path

    earlier = [c for c in commits if c.kind == "fix_with_test"][2]
    reuse = _builder(place).reuse_check(built, _working_copy(place, repo, earlier.sha, "earlier"))
    assert reuse.status == "ok", reuse.output
    assert "collected" in reuse.output or "tests collected" in reuse.output or "::" in reuse.output


def test_an_install_that_fails_records_every_attempt(place):
    work = place / "broken"
    (work / "repo").mkdir(parents=True)
    (work / "repo" / "setup.py").write_text("raise SystemExit('this package refuses to install')\n")
    with pytest.raises(EnvironmentFailed) as failed:
        _builder(place).build(work, as_of=AS_OF)
    attempts = failed.value.attempts
    assert [a.strategy for a in attempts] == [f"{PYTHON} editable"]
    assert attempts[0].step == "install" and attempts[0].status == "failed"
    assert "this package refuses to install" in attempts[0].output


def test_tests_that_do_not_collect_fail_the_attempt(place):
    work = place / "uncollectable"
    (work / "repo" / "tests").mkdir(parents=True)
    (work / "repo" / "tests" / "test_x.py").write_text("def test_x(:\n")
    with pytest.raises(EnvironmentFailed) as failed:
        _builder(place).build(work, as_of=AS_OF)
    (attempt,) = failed.value.attempts
    assert attempt.strategy == f"{PYTHON} tests-only" and attempt.step == "collect"
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
    from worker.engine.env.builder import environment_seal

    env = place / "linked-env"
    (env / "lib").mkdir(parents=True)
    outside = place / "linked-outside.py"
    outside.write_text("original\n")
    os.link(outside, env / "lib" / "sitecustomize.py")
    environment_seal(env)
    outside.write_text("changed from the working copy\n")
    assert (env / "lib" / "sitecustomize.py").read_text() == "original\n"
    assert os.stat(env / "lib" / "sitecustomize.py").st_nlink == 1


def test_old_code_gets_the_older_python_it_needs_from_the_docker_backend(place):
    runtimes = docker_runtimes(default_images())
    assert {"3.11", "3.9"} <= {runtime.version for runtime in runtimes}, \
        "make test builds commitgym-base:bookworm and commitgym-base:bullseye (deploy/dev/docker.sh)"
    work = place / "old-code"
    (work / "repo" / "tests").mkdir(parents=True)
    # collections.Mapping went away in Python 3.10.
    (work / "repo" / "tests" / "test_old.py").write_text(
        "from collections import Mapping\n\n\ndef test_mapping():\n    assert isinstance({}, Mapping)\n")
    builder = EnvironmentBuilder(env_root=place / "envs-docker", uv=UV, sandbox_factory=DockerSandbox,
                                 backend="docker", runtimes=runtimes)
    built = builder.build(work, as_of=AS_OF)
    assert [(a.strategy, a.step, a.status) for a in built.attempts] == [
        ("python3.11 tests-only", "collect", "failed"), ("python3.9 tests-only", "", "ok")]
    assert "Mapping" in built.attempts[0].output
    assert built.python_version.startswith("3.9.") and built.image == "commitgym-base:bullseye"
    assert builder.runs(built)
    run = builder.sandbox([(built.path, ENV)], image=built.image).run(
        [f"{ENV}/bin/python", "-m", "pytest", "-q", "-p", "no:cacheprovider"], workdir=work, mount_at=WORKSPACE,
        cwd=REPO)
    assert run.ok and b"1 passed" in run.output, run.output


def test_a_dependency_that_broke_later_is_held_back_until_the_tests_collect(place):
    work = place / "held-back"
    (work / "repo" / "tests").mkdir(parents=True)
    (work / "repo" / "requirements.txt").write_text("itsdangerous\n")
    # itsdangerous 2.1 removed this class; code written against 2.0 still imports it.
    (work / "repo" / "tests" / "test_token.py").write_text(
        "from itsdangerous import TimedJSONWebSignatureSerializer\n\n\n"
        "def test_token():\n    assert TimedJSONWebSignatureSerializer('k').loads(\n"
        "        TimedJSONWebSignatureSerializer('k').dumps({'a': 1})) == {'a': 1}\n")
    built = _builder(place).build(work, as_of=AS_OF)
    *held, last = built.attempts
    assert (last.strategy, last.status) == (f"{PYTHON} requirements itsdangerous<2.1", "ok")
    assert held and all(a.step == "collect" and "TimedJSONWebSignatureSerializer" in a.output for a in held)
    assert held[0].strategy == f"{PYTHON} requirements"
    assert "itsdangerous==2.0." in built.lock


def test_an_import_error_in_the_repositorys_own_code_holds_nothing_back(place):
    work = place / "own-error"
    (work / "repo" / "mypkg").mkdir(parents=True)
    (work / "repo" / "mypkg" / "__init__.py").write_text("")
    (work / "repo" / "tests").mkdir()
    (work / "repo" / "tests" / "test_x.py").write_text("from mypkg import missing\n\n\ndef test_x():\n    pass\n")
    with pytest.raises(EnvironmentFailed) as failed:
        _builder(place).build(work, as_of=AS_OF)
    assert [a.strategy for a in failed.value.attempts] == [f"{PYTHON} tests-only"]
