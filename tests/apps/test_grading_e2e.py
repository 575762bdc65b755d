"""Grading candidates through the real parts: the grade command, Redis, a worker process, the sandbox,
on the sample repository."""

import difflib
import json
import os
import subprocess
import sys

import pytest
from django.conf import settings
from django.urls import reverse

from apps.datasets.models import Candidate, Grade, Run
from apps.jobs.models import Job
from apps.repositories.services import repository_register
from apps.tasks.models import Task
from tests.conftest import commands_database_url, mine_now
from worker.demo.sample_repo import sample_repo_write

pytestmark = pytest.mark.e2e

FORGING_CONFTEST = ("import pytest\n\n\n@pytest.hookimpl(hookwrapper=True)\n"
                    "def pytest_runtest_makereport(item, call):\n"
                    "    outcome = yield\n    outcome.get_result().outcome = 'passed'\n")


def new_file(path: str, text: str) -> str:
    lines = text.splitlines()
    return (f"diff --git a/{path} b/{path}\nnew file mode 100644\n--- /dev/null\n+++ b/{path}\n"
            f"@@ -0,0 +1,{len(lines)} @@\n" + "".join(f"+{line}\n" for line in lines))


REWRITING = ("import _pytest.reports\n_original = _pytest.reports.TestReport.__init__\n\n\n"
             "def _forged(self, *args, **kwargs):\n    _original(self, *args, **kwargs)\n"
             "    self.outcome = 'passed'\n\n\n_pytest.reports.TestReport.__init__ = _forged")


def appended(path: str, before: str, lines: str) -> str:
    """A patch adding `lines` at the end of the file `path`."""
    after = before + "\n" + lines + "\n"
    return f"diff --git a/{path} b/{path}\n" + "".join(difflib.unified_diff(
        before.splitlines(keepends=True), after.splitlines(keepends=True), f"a/{path}", f"b/{path}"))


def manage(*args, timeout=900):
    """A command in a process of its own, on the test database and the worker's mirrors."""
    return subprocess.run([sys.executable, "manage.py", *args], capture_output=True, text=True, timeout=timeout,
                          cwd=settings.BASE_DIR, env={**os.environ, "DATABASE_URL": commands_database_url(),
                                                      "COMMITGYM_MIRROR_DIR": str(settings.COMMITGYM_MIRROR_DIR)})


def test_grade_command_through_a_worker(celery_worker, tmp_path, curator_client):
    commits = sample_repo_write(tmp_path / "textkit")
    repository = repository_register(location=str(tmp_path / "textkit"))
    mine_now(repository)
    fix = [c for c in commits if c.kind == "fix_with_test"][0]
    validated = manage("validate", repository.name, "--commit", fix.sha, "--json")
    assert validated.returncode == 0 and json.loads(validated.stdout)["verdict"] == "valid", (
        validated.stderr, list(Job.objects.values_list("error_code", "error_message")))
    task = Task.objects.get(commit__sha=fix.sha)
    run = Run.objects.create(name="agent-x")
    # A module the tests import, made to print PASSED lines, or to rewrite pytest's reports at import.
    module = next(path for path in task.commit.source_files if path.endswith(".py"))
    source = subprocess.run(["git", "show", f"{task.commit.parent_sha}:{module}"], cwd=repository.mirror_dir,
                            capture_output=True, text=True, check=True).stdout
    made = {
        "conftest_only": new_file("conftest.py", FORGING_CONFTEST),
        "unrelated": new_file("notes_for_later.py", "NOTE = 1"),
        "no_patch": None,
        "prints_passed": appended(module, source, "print('tests/test_x.py::test_y PASSED')\nprint('== 9 passed ==')"),
        "rewrites_reports": appended(module, source, REWRITING),
    }
    for kind, patch in made.items():
        Candidate.objects.create(task=task, source="import", run=Run.objects.create(name=kind) if kind != "unrelated"
                                 else run, kind=kind, patch=patch or "", no_patch=patch is None)

    done = manage("grade", task.instance_id, "--json")
    assert done.returncode == 0, done.stderr
    *lines, last = [json.loads(line) for line in done.stdout.splitlines()]
    by_kind = {line["kind"]: line for line in lines}
    assert set(by_kind) == {"gold", "empty", "conftest_only", "unrelated", "no_patch", "prints_passed",
                            "rewrites_reports"}
    assert set(lines[0]) == {"task_id", "candidate_id", "source", "kind", "outcome", "tampering", "touches_tests",
                             "seconds"}
    assert {kind: (line["outcome"], line["tampering"]) for kind, line in by_kind.items()} == {
        "gold": ("resolved", False), "empty": ("no", False), "conftest_only": ("no", True),
        "unrelated": ("no", False), "no_patch": ("no_patch", False), "prints_passed": ("no", False),
        "rewrites_reports": ("untrusted", False)}
    assert by_kind["gold"]["source"] == "gold" and by_kind["gold"]["task_id"] == task.instance_id
    assert last == {"counts": {"no": 4, "no_patch": 1, "resolved": 1, "untrusted": 1}}
    # The grades are jobs of the jobs table, on the tests queue, with each run's per-test outcomes.
    gold = Candidate.objects.get(task=task, source="gold")
    assert (gold.outcome, gold.outcome_source) == ("resolved", "graded")
    grade = Grade.objects.get(candidate=gold)
    assert grade.job.kind == "grade" and grade.job.state == Job.State.SUCCEEDED
    assert set(fix.fail_to_pass) <= {test for test, status in grade.runs[0]["outcomes"].items() if status == "PASSED"}
    # Graded candidates are not graded again; the page shows them.
    again = manage("grade", task.instance_id, "--json")
    assert again.returncode == 0 and json.loads(again.stdout.splitlines()[-1]) == {"counts": {}}
    page = curator_client.get(reverse("datasets:task_candidates", args=[task.instance_id])).content.decode()
    assert page.count("badge-resolved") == 1 and "tampering" in page


def test_mutants_made_graded_scored_and_judged_on_the_review_page(celery_worker, tmp_path, curator_client):
    commits = sample_repo_write(tmp_path / "textkit")
    repository = repository_register(location=str(tmp_path / "textkit"))
    mine_now(repository)
    fix = [c for c in commits if c.kind == "fix_with_test"][0]
    assert manage("validate", repository.name, "--commit", fix.sha, "--json").returncode == 0
    task = Task.objects.get(commit__sha=fix.sha)
    made = manage("make_mutants", task.instance_id, "--json")
    assert made.returncode == 0 and made.stdout, made.stderr
    line = json.loads(made.stdout)
    assert line["task_id"] == task.instance_id and line["made"] and "tampering" in line["made"]
    mutants = Candidate.objects.filter(task=task, source="mutant")
    assert sorted(mutants.values_list("kind", flat=True)) == sorted(line["made"])
    assert all(m.made["description"] and m.made["file"] for m in mutants)
    # Made once: asking again makes none.
    assert json.loads(manage("make_mutants", task.instance_id, "--json").stdout)["made"] == []

    graded = manage("grade", task.instance_id, "--json")
    assert graded.returncode == 0, graded.stderr
    lines = [json.loads(text) for text in graded.stdout.splitlines()[:-1]]
    by_kind = {entry["kind"]: entry for entry in lines if entry["source"] == "mutant"}
    assert set(by_kind) == set(line["made"]) and by_kind["tampering"]["tampering"] is True
    task.refresh_from_db()
    caught = sum(entry["outcome"] != "resolved" for entry in by_kind.values())
    assert task.mutation_score == pytest.approx(caught / len(by_kind))
    page = curator_client.get(reverse("tasks:review", args=[task.instance_id])).content.decode()
    assert "Mutants of the gold patch" in page and by_kind["tampering"]["kind"] in page
    listed = curator_client.get(reverse("tasks:all"), {"mutation_max": "1"}).content.decode()
    assert task.instance_id in listed
    # A survivor marked equivalent counts for nothing (made one here if none survived).
    mutant = mutants.exclude(kind="tampering").first()
    Candidate.objects.filter(id=mutant.id).update(outcome="resolved")
    response = curator_client.post(reverse("datasets:mutant_equivalent", args=[mutant.id]), {"equivalent": "1"})
    assert response.status_code == 302
    task.refresh_from_db()
    others = [entry for kind, entry in by_kind.items() if kind != mutant.kind]
    assert task.mutation_score == pytest.approx(sum(e["outcome"] != "resolved" for e in others) / len(others))
    curator_client.post(reverse("datasets:tests_weak", args=[task.instance_id]))
    assert task.changes.filter(kind="tests_flagged_weak").exists()
