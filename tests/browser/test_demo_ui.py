"""A newcomer's walk through the demo's data, in a real browser: the first page says the demo is being
prepared and where it stands; meanwhile the review queue hands out a task whose issue is marked as a
recorded text, the newcomer accepts it and finds the review on the task page; once the demo is ready,
the dataset page shows all five selectors' best@k, and a task's candidates and matrix show the
imported runs with their report, the judge's and the tests' scores. A screenshot of each page
goes to var/screenshots/demo-*.png.

The demo's preparation runs here as `make demo` runs it (apps.datasets.demo.demo_prepare, in a thread
beside the live server), on PostgreSQL and Redis, its jobs in the suite's Celery worker and, as the
demo has one, a worker of the `llm` queue's own: the judge (the embedded model) scores while the tests
run.
"""

import re
import threading

import pytest
from playwright.sync_api import expect

from apps.datasets.demo import demo_prepare, demo_repository, demo_user_reset
from apps.datasets.models import Candidate, Dataset
from apps.tasks.models import Review, Task
from tests.browser.conftest import log_in, page_screenshot
from tests.conftest import process_group_kill, wait_until, worker_start
from worker.demo.bundle import demo_bundle

pytestmark = pytest.mark.e2e

PREPARING_SECONDS = 900  # every job of the demo, one at a time on the suite's worker
SELECTORS = ["random", "execution", "judge", "hybrid", "oracle"]


def _shot(page, folder, name: str) -> None:
    page_screenshot(page, folder / f"demo-{name}.png")


@pytest.fixture
def demo_preparing(celery_worker, settings, tmp_path):
    """The demo's preparation under way in a thread, and a worker of the llm queue's own started beside the
    suite's: (the thread, [the progress it ends with])."""
    ended = []
    preparing = threading.Thread(target=lambda: ended.append(demo_prepare(sample=tmp_path / "textkit", every=0.5)),
                                 daemon=True)
    preparing.start()
    worker = worker_start(tmp_path, "llm", "llm", {"COMMITGYM_MIRROR_DIR": str(settings.COMMITGYM_MIRROR_DIR)})
    yield preparing, ended
    process_group_kill(worker)


def test_a_newcomer_walks_the_demo_from_the_first_page_to_a_review_and_the_verifiers_figures(
    live_server, demo_preparing, new_page, page_problems, screenshot_dir
):
    preparing, ended = demo_preparing
    password = demo_user_reset()
    wait_until(demo_repository, timeout=30, what="the demo's repository")
    base = live_server.url
    page = new_page()

    # --- the first page says where the preparation stands, and follows it without a reload ---------
    log_in(page, base, "demo", password, then=None)
    progress = page.locator("#demo-progress")
    expect(progress).to_contain_text(re.compile(r"The demo is being prepared: step [1-8] of 8"))
    said = progress.inner_text()
    _shot(page, screenshot_dir, "preparing")
    expect(progress).not_to_have_text(said, timeout=180_000)  # the block asked for the page again

    # --- meanwhile the queue hands out a demo task, its issue marked as recorded; accept it ----------
    wait_until(lambda: Task.objects.filter(state="needs_review").exists(), timeout=PREPARING_SECONDS,
               what="a demo task in the review queue")
    page.goto(base + "/")
    page.locator("#path-tasks").get_by_role("link", name="Review").click()
    expect(page).to_have_url(re.compile(r"/tasks/[^/]+/review/\?queue=1$"))
    instance_id = re.search(r"/tasks/([^/]+)/review/", page.url).group(1)
    assert instance_id in demo_bundle().instance_ids
    expect(page.locator("#issue-recorded")).to_have_text("recorded text")
    expect(page.locator("#issue-pane h2")).to_contain_text("bundled with the demo, not written by the issue writer")
    expect(page.locator("#mutants")).to_contain_text("mutation score")
    _shot(page, screenshot_dir, "review")
    form = page.locator("#review-form")
    form.locator("fieldset").nth(0).get_by_label("0", exact=True).check()
    form.locator("fieldset").nth(1).get_by_label("1", exact=True).check()
    form.get_by_label("under 15 minutes").check()
    page.locator("#accept").click()
    expect(page.locator(".messages")).to_contain_text(f"{instance_id} accepted.")
    assert Task.objects.get(instance_id=instance_id).state == "accepted"
    assert Review.objects.get(task__instance_id=instance_id).decision == "accept"

    page.goto(f"{base}/tasks/{instance_id}/")
    expect(page.locator("#reviews table.reviews tbody tr")).to_have_count(1)
    expect(page.locator("#reviews table.reviews tbody tr").first).to_contain_text("Accepted")
    expect(page.locator("#issue-recorded")).to_have_text("recorded text")
    _shot(page, screenshot_dir, "task-reviewed")

    # --- once the preparation ends, the first page says no more of it ---------------------------------
    preparing.join(timeout=PREPARING_SECONDS)
    assert not preparing.is_alive(), "the demo's preparation did not end"
    (result,) = ended
    assert result.complete and not result.stopped, result
    page.goto(base + "/")
    expect(page.locator("#demo-progress")).to_have_count(0)
    expect(page.locator("#path-tasks")).to_contain_text("3 valid")
    expect(page.locator("#path-tasks")).to_contain_text("2 waiting, 1 accepted")
    _shot(page, screenshot_dir, "first-page")

    # --- the dataset page, from the first page: every selector's best@k --------------------------------
    page.goto(base + "/")
    page.locator("#path-patches").get_by_role("link", name="Its dataset").click()
    dataset = Dataset.objects.get(repository=demo_repository())
    expect(page).to_have_url(f"{base}/datasets/{dataset.pk}/")
    figures = page.locator("table.measures")
    expect(figures.locator("thead th")).to_have_text(["k", *SELECTORS])  # none starred: each scores every task
    k_max = len(demo_bundle().runs)
    expect(figures.locator("tbody tr")).to_have_count(k_max)
    for row in range(k_max):
        expect(figures.locator("tbody tr").nth(row).locator("td")).to_have_text(
            [str(row + 1), *[re.compile(r"^[01]\.\d{3}$")] * len(SELECTORS)])
    expect(page.locator("svg").first).to_be_visible()
    _shot(page, screenshot_dir, "dataset")

    # --- a task's candidates (imported runs, ground truth from their report) and its matrix ----------
    page.goto(f"{base}/tasks/{instance_id}/candidates/")
    imported = Candidate.objects.filter(task__instance_id=instance_id, source="import")
    assert imported.count() == k_max and all(c.outcome_source.startswith("report:run_report:") for c in imported)
    expect(page.locator("table.candidates-side-by-side")).to_contain_text("demo-agent-a")
    _shot(page, screenshot_dir, "candidates")
    page.goto(f"{base}/tasks/{instance_id}/matrix/")
    expect(page.locator("body")).to_contain_text("recorded text (bundled with the demo)")  # its reproduction tests
    _shot(page, screenshot_dir, "matrix")

    assert not page_problems.items, "\n".join(page_problems.items)
