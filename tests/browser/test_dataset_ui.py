"""A dataset's page in a real browser: the best@k chart and the judge's reliability diagram are drawn
(SVG from the server), their numbers sit beside them, and another judge mode can be chosen. A
screenshot is written to var/screenshots/dataset.png."""

import json

import pytest
from django.contrib.auth.models import Group, User
from playwright.sync_api import expect

from apps.datasets.imports import instances_import, predictions_import
from apps.datasets.judging import judge_identity
from apps.datasets.models import Candidate, Dataset, JudgeScore
from tests.browser.conftest import page_screenshot
from tests.worker.test_swebench_files import GOLD, instance, jsonl

pytestmark = pytest.mark.e2e

TASKS = [f"octo__calc-{n}" for n in range(1, 7)]


def judged_dataset(tmp_path) -> Dataset:
    """Six imported tasks, three runs each with a report, every candidate scored by the judge."""
    instances_import(path=jsonl(tmp_path / "charted.jsonl", [instance(t, base_commit=f"{n:040d}")
                                                              for n, t in enumerate(TASKS)]))
    for r, run in enumerate(("a", "b", "c")):
        resolved = TASKS[r::2]
        report = tmp_path / f"{run}.json"
        report.write_text(json.dumps({"schema_version": 2, "resolved_ids": resolved, "submitted_ids": TASKS,
                                      "unresolved_ids": [t for t in TASKS if t not in resolved]}))
        rows = [{"instance_id": t, "model_name_or_path": run, "model_patch": GOLD.replace("b", f"b + {r}")}
                for t in TASKS]
        predictions_import(path=jsonl(tmp_path / f"{run}.jsonl", rows), report_path=report)
    model, version = judge_identity()
    JudgeScore.objects.bulk_create([
        JudgeScore(candidate=c, mode="patch", model=model, prompt_version=version,
                   p_yes=0.8 if c.outcome == "resolved" else 0.3 + 0.05 * (c.id % 3), logprob_yes=-0.2,
                   logprob_no=-1.5) for c in Candidate.objects.filter(source="import")])
    return Dataset.objects.get(name="charted")


def test_the_dataset_page_draws_its_charts_with_their_numbers(live_server, new_page, page_problems, screenshot_dir,
                                                               tmp_path):
    dataset = judged_dataset(tmp_path)
    User.objects.create_user(username="dana", password="dana-password-1").groups.add(
        Group.objects.get_or_create(name="curator")[0])
    page = new_page()
    page.goto(f"{live_server.url}/datasets/{dataset.pk}/")
    page.get_by_label("User name").fill("dana")
    page.get_by_label("Password").fill("dana-password-1")
    page.get_by_role("button", name="Log in").click()
    charts = page.locator("svg.chart")
    expect(charts).to_have_count(2)
    best_at_k = charts.nth(0)
    expect(best_at_k.locator("polyline.series")).to_have_count(3)  # random, judge, oracle
    expect(best_at_k.locator("text.legend")).to_have_text(["random", "judge", "oracle"])
    box = best_at_k.bounding_box()
    assert box["width"] > 300 and box["height"] > 150, box  # drawn at a size a person can read
    # The numbers beside the chart: three candidates a task, so k = 1..3, and the oracle's row at k = 3.
    table = page.locator("table.measures")
    expect(table.locator("tbody tr")).to_have_count(3)
    expect(table.locator("tbody tr").nth(2)).to_contain_text("1.000")
    expect(page.locator("table.calibration tbody tr")).to_have_count(10)
    page_screenshot(page, screenshot_dir / "dataset.png")
    # Another judge mode: nothing scored in it, so its chart says why the judge is missing.
    page.get_by_label("trajectory", exact=True).check()
    page.get_by_role("button", name="Show").click()
    expect(page).to_have_url(f"{live_server.url}/datasets/{dataset.pk}/?mode=trajectory")
    expect(page.locator("svg.chart").first.locator("polyline.series")).to_have_count(2)
    expect(page.get_by_text("judge: not shown")).to_be_visible()
    assert page_problems.items == []
