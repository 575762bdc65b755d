"""commitgym as the harness for anyone's predictions, through the real parts: predictions graded by a
worker process in the sandbox, the run report and per-instance report.json files written as
SWE-bench's harness writes them, its own make_run_report building the same report from our folder,
and import_predictions reading ours back to the same ground truth."""

import json
import os
import subprocess
import sys

import pytest
from django.conf import settings

from apps.datasets.models import Candidate, Run
from apps.repositories.services import repository_register
from apps.tasks.models import Task
from apps.tasks.selectors import task_patches
from tests.apps.test_grading_e2e import manage
from tests.conftest import commands_database_url, mine_now
from worker.demo.sample_repo import sample_repo_write

pytestmark = pytest.mark.e2e

# SWE-bench's own report, built in a process of its own from our logs folder (it reads
# logs/run_evaluation/... relative to its working directory and writes MODEL.RUN.json there).
THEIR_REPORT = """
import json, sys
from swebench.harness.reporting import make_run_report

predictions, dataset, run_id = json.loads(sys.argv[1]), json.loads(sys.argv[2]), sys.argv[3]
print(make_run_report(predictions, [{"instance_id": i} for i in dataset], run_id))
"""
MODEL = "org/agent-7b"


def test_evaluate_writes_swebenchs_reports_and_they_read_back(celery_worker, tmp_path):
    commits = sample_repo_write(tmp_path / "textkit")
    repository = repository_register(location=str(tmp_path / "textkit"))
    mine_now(repository)
    fixes = [c for c in commits if c.kind == "fix_with_test" and c.expected_drop_reason is None][:4]
    validated = manage("validate", repository.name, *[arg for fix in fixes for arg in ("--commit", fix.sha)], "--json")
    assert validated.returncode == 0, validated.stderr
    gold, empty, wrong, unpredicted = [Task.objects.get(commit__sha=fix.sha) for fix in fixes]
    assert {task.state for task in (gold, empty, wrong, unpredicted)} == {"valid"}
    gold_patch = task_patches(task=gold).source_patch
    rows = [{"instance_id": gold.instance_id, "model_name_or_path": MODEL, "model_patch": gold_patch},
            {"instance_id": empty.instance_id, "model_name_or_path": MODEL, "model_patch": ""},
            {"instance_id": wrong.instance_id, "model_name_or_path": MODEL,
             "model_patch": "diff --git a/notes.py b/notes.py\nnew file mode 100644\n--- /dev/null\n+++ b/notes.py\n"
                            "@@ -0,0 +1 @@\n+NOTE = 1\n"},
            {"instance_id": "nobody__nothing-1", "model_name_or_path": MODEL, "model_patch": gold_patch}]
    predictions = tmp_path / "preds.jsonl"
    predictions.write_text("".join(json.dumps(row) + "\n" for row in rows))
    folder = tmp_path / "evaluation"
    report = folder / f"{MODEL.replace('/', '__')}.first.json"

    done = manage("evaluate", repository.name, str(predictions), "--run", "first", "--report", str(report), "--json")
    assert done.returncode == 0, done.stderr
    ours = json.loads(done.stdout)
    assert ours == json.loads(report.read_text())
    dataset = sorted(Task.objects.filter(repository=repository, verdict="valid").values_list("instance_id", flat=True))
    assert (ours["resolved_ids"], ours["unresolved_ids"], ours["empty_patch_ids"], ours["error_ids"]) == (
        [gold.instance_id], [wrong.instance_id], [empty.instance_id], [])
    assert ours["incomplete_ids"] == sorted(set(dataset) - {gold.instance_id, empty.instance_id, wrong.instance_id})
    assert unpredicted.instance_id in ours["incomplete_ids"] and ours["total_instances"] == len(dataset)
    assert ours["submitted_ids"] == sorted(row["instance_id"] for row in rows) and ours["schema_version"] == 2
    # Each completed instance's report.json, where the harness keeps its logs, with its tests' status.
    logs = folder / "logs" / "run_evaluation" / "first" / MODEL.replace("/", "__")
    assert sorted(path.name for path in logs.iterdir()) == sorted([gold.instance_id, wrong.instance_id])
    wrong_report = json.loads((logs / wrong.instance_id / "report.json").read_text())[wrong.instance_id]
    assert wrong_report["resolved"] is False and wrong_report["tests_status"]["FAIL_TO_PASS"]["success"] == []
    assert wrong_report["tests_status"]["FAIL_TO_PASS"]["failure"] == sorted(fixes[2].fail_to_pass)
    gold_report = json.loads((logs / gold.instance_id / "report.json").read_text())[gold.instance_id]
    assert gold_report["resolved"] and gold_report["tests_status"]["FAIL_TO_PASS"]["failure"] == []

    # SWE-bench's make_run_report, from our folder: the same lists and counts, every key it writes in ours.
    theirs_made = subprocess.run(
        [sys.executable, "-c", THEIR_REPORT, json.dumps({row["instance_id"]: row for row in rows}),
         json.dumps(dataset), "first"], cwd=folder, capture_output=True, text=True, timeout=300)
    assert theirs_made.returncode == 0, theirs_made.stderr
    theirs = json.loads((folder / theirs_made.stdout.strip().splitlines()[-1]).read_text())
    assert {key: ours[key] for key in theirs} == theirs

    # Read back into another run: the same ground truth, candidate by candidate.
    again = manage("import_predictions", str(predictions), "--run", "again", "--report", str(report), "--json")
    assert again.returncode == 0, again.stderr
    first = dict(Candidate.objects.filter(run__name="first").values_list("task__instance_id", "outcome"))
    assert first == {gold.instance_id: "resolved", empty.instance_id: "no_patch", wrong.instance_id: "no"}
    assert dict(Candidate.objects.filter(run__name="again").values_list("task__instance_id", "outcome")) == first
    # Evaluated, a ground truth taken from a report is not taken on its word: graded here.
    regraded = manage("evaluate", repository.name, str(predictions), "--run", "again", "--report",
                      str(tmp_path / "again.json"), "--json")
    assert regraded.returncode == 0, regraded.stderr
    assert set(Candidate.objects.filter(run__name="again", no_patch=False).values_list("outcome_source", flat=True)) \
        == {"graded"}
    assert json.loads(regraded.stdout)["resolved_ids"] == [gold.instance_id]
    # A run of candidates made here is never replaced by predictions of the same name.
    made_here = Run.objects.create(name="made-here")
    Candidate.objects.create(task=gold, source="sampler", run=made_here, kind="sampler", patch=gold_patch)
    refused = manage("evaluate", repository.name, str(predictions), "--run", "made-here")
    assert refused.returncode != 0 and "holds candidates made here" in refused.stderr
    assert Candidate.objects.filter(run=made_here).count() == 1

    # Two models in one file: each its run, graded together, a report each, named as the harness names them.
    two = tmp_path / "two.jsonl"
    two.write_text("".join(json.dumps({"instance_id": gold.instance_id, "model_name_or_path": model,
                                       "model_patch": patch}) + "\n"
                           for model, patch in (("org/m-right", gold_patch), ("m-empty", ""))))
    refused = manage("evaluate", repository.name, str(two), "--report", str(tmp_path / "one.json"))
    assert refused.returncode != 0 and "the predictions name 2 models: --report names one run's report" in \
        refused.stderr
    (tmp_path / "two").mkdir()
    both = subprocess.run([sys.executable, str(settings.BASE_DIR / "manage.py"), "evaluate", repository.name, str(two),
                           "--json"], cwd=tmp_path / "two", capture_output=True, text=True, timeout=900,
                          env={**os.environ, "DATABASE_URL": commands_database_url(),
                               "COMMITGYM_MIRROR_DIR": str(settings.COMMITGYM_MIRROR_DIR)})
    assert both.returncode == 0, both.stderr
    # A model's "/" is "__" in the files' names, as the harness writes it.
    right, empty_run = (json.loads((tmp_path / "two" / f"{name}.{name}.json").read_text())
                        for name in ("org__m-right", "m-empty"))
    assert (tmp_path / "two" / "logs" / "run_evaluation" / "org__m-right" / "org__m-right" / gold.instance_id /
            "report.json").is_file()
    assert [json.loads(line)["resolved_ids"] for line in both.stdout.splitlines()] == [[], [gold.instance_id]]
    assert (right["resolved_ids"], empty_run["empty_patch_ids"]) == ([gold.instance_id], [gold.instance_id])

