"""The dataset page says how much each figure stands on: how many of the tasks with candidates each
selector scores, a selector that scores too few of them greyed and left out of the chart, and the
judge's calibration with each bin's count, small bins drawn hollow and off the line."""

import json
import re

import pytest
from django.urls import reverse

from apps.datasets.candidates.imports import instances_import, predictions_import
from apps.datasets.models import Candidate, Dataset, JudgeScore
from apps.datasets.verifiers.judging import judge_identity
from apps.datasets.verifiers.measures import MIN_BIN_CANDIDATES, measures_compute
from tests.worker.test_swebench_files import GOLD, instance, jsonl

pytestmark = pytest.mark.django_db

TASKS = [f"octo__calc-{n}" for n in range(1, 9)]
JUDGED = TASKS[:2]  # the judge has scored the candidates of 2 of the 8 tasks


def sparsely_judged(tmp_path) -> Dataset:
    """Eight imported tasks with three runs' candidates each; the judge has scored two tasks': five of
    those six candidates near 0.85 (one calibration bin of five), one at 0.15 (a bin of one)."""
    instances_import(path=jsonl(tmp_path / "sparse.jsonl", [instance(t, base_commit=f"{n:040d}")
                                                            for n, t in enumerate(TASKS)]))
    for r, run in enumerate(("a", "b", "c")):
        resolved = TASKS[r::3]
        report = tmp_path / f"{run}.json"
        report.write_text(json.dumps({"schema_version": 2, "resolved_ids": resolved, "submitted_ids": TASKS,
                                      "unresolved_ids": [t for t in TASKS if t not in resolved]}))
        rows = [{"instance_id": t, "model_name_or_path": run, "model_patch": GOLD.replace("b", f"b + {r}")}
                for t in TASKS]
        predictions_import(path=jsonl(tmp_path / f"{run}.jsonl", rows), report_path=report)
    model, version = judge_identity()
    judged = Candidate.objects.filter(source="import", task__instance_id__in=JUDGED).order_by("id")
    JudgeScore.objects.bulk_create([
        JudgeScore(candidate=c, mode="patch", model=model, prompt_version=version,
                   p_yes=0.15 if n == 0 else 0.81 + 0.01 * n, logprob_yes=-0.2, logprob_no=-1.5)
        for n, c in enumerate(judged)])
    return Dataset.objects.get(name="sparse")


def test_a_selector_that_scored_few_tasks_is_greyed_and_not_drawn(tmp_path, curator_client):
    dataset = sparsely_judged(tmp_path)
    measured = measures_compute(dataset.tasks.all(), judge_mode="patch")
    assert measured.tasks_with_candidates == 8
    assert measured.scored_tasks == {"random": 8, "execution": 0, "judge": 2, "hybrid": 0, "oracle": 8}
    assert measured.as_json()["scored_tasks"]["judge"] == 2
    page = curator_client.get(reverse("datasets:detail", args=[dataset.pk])).content.decode()
    scored = re.search(r'<p class="small" id="scored-tasks">(.*?)</p>', page, re.S).group(1)
    assert re.search(r'class="scored thin" data-selector="judge">judge 2 of 8<', scored)
    # The judge's curve is left out of the chart, its numbers kept in the table, greyed, with why.
    chart = page[page.index('<svg class="chart"'):page.index("</svg>")]
    assert 'data-series="random"' in chart and 'data-series="oracle"' in chart
    assert 'data-series="judge"' not in chart
    table = page[page.index('<table class="table measures">'):]
    table = table[:table.index("</table>")]
    assert re.search(r'<th class="num thin" title="scored on 2 of the 8 tasks with candidates[^"]*">judge\*</th>',
                     table)
    assert table.count('<td class="num thin">') == 3  # k = 1..3
    assert "judge*: not drawn, greyed in the table (scored on 2 of the 8 tasks with candidates" in page


def test_the_calibration_says_what_it_stands_on_and_draws_small_bins_hollow(tmp_path, curator_client):
    dataset = sparsely_judged(tmp_path)
    page = curator_client.get(reverse("datasets:detail", args=[dataset.pk])).content.decode()
    scope = re.search(r'<p class="small thin" id="calibration-scope">(.*?)</p>', page, re.S).group(1)
    assert "Over 6 scored candidates of 2 of the 8 tasks with candidates: too few tasks" in scope
    assert '<div class="chart-with-table thin">' in page
    calibration = page[page.index("The judge&#x27;s reliability diagram"):]
    calibration = calibration[:calibration.index("</svg>")]
    # Two bins: one of five candidates (solid, on the line) and one of a single candidate (hollow, off it).
    assert MIN_BIN_CANDIDATES == 5
    markers = re.findall(r'<(?:circle|rect|polygon|path) class="marker marker-\w+( faint)?" data-series="judge"',
                         calibration)
    assert sorted(markers) == ["", "", " faint"]  # the legend's marker, the full bin, the small bin
    assert re.findall(r'<text class="note( faint)?"[^>]*>(\d+)</text>', calibration) == [(" faint", "1"), ("", "5")]
    rows = page[page.index('<table class="table calibration">'):]
    assert rows.count('<tr class="thin">') == 1
