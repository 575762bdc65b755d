"""Importing from the datasets page in a real browser: a file of the wrong kind is refused at once
with the typed fields kept; an instance file, then predictions with their report, are uploaded and
imported by the suite's real worker while the upload's page follows the job to its counts.
Screenshot: var/screenshots/upload.png."""

import json

import pytest
from playwright.sync_api import expect

from apps.datasets.models import Candidate, Dataset
from tests.browser.conftest import log_in, page_screenshot
from tests.conftest import user_with_role
from tests.worker.test_swebench_files import GOLD, instance

pytestmark = pytest.mark.e2e

TASKS = ["octo__calc-1", "octo__calc-2"]


def _jsonl(path, rows):
    path.write_text("".join(json.dumps(row) + "\n" for row in rows))
    return str(path)


def test_a_curator_uploads_instances_and_predictions_and_sees_what_they_gave(live_server, celery_worker, new_page,
                                                                              page_problems, screenshot_dir, tmp_path):
    user_with_role("carla", "curator")
    page = new_page()
    log_in(page, live_server.url, "carla", "pw-carla", then="/datasets/")
    page_problems.allow("/uploads/", 400)

    # A file of the wrong kind: refused before anything is kept, the typed dataset name still there.
    (tmp_path / "notes.txt").write_text("not instances")
    page.locator("#upload > summary").click()
    page.locator("#upload-file").set_input_files(str(tmp_path / "notes.txt"))
    page.locator("#upload-dataset").fill("calc bench")
    page.locator("#upload-submit").click()
    expect(page.locator("#upload-refusal")).to_contain_text("notes.txt: an instances file is expected as .jsonl")
    expect(page.locator("#upload-dataset")).to_have_value("calc bench")

    page.locator("#upload-file").set_input_files(
        _jsonl(tmp_path / "calc.jsonl", [instance(t, base_commit=f"{n:040d}") for n, t in enumerate(TASKS)]))
    page.locator("#upload-submit").click()
    expect(page.locator("#upload-counts")).to_contain_text("2 rows read, 2 matched, 0 refused: 2 tasks made",
                                                           timeout=60_000)
    assert Dataset.objects.get(name="calc bench").tasks.count() == 2

    page.goto(live_server.url + "/datasets/")
    page.locator("#upload > summary").click()
    page.get_by_label("predictions (candidate patches").check()
    page.locator("#upload-file").set_input_files(_jsonl(tmp_path / "agent.jsonl", [
        {"instance_id": t, "model_name_or_path": "agent-1", "model_patch": GOLD} for t in TASKS]))
    (tmp_path / "report.json").write_text(json.dumps({"schema_version": 2, "resolved_ids": TASKS[:1],
                                                      "unresolved_ids": TASKS[1:], "submitted_ids": TASKS}))
    page.locator("#upload-report").set_input_files(str(tmp_path / "report.json"))
    page.locator("#upload-submit").click()
    expect(page.locator("#upload-counts")).to_contain_text("run agent-1, 2 candidates, 1 resolved by the report",
                                                           timeout=60_000)
    page_screenshot(page, screenshot_dir / "upload.png")
    assert sorted(Candidate.objects.filter(source="import").values_list("outcome", flat=True)) == ["no", "resolved"]
    assert page_problems.items == []
