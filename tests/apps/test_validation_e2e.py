"""Validation through the real parts: the validate command, Redis, a worker process, the sandbox."""

import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import get_args

import pytest
from django.conf import settings

from apps.environments.models import Environment
from apps.repositories.services import repository_register
from apps.tasks.models import Task, TaskStateChange, Validation
from tests.conftest import commands_database_url, mine_now, process_group_kill, wait_until, worker_start
from tests.gitrepo import GitRepo
from worker.demo.sample_repo import sample_repo_write
from worker.engine.sandbox.base import RunStatus

# The statuses of a run a limit stopped (a time, memory, output or disk limit, or a kill).
LIMITS_STOPPED = set(get_args(RunStatus)) - {"ok", "failed"}

pytestmark = pytest.mark.e2e


def test_validate_command_through_a_worker(celery_worker, tmp_path):
    commits = sample_repo_write(tmp_path / "textkit")
    repository = repository_register(location=str(tmp_path / "textkit"))
    mine_now(repository)
    fix = [c for c in commits if c.kind == "fix_with_test"][0]
    breaking = [c for c in commits if c.kind == "breaks_other_test"][0]
    env = {**os.environ, "DATABASE_URL": commands_database_url()}
    done = subprocess.run(
        [sys.executable, "manage.py", "validate", repository.name, "--commit", fix.sha[:10],
         "--commit", breaking.sha, "--json"],
        env=env, capture_output=True, text=True, timeout=600, cwd=settings.BASE_DIR)
    assert done.returncode == 0, done.stderr
    lines = {line["sha"]: line for line in map(json.loads, done.stdout.splitlines())}
    assert set(lines) == {fix.sha, breaking.sha}
    assert re.search(r"2 validated: 1 invalid, 1 valid; environment reuse: [12] of 2 \(\d+\.\d%\), 1 distinct",
                     done.stderr), done.stderr
    assert set(lines[fix.sha]) == {"sha", "task_id", "verdict", "reason", "fail_to_pass", "pass_to_pass_count",
                                   "flaky", "environment_id", "environment_reused", "seconds"}
    assert lines[fix.sha]["verdict"] == "valid" and lines[fix.sha]["fail_to_pass"] == sorted(fix.fail_to_pass)
    assert (lines[breaking.sha]["verdict"], lines[breaking.sha]["reason"]) == ("invalid", "breaks_other_tests")

    task = Task.objects.get(commit__sha=fix.sha)
    assert task.state == "valid"
    # The list's summary columns hold the verdict the worker stored with the job's end.
    assert (task.verdict, task.fail_to_pass_count) == ("valid", len(fix.fail_to_pass))
    assert list(TaskStateChange.objects.filter(task=task).values_list("to_state", flat=True)) == [
        "mined", "building", "validating", "valid"]
    validation = Validation.objects.get(task=task)
    assert validation.environment == Environment.objects.get(key=lines[fix.sha]["environment_id"])
    assert validation.attempts.exists() and validation.runs.filter(side="after", scope="suite").exists()
    # Its runs were the gold and empty patches' grades: kept for grading, which does not make them again.
    assert set(validation.controls) == {"gold", "empty"} and validation.grade_selection == []
    assert Task.objects.get(commit__sha=breaking.sha).state == "invalid"


def test_validate_refuses_an_unknown_repository_and_commit(celery_worker, git_repo):
    git_repo.commit("init", {"a.py": "x = 1\n"})
    small_repository = repository_register(location=str(git_repo.path))
    mine_now(small_repository)
    env = {**os.environ, "DATABASE_URL": commands_database_url()}
    unknown = subprocess.run([sys.executable, "manage.py", "validate", "nobody/nothing", "--json"],
                             env=env, capture_output=True, text=True, timeout=60, cwd=settings.BASE_DIR)
    assert unknown.returncode != 0 and unknown.stdout == "" and "no registered repository" in unknown.stderr
    no_commit = subprocess.run([sys.executable, "manage.py", "validate", small_repository.name, "--commit", "ffff"],
                               env=env, capture_output=True, text=True, timeout=60, cwd=settings.BASE_DIR)
    assert no_commit.returncode != 0 and "no task" in no_commit.stderr


def test_validate_command_with_the_docker_backend(celery_worker, tmp_path):
    commits = sample_repo_write(tmp_path / "textkit")
    repository = repository_register(location=str(tmp_path / "textkit"))
    mine_now(repository)
    fix = [c for c in commits if c.kind == "fix_with_test"][3]
    env = {**os.environ, "DATABASE_URL": commands_database_url()}
    done = subprocess.run(
        [sys.executable, "manage.py", "validate", repository.name, "--commit", fix.sha, "--backend", "docker",
         "--json"], env=env, capture_output=True, text=True, timeout=600, cwd=settings.BASE_DIR)
    assert done.returncode == 0, done.stderr
    (line,) = map(json.loads, done.stdout.splitlines())
    assert line["verdict"] == "valid" and line["fail_to_pass"] == sorted(fix.fail_to_pass)
    validation = Validation.objects.get(task__commit__sha=fix.sha)
    assert validation.backend == "docker" and validation.environment.backend == "docker"
    assert validation.environment.build_network == "index_proxy"
    install = validation.attempts.filter(status="ok").last().output
    assert "# network: the package index only (pypi.org, files.pythonhosted.org, port 443)" in install


HOSTILE_SETUP = '''
import os, sys
print("environment seen:", sorted(os.environ))
try:
    print("shadow:", open("/etc/shadow").read()[:40])
except OSError as error:
    print("shadow unreadable:", error)
sys.exit("this package refuses to install")
'''

HOSTILE_TESTS = '''
import os, shutil, socket, time
from calc import add


def test_add():
    assert add(2, 3) == 5


def test_hangs():
    while True:
        pass


def test_allocates_ten_gigabytes():
    blocks = [bytearray(1 << 30) for _ in range(10)]
    assert blocks


def test_forks_without_end():
    for _ in range(100_000):
        if os.fork() == 0:
            time.sleep(3600)
    assert False


def test_reaches_the_hosts_redis():
    socket.create_connection(("127.0.0.1", 6379), timeout=2).close()


def test_reads_secrets():
    assert "DATABASE_URL" in os.environ or open("/etc/shadow").read()


def test_deletes_the_environment():
    shutil.rmtree("/workspace/env")
    assert not os.path.exists("/workspace/env")
'''


def _validate(repository, *shas: str) -> dict:
    env = {**os.environ, "DATABASE_URL": commands_database_url()}
    done = subprocess.run(
        [sys.executable, "manage.py", "validate", repository.name, *[a for sha in shas for a in ("--commit", sha)],
         "--json"], env=env, capture_output=True, text=True, timeout=900, cwd=settings.BASE_DIR)
    assert done.returncode == 0, done.stderr
    return {line["sha"]: line for line in map(json.loads, done.stdout.splitlines())}


def test_hostile_code_is_contained_and_the_worker_goes_on(celery_worker, tmp_path):
    installer = GitRepo(tmp_path / "installer")
    installer.commit("init", {"setup.py": "from setuptools import setup\nsetup(name='x')\n"})
    refusing = installer.commit("Fix the install", {"setup.py": HOSTILE_SETUP, "x.py": "X = 1\n"})
    attacker = GitRepo(tmp_path / "attacker")
    attacker.commit("init", {"calc.py": "def add(a, b):\n    return a - b\n"})
    fix = attacker.commit("Fix add", {"calc.py": "def add(a, b):\n    return a + b\n",
                                      "tests/test_calc.py": HOSTILE_TESTS})
    installer_repository = repository_register(location=str(installer.path))
    attacker_repository = repository_register(location=str(attacker.path))
    mine_now(installer_repository)
    mine_now(attacker_repository)

    failed = _validate(installer_repository, refusing)[refusing]
    assert (failed["verdict"], failed["reason"]) == ("environment_failed", "build_failed")
    attempt = Validation.objects.get(task__commit__sha=refusing).attempts.first()
    assert "this package refuses to install" in attempt.output and "shadow unreadable" in attempt.output
    assert "DATABASE_URL" not in attempt.output and "SECRET_KEY" not in attempt.output

    # The same worker goes on with the next job, whose tests attack the sandbox.
    line = _validate(attacker_repository, fix)[fix]
    assert (line["verdict"], line["fail_to_pass"]) == ("valid", ["tests/test_calc.py::test_add"])
    validation = Validation.objects.get(task__commit__sha=fix)
    assert validation.pass_to_pass == [] and validation.flaky == []
    attacks = ("test_hangs", "test_allocates_ten_gigabytes", "test_forks_without_end", "test_reaches_the_hosts_redis",
               "test_reads_secrets", "test_deletes_the_environment")
    runs = list(validation.runs.order_by("id"))
    said = [(run.side, run.scope, run.status, run.exit_code, round(run.seconds, 1), run.output[-400:]) for run in runs]
    # The suite before and after, one rerun (COMMITGYM_VALIDATION_RERUNS=1). Where an attack made a limit
    # stop a suite run (the kernel's memory killer, on a busy machine), the commit's own files run on their
    # own as well, as for any suite cut short; on a busy machine the memory killer may stop those too.
    # A stopped run says which limit stopped it, and holds no outcome of an attack.
    assert [run.scope for run in runs].count("suite") == 2, said
    stopped = [run for run in runs if run.status not in ("ok", "failed")]
    assert len(runs) == 3 or (len(runs) == 5 and any(run.scope == "suite" for run in stopped)), said
    assert all(run.status in LIMITS_STOPPED for run in stopped), said
    for run in runs:
        for attack in attacks:
            outcome = run.outcomes.get(f"tests/test_calc.py::{attack}")
            assert outcome in {"FAILED", "ERROR"} or (run in stopped and outcome is None), (attack, said)
    assert (Path(validation.environment.path) / "bin" / "python").exists()


SLOW_TESTS = '''\
import time
from calc import add


def test_add():
    time.sleep(2)
    assert add(2, 3) == 5
'''


@pytest.fixture
def sandbox_reachable_dir():
    """A folder of the test's own that sandbox users may walk through (pytest's own is closed to them)."""
    import shutil
    import tempfile

    settings.VAR_DIR.mkdir(parents=True, exist_ok=True)
    path = Path(tempfile.mkdtemp(prefix="test-", dir=settings.VAR_DIR))
    path.chmod(0o711)
    yield path
    shutil.rmtree(path, ignore_errors=True)


def test_a_worker_killed_mid_validation_leaves_a_job_another_finishes_exactly_once(transactional_db, settings,
                                                                                    tmp_path, git_repo,
                                                                                    sandbox_reachable_dir):
    from celery import current_app

    from apps.jobs.models import Job
    from apps.jobs.services import jobs_sweep
    from apps.tasks.services import task_validation_start

    settings.COMMITGYM_WORK_DIR = sandbox_reachable_dir / "work"
    settings.COMMITGYM_MIRROR_DIR = tmp_path / "mirrors"
    settings.COMMITGYM_JOB_STALE_SECONDS = 3
    envs = sandbox_reachable_dir / "envs"
    env = {"COMMITGYM_JOB_STALE_SECONDS": "3", "COMMITGYM_JOB_HEARTBEAT_SECONDS": "1",
           "COMMITGYM_WORK_DIR": str(settings.COMMITGYM_WORK_DIR), "COMMITGYM_ENV_DIR": str(envs),
           "COMMITGYM_MIRROR_DIR": str(settings.COMMITGYM_MIRROR_DIR), "COMMITGYM_VALIDATION_RERUNS": "1"}
    git_repo.commit("init", {"calc.py": "def add(a, b):\n    return a - b\n"})
    fix = git_repo.commit("Fix add", {"calc.py": "def add(a, b):\n    return a + b\n",
                                      "tests/test_calc.py": SLOW_TESTS})
    repository = repository_register(location=str(git_repo.path))
    mine_now(repository)
    task = Task.objects.get(commit__sha=fix)
    # The suite's shared worker (if one runs) must not take the job: only these two consume "tests".
    current_app.control.cancel_consumer("tests", reply=True, timeout=5)
    first = worker_start(tmp_path, "first", "tests", env)
    second = None
    try:
        validation = task_validation_start(task=task)
        job_id = validation.job_id
        environments = envs / "local" / f"repository-{repository.pk}"
        # Killed once its environment is built, while the tests run.
        wait_until(lambda: environments.is_dir() and any(environments.iterdir())
                   or not Job.objects.get(id=job_id).is_active, timeout=300, what="the first worker to build")
        assert Job.objects.get(id=job_id).state == "running", Job.objects.get(id=job_id).error_message
        process_group_kill(first)
        folders = list(settings.COMMITGYM_WORK_DIR.glob(f"job-{job_id}-*"))
        assert len(folders) == 1 and Job.objects.get(id=job_id).state == "running"
        second = worker_start(tmp_path, "second", "tests", env)
        wait_until(lambda: jobs_sweep()["taken_over"] == 1, timeout=30, what="the dead worker's job to be handed on")
        assert not folders[0].exists()  # the dead worker's working copy went as its job was handed on
        wait_until(lambda: not Job.objects.get(id=job_id).is_active, timeout=300, what="the validation to end")

        job = Job.objects.get(id=job_id)
        assert job.state == "succeeded" and job.worker.startswith("second@") and job.dispatches == 2
        assert Validation.objects.filter(task=task).count() == 1 and Job.objects.filter(kind="validation").count() == 1
        validation = Validation.objects.get(id=validation.id)
        assert (validation.verdict, validation.fail_to_pass) == ("valid", ["tests/test_calc.py::test_add"])
        runs = list(validation.runs.values_list("side", "scope", "index"))
        assert runs and len(runs) == len(set(runs))  # one set of runs: the second worker's
        assert validation.attempts.count() == len(set(validation.attempts.values_list("strategy", flat=True)))
        assert list(TaskStateChange.objects.filter(task=task).values_list("to_state", flat=True)) == [
            "mined", "building", "validating", "valid"]
        assert not any(settings.COMMITGYM_WORK_DIR.glob(f"job-{job_id}-*"))  # the second's went as it ended
    finally:
        process_group_kill(first)
        if second is not None:
            process_group_kill(second)
        current_app.control.add_consumer("tests", reply=True, timeout=5)
