"""Validation through the real parts: the validate command, Redis, a worker process, the sandbox."""

import json
import os
import subprocess
import sys
from urllib.parse import urlsplit, urlunsplit

import pytest
from django.conf import settings

from apps.environments.models import Environment
from apps.repositories.services import repository_register
from apps.tasks.models import Task, TaskStateChange, Validation
from tests.conftest import mine_now
from worker.engine.sample_repo import sample_repo_write

pytestmark = pytest.mark.e2e


def _test_database_url() -> str:
    parts = urlsplit(os.environ["DATABASE_URL"])
    return urlunsplit(parts._replace(path="/" + settings.DATABASES["default"]["NAME"]))


def test_validate_command_through_a_worker(celery_worker, tmp_path):
    commits = sample_repo_write(tmp_path / "textkit")
    repository = repository_register(location=str(tmp_path / "textkit"))
    mine_now(repository)
    fix = [c for c in commits if c.kind == "fix_with_test"][0]
    breaking = [c for c in commits if c.kind == "breaks_other_test"][0]
    env = {**os.environ, "DATABASE_URL": _test_database_url(), "COMMITGYM_VALIDATION_RUNS": "2"}
    done = subprocess.run(
        [sys.executable, "manage.py", "validate", repository.name, "--commit", fix.sha[:10],
         "--commit", breaking.sha, "--json"],
        env=env, capture_output=True, text=True, timeout=600, cwd=settings.BASE_DIR)
    assert done.returncode == 0, done.stderr
    lines = {line["sha"]: line for line in map(json.loads, done.stdout.splitlines())}
    assert set(lines) == {fix.sha, breaking.sha}
    assert set(lines[fix.sha]) == {"sha", "task_id", "verdict", "reason", "fail_to_pass", "pass_to_pass_count",
                                   "flaky", "environment_id", "environment_reused", "seconds"}
    assert lines[fix.sha]["verdict"] == "valid" and lines[fix.sha]["fail_to_pass"] == sorted(fix.fail_to_pass)
    assert (lines[breaking.sha]["verdict"], lines[breaking.sha]["reason"]) == ("invalid", "breaks_other_tests")

    task = Task.objects.get(commit__sha=fix.sha)
    assert task.state == "valid"
    assert list(TaskStateChange.objects.filter(task=task).values_list("to_state", flat=True)) == [
        "mined", "building", "validating", "valid"]
    validation = Validation.objects.get(task=task)
    assert validation.environment == Environment.objects.get(key=lines[fix.sha]["environment_id"])
    assert validation.attempts.exists() and validation.runs.filter(side="gold").exists()
    assert Task.objects.get(commit__sha=breaking.sha).state == "invalid"


def test_validate_refuses_an_unknown_repository_and_commit(celery_worker, git_repo):
    git_repo.commit("init", {"a.py": "x = 1\n"})
    small_repository = repository_register(location=str(git_repo.path))
    mine_now(small_repository)
    env = {**os.environ, "DATABASE_URL": _test_database_url()}
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
    env = {**os.environ, "DATABASE_URL": _test_database_url(), "COMMITGYM_VALIDATION_RUNS": "2"}
    done = subprocess.run(
        [sys.executable, "manage.py", "validate", repository.name, "--commit", fix.sha, "--backend", "docker",
         "--json"], env=env, capture_output=True, text=True, timeout=600, cwd=settings.BASE_DIR)
    assert done.returncode == 0, done.stderr
    (line,) = map(json.loads, done.stdout.splitlines())
    assert line["verdict"] == "valid" and line["fail_to_pass"] == sorted(fix.fail_to_pass)
    validation = Validation.objects.get(task__commit__sha=fix.sha)
    assert validation.backend == "docker" and validation.environment.backend == "docker"
    assert validation.environment.build_network == "host"
