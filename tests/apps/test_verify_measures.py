"""`manage.py verify` on imported instances with imported predictions and reports: best@k of the selectors
that need no execution, exactly, with every task of the dataset in the denominator."""

import json
from fractions import Fraction
from io import StringIO

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

from apps.datasets.candidates.imports import instances_import, predictions_import
from tests.worker.test_swebench_files import GOLD, instance, jsonl

pytestmark = pytest.mark.django_db

TASKS = ["octo__calc-1", "octo__calc-2", "octo__calc-3", "octo__calc-4"]
# Which run resolved which task, as its report says: calc-1 one of three runs, calc-2 none of three,
# calc-3 both of its two (run c has no prediction for it), calc-4 has no candidate at all.
RESOLVED = {"a": ["octo__calc-1", "octo__calc-3"], "b": ["octo__calc-3"], "c": []}
PREDICTED = {"a": TASKS[:3], "b": TASKS[:3], "c": TASKS[:2]}


def verify(*args) -> dict:
    out = StringIO()
    call_command("verify", *args, stdout=out)
    return json.loads(out.getvalue())


def imported(tmp_path):
    instances_import(path=jsonl(tmp_path / "verified.jsonl", [instance(task_id, base_commit=f"{n:040d}")
                                                               for n, task_id in enumerate(TASKS)]))
    for run, ids in PREDICTED.items():
        rows = [{"instance_id": i, "model_name_or_path": run, "model_patch": GOLD.replace("a + b", f"a + b + {n}")}
                for n, i in enumerate(ids)]
        report = tmp_path / f"report-{run}.json"
        report.write_text(json.dumps({"schema_version": 2, "resolved_ids": RESOLVED[run], "submitted_ids": ids,
                                      "unresolved_ids": [i for i in ids if i not in RESOLVED[run]],
                                      "completed_ids": ids, "error_ids": [], "empty_patch_ids": [],
                                      "incomplete_ids": []}))
        predictions_import(path=jsonl(tmp_path / f"{run}.jsonl", rows), report_path=report)


def test_oracle_and_random_best_at_k_are_exact_over_every_task_of_the_dataset(tmp_path):
    imported(tmp_path)
    line = verify("--dataset", "verified", "--no-tests", "--no-judge", "--json")
    assert (line["tasks"], line["candidates"], line["resolved_candidates"], line["k_max"]) == (4, 8, 3, 3)
    # Oracle at k_max: the share of tasks with any resolved candidate, 2 of 4.
    assert line["best_at_k"]["oracle"][-1] == 0.5
    # Random: the mean of each task's share of resolved candidates, (1/3 + 0 + 1 + 0) / 4, at every k.
    assert line["best_at_k"]["random"] == [float(Fraction(1, 3))] * 3
    # Oracle at k=2: calc-1 is missed only by the pair without its one resolved candidate (1 of 3 pairs):
    # (2/3 + 0 + 1 + 0) / 4 = 5/12.
    assert line["best_at_k"]["oracle"] == [float(Fraction(1, 3)), float(Fraction(5, 12)), 0.5]
    assert line["best_at_k"]["judge"] is None and line["skipped"]["judge"] == "--no-judge"
    assert line["best_at_k"]["execution"] is None and line["skipped"]["execution"] == "--no-tests"
    assert line["best_at_k"]["hybrid"] is None and "toxic_tests" in line["skipped"]
    assert set(line) >= {"bands", "judge", "distinguishing_share", "toxic_tests", "complementarity"}
    low, high = line["bands"]["random"][0]
    assert low <= 1 / 3 <= high


def test_controls_count_only_when_asked_and_bad_arguments_say_why(tmp_path):
    imported(tmp_path)
    assert verify("--dataset", "verified", "--no-tests", "--no-judge", "--json", "--sources", "gold")["candidates"] == 0
    with pytest.raises(CommandError, match="unknown candidate source wizard"):
        verify("--dataset", "verified", "--json", "--sources", "import,wizard")
    with pytest.raises(CommandError, match="no dataset named 'nope'"):
        verify("--dataset", "nope", "--json")
    out = StringIO()
    call_command("verify", "--dataset", "verified", "--no-tests", "--no-judge", stdout=out)
    assert "4 tasks, 8 candidates" in out.getvalue() and "50.0%" in out.getvalue()


def test_a_prediction_without_a_patch_is_in_no_pool_unless_the_sources_name_it(tmp_path):
    imported(tmp_path)
    empty = tmp_path / "d.jsonl"
    empty.write_text(json.dumps({"instance_id": "octo__calc-3", "model_name_or_path": "d", "model_patch": None}) + "\n")
    predictions_import(path=empty)
    line = verify("--dataset", "verified", "--no-tests", "--no-judge", "--json")
    # As before it came: calc-3's pool is still its two resolved candidates, counted beside it the one without a patch.
    assert (line["candidates"], line["no_patch"]) == (8, 1)
    assert line["best_at_k"]["random"] == [float(Fraction(1, 3))] * 3
    asked = verify("--dataset", "verified", "--no-tests", "--no-judge", "--json", "--sources", "import,no_patch")
    # In calc-3's pool it is a wrong candidate: random there 2/3, so (1/3 + 0 + 2/3 + 0) / 4 = 1/4 at k = 1.
    assert (asked["candidates"], asked["no_patch"]) == (9, 0)
    assert asked["best_at_k"]["random"][0] == 0.25
