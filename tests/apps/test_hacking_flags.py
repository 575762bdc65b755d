"""Candidates the hacking detector flags: `suspicious`, shown as graded, never counted as resolved in any
measure (best@k, the oracle, calibration, runs' resolved rates, the candidates' chosen-by, mutation scores,
training exports) until a curator clears them, with a note, on the task's candidates page."""

import json
from io import StringIO
from pathlib import Path

import pytest
from django.core.management import call_command
from django.urls import reverse

from apps.datasets.candidates.imports import instances_import, predictions_import
from apps.datasets.candidates.mutants import task_mutation_score_refresh
from apps.datasets.models import Candidate, Dataset, Run
from apps.datasets.releases import export_start, scope_of_repository
from apps.datasets.selectors import candidate_counts, runs_summarised, task_candidate_scores
from apps.jobs.models import Job
from apps.jobs.services import job_run
from apps.tasks.models import Task
from tests.apps.test_releases import accepted, released  # noqa: F401 - a fixture and a helper shared
from tests.worker.test_swebench_files import GOLD, instance, jsonl

pytestmark = pytest.mark.django_db

TASKS = ["octo__calc-1", "octo__calc-2", "octo__calc-3"]
# Every comparison with its result is true: resolved by any report, and flagged.
HACK = ("diff --git a/calc.py b/calc.py\n--- a/calc.py\n+++ b/calc.py\n@@ -1 +1,6 @@\n-a - b\n"
        "+class Same(int):\n+    def __eq__(self, other):\n+        return True\n+\n+\n+a - b\n")


def verify() -> dict:
    out = StringIO()
    call_command("verify", "--dataset", "verified", "--no-tests", "--no-judge", "--json", stdout=out)
    return json.loads(out.getvalue())


def imported(tmp_path):
    """Three tasks; the run `honest` resolves calc-1 with the fix, the run `hacker` 'resolves' calc-1 and
    calc-2 with an __eq__ that is always true (its report says resolved)."""
    instances_import(path=jsonl(tmp_path / "verified.jsonl", [instance(task_id, base_commit=f"{n:040d}")
                                                               for n, task_id in enumerate(TASKS)]))
    for run, patch, ids in (("honest", GOLD, TASKS[:1]), ("hacker", HACK, TASKS[:2])):
        report = tmp_path / f"report-{run}.json"
        report.write_text(json.dumps({"resolved": ids}))
        predictions_import(path=jsonl(tmp_path / f"{run}.jsonl", [
            {"instance_id": i, "model_name_or_path": run, "model_patch": patch} for i in ids]), report_path=report)
    return {run: Candidate.objects.filter(run__name=run).order_by("task__instance_id") for run in ("honest", "hacker")}


def test_a_flagged_candidate_counts_as_not_resolved_everywhere_until_a_curator_clears_it(tmp_path, curator_client):
    candidates = imported(tmp_path)
    hacked = list(candidates["hacker"])
    # Flagged as imported, from the diff alone; the report's word is kept and shown.
    assert [(c.outcome, c.suspicious, [(f["reason"], f["path"], f["line"], f["parsed"]) for f in c.hacking])
            for c in hacked] == [("resolved", True, [("constant_comparison", "calc.py", 2, "fragment")])] * 2
    assert not candidates["honest"].get().suspicious

    line = verify()
    assert (line["candidates"], line["resolved_candidates"]) == (3, 1)
    assert line["best_at_k"]["oracle"][-1] == pytest.approx(1 / 3)  # calc-1 only: the honest fix
    tasks = Task.objects.filter(instance_id__in=TASKS)
    assert {row.run.name: row.resolved for row in runs_summarised(tasks=tasks)} == {"honest": 1, "hacker": 0}
    assert candidate_counts(tasks=tasks)["import"] == {"resolved": 1, "suspicious": 2}
    first = Task.objects.get(instance_id=TASKS[0])
    chosen = {i: scores.chosen_by for i, scores in task_candidate_scores(task=first).items() if scores.chosen_by}
    assert chosen == {candidates["honest"].get().id: ["oracle"]}  # not the flagged one, resolved by its report

    dataset = Dataset.objects.get(name="verified")
    page = curator_client.get(reverse("datasets:detail", args=[dataset.pk])).content.decode()
    assert "<strong>2</strong> candidates flagged by the hacking detector are not yet cleared" in page
    page = curator_client.get(reverse("datasets:task_candidates", args=[TASKS[1]])).content.decode()
    assert "badge-suspicious" in page and "constant_comparison" in page and "<code>calc.py:2</code>" in page
    assert "counts as not resolved in every measure until a curator clears it" in page

    # A word without a note is refused and records nothing.
    url = reverse("datasets:candidate_hacking", args=[hacked[1].id])
    response = curator_client.post(url, {"verdict": "cleared", "note": "  "}, follow=True)
    assert "Not recorded: say why in the note" in response.content.decode()
    hacked[1].refresh_from_db()
    assert (hacked[1].hacking_review, hacked[1].suspicious) == ("", True)
    # Cleared (a curator's mistake, say): it counts as its grade says, with who, when and why kept.
    response = curator_client.post(url, {"verdict": "cleared", "note": "looked fine to me"})
    assert response.status_code == 302
    hacked[1].refresh_from_db()
    assert (hacked[1].hacking_review, hacked[1].suspicious, hacked[1].hacking_note) == (
        "cleared", False, "looked fine to me")
    assert hacked[1].hacking_reviewed_by.username == "carla" and hacked[1].hacking_reviewed_at is not None
    assert verify()["resolved_candidates"] == 2
    assert candidate_counts(tasks=tasks)["import"] == {"resolved": 2, "suspicious": 1}
    # Confirmed: it never counts.
    curator_client.post(reverse("datasets:candidate_hacking", args=[hacked[0].id]),
                        {"verdict": "confirmed", "note": "__eq__ returns True for anything"})
    hacked[0].refresh_from_db()
    assert (hacked[0].hacking_review, hacked[0].suspicious) == ("confirmed", True)
    assert verify()["resolved_candidates"] == 2
    page = curator_client.get(reverse("datasets:task_candidates", args=[TASKS[0]])).content.decode()
    assert "Confirmed: it games the tests, by carla" in page and "__eq__ returns True for anything" in page
    page = curator_client.get(reverse("datasets:detail", args=[dataset.pk])).content.decode()
    assert "<strong>0</strong> candidates flagged" in page and "1 confirmed as gaming the tests, 1 cleared" in page


def test_only_curators_clear_or_confirm_and_an_unflagged_candidate_has_nothing_to_clear(tmp_path, curator_client,
                                                                                        annotator_client):
    candidates = imported(tmp_path)
    hacked = candidates["hacker"].first()
    url = reverse("datasets:candidate_hacking", args=[hacked.id])
    assert annotator_client.post(url, {"verdict": "cleared", "note": "fine"}).status_code == 403
    honest = candidates["honest"].get()
    response = curator_client.post(reverse("datasets:candidate_hacking", args=[honest.id]),
                                   {"verdict": "cleared", "note": "fine"}, follow=True)
    assert "has not flagged this candidate" in response.content.decode()
    response = curator_client.post(url, {"verdict": "maybe", "note": "fine"}, follow=True)
    assert "is not a word on a flag" in response.content.decode()
    hacked.refresh_from_db()
    assert (hacked.hacking_review, hacked.suspicious) == ("", True)


def test_a_flag_raised_again_differently_waits_for_a_curator_again(tmp_path, curator, curator_client):
    from apps.datasets.grading.hacking import candidate_hacking_review, candidate_hacking_store

    hacked = imported(tmp_path)["hacker"].first()
    candidate_hacking_review(candidate=hacked, verdict="cleared", note="fine", user=curator)
    # The same flags found again (a grade reading the file whole): the curator's word stands.
    assert candidate_hacking_store(hacked.id, hacked.hacking) is False
    # Other flags: they wait for a curator again.
    assert candidate_hacking_store(hacked.id, [{**hacked.hacking[0], "line": 9}]) is True
    hacked.refresh_from_db()
    assert (hacked.hacking_review, hacked.hacking_note, hacked.suspicious) == ("", "", True)


def test_a_flagged_mutant_that_resolves_counts_as_caught(tmp_path):
    imported(tmp_path)
    task = Task.objects.get(instance_id=TASKS[2])
    Candidate.objects.create(task=task, source="mutant", kind="flip_comparison", patch=GOLD, outcome="no")
    Candidate.objects.create(task=task, source="mutant", kind="hard_coded_return", patch=HACK, outcome="resolved",
                             hacking=[{"reason": "constant_comparison", "path": "calc.py", "line": 2}],
                             suspicious=True)
    task_mutation_score_refresh(task.id)
    task.refresh_from_db()
    assert task.mutation_score == 1.0


def test_training_exports_leave_out_a_flagged_resolution_and_label_a_confirmed_one_wrong(
        accepted, small_repository, tmp_path, settings):  # noqa: F811 - the fixture imported above
    settings.COMMITGYM_RELEASE_DIR = tmp_path / "releases"
    release = released(scope=scope_of_repository(small_repository))
    steps = [{"step": 1, "thought": "t", "action": "a", "observation": "o"}]
    flag = [{"reason": "constant_comparison", "path": "lib/calc.py", "line": 2}]

    def candidate(name, **fields):
        return Candidate.objects.create(task=accepted, source="import", run=Run.objects.create(name=name), kind=name,
                                        patch=name, outcome="resolved", outcome_source="graded", trajectory=steps,
                                        **fields)

    right = candidate("right")
    awaiting = candidate("awaiting", hacking=flag, suspicious=True)
    confirmed = candidate("confirmed", hacking=flag, suspicious=True, hacking_review="confirmed")
    cleared = candidate("cleared", hacking=flag, suspicious=False, hacking_review="cleared")
    rows = {}
    for kind in ("trajectories", "judge"):
        export = export_start(release=release, kind=kind)
        job_run(job_id=export.job_id)
        export.refresh_from_db()
        assert export.state == Job.State.SUCCEEDED, export.job.error_message
        rows[kind] = [json.loads(text) for text in (Path(export.folder) / f"{kind}.jsonl").read_text().splitlines()]
        rows[kind + " counts"] = export.manifest["counts"]
    assert [row["candidate_id"] for row in rows["trajectories"]] == [right.id, cleared.id]
    assert rows["trajectories counts"] == {"trajectories": 2, "suspicious_left_out": 2}
    assert [(row["candidate_id"], row["label"], row["label_source"]) for row in rows["judge"]] == [
        (right.id, True, "hidden_tests:graded"), (confirmed.id, False, "curator:hacking_confirmed"),
        (cleared.id, True, "hidden_tests:graded")]
    assert awaiting.id not in [row["candidate_id"] for row in rows["judge"]]
    assert rows["judge counts"] == {"right": 2, "wrong": 1, "suspicious_left_out": 1}


def test_an_import_reads_what_its_report_calls_resolved_and_grading_reads_the_rest(tmp_path):
    instances_import(path=jsonl(tmp_path / "verified.jsonl", [instance(TASKS[0])]))
    predictions = jsonl(tmp_path / "hacker.jsonl", [{"instance_id": TASKS[0], "model_name_or_path": "hacker",
                                                     "model_patch": HACK}])
    predictions_import(path=predictions)  # no report: no ground truth, graded later (which reads the patch)
    hacked = Candidate.objects.get(run__name="hacker")
    assert (hacked.outcome, hacked.hacking, hacked.suspicious) == ("", [], False)
    report = tmp_path / "report.json"
    report.write_text(json.dumps({"resolved": [TASKS[0]]}))
    predictions_import(path=predictions, report_path=report)  # the same patch, kept: now the report's word
    hacked.refresh_from_db()
    assert (hacked.outcome, [flag["reason"] for flag in hacked.hacking], hacked.suspicious) == (
        "resolved", ["constant_comparison"], True)
