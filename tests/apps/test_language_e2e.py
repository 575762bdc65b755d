"""Model-backed jobs through the real parts: commands, Redis, a worker process, the embedded model."""

import json
import os
import subprocess
import sys

import pytest
from django.conf import settings

from apps.repositories.services import repository_register
from apps.tasks.models import IssueVersion, Task
from tests.conftest import mine_now, commands_database_url
from worker.engine.sample_repo import sample_repo_write

pytestmark = pytest.mark.e2e


def _manage(*args: str, env_extra: dict = None, timeout: float = 900) -> subprocess.CompletedProcess:
    env = {**os.environ, "DATABASE_URL": commands_database_url(), **(env_extra or {})}
    return subprocess.run([sys.executable, "manage.py", *args], env=env, capture_output=True, text=True,
                          timeout=timeout, cwd=settings.BASE_DIR)


def test_backtranslate_writes_each_valid_task_s_issue_through_a_worker(celery_worker, tmp_path):
    commits = sample_repo_write(tmp_path / "textkit")
    repository = repository_register(location=str(tmp_path / "textkit"))
    mine_now(repository)
    fix = [c for c in commits if c.kind == "fix_with_test"][0]
    validated = _manage("validate", repository.name, "--commit", fix.sha, "--json")
    assert validated.returncode == 0 and json.loads(validated.stdout)["verdict"] == "valid", validated.stderr

    written = _manage("backtranslate", repository.name, "--json")
    assert written.returncode == 0, written.stderr
    (line,) = map(json.loads, written.stdout.splitlines())
    task = Task.objects.get(commit__sha=fix.sha)
    assert set(line) == {"task_id", "outcome", "model", "leak_score", "seconds"}
    assert (line["task_id"], line["outcome"], line["model"]) == (task.instance_id, "written", "SmolLM2-135M-Instruct")
    assert 0 <= line["leak_score"] <= 1
    version = IssueVersion.objects.get(task=task)
    assert version.text and version.model_call.task == task

    again = _manage("backtranslate", repository.name, "--json")
    assert json.loads(again.stdout)["outcome"] == "cached" and IssueVersion.objects.filter(task=task).count() == 1


def test_llm_check_reports_each_role_and_bad_settings_are_refused(celery_worker):
    checked = _manage("llm_check", "--role", "issue_writer", "--role", "judge", "--json", timeout=300)
    assert checked.returncode == 0, checked.stderr
    lines = [json.loads(line) for line in checked.stdout.splitlines()]
    assert [line["role"] for line in lines] == ["issue_writer", "judge"]
    assert all(line["ok"] and line["logprobs"] and line["backend"] == "embedded" for line in lines)
    assert set(lines[0]) == {"role", "backend", "model", "ok", "seconds", "logprobs"}

    refused = _manage("llm_check", env_extra={"COMMITGYM_JUDGE_BACKEND": "anthropic", "COMMITGYM_JUDGE_MODEL": "c"},
                      timeout=120)
    assert refused.returncode != 0 and "cannot score" in refused.stderr

    down = _manage("llm_check", "--role", "issue_writer", "--json", timeout=300, env_extra={
        "COMMITGYM_ISSUE_WRITER_BACKEND": "openai", "COMMITGYM_ISSUE_WRITER_MODEL": "m",
        "COMMITGYM_ISSUE_WRITER_BASE_URL": "http://127.0.0.1:9/v1", "COMMITGYM_ISSUE_WRITER_API_KEY": "sk-hidden"})
    assert down.returncode != 0 and json.loads(down.stdout)["ok"] is False
    assert "unreachable" in down.stderr and "sk-hidden" not in down.stderr + down.stdout
