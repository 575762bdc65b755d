"""Importing SWE-bench instance and predictions files into datasets, tasks and candidates
(apps/datasets/candidates/imports.py), through the commands and the pages."""

import json
import os
import subprocess
import sys

import pyarrow
import pyarrow.parquet
import pytest
from django.core.management import call_command
from django.core.management.base import CommandError
from django.urls import reverse

from apps.bulk_insert import rows_insert
from apps.datasets.candidates import imports
from apps.datasets.candidates.imports import ImportUnreadable, instances_import, predictions_import
from apps.datasets.models import Candidate, Dataset, DatasetTask, Import, Run
from apps.repositories.models import Commit, Repository
from apps.tasks.models import ImportedInstance, IssueVersion, SavedView, Task
from tests.conftest import commands_database_url
from tests.worker.test_swebench_files import GOLD, instance, jsonl

pytestmark = pytest.mark.django_db

SYMPY = instance("sympy__sympy-20590", repo="sympy/sympy", base_commit="c" * 40,
                 FAIL_TO_PASS=["test_immutable"], PASS_TO_PASS=["test_Symbol", "test_Dummy"],
                 problem_statement="Symbol instances have __dict__ since 1.7?")
OTHER_GOLD = GOLD.replace("+a + b", "+b + a")


def three_instances():
    return [instance(), instance("octo__calc-2", base_commit="a" * 40, problem_statement="mul() adds"), SYMPY]


def table_counts() -> dict:
    return {model.__name__: model.objects.count() for model in (
        Task, Repository, Commit, ImportedInstance, IssueVersion, Dataset, DatasetTask, Candidate, Run)}


def test_an_instance_file_makes_tasks_with_their_patches_statement_and_oracle_as_given(tmp_path):
    imported = instances_import(path=jsonl(tmp_path / "verified.jsonl", three_instances()))
    assert imported.counts == {"rows": 3, "created": 3, "unchanged": 0, "refused": 0, "duplicates": 0}
    dataset = imported.dataset
    assert (dataset.name, dataset.kind) == ("verified", "import")
    assert sorted(dataset.tasks.values_list("instance_id", flat=True)) == [
        "octo__calc-1", "octo__calc-2", "sympy__sympy-20590"]
    task = Task.objects.select_related("repository", "commit", "imported_instance").get(
        instance_id="sympy__sympy-20590")
    assert (task.source, task.state, task.verdict, task.fail_to_pass_count) == ("imported", "valid", "valid", 1)
    # A repository row with no mirror, and the base commit as the task's commit.
    assert (task.repository.name, task.repository.url) == ("sympy/sympy", "https://github.com/sympy/sympy.git")
    assert not task.repository.mirror_dir.exists()
    assert (task.commit.sha, task.commit.drop_reason) == ("c" * 40, "imported_base")
    # Test ids as given, not made into node ids.
    assert (task.imported_instance.fail_to_pass, task.imported_instance.pass_to_pass) == (
        ["test_immutable"], ["test_Symbol", "test_Dummy"])
    assert task.imported_instance.patch == GOLD and task.imported_instance.environment_setup_commit == "b" * 40
    issue = task.issue_versions.get()
    assert (issue.number, issue.author, issue.text) == (1, "imported", SYMPY["problem_statement"])
    # The two controls.
    assert sorted(task.candidates.values_list("source", "patch")) == [("empty", ""), ("gold", GOLD)]
    # Two instances of one base commit share its row.
    assert Commit.objects.filter(sha="a" * 40).count() == 1
    assert Task.objects.filter(commit__sha="a" * 40).count() == 2


def test_importing_the_same_file_again_changes_nothing(tmp_path):
    path = jsonl(tmp_path / "verified.jsonl", three_instances())
    instances_import(path=path)
    before = table_counts()
    again = instances_import(path=path)
    assert again.counts == {"rows": 3, "created": 0, "unchanged": 3, "refused": 0, "duplicates": 0}
    assert table_counts() == before


def test_an_instance_id_of_another_dataset_or_a_changed_row_is_refused_with_why(tmp_path):
    instances_import(path=jsonl(tmp_path / "verified.jsonl", three_instances()))
    other = instances_import(path=jsonl(tmp_path / "lite.jsonl", [instance(), instance("octo__calc-9")]))
    assert other.counts["created"] == 1 and other.refused == [
        {"row": 1, "instance_id": "octo__calc-1",
         "reason": "octo__calc-1 exists already, in dataset verified: instance ids are unique"}]
    changed = instances_import(path=jsonl(tmp_path / "v2.jsonl", [instance(patch=OTHER_GOLD)]),
                               dataset_name="verified")
    assert changed.counts["refused"] == 1
    assert "in this dataset already with different fields" in changed.refused[0]["reason"]
    assert ImportedInstance.objects.get(task__instance_id="octo__calc-1").patch == GOLD


def test_a_mined_tasks_id_is_refused(tmp_path):
    repository = Repository.objects.create(name="octo/calc", url="/nowhere")
    commit = Commit.objects.create(repository=repository, sha="d" * 40, author_name="a", author_email="a@b",
                                   authored_at="2024-01-01T00:00Z", committed_at="2024-01-01T00:00Z", message="fix")
    Task.objects.create(instance_id="octo__calc-1", repository=repository, commit=commit)
    imported = instances_import(path=jsonl(tmp_path / "i.jsonl", [instance()]))
    assert imported.refused[0]["reason"] == "octo__calc-1 is a task mined from octo/calc: instance ids are unique"


def test_parquet_and_json_lists_as_the_hugging_face_copies_ship(tmp_path):
    # As the Hugging Face copies store them: the two lists as JSON strings.
    rows = [{**row, **{name: row[name] if isinstance(row[name], str) else json.dumps(row[name])
                       for name in ("FAIL_TO_PASS", "PASS_TO_PASS")}} for row in three_instances()]
    pyarrow.parquet.write_table(pyarrow.Table.from_pylist(rows), tmp_path / "test-00000-of-00001.parquet")
    imported = instances_import(path=tmp_path / "test-00000-of-00001.parquet", dataset_name="parquet")
    assert imported.counts["created"] == 3
    assert ImportedInstance.objects.get(task__instance_id="octo__calc-1").fail_to_pass == [
        "tests/test_calc.py::test_add"]
    (tmp_path / "list.json").write_text(json.dumps(rows))
    # The same rows again under the same dataset: nothing new.
    assert instances_import(path=tmp_path / "list.json", dataset_name="parquet").counts["unchanged"] == 3


def test_bad_rows_are_refused_each_with_its_reason_and_a_failed_import_leaves_nothing(tmp_path, monkeypatch):
    path = tmp_path / "bad.jsonl"
    good = [json.dumps(instance(f"ok-{i}")).encode() for i in range(3)]
    path.write_bytes(b"\n".join([good[0], b'{"instance_id": "cut', good[1], b"caf\xe9",
                                 json.dumps(instance("huge", patch="+" * (50 << 20))).encode(),
                                 json.dumps(instance("short-sha", base_commit="main")).encode(), good[2]]))
    imported = instances_import(path=path)
    assert imported.counts == {"rows": 7, "created": 3, "unchanged": 0, "refused": 4, "duplicates": 0}
    assert [(row["row"], row["instance_id"]) for row in imported.refused] == [
        (2, ""), (4, ""), (5, "huge"), (6, "short-sha")]
    assert imported.refused[2]["reason"] == "patch is 50.0 MB, over the 8 MB limit"
    assert imported.refused[3]["reason"] == "base_commit 'main' is not a commit's hex sha"
    before = table_counts()
    calls = []

    def breaks_on_the_fourth_table(*args, **kwargs):
        calls.append(1)
        if len(calls) == 4:
            raise RuntimeError("the database went away")
        return rows_insert(*args, **kwargs)

    monkeypatch.setattr(imports, "rows_insert", breaks_on_the_fourth_table)
    with pytest.raises(RuntimeError):
        instances_import(path=jsonl(tmp_path / "new.jsonl", [instance("n-1"), instance("n-2")]))
    assert table_counts() == before and not Import.objects.filter(file_name="new.jsonl").exists()


def test_the_command_exits_non_zero_only_when_nothing_could_be_read(tmp_path, capsys):
    (tmp_path / "broken.json").write_text("[{")
    with pytest.raises(CommandError, match="nothing imported: broken.json is not JSON in UTF-8"):
        call_command("import_instances", str(tmp_path / "broken.json"))
    with pytest.raises(CommandError, match="a .jsonl or .json file is expected"):
        call_command("import_instances", str(jsonl(tmp_path / "rows.txt", [instance()])))
    call_command("import_instances", str(jsonl(tmp_path / "half.jsonl", [instance(), {"instance_id": "x"}])),
                 "--json", "--dataset", "mine")
    out, err = capsys.readouterr()
    line = json.loads(out)
    assert {key: line[key] for key in ("dataset", "rows", "created", "refused")} == {
        "dataset": "mine", "rows": 2, "created": 1, "refused": 1}
    assert "row 2 (x) refused: missing or not text: repo, base_commit" in err


# --- predictions ---------------------------------------------------------------------------


def predictions(run="agent-a"):
    return [{"instance_id": "octo__calc-1", "model_name_or_path": run, "model_patch": GOLD},
            {"instance_id": "octo__calc-2", "model_name_or_path": run, "model_patch": OTHER_GOLD},
            {"instance_id": "sympy__sympy-20590", "model_name_or_path": run, "model_patch": None}]


def prediction_files(tmp_path) -> list:
    rows = predictions()
    (tmp_path / "list.json").write_text(json.dumps(rows))
    (tmp_path / "keyed.json").write_text(json.dumps({row["instance_id"]: row for row in rows}))
    return [jsonl(tmp_path / "preds.jsonl", rows), tmp_path / "list.json", tmp_path / "keyed.json"]


def report_files(tmp_path) -> list:
    """The same evaluation in the three shapes: calc-1 resolved, calc-2 not, sympy without a patch."""
    (tmp_path / "run_report.json").write_text(json.dumps({
        "schema_version": 2, "resolved_ids": ["octo__calc-1"], "unresolved_ids": ["octo__calc-2"],
        "empty_patch_ids": ["sympy__sympy-20590"], "error_ids": [], "completed_ids": ["octo__calc-1", "octo__calc-2"],
        "incomplete_ids": [], "submitted_ids": ["octo__calc-1", "octo__calc-2", "sympy__sympy-20590"]}))
    (tmp_path / "lists.json").write_text(json.dumps({
        "generated": ["octo__calc-1", "octo__calc-2"], "applied": ["octo__calc-1", "octo__calc-2"],
        "resolved": ["octo__calc-1"], "no_generation": ["sympy__sympy-20590"]}))
    for instance_id, resolved in (("octo__calc-1", True), ("octo__calc-2", False)):
        folder = tmp_path / "logs" / instance_id
        folder.mkdir(parents=True)
        (folder / "report.json").write_text(json.dumps({instance_id: {
            "resolved": resolved, "patch_successfully_applied": True, "tests_status": {
                "FAIL_TO_PASS": {"success": ["t"] if resolved else [], "failure": [] if resolved else ["t"]},
                "PASS_TO_PASS": {"success": [], "failure": []}}}}))
    return [tmp_path / "run_report.json", tmp_path / "lists.json", tmp_path / "logs"]


@pytest.mark.parametrize("shape", [0, 1, 2], ids=["jsonl", "json_list", "json_keyed"])
def test_predictions_in_each_shape_with_a_report_in_each_shape_land_with_its_ground_truth(tmp_path, shape):
    instances_import(path=jsonl(tmp_path / "verified.jsonl", three_instances()))
    for report, expected_shape in zip(report_files(tmp_path), ("run_report", "lists", "report_folder")):
        path = prediction_files(tmp_path)[shape]
        imported, runs = predictions_import(path=path, run_name=f"run-{expected_shape}", report_path=report)
        assert imported.report_shape == expected_shape
        assert [run.printed() for run in runs] == [{
            "run": f"run-{expected_shape}", "rows": 3, "candidates": 3, "no_patch": 1, "unknown_instance": 0,
            "duplicates": 0, "rejected": 0, "resolved": 1, "ungraded": 0, "replaced": 0, "trajectories": 0}]
        got = {c.task.instance_id: (c.patch, c.no_patch, c.outcome, c.outcome_source) for c in
               Candidate.objects.filter(run__name=f"run-{expected_shape}").select_related("task")}
        source = f"report:{expected_shape}:{report.name}"
        assert got == {"octo__calc-1": (GOLD, False, "resolved", source),
                       "octo__calc-2": (OTHER_GOLD, False, "no", source),
                       "sympy__sympy-20590": ("", True, "no_patch", "import: no patch")}


def test_runs_by_model_name_unknown_ids_duplicates_and_replacing_a_runs_candidates(tmp_path):
    instances_import(path=jsonl(tmp_path / "verified.jsonl", three_instances()))
    rows = predictions("agent-a") + [
        {"instance_id": "octo__calc-1", "model_name_or_path": "agent-b", "model_patch": GOLD},
        {"instance_id": "nobody__none-1", "model_name_or_path": "agent-b", "model_patch": GOLD}]
    path = jsonl(tmp_path / "two_runs.jsonl", rows + [rows[1]])  # calc-2 of agent-a twice
    imported, runs = predictions_import(path=path)
    lines = {run.run: run.printed() for run in runs}
    assert lines["agent-a"] == {"run": "agent-a", "rows": 4, "candidates": 3, "no_patch": 1, "unknown_instance": 0,
                                "duplicates": 1, "rejected": 0, "resolved": None, "ungraded": None, "replaced": 0,
                                "trajectories": 0}
    assert lines["agent-b"]["unknown_instance"] == 1 and lines["agent-b"]["candidates"] == 1
    assert imported.refused == [{"row": 5, "instance_id": "nobody__none-1", "reason": "no task has this instance id"}]
    kept = Candidate.objects.get(run__name="agent-a", task__instance_id="octo__calc-1")
    # Again, with calc-2's patch changed: it replaces that candidate alone; the unchanged ones stay.
    rows[1] = {**rows[1], "model_patch": GOLD}
    _, runs = predictions_import(path=jsonl(tmp_path / "again.jsonl", rows[:3]))
    assert runs[0].printed()["replaced"] == 1 and runs[0].candidates == 3
    assert Candidate.objects.get(run__name="agent-a", task__instance_id="octo__calc-1").pk == kept.pk
    assert Candidate.objects.get(run__name="agent-a", task__instance_id="octo__calc-2").patch == GOLD
    assert Candidate.objects.filter(run__name="agent-a").count() == 3


def test_a_report_never_overrides_a_grade_made_here(tmp_path):
    instances_import(path=jsonl(tmp_path / "verified.jsonl", three_instances()))
    path = jsonl(tmp_path / "preds.jsonl", predictions())
    predictions_import(path=path)
    Candidate.objects.filter(run__name="agent-a", task__instance_id="octo__calc-2").update(
        outcome="untrusted", outcome_source="graded")
    (tmp_path / "says_resolved.json").write_text(json.dumps({
        "schema_version": 2, "resolved_ids": ["octo__calc-1", "octo__calc-2"], "unresolved_ids": []}))
    predictions_import(path=path, report_path=tmp_path / "says_resolved.json")
    outcomes = dict(Candidate.objects.filter(run__name="agent-a").values_list("task__instance_id", "outcome"))
    assert outcomes == {"octo__calc-1": "resolved", "octo__calc-2": "untrusted", "sympy__sympy-20590": "no_patch"}


@pytest.mark.django_db(transaction=True)  # the command is another process: it sees only what was committed
def test_the_predictions_command_prints_one_json_line_per_run(tmp_path):
    instances_import(path=jsonl(tmp_path / "verified.jsonl", three_instances()))
    path = jsonl(tmp_path / "preds.jsonl", predictions("agent-a") + [{"instance_id": "x"}])
    done = subprocess.run([sys.executable, "manage.py", "import_predictions", str(path), "--report",
                           str(report_files(tmp_path)[0]), "--json"], capture_output=True, text=True,
                          env={**os.environ, "DATABASE_URL": commands_database_url()})
    assert done.returncode == 0, done.stderr
    assert [json.loads(line) for line in done.stdout.splitlines()] == [{
        "run": "agent-a", "rows": 4, "candidates": 3, "no_patch": 1, "unknown_instance": 0, "duplicates": 0,
        "rejected": 1, "resolved": 1, "ungraded": 0, "replaced": 0, "trajectories": 0}]
    assert "row 4 (x) refused: missing or not text: model_name_or_path (or name the run)" in done.stderr
    unreadable = subprocess.run([sys.executable, "manage.py", "import_predictions", str(path), "--report",
                                 str(tmp_path / "absent.json")], capture_output=True, text=True,
                                env={**os.environ, "DATABASE_URL": commands_database_url()})
    assert unreadable.returncode == 1 and "nothing imported: absent.json is not a readable JSON report" in \
        unreadable.stderr


def test_a_file_with_no_rows_is_refused_with_why_by_the_imports_and_the_commands(tmp_path):
    instances_import(path=jsonl(tmp_path / "verified.jsonl", three_instances()))
    files = {"empty.jsonl": "", "blank.jsonl": "\n  \n", "list.json": "[]", "keyed.json": "{}"}
    for name, text in files.items():
        (tmp_path / name).write_text(text)
        with pytest.raises(ImportUnreadable, match=f"^{name} holds no predictions: it has no rows$"):
            predictions_import(path=tmp_path / name, run_name="agent-a")
    with pytest.raises(CommandError, match="^nothing imported: empty.jsonl holds no predictions: it has no rows$"):
        call_command("import_predictions", str(tmp_path / "empty.jsonl"))
    with pytest.raises(CommandError, match="^nothing imported: list.json holds no instances: it has no rows$"):
        call_command("import_instances", str(tmp_path / "list.json"))
    assert not Run.objects.exists() and list(Import.objects.values_list("kind", flat=True)) == [Import.Kind.INSTANCES]


def test_trajectories_go_with_their_candidates_and_show_on_the_task_page(tmp_path, curator_client):
    instances_import(path=jsonl(tmp_path / "verified.jsonl", three_instances()))
    steps = jsonl(tmp_path / "steps.jsonl", [
        {"instance_id": "octo__calc-1", "step": 2, "thought": "fix it", "action": "edit calc.py", "observation": "ok"},
        {"instance_id": "octo__calc-1", "step": 1, "thought": "<b>look</b>", "action": "cat calc.py",
         "observation": "a - b"}])
    _, runs = predictions_import(path=jsonl(tmp_path / "preds.jsonl", predictions()), trajectories_path=steps)
    assert runs[0].trajectories == 1
    candidate = Candidate.objects.get(run__name="agent-a", task__instance_id="octo__calc-1")
    assert [step["action"] for step in candidate.trajectory] == ["cat calc.py", "edit calc.py"]
    page = curator_client.get(reverse("datasets:task_candidates", args=["octo__calc-1"])).content.decode()
    assert "The agent's trajectory (2 steps)" in page and "&lt;b&gt;look&lt;/b&gt;" in page
    with pytest.raises(ImportUnreadable, match="absent: no such file or folder of trajectories"):
        predictions_import(path=tmp_path / "preds.jsonl", trajectories_path=tmp_path / "absent")


# --- pages ---------------------------------------------------------------------------------


def test_the_pages_show_datasets_runs_imports_and_a_tasks_candidates(tmp_path, curator_client):
    instances = instances_import(path=jsonl(tmp_path / "verified.jsonl", three_instances() + [{"instance_id": "x"}]))
    imported, _ = predictions_import(path=jsonl(tmp_path / "preds.jsonl", predictions()),
                                     report_path=report_files(tmp_path)[0])
    dataset = Dataset.objects.get(name="verified")
    page = curator_client.get(reverse("datasets:list")).content.decode()
    assert "verified" in page and "sympy/sympy" not in page  # a repository's dataset shows once it has mined tasks
    page = curator_client.get(reverse("datasets:detail", args=[dataset.pk])).content.decode()
    # SWE-bench's resolved rate: over every instance of the dataset, "1 of 3", not over those graded.
    assert "agent-a" in page and "sympy__sympy-20590" in page and '<td class="num run-resolved">1 of 3</td>' in page
    assert "33%" in page
    page = curator_client.get(reverse("datasets:import", args=[instances.pk])).content.decode()
    assert "missing or not text: repo" in page and "<strong>4</strong> rows read" in page
    page = curator_client.get(reverse("datasets:run", args=[Run.objects.get(name="agent-a").pk])).content.decode()
    assert "1 resolved, of the 3 tasks it was given (33%)" in page
    page = curator_client.get(reverse("datasets:task_candidates", args=["octo__calc-1"])).content.decode()
    assert "report:run_report:run_report.json" in page and "Gold" in page and "Empty" in page
    page = curator_client.get(reverse("tasks:detail", args=["sympy__sympy-20590"])).content.decode()
    assert "Oracle, as imported" in page and "test_immutable" in page and "not pytest node ids" in page
    response = curator_client.post(reverse("tasks:validate", args=["sympy__sympy-20590"]), follow=True)
    assert "is an imported instance" in response.content.decode()
    assert not Task.objects.get(instance_id="sympy__sympy-20590").validations.exists()
    review = curator_client.get(reverse("tasks:review", args=["octo__calc-1"])).content.decode()
    assert "calc.py" in review and "mirror is not on disk" not in review


def test_a_saved_views_tasks_make_a_dataset_a_snapshot(tmp_path, curator, curator_client):
    instances_import(path=jsonl(tmp_path / "verified.jsonl", three_instances()))
    view = SavedView.objects.create(user=curator, name="sympy only", query="q=sympy")
    response = curator_client.post(reverse("datasets:from_view", args=[view.pk]), follow=True)
    dataset = Dataset.objects.get(name="sympy only")
    assert (dataset.kind, dataset.query) == ("view", "q=sympy")
    assert list(dataset.tasks.values_list("instance_id", flat=True)) == ["sympy__sympy-20590"]
    assert "made of the 1 tasks the view matches now" in response.content.decode()
    again = curator_client.post(reverse("datasets:from_view", args=[view.pk]), follow=True).content.decode()
    assert "No dataset made: a dataset named &#x27;sympy only&#x27; exists already" in again
    empty = SavedView.objects.create(user=curator, name="nothing", query="q=nothing-matches")
    nothing = curator_client.post(reverse("datasets:from_view", args=[empty.pk]), follow=True).content.decode()
    assert "matches no task now" in nothing and not Dataset.objects.filter(name="nothing").exists()


def test_a_repository_gets_its_dataset_when_registered():
    repository = Repository.objects.create(name="octo/lib", url="/x")
    assert Dataset.objects.get(repository=repository).name == "octo/lib"


def test_a_report_that_lists_only_resolved_gives_every_submitted_prediction_a_ground_truth(tmp_path):
    instances_import(path=jsonl(tmp_path / "verified.jsonl", three_instances()))
    only_resolved = tmp_path / "results.json"  # SWE-bench's older shape: generated and applied as counts
    only_resolved.write_text(json.dumps({"generated": 3, "applied": 2, "resolved": ["octo__calc-1"]}))
    _, runs = predictions_import(path=jsonl(tmp_path / "preds.jsonl", predictions("agent-a")),
                                 report_path=only_resolved)
    assert (runs[0].resolved, runs[0].ungraded) == (1, 0)
    got = dict(Candidate.objects.filter(run__name="agent-a").values_list("task__instance_id", "outcome"))
    assert got == {"octo__calc-1": "resolved", "octo__calc-2": "no", "sympy__sympy-20590": "no_patch"}

    # A run report names every prediction it evaluated: one it does not name is left without a ground truth,
    # and the import says how many.
    partial_report = tmp_path / "partial_run_report.json"
    partial_report.write_text(json.dumps({"schema_version": 2, "resolved_ids": ["octo__calc-1"],
                                          "unresolved_ids": [], "submitted_ids": ["octo__calc-1"]}))
    _, runs = predictions_import(path=jsonl(tmp_path / "preds_b.jsonl", predictions("agent-b")),
                                 report_path=partial_report)
    assert (runs[0].resolved, runs[0].ungraded) == (1, 1)
    assert Candidate.objects.get(run__name="agent-b", task__instance_id="octo__calc-2").outcome == ""
