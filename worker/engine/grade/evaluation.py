"""An evaluation written as SWE-bench's harness writes one: a run report (`schema_version` 2) and a
`report.json` per instance under `logs/run_evaluation/RUN/MODEL/INSTANCE/`, so that the harness's own
`make_run_report` builds the same report from our folder.

How each ground truth (GROUND_TRUTH_OUTCOMES) lands, as the harness would place that instance:
- no patch: `empty_patch_ids`, no report.json (the harness does not run it);
- resolved; partial and no (the tests ran, not all passed); untrusted (the run's account of itself
  could not be believed, so nothing in it counts): a report.json, the instance completed, resolved
  or unresolved;
- does not apply, error, timeout, or not graded: no report.json, an error (the harness raises there);
- an instance of the dataset with no prediction: incomplete.
The run report also keeps each instance's own outcome under `commitgym_outcomes`: read back, it
gives the same ground truth, partial included.
"""

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Optional

from worker.engine.grade.oracle import PASSING

LOGS = Path("logs") / "run_evaluation"
REPORT = "report.json"
COMPLETED = ("resolved", "partial", "no", "untrusted")
OWN_OUTCOMES = "commitgym_outcomes"


@dataclass(frozen=True)
class Evaluated:
    instance_id: str
    model: str  # the prediction's model_name_or_path
    outcome: str  # one of GROUND_TRUTH_OUTCOMES, "" when it has none
    fail_to_pass: tuple[str, ...] = ()
    pass_to_pass: tuple[str, ...] = ()
    outcomes: dict = field(default_factory=dict)  # test id -> status in the grading run
    untrusted: str = ""  # why the run could not be believed


def model_folder(model: str) -> str:
    return model.replace("/", "__")


def folder_name_unsafe(name: str) -> bool:
    """A name the harness's log layout would turn into a path outside its own folder (or none)."""
    return name in ("", ".", "..") or any(char in name for char in "/\\\0")


def instance_report(evaluated: Evaluated) -> Optional[dict]:
    """SWE-bench's report.json for one instance; None where the harness writes none."""
    if evaluated.outcome not in COMPLETED:
        return None
    believed = {} if evaluated.outcome == "untrusted" else evaluated.outcomes

    def split(tests: tuple[str, ...]) -> dict:
        return {"success": [test for test in tests if believed.get(test) in PASSING],
                "failure": [test for test in tests if believed.get(test) not in PASSING]}

    report = {"patch_is_None": False, "patch_exists": True, "patch_successfully_applied": True,
              "resolved": evaluated.outcome == "resolved",
              "tests_status": {"FAIL_TO_PASS": split(evaluated.fail_to_pass),
                               "PASS_TO_PASS": split(evaluated.pass_to_pass),
                               "FAIL_TO_FAIL": {"success": [], "failure": []},
                               "PASS_TO_FAIL": {"success": [], "failure": []}}}
    if evaluated.untrusted:
        report["commitgym_untrusted"] = evaluated.untrusted
    return {evaluated.instance_id: report}


def run_report(dataset_ids: list[str], submitted_ids: list[str], evaluated: list[Evaluated]) -> dict:
    """The run report over the dataset's instances, for the predictions submitted (`submitted_ids`:
    every prediction's instance id, those of no instance of the dataset included, as the harness counts)."""
    by_id = {one.instance_id: one for one in evaluated}
    dataset = set(dataset_ids)
    ids = {name: set() for name in ("completed", "incomplete", "empty_patch", "resolved", "unresolved", "error")}
    for instance_id in dataset:
        one = by_id.get(instance_id)
        if one is None:
            ids["incomplete"].add(instance_id)
        elif one.outcome == "no_patch":
            ids["empty_patch"].add(instance_id)
        elif one.outcome in COMPLETED:
            ids["completed"].add(instance_id)
            ids["resolved" if one.outcome == "resolved" else "unresolved"].add(instance_id)
        else:
            ids["error"].add(instance_id)
    return {
        "total_instances": len(dataset), "submitted_instances": len(submitted_ids),
        "completed_instances": len(ids["completed"]), "resolved_instances": len(ids["resolved"]),
        "unresolved_instances": len(ids["unresolved"]), "empty_patch_instances": len(ids["empty_patch"]),
        "error_instances": len(ids["error"]),
        "completed_ids": sorted(ids["completed"]), "incomplete_ids": sorted(ids["incomplete"]),
        "empty_patch_ids": sorted(ids["empty_patch"]), "submitted_ids": sorted(submitted_ids),
        "resolved_ids": sorted(ids["resolved"]), "unresolved_ids": sorted(ids["unresolved"]),
        "error_ids": sorted(ids["error"]), "schema_version": 2,
        # What the harness adds when it looked at no Docker engine: this evaluation leaves none behind.
        "unstopped_instances": 0, "unstopped_containers": [], "unremoved_images": [],
        OWN_OUTCOMES: {one.instance_id: one.outcome for one in sorted(evaluated, key=lambda e: e.instance_id)
                       if one.instance_id in dataset and one.outcome},
    }


def evaluation_write(folder: Path, run_id: str, dataset_ids: list[str], submitted_ids: list[str],
                     evaluated: list[Evaluated], report_path: Path) -> dict:
    """The per-instance reports under `folder`/logs/run_evaluation/RUN_ID/, then the run report at
    `report_path`; returns the run report."""
    dataset = set(dataset_ids)
    names = [run_id, *(name for one in evaluated for name in (one.instance_id, model_folder(one.model)))]
    unsafe = next((name for name in names if folder_name_unsafe(name)), None)
    if unsafe is not None:
        raise ValueError(f"{unsafe!r} cannot name a folder of the harness's logs")
    for one in evaluated:
        report = instance_report(one) if one.instance_id in dataset else None
        target = folder / LOGS / run_id / model_folder(one.model) / one.instance_id / REPORT
        if report is None:  # an earlier evaluation's report.json would count it completed
            target.unlink(missing_ok=True)
            continue
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(json.dumps(report, indent=4))
    report = run_report(dataset_ids, submitted_ids, evaluated)
    report_path.parent.mkdir(parents=True, exist_ok=True)
    report_path.write_text(json.dumps(report, indent=4))
    return report
