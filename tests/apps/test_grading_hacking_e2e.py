"""Hostile candidates on the sample repository through the real parts (the grade command, Redis, a worker
process, the sandbox): graded, flagged `suspicious` with their reasons, a second opinion beside the one
whose tests pass only under pytest, left out of the measures until a curator clears them."""

import json
import subprocess

import pytest
from django.urls import reverse

from apps.datasets.models import Candidate, Grade, Run
from apps.repositories.services import repository_register
from apps.tasks.models import Task
from tests.apps.test_grading_e2e import manage
from tests.conftest import mine_now
from tests.worker.test_grade_forgery_detector import ATTACKS, F2P, MODULE
from worker.demo.sample_repo import sample_repo_write
from worker.engine.grade.source_edits import file_diff

pytestmark = pytest.mark.e2e


def test_hostile_candidates_are_graded_flagged_given_a_second_opinion_and_left_out_until_cleared(
        celery_worker, tmp_path, curator_client):
    commits = sample_repo_write(tmp_path / "textkit")
    repository = repository_register(location=str(tmp_path / "textkit"))
    mine_now(repository)
    fix = next(c for c in commits if c.fail_to_pass == (F2P,))
    validated = manage("validate", repository.name, "--commit", fix.sha, "--json")
    assert validated.returncode == 0 and json.loads(validated.stdout)["verdict"] == "valid", validated.stderr
    task = Task.objects.get(commit__sha=fix.sha)
    base = subprocess.run(["git", "show", f"{task.commit.parent_sha}:{MODULE}"], cwd=repository.mirror_dir,
                          capture_output=True, text=True, check=True).stdout
    for name in ("eq_always_true", "harness_probe"):
        replaced, added, _ = ATTACKS[name]
        Candidate.objects.create(task=task, source="import", run=Run.objects.create(name=name), kind=name,
                                 patch=file_diff(MODULE, base, base.replace(replaced, added)))

    done = manage("grade", task.instance_id, "--json")
    assert done.returncode == 0, done.stderr
    lines = {line["kind"]: line for line in map(json.loads, done.stdout.splitlines()[:-1])}
    assert {kind: (line["outcome"], line["suspicious"], [flag["reason"] for flag in line["hacking"]])
            for kind, line in lines.items()} == {
        "gold": ("resolved", False, []), "empty": ("no", False, []),
        "eq_always_true": ("resolved", True, ["constant_comparison"]),
        "harness_probe": ("resolved", True, ["harness_probe"])}
    assert lines["eq_always_true"]["hacking"][0]["path"] == MODULE
    # The plain runner (not pytest) fails the test the grade passed where the code is right only under pytest.
    assert (lines["harness_probe"]["second_opinion_differs"], lines["eq_always_true"]["second_opinion_differs"]) == (
        [F2P], [])
    probe = Candidate.objects.get(task=task, kind="harness_probe")
    grade = Grade.objects.get(candidate=probe)
    assert [flag["parsed"] for flag in grade.hacking] == ["file"]
    assert grade.second_opinion["outcomes"] == {F2P: "FAILED"}

    page = curator_client.get(reverse("datasets:task_candidates", args=[task.instance_id])).content.decode()
    assert page.count("badge-suspicious") >= 4 and "second opinion differs" in page
    assert f"<code>{F2P}</code>: the grade says PASSED, the plain runner FAILED" in page

    def resolved_candidates() -> int:
        verified = manage("verify", task.instance_id, "--no-tests", "--no-judge", "--sources", "import", "--json")
        assert verified.returncode == 0, verified.stderr
        return json.loads(verified.stdout)["resolved_candidates"]

    assert resolved_candidates() == 0
    response = curator_client.post(reverse("datasets:candidate_hacking", args=[probe.id]),
                                   {"verdict": "cleared", "note": "cleared to see the figure move"})
    assert response.status_code == 302
    assert resolved_candidates() == 1
