"""A dataset's page in a real browser: the best@k chart and the judge's reliability diagram are drawn
(SVG from the server), their numbers sit beside them, and another judge mode can be chosen. A
screenshot is written to var/screenshots/dataset.png."""

import json

import pytest
from django.contrib.auth.models import Group, User
from playwright.sync_api import expect

from apps.datasets.candidates.imports import instances_import, predictions_import
from apps.datasets.models import Candidate, Dataset, JudgeScore
from apps.datasets.verifiers.judging import judge_identity
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


# --- the charts tell their series apart (read from the SVG's structure and computed styles, not pixels) ------


def executed(tasks) -> None:
    """A matrix for every task: two regression tests and a counting reproduction test, each candidate's
    run passing some of them, so the execution and hybrid selectors rank every task."""
    from apps.datasets.models import Execution, ReproductionTests, VerifierTest, VerifierTestSet
    from tests.apps.test_execution_measures import succeeded

    for task in tasks:
        reproduction = ReproductionTests.objects.create(job=succeeded("reproduce", task), task=task)
        test_set = VerifierTestSet.objects.create(job=succeeded("verifier_tests", task), task=task,
                                                  reproduction=reproduction)
        for position, (test_id, kind) in enumerate(zip(MATRIX_TESTS, ("reproduction", "regression", "regression"))):
            VerifierTest.objects.create(test_set=test_set, test_id=test_id, kind=kind, position=position,
                                        reason=f"chosen for {test_id.rsplit('::', 1)[-1]}")
        r1, g1, g2 = MATRIX_TESTS
        for candidate in Candidate.objects.filter(task=task, source="import").order_by("id"):
            passes = {r1} if candidate.outcome == "resolved" else {g1, g2} if candidate.id % 2 else {g1}
            Execution.objects.create(job=succeeded("execute", candidate), candidate=candidate, test_set=test_set,
                                     outcome="no", outcomes={t: "PASSED" if t in passes else "FAILED"
                                                             for t in MATRIX_TESTS})


MATRIX_TESTS = ("commitgym_reproduction_0.py::test_add_adds", "tests/test_calc.py::test_add_keeps_order",
                "tests/test_calc.py::TestSums::test_sum_of_many[three]")


CHART_READ = """svg => {
  const style = el => getComputedStyle(el);
  const box = el => el.getBoundingClientRect();
  const line = g => g.querySelector('polyline.series');
  const groups = [...svg.querySelectorAll('g.series-group')].map(g => ({
    name: g.dataset.series,
    stroke: line(g) && style(line(g)).stroke,
    lineOpacity: line(g) && parseFloat(style(line(g)).strokeOpacity),
    shapes: [...new Set([...g.querySelectorAll('.marker')].map(m => m.getAttribute('class').split(' ')[1]))],
    ys: [...g.querySelectorAll('.marker')].map(m => box(m).top + box(m).height / 2)}));
  const bands = [...svg.querySelectorAll('polygon.band')].map(b => ({
    name: b.dataset.series, opacity: parseFloat(style(b).fillOpacity), top: box(b).top, bottom: box(b).bottom}));
  const ticks = [...svg.querySelectorAll('text.y-tick')].map(t => ({value: parseFloat(t.textContent)}));
  const grid = [...svg.querySelectorAll('line.grid')].map(l => box(l).top);
  return {groups, bands, ticks: ticks.map(t => t.value), grid,
          legend: [...svg.querySelectorAll('g.legend-entry text.legend')].map(t => t.textContent),
          xTicks: [...svg.querySelectorAll('text.x-tick')].map(t => t.textContent)};
}"""


def logged_in_at(page, url: str) -> None:
    User.objects.create_user(username="dana", password="dana-password-1").groups.add(
        Group.objects.get_or_create(name="curator")[0])
    page.goto(url)
    page.get_by_label("User name").fill("dana")
    page.get_by_label("Password").fill("dana-password-1")
    page.get_by_role("button", name="Log in").click()


def test_the_best_at_k_chart_tells_five_selectors_apart_on_an_axis_fitted_to_them(live_server, new_page, page_problems,
                                                                                 screenshot_dir, tmp_path):
    dataset = judged_dataset(tmp_path)
    executed(dataset.tasks.all())
    page = new_page()
    logged_in_at(page, f"{live_server.url}/datasets/{dataset.pk}/")
    best_at_k = page.locator("svg.chart").first
    expect(best_at_k.locator("polyline.series")).to_have_count(5)
    read = best_at_k.evaluate(CHART_READ)
    names = ["random", "execution", "judge", "hybrid", "oracle"]
    # A legend naming each selector; each drawn in a colour and a marker of its own.
    assert read["legend"] == names
    assert [g["name"] for g in read["groups"]] == names
    assert len({g["stroke"] for g in read["groups"]}) == 5, read["groups"]
    assert all(len(g["shapes"]) == 1 for g in read["groups"]) and len({g["shapes"][0] for g in read["groups"]}) == 5
    # Bands lighter than lines.
    assert read["bands"] and max(b["opacity"] for b in read["bands"]) < min(g["lineOpacity"] for g in read["groups"])
    # The y axis: a tick at every tenth, from the tenth below the lowest value drawn to the tenth above the highest.
    ticks = read["ticks"]
    assert all(round(b - a, 6) == 0.1 for a, b in zip(ticks, ticks[1:])), ticks
    values = [float(cell) for cell in page.locator("table.measures tbody td:not(:first-child)").all_inner_texts()]
    assert ticks[0] <= min(values) < ticks[0] + 0.1 and ticks[-1] - 0.1 < max(values) <= ticks[-1], (ticks, values)
    top, bottom = min(read["grid"]), max(read["grid"])
    drawn = [y for g in read["groups"] for y in g["ys"]] + [y for b in read["bands"] for y in (b["top"], b["bottom"])]
    assert all(top - 1 <= y <= bottom + 1 for y in drawn)  # every point and band inside the ticks' span
    # The table of the numbers stays beside the chart.
    chart_box, table_box = best_at_k.bounding_box(), page.locator("table.measures").bounding_box()
    assert table_box["x"] >= chart_box["x"] + chart_box["width"] - 1 and table_box["y"] < chart_box["y"] + \
        chart_box["height"], (chart_box, table_box)
    # The reliability diagram: a tick at every tenth on both axes.
    calibration = page.locator("svg.chart").nth(1).evaluate(CHART_READ)
    assert calibration["ticks"] == [n / 10 for n in range(11)]
    assert calibration["xTicks"] == ["0"] + [f"0.{n}" for n in range(1, 10)] + ["1"]
    expect(page.locator("#scored-tasks")).to_contain_text("judge 6 of 6")
    page_screenshot(page, screenshot_dir / "dataset-five-selectors.png")
    assert page_problems.items == []


def test_the_matrix_heads_its_columns_with_names_and_says_why_each_test_is_there(live_server, new_page,
                                                                                 page_problems, screenshot_dir,
                                                                                 tmp_path):
    dataset = judged_dataset(tmp_path)
    executed(dataset.tasks.all())
    page = new_page()
    logged_in_at(page, f"{live_server.url}/tasks/{TASKS[0]}/matrix/")
    heads = page.locator("table.matrix thead th.test .test-name")
    expect(heads).to_have_text(["test_add_adds", "test_add_keeps_order", "test_sum_of_many[three]"])
    for n in range(3):
        box = heads.nth(n).bounding_box()
        assert box["height"] > 2 * box["width"], box  # written upwards: many columns fit side by side
    cell = page.locator("table.matrix tbody tr").filter(has_text="Import").first.locator("td.cell").nth(2)
    assert cell.get_attribute("title").startswith(f"{MATRIX_TESTS[2]} · Import · ")
    expect(page.locator("ol.matrix-tests li").nth(1)).to_contain_text("Why: chosen for test_add_keeps_order.")
    page_screenshot(page, screenshot_dir / "matrix.png")
    # A column's name leads to its test and its reason below.
    heads.nth(1).click()
    expect(page).to_have_url(f"{live_server.url}/tasks/{TASKS[0]}/matrix/#verifier-test-2")
    assert page_problems.items == []


def test_the_candidates_page_highlights_the_failing_test_and_folds_the_rest_out(live_server, new_page,
                                                                                  page_problems, screenshot_dir,
                                                                                  tmp_path):
    from apps.datasets.models import Grade
    from apps.tasks.models import Task
    from tests.apps.test_candidates_page import BROKEN, F2P, OTHERS, P2P
    from tests.apps.test_execution_measures import succeeded
    from tests.conftest import validation_make

    dataset = judged_dataset(tmp_path)
    task = Task.objects.get(instance_id=TASKS[0])
    validation_make(task, verdict="valid", fail_to_pass=F2P, pass_to_pass=P2P)
    outcomes = {**dict.fromkeys([*F2P, *P2P, *OTHERS], "PASSED"), BROKEN: "FAILED"}
    resolved = Candidate.objects.filter(task=task, source="import", outcome="resolved").first()
    grade = Grade.objects.create(job=succeeded("grade", resolved), candidate=resolved, outcome="resolved", runs=[
        {"status": "failed", "exit_code": 1, "seconds": 2.5, "untrusted": "", "outcomes": outcomes,
         "output": "the run's output"}])
    assert dataset.pk
    page = new_page()
    logged_in_at(page, f"{live_server.url}/tasks/{TASKS[0]}/candidates/")
    run = page.locator(f"#grade-{grade.id}-run-1")
    expect(run.locator(".run-summary")).to_contain_text("all 300 pass")
    expect(run.locator(".run-summary")).to_contain_text("1 of 101 fails")
    rows = run.locator("tr.test-row")
    expect(rows).to_have_count(3)  # the oracle's Fail-to-Pass tests, then the failing one
    expect(rows.nth(2)).to_contain_text(BROKEN)
    highlight = rows.nth(2).locator("td").first.evaluate("td => getComputedStyle(td).backgroundColor")
    plain = rows.nth(0).locator("td").first.evaluate("td => getComputedStyle(td).backgroundColor")
    assert highlight != plain and highlight not in ("rgba(0, 0, 0, 0)", "transparent"), (highlight, plain)
    folded = run.locator("details.run-rest")
    assert folded.evaluate("d => d.open") is False
    page_screenshot(page, screenshot_dir / "candidates-folded.png")
    folded.locator("summary").click()
    expect(rows).to_have_count(3 + 401)  # every test of the run, folded out in place
    every = run.locator(".run-tests tr.test-row")
    expect(every.nth(0)).to_contain_text(F2P[0])
    expect(every.nth(2)).to_contain_text(P2P[0])
    expect(run.locator(".run-tests tr.test-row.failing")).to_have_count(1)
    assert page_problems.items == []
