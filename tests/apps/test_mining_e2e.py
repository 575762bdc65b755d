"""Mining through the real parts: PostgreSQL, Redis, a Celery worker process, git."""

import json
import os
import subprocess
import sys
import time

import pytest
from django.conf import settings

from apps.jobs.models import Job
from apps.repositories.models import Commit, MiningJob, Repository
from apps.repositories.services import mining_job_start, repository_register
from apps.tasks.models import Task
from tests.conftest import commands_database_url

pytestmark = pytest.mark.e2e


def _wait_for(job: MiningJob, timeout: float = 60) -> MiningJob:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        job.refresh_from_db()
        if not job.is_active:
            return job
        time.sleep(0.1)
    raise AssertionError(f"job {job.id} still {job.state} after {timeout} s")


def test_mining_job_goes_through_redis_to_a_worker_process(celery_worker, git_repo):
    git_repo.commit("Initial", {"pkg/core.py": "def double(x):\n    return x + x\n"})
    fix = git_repo.commit("Fix double for strings", {"pkg/core.py": "def double(x):\n    return x * 2\n",
                                                       "tests/test_core.py": "def test_double():\n    pass\n"})
    repository = repository_register(location=str(git_repo.path))

    job, created = mining_job_start(repository=repository)
    assert created and job.state == MiningJob.State.QUEUED
    job = _wait_for(job)

    assert job.state == MiningJob.State.SUCCEEDED, job.error_message
    assert (job.progress_done, job.progress_total, job.new_commits) == (2, 2, 2)
    stored = Commit.objects.get(repository=repository, sha=fix)
    assert stored.drop_reason == "" and stored.tests_changed and stored.source_files == ["pkg/core.py"]
    task = Task.objects.get(commit=stored)
    assert task.instance_id == f"local__{git_repo.path.name}-{fix[:10]}"
    assert task.state == "mined" and task.state_changes.count() == 1
    assert (settings.COMMITGYM_MIRROR_DIR / f"{repository.pk}.git" / "HEAD").exists()


def test_mine_command_waits_for_the_worker_and_prints_one_json_line(celery_worker, git_repo):
    git_repo.commit("Initial", {"pkg/core.py": "VALUE = 1\n"})
    git_repo.commit("Docs", {"README.md": "hello\n"})
    env = {**os.environ, "DATABASE_URL": commands_database_url()}

    first = _mine(git_repo.path, env)
    git_repo.commit("Change value", {"pkg/core.py": "VALUE = 2\n"})
    second = _mine(git_repo.path, env)

    assert set(first) == {"repo", "commits_seen", "new_commits", "kept", "dropped", "seconds"}
    assert first["commits_seen"] == 2 and first["new_commits"] == 2
    assert first["kept"] == 1 and first["dropped"] == {"no_python_change": 1}
    assert second["commits_seen"] == 3 and second["new_commits"] == 1 and second["kept"] == 2
    assert Commit.objects.filter(repository__url=str(git_repo.path)).count() == 3


def test_mine_command_fails_with_a_clear_reason(celery_worker, tmp_path):
    not_a_repo = tmp_path / "plain-folder"
    not_a_repo.mkdir()
    env = {**os.environ, "DATABASE_URL": commands_database_url()}
    done = subprocess.run([sys.executable, "manage.py", "mine", str(not_a_repo), "--json"],
                          env=env, capture_output=True, text=True, timeout=120, cwd=settings.BASE_DIR)
    # Refused at registration, before any job: nothing is left to delete by hand.
    assert done.returncode != 0
    assert done.stdout == ""
    assert f"{not_a_repo} is not a git repository." in done.stderr
    assert not Repository.objects.exists() and not Job.objects.exists()


def _mine(path, env) -> dict:
    done = subprocess.run([sys.executable, "manage.py", "mine", str(path), "--json"],
                          env=env, capture_output=True, text=True, timeout=120, cwd=settings.BASE_DIR)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert len(lines) == 1, done.stdout
    return json.loads(lines[0])

