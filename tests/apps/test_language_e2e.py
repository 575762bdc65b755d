"""Model-backed jobs through the real parts: commands, Redis, a worker process, the embedded model."""

import json
import os
import subprocess
import sys

import pytest
from django.conf import settings

from apps.llm.models import ModelCall
from apps.repositories.services import repository_register
from apps.tasks.backtranslation import ISSUE_WRITER_TOKENS, issue_prompt
from apps.tasks.generation import TEST_WRITER_TOKENS, generation_prompt
from apps.tasks.models import GeneratedTest, IssueVersion, Task, Validation
from tests.conftest import commands_database_url, mine_now, record_model_answer
from worker.demo.sample_repo import sample_repo_write

pytestmark = pytest.mark.e2e


def _manage(*args: str, env_extra: dict = None, timeout: float = 900) -> subprocess.CompletedProcess:
    env = {**os.environ, "DATABASE_URL": commands_database_url(), **(env_extra or {})}
    return subprocess.run([sys.executable, "manage.py", *args], env=env, capture_output=True, text=True,
                          timeout=timeout, cwd=settings.BASE_DIR)


def test_backtranslate_writes_each_valid_task_s_issue_through_a_worker(celery_worker, tmp_path):
    commits = sample_repo_write(tmp_path / "textkit")
    repository = repository_register(location=str(tmp_path / "textkit"))
    mine_now(repository)
    fix, leaked = [c for c in commits if c.kind == "fix_with_test"][:2]
    validated = _manage("validate", repository.name, "--commit", fix.sha, "--commit", leaked.sha, "--json")
    assert validated.returncode == 0, validated.stderr
    assert {json.loads(line)["verdict"] for line in validated.stdout.splitlines()} == {"valid"}
    task, leaking_task = Task.objects.get(commit__sha=fix.sha), Task.objects.get(commit__sha=leaked.sha)
    # The issue writer "answers" the second task with a text that names its Fail-to-Pass tests.
    validation = Validation.objects.get(task=leaking_task)
    prompt, variables = issue_prompt(leaking_task, validation)
    names = " and ".join(test.split("::")[-1] for test in validation.fail_to_pass)
    record_model_answer(role="issue_writer", prompt=prompt, variables=variables, task=leaking_task,
                        max_tokens=ISSUE_WRITER_TOKENS, answer=f"Broken\n\nRun {names} to see it.")

    written = _manage("backtranslate", repository.name, "--json")
    assert written.returncode == 0, written.stderr
    lines = {line["task_id"]: line for line in map(json.loads, written.stdout.splitlines())}
    line = lines[task.instance_id]
    assert set(line) == {"task_id", "outcome", "model", "leak_score", "seconds"}
    assert (line["outcome"], line["model"]) == ("written", "SmolLM2-135M-Instruct")
    assert 0 <= line["leak_score"] <= 1
    version = IssueVersion.objects.get(task=task)
    assert version.text and version.model_call.task == task and version.model_call.tokens_out > 0
    flagged = IssueVersion.objects.get(task=leaking_task)
    assert lines[leaking_task.instance_id]["leak_score"] == flagged.leak_score == 1.0 and flagged.leak_flagged

    again = _manage("backtranslate", repository.name, "--json")
    assert {json.loads(line)["outcome"] for line in again.stdout.splitlines()} == {"cached"}
    assert IssueVersion.objects.filter(task=task).count() == 1


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


GOOD_TEST = """```python
from textkit.slug import slugify


def test_max_length_leaves_no_trailing_separator():
    assert slugify("hello big world", max_length=10) == "hello-big"
```
And one that checks nothing new:
```python
from textkit.slug import slugify


def test_plain():
    assert slugify("a b") == "a-b"
```"""


def test_a_fix_without_tests_becomes_valid_through_a_generated_test(celery_worker, tmp_path):
    commits = sample_repo_write(tmp_path / "textkit")
    repository = repository_register(location=str(tmp_path / "textkit"))
    mine_now(repository)
    fixes = [c for c in commits if c.kind == "fix_without_test"]
    validated = _manage("validate", repository.name, "--commit", fixes[0].sha, "--commit", fixes[1].sha, "--json")
    assert validated.returncode == 0, validated.stderr
    assert {json.loads(line)["reason"] for line in validated.stdout.splitlines()} == {"no_fail_to_pass"}
    known, embedded = (Task.objects.get(commit__sha=fix.sha) for fix in fixes[:2])
    # The test writer "answers" the first task with a known good test; the embedded model writes the other's.
    prompt, variables = generation_prompt(known)
    record_model_answer(role="test_writer", prompt=prompt, variables=variables, answer=GOOD_TEST,
                        max_tokens=TEST_WRITER_TOKENS, task=known)

    generated = _manage("generate_tests", repository.name, "--json")
    lines = {line["task_id"]: line for line in map(json.loads, generated.stdout.splitlines())}
    assert set(lines) == {known.instance_id, embedded.instance_id}, generated.stderr
    assert {key: lines[known.instance_id][key] for key in ("outcome", "model", "kept", "dropped")} == {
        "outcome": "written", "model": "recorded", "kept": 1, "dropped": 1}
    known.refresh_from_db()
    assert known.state == "valid"
    kept, dropped = GeneratedTest.objects.filter(task=known).order_by("index")
    assert (kept.state, kept.fail_to_pass) == (
        "kept", ["test_commitgym_generated_1.py::test_max_length_leaves_no_trailing_separator"])
    assert (dropped.state, dropped.reason) == ("dropped", "passes_before")
    assert len(kept.before) == 2 and set(kept.before[0].values()) == {"FAILED"}
    validation = kept.validation
    assert validation.generated and validation.verdict == "valid" and validation.fail_to_pass == kept.fail_to_pass

    line = lines[embedded.instance_id]
    call = ModelCall.objects.get(task=embedded, role="test_writer")
    assert call.outcome == "ok" and call.model == "SmolLM2-135M-Instruct" and call.tokens_out > 0
    rows = GeneratedTest.objects.filter(task=embedded)
    if line["outcome"] == "written":  # the weak model's answer held a test: each file was judged
        assert line["kept"] + line["dropped"] == rows.count() > 0
        assert not rows.filter(state="pending").exists()
    else:
        assert line["outcome"] == "failed" and not rows.exists() and generated.returncode != 0
        assert "no Python code block" in generated.stderr
