"""commitgym as the harness for anyone's predictions, through the real parts: predictions graded by a
worker process in the sandbox, the run report and per-instance report.json files written as
SWE-bench's harness writes them, its own make_run_report building the same report from our folder,
and import_predictions reading ours back to the same ground truth."""

import json
import os
import shutil
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
from worker.engine.env.rebuild import release_lock

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


def validated_sample(tmp_path, count: int):
    """The sample repository mined, and its first `count` fixes with tests validated: (it, the fixes)."""
    commits = sample_repo_write(tmp_path / "textkit")
    repository = repository_register(location=str(tmp_path / "textkit"))
    mine_now(repository)
    fixes = [c for c in commits if c.kind == "fix_with_test" and c.expected_drop_reason is None][:count]
    validated = manage("validate", repository.name, *[arg for fix in fixes for arg in ("--commit", fix.sha)], "--json")
    assert validated.returncode == 0, validated.stderr
    return repository, fixes


def their_report(folder, predictions: dict, dataset: list[str], run_id: str) -> dict:
    """SWE-bench's make_run_report over `folder`'s logs, in a process of its own."""
    made = subprocess.run([sys.executable, "-c", THEIR_REPORT, json.dumps(predictions), json.dumps(dataset), run_id],
                          cwd=folder, capture_output=True, text=True, timeout=300)
    assert made.returncode == 0, made.stderr
    return json.loads((folder / made.stdout.strip().splitlines()[-1]).read_text())


def test_evaluate_writes_swebenchs_reports_and_they_read_back(celery_worker, tmp_path):
    repository, fixes = validated_sample(tmp_path, 4)
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
    theirs = their_report(folder, {row["instance_id"]: row for row in rows}, dataset, "first")
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



def test_a_release_folder_is_evaluated_on_a_database_that_never_validated_its_tasks(celery_worker, tmp_path):
    from apps.datasets.models import Dataset
    from apps.environments.models import Environment
    from apps.repositories.models import Repository
    from apps.tasks.models import IssueVersion

    repository, fixes = validated_sample(tmp_path, 2)
    tasks = Task.objects.filter(commit__sha__in=[fix.sha for fix in fixes], verdict="valid")
    assert tasks.count() == 2
    for task in tasks:
        IssueVersion.objects.create(task=task, number=1, author="person", text=f"Broken: {task.instance_id}")
    tasks.update(state="accepted")
    released = manage("release_dataset", "textkit", "--repository", repository.name, "--out",
                      str(tmp_path / "releases"), "--json")
    assert released.returncode == 0, released.stderr
    folder = tmp_path / "elsewhere" / "textkit@1"
    shutil.copytree(tmp_path / "releases" / "textkit@1", folder)
    rows = [json.loads(line) for line in (folder / "instances.jsonl").read_text().splitlines()]

    # Nothing of the tasks is left here: not their rows, environments, mirror or working copies.
    for environment in Environment.objects.all():
        shutil.rmtree(environment.path, ignore_errors=True)
    Environment.objects.all().delete()
    shutil.rmtree(repository.mirror_dir, ignore_errors=True)
    Dataset.objects.all().delete()
    Repository.objects.all().delete()
    assert not Task.objects.exists()

    first, second = rows
    predictions = tmp_path / "folder-preds.jsonl"
    predictions.write_text("".join(json.dumps(row) + "\n" for row in [
        {"instance_id": first["instance_id"], "model_name_or_path": MODEL, "model_patch": first["patch"]},
        {"instance_id": second["instance_id"], "model_name_or_path": MODEL, "model_patch": None}]))
    report = tmp_path / "folder-eval" / "report.json"
    done = manage("evaluate", str(folder), str(predictions), "--run", "fresh", "--report", str(report), "--json")
    assert done.returncode == 0, done.stderr
    ours = json.loads(done.stdout)
    assert (ours["resolved_ids"], ours["empty_patch_ids"], ours["error_ids"], ours["total_instances"]) == (
        [first["instance_id"]], [second["instance_id"]], [], 2), ours
    # The tasks came from the folder: imported, each graded in an environment made again from its files.
    imported = Task.objects.get(instance_id=first["instance_id"])
    assert imported.source == "imported" and imported.imported_instance.source_archive.startswith(str(folder))
    validation = imported.validations.get()
    assert (validation.reason, validation.environment.recipe_key) == (
        "from_release", f"release:{first['commitgym_environment_key']}")
    lock = (folder / "environments" / first["commitgym_environment_key"] / "requirements.lock").read_text()
    assert release_lock(validation.environment.lock).splitlines() == [
        line.rstrip(" \\") for line in lock.splitlines() if "==" in line]
    submitted = {row["instance_id"]: {"instance_id": row["instance_id"], "model_name_or_path": MODEL,
                                      "model_patch": row["patch"] if row is first else None} for row in rows}
    theirs = their_report(report.parent, submitted, [row["instance_id"] for row in rows], "fresh")
    assert {key: ours[key] for key in theirs} == theirs

    # On the docker backend the environment, made again in the sandbox, is sealed into an image of its own
    # that the runs use as it is, nothing mounted over it: the same grades.
    import docker

    def evaluated_in_docker(run: str) -> dict:
        done = manage("evaluate", str(folder), str(predictions), "--run", run, "--backend", "docker",
                      "--report", str(tmp_path / run / "report.json"), "--json")
        assert done.returncode == 0, done.stderr
        graded = json.loads(done.stdout)
        assert (graded["resolved_ids"], graded["empty_patch_ids"], graded["error_ids"]) == (
            ours["resolved_ids"], ours["empty_patch_ids"], []), graded
        assert Candidate.objects.get(run__name=run, task=imported).grades.get().backend == "docker"
        return graded

    evaluated_in_docker("in-docker")
    environment = imported.validations.get(backend="docker").environment
    assert environment.sealed_image and environment.recipe_key == f"release:{first['commitgym_environment_key']}"
    engine = docker.from_env()
    assert f"commitgym-environment:{environment.key}" in engine.images.get(environment.sealed_image).tags
    # Its image gone, the environment is sealed again from its folder, not graded in for ever as if it were there.
    engine.images.remove(environment.sealed_image, force=True)
    environments = Environment.objects.count()
    evaluated_in_docker("in-docker-again")
    environment.refresh_from_db()
    assert engine.images.get(environment.sealed_image)
    assert Environment.objects.count() == environments  # the same environment, not one made again
