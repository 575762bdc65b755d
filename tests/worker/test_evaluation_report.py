"""An evaluation as SWE-bench's harness writes it, from plain data: where each ground truth lands,
what a report.json holds, the names that cannot be folders, and the report read back whole."""

import json

import pytest

from worker.engine.grade.evaluation import Evaluated, evaluation_write, instance_report, run_report
from worker.engine.grade.swebench import report_read

OUTCOMES = {"t-resolved": "resolved", "t-partial": "partial", "t-no": "no", "t-untrusted": "untrusted",
            "t-empty": "no_patch", "t-apply": "does_not_apply", "t-error": "error", "t-timeout": "timeout",
            "t-ungraded": ""}


def evaluated() -> list[Evaluated]:
    return [Evaluated(instance_id, "org/m", outcome, fail_to_pass=("a::f1", "a::f2"), pass_to_pass=("a::p",),
                      outcomes={"a::f1": "PASSED", "a::f2": "FAILED", "a::p": "PASSED"},
                      untrusted="forged_result: x" if outcome == "untrusted" else "")
            for instance_id, outcome in OUTCOMES.items()]


def test_each_ground_truth_lands_where_the_harness_would_place_it():
    report = run_report([*OUTCOMES, "t-unpredicted"], [*OUTCOMES, "t-not-in-dataset"], evaluated())
    assert report["resolved_ids"] == ["t-resolved"]
    assert report["unresolved_ids"] == ["t-no", "t-partial", "t-untrusted"]
    assert report["completed_ids"] == ["t-no", "t-partial", "t-resolved", "t-untrusted"]
    assert report["empty_patch_ids"] == ["t-empty"] and report["incomplete_ids"] == ["t-unpredicted"]
    assert report["error_ids"] == ["t-apply", "t-error", "t-timeout", "t-ungraded"]
    assert (report["total_instances"], report["submitted_instances"], report["completed_instances"],
            report["resolved_instances"], report["unresolved_instances"], report["empty_patch_instances"],
            report["error_instances"]) == (10, 10, 4, 1, 3, 1, 4)


def test_a_report_json_splits_the_graded_tests_and_believes_nothing_of_an_untrusted_run():
    by_id = {one.instance_id: one for one in evaluated()}
    [partial] = instance_report(by_id["t-partial"]).values()
    assert partial["resolved"] is False and partial["patch_successfully_applied"] is True
    assert partial["tests_status"]["FAIL_TO_PASS"] == {"success": ["a::f1"], "failure": ["a::f2"]}
    assert partial["tests_status"]["PASS_TO_PASS"] == {"success": ["a::p"], "failure": []}
    assert partial["tests_status"]["PASS_TO_FAIL"] == {"success": [], "failure": []}
    [untrusted] = instance_report(by_id["t-untrusted"]).values()
    assert untrusted["tests_status"]["PASS_TO_PASS"] == {"success": [], "failure": ["a::p"]}
    assert untrusted["commitgym_untrusted"] == "forged_result: x" and untrusted["resolved"] is False
    assert instance_report(by_id["t-apply"]) is None and instance_report(by_id["t-empty"]) is None


def test_the_run_report_reads_back_to_the_same_ground_truth(tmp_path):
    report = tmp_path / "r.json"
    evaluation_write(tmp_path, "run-1", list(OUTCOMES), list(OUTCOMES), evaluated(), report)
    back = report_read(report).outcomes
    # A prediction that got no ground truth is an error of the evaluation, as the harness says.
    assert back == {**{instance_id: outcome for instance_id, outcome in OUTCOMES.items()}, "t-ungraded": "error"}
    # The lists alone (a report another harness wrote) give what they can say.
    lists_only = {key: value for key, value in json.loads(report.read_text()).items() if key != "commitgym_outcomes"}
    report.write_text(json.dumps(lists_only))
    assert report_read(report).outcomes["t-partial"] == "no" and report_read(report).outcomes["t-apply"] == "error"
    # An outcome the lists contradict is not taken.
    report.write_text(json.dumps({**lists_only, "commitgym_outcomes": {"t-no": "resolved", "t-error": "timeout"}}))
    assert report_read(report).outcomes["t-no"] == "no" and report_read(report).outcomes["t-error"] == "timeout"
    folder = tmp_path / "logs" / "run_evaluation" / "run-1" / "org__m"
    assert sorted(path.name for path in folder.iterdir()) == ["t-no", "t-partial", "t-resolved", "t-untrusted"]


@pytest.mark.parametrize("name", ["..", "a/b", "", "x\\y", "a\0b"])
def test_names_that_would_leave_the_logs_folder_are_refused(tmp_path, name):
    one = Evaluated(name, "m", "resolved")
    with pytest.raises(ValueError, match="cannot name a folder"):
        evaluation_write(tmp_path, "run", [name], [name], [one], tmp_path / "r.json")
    with pytest.raises(ValueError, match="cannot name a folder"):
        evaluation_write(tmp_path, name, ["ok"], ["ok"], [Evaluated("ok", "m", "resolved")], tmp_path / "r.json")
    assert not (tmp_path / "r.json").exists()


def test_an_evaluation_again_leaves_no_report_json_of_an_instance_it_now_calls_an_error(tmp_path):
    first = [Evaluated("t-1", "org/m", "resolved", outcomes={}), Evaluated("t-2", "org/m", "no")]
    evaluation_write(tmp_path, "run", ["t-1", "t-2"], ["t-1", "t-2"], first, tmp_path / "r.json")
    folder = tmp_path / "logs" / "run_evaluation" / "run" / "org__m"
    assert sorted(path.name for path in folder.iterdir()) == ["t-1", "t-2"]
    again = [Evaluated("t-1", "org/m", "error"), Evaluated("t-2", "org/m", "no")]
    report = evaluation_write(tmp_path, "run", ["t-1", "t-2"], ["t-1", "t-2"], again, tmp_path / "r.json")
    assert not (folder / "t-1" / "report.json").exists() and (folder / "t-2" / "report.json").exists()
    assert report["error_ids"] == ["t-1"]
