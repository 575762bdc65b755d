"""SWE-bench's instance, predictions and report files, read row by row (worker/engine/grade/swebench.py)."""

import json

import pytest

from worker.engine.grade.swebench import (
    MAX_PATCH_BYTES,
    NotARow,
    instances_read,
    predictions_read,
    report_read,
)

GOLD = "diff --git a/calc.py b/calc.py\n--- a/calc.py\n+++ b/calc.py\n@@ -1 +1 @@\n-a - b\n+a + b\n"


def instance(instance_id="octo__calc-1", **changes):
    row = {"instance_id": instance_id, "repo": "octo/calc", "base_commit": "a" * 40, "patch": GOLD,
           "test_patch": GOLD.replace("calc.py", "tests/test_calc.py"), "problem_statement": "add() subtracts",
           "hints_text": "", "created_at": "2023-01-02T03:04:05Z", "version": "1.0",
           "FAIL_TO_PASS": json.dumps(["tests/test_calc.py::test_add"]), "PASS_TO_PASS": "[]",
           "environment_setup_commit": "b" * 40}
    return {**row, **changes}


def jsonl(path, rows):
    path.write_text("".join(json.dumps(row) + "\n" for row in rows))
    return path


def test_instances_in_swebench_shape_keep_their_test_ids_as_given(tmp_path):
    sympy = instance("sympy__sympy-1", FAIL_TO_PASS=["test_issue_1"], PASS_TO_PASS=["test_other (mod.Case)"])
    read = instances_read(jsonl(tmp_path / "instances.jsonl", [instance(), sympy]))
    assert (read.rows, read.refused, read.duplicates, read.unreadable) == (2, [], [], "")
    assert read.kept["octo__calc-1"].fail_to_pass == ("tests/test_calc.py::test_add",)
    assert read.kept["octo__calc-1"].environment_setup_commit == "b" * 40
    # Lists as lists, and ids that are not pytest node ids, as given.
    assert read.kept["sympy__sympy-1"].pass_to_pass == ("test_other (mod.Case)",)
    (tmp_path / "list.json").write_text(json.dumps([instance()]))
    assert list(instances_read(tmp_path / "list.json").kept) == ["octo__calc-1"]


def test_every_bad_instance_row_is_refused_with_its_reason_and_the_rest_kept(tmp_path):
    path = tmp_path / "bad.jsonl"
    lines = [json.dumps(instance("ok-1")).encode(),
             json.dumps(instance("no-repo", repo="")).encode(),
             b'{"instance_id": "cut-off", "repo": ',
             json.dumps(instance("huge", patch="+" * (MAX_PATCH_BYTES + 1))).encode(),
             json.dumps(instance("bad-lists", FAIL_TO_PASS="not json")).encode(),
             b'{"instance_id": "latin-1", "problem_statement": "caf\xe9"}',
             json.dumps(instance("ok-1", problem_statement="the later row")).encode(),
             json.dumps(instance("crlf", patch=GOLD.replace("\n", "\r\n"))).encode(),
             b"[1, 2]"]
    path.write_bytes(b"\n".join(lines) + b"\n\n")
    read = instances_read(path)
    assert read.rows == 9 and sorted(read.kept) == ["crlf", "ok-1"] and read.duplicates == ["ok-1"]
    assert read.kept["ok-1"].problem_statement == "the later row"
    assert read.kept["crlf"].patch.endswith("+a + b\r\n")  # kept as given: applying it decides
    reasons = {(refused.row, refused.instance_id): refused.reason for refused in read.refused}
    assert reasons[(2, "no-repo")] == "missing or not text: repo"
    assert reasons[(3, "")].startswith("line 3 is not JSON")
    assert reasons[(4, "huge")] == "patch is 8.0 MB, over the 8 MB limit"
    assert reasons[(5, "bad-lists")] == "FAIL_TO_PASS is text but not a JSON list"
    assert reasons[(6, "")] == "line 6 is not UTF-8"
    assert reasons[(9, "")] == "the row is not an object"


def test_ids_and_names_must_be_printable_text_and_deep_nesting_is_a_refused_row(tmp_path):
    rows = [instance("a\u0000b"), instance("ok\ud800"), instance("fine", repo="octo/ca\nlc")]
    path = tmp_path / "names.jsonl"
    path.write_text("".join(json.dumps(row) + "\n" for row in rows) + "[" * 100_000 + "\n")
    read = instances_read(path)
    assert list(read.kept) == [] and len(read.refused) == 4
    assert "holds characters that are not printable text" in read.refused[0].reason
    assert read.refused[2].reason.startswith("repo 'octo/ca\\nlc' holds characters")
    assert "RecursionError" in read.refused[3].reason
    named = predictions_read(jsonl(tmp_path / "p.jsonl", [{"instance_id": "x", "model_name_or_path": "a\u0007",
                                                           "model_patch": ""}]))
    assert "model_name_or_path" in named.refused[0].reason


def test_a_file_nothing_can_be_read_from_says_why(tmp_path):
    (tmp_path / "broken.json").write_text("[{")
    assert instances_read(tmp_path / "broken.json").unreadable.startswith("broken.json is not JSON in UTF-8")
    (tmp_path / "object.json").write_text("{}")
    assert instances_read(tmp_path / "object.json").unreadable == "object.json holds dict, not a list of rows"
    assert instances_read(tmp_path / "missing.jsonl").unreadable.startswith("missing.jsonl cannot be read")
    (tmp_path / "data.csv").write_text("a,b\n")
    assert instances_read(tmp_path / "data.csv").unreadable == "data.csv: a .jsonl or .json file is expected"


def test_predictions_in_each_shape_with_no_patch_said_so(tmp_path):
    rows = [{"instance_id": "octo__calc-1", "model_name_or_path": "agent-a", "model_patch": GOLD},
            {"instance_id": "octo__calc-2", "model_name_or_path": "agent-a", "model_patch": None},
            {"instance_id": "octo__calc-3", "model_name_or_path": "agent-b", "model_patch": ""}]
    from_jsonl = predictions_read(jsonl(tmp_path / "preds.jsonl", rows))
    (tmp_path / "list.json").write_text(json.dumps(rows))
    (tmp_path / "keyed.json").write_text(json.dumps({row["instance_id"]: {k: v for k, v in row.items()
                                                                           if k != "instance_id"} for row in rows}))
    for read in (from_jsonl, predictions_read(tmp_path / "list.json"), predictions_read(tmp_path / "keyed.json")):
        assert [(p.instance_id, p.run, p.patch) for p in read.kept.values()] == [
            ("octo__calc-1", "agent-a", GOLD), ("octo__calc-2", "agent-a", None), ("octo__calc-3", "agent-b", None)]
    named = predictions_read(tmp_path / "list.json", run="mine")
    assert {p.run for p in named.kept.values()} == {"mine"}
    refused = predictions_read(jsonl(tmp_path / "bad.jsonl", [{"instance_id": "x"}, {"model_patch": GOLD},
                                                             {"instance_id": "y", "model_name_or_path": "a",
                                                              "model_patch": 3}])).refused
    assert [r.reason for r in refused] == ["missing or not text: model_name_or_path (or name the run)",
                                           "missing or not text: instance_id", "model_patch is not text"]


def test_a_run_report_maps_to_outcomes(tmp_path):
    (tmp_path / "run.json").write_text(json.dumps({
        "schema_version": 2, "resolved_ids": ["a"], "unresolved_ids": ["b"], "error_ids": ["c"],
        "empty_patch_ids": ["d"], "completed_ids": ["a", "b"], "incomplete_ids": ["e"],
        "submitted_ids": ["a", "b", "c", "d", "e"]}))
    report = report_read(tmp_path / "run.json")
    assert report.shape == "run_report"
    assert report.outcomes == {"a": "resolved", "b": "no", "c": "error", "d": "no_patch"}  # e: not finished


def test_the_older_report_of_lists_maps_to_outcomes(tmp_path):
    (tmp_path / "old.json").write_text(json.dumps({
        "generated": ["a", "b", "c", "d", "e"], "applied": ["a", "b", "d", "e"], "resolved": ["a"],
        "no_apply": ["c"], "test_errored": ["d"], "test_timeout": ["e"], "no_generation": ["f"]}))
    report = report_read(tmp_path / "old.json")
    assert report.shape == "lists"
    assert report.outcomes == {"a": "resolved", "b": "no", "c": "does_not_apply", "d": "error", "e": "timeout",
                               "f": "no_patch"}


def test_a_folder_of_per_instance_reports_maps_to_outcomes(tmp_path):
    def write(instance_id, **fields):
        folder = tmp_path / "logs" / "run" / "agent" / instance_id
        folder.mkdir(parents=True)
        (folder / "report.json").write_text(json.dumps({instance_id: fields}))

    status = {"FAIL_TO_PASS": {"success": ["t1"], "failure": []}, "PASS_TO_PASS": {"success": [], "failure": []}}
    write("a", resolved=True, patch_successfully_applied=True, tests_status=status)
    write("b", resolved=False, patch_successfully_applied=False)
    write("c", resolved=False, patch_successfully_applied=True, tests_status={
        "FAIL_TO_PASS": {"success": ["t1"], "failure": ["t2"]}, "PASS_TO_PASS": {"success": ["p"], "failure": []}})
    write("d", resolved=False, patch_successfully_applied=True, tests_status={
        "FAIL_TO_PASS": {"success": ["t1"], "failure": []}, "PASS_TO_PASS": {"success": [], "failure": ["p"]}})
    report = report_read(tmp_path / "logs")
    assert report.shape == "report_folder"
    assert report.outcomes == {"a": "resolved", "b": "does_not_apply", "c": "partial", "d": "no"}
    # One such file alone reads the same.
    single = report_read(tmp_path / "logs" / "run" / "agent" / "c" / "report.json")
    assert single.outcomes == {"c": "partial"}


def test_a_file_that_is_no_report_is_refused_with_the_shapes_it_could_be(tmp_path):
    (tmp_path / "other.json").write_text(json.dumps({"hello": "world"}))
    with pytest.raises(NotARow, match="none of the report shapes"):
        report_read(tmp_path / "other.json")
    (tmp_path / "list.json").write_text("[]")
    with pytest.raises(NotARow, match="it holds list"):
        report_read(tmp_path / "list.json")
