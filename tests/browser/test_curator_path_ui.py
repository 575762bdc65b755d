"""A new curator's first path through the Commit Mine, in a real browser, on the sample repository:
register by path (refused, then allowed as the form explains), a bad location refused at once, mine,
validate and write issues from the repository page while watching their jobs, meet a degenerate issue
held back from the queue, reject with a reason only, and find that review on the task page.
A screenshot of each page goes to var/screenshots/curator-path-*.png.

The live server and a real Celery worker process share the test database; the issue writer's
answers are recorded beforehand (a known answer per task, one of them a loop), so writing is instant
and the degenerate text is the one this test chose.
"""

import re

import pytest
from playwright.sync_api import expect

from apps.jobs.models import Job
from apps.repositories.models import Repository
from apps.tasks.backtranslation import ISSUE_WRITER_TOKENS, issue_prompt, valid_validation
from apps.tasks.models import Review, Task
from tests.browser.conftest import log_in, page_screenshot
from tests.conftest import record_model_answer, user_with_role
from worker.demo.sample_repo import sample_repo_write

pytestmark = pytest.mark.e2e

MINING_MS = 60_000
VALIDATING_MS = 900_000  # every waiting task of the sample, one at a time on the suite's worker
WRITING_MS = 120_000
LOOPING_SENTENCE = "The slug keeps a trailing separator when the text is cut to length. "
PLAIN_ISSUE = ("Wrong result from the library\n\nA call gives a different answer than the documentation promises; "
               "the behaviour looks like a regression.")


def _shot(page, folder, name: str) -> None:
    page_screenshot(page, folder / f"curator-path-{name}.png")


def _register(page, location: str) -> None:
    page.get_by_label("Location").fill(location)
    page.get_by_role("button", name="Register and mine").click()


def _location_refused(page, words: str) -> None:
    """The form comes back with the location's error, and nothing was made."""
    expect(page.locator("#register .field.has-errors")).to_contain_text(words)
    assert not Repository.objects.exists() and not Job.objects.exists()


def _issues_recorded(repository) -> Task:
    """The issue writer's answer for each valid task, recorded as if the model had given it: a
    plain report for each, and for the first a sentence repeated twenty times. Returns that one."""
    valid = list(Task.objects.filter(repository=repository, state="valid").order_by("commit__committed_at", "id"))
    assert len(valid) >= 3, [(t.instance_id, t.state, t.reason) for t in Task.objects.filter(repository=repository)]
    for index, task in enumerate(valid):
        prompt, variables = issue_prompt(task, valid_validation(task))  # what the issue writer will read
        record_model_answer(role="issue_writer", prompt=prompt, variables=variables, task=task,
                            max_tokens=ISSUE_WRITER_TOKENS, answer=LOOPING_SENTENCE * 20 if index == 0 else PLAIN_ISSUE)
    return valid[0]


def _bulk_watched(page, folder, name: str, timeout_ms: int, *, slow: bool) -> None:
    """On a bulk action's page: its jobs' counts (for `slow` jobs, seen while they run), then the end."""
    expect(page.get_by_role("heading", name=re.compile(r"Bulk action \d+"))).to_be_visible()
    jobs = page.locator("#bulk-jobs")
    expect(jobs).to_contain_text(re.compile(r"\d+ queued · \d+ running · \d+ finished · \d+ failed of \d+"))
    expect(jobs.get_by_role("link", name="on the jobs page")).to_be_visible()
    if slow:
        expect(page.locator("#bulk-state")).to_have_text("running its jobs")
        _shot(page, folder, f"{name}-running")
    expect(page.locator("#bulk-state")).to_have_text("succeeded", timeout=timeout_ms)
    expect(jobs).to_contain_text(re.compile(r"0 queued · 0 running · \d+ finished · 0 failed"))
    _shot(page, folder, f"{name}-done")


def test_a_new_curator_walks_from_registering_to_a_review(
    live_server, celery_worker, new_page, page_problems, screenshot_dir, settings, tmp_path
):
    sample = sample_repo_write(tmp_path / "textkit")
    user_with_role("carla", "curator")
    base = live_server.url
    page = new_page()
    log_in(page, base, "carla", "pw-carla")

    page_problems.allow("/repositories/", 400)  # a refused registration comes back as a 400 with the form

    # --- a local path: the form says no folder is allowed, and the register refuses it ------------
    settings.COMMITGYM_LOCAL_ROOTS = []
    page.reload()
    expect(page.locator("#register .help").first).to_contain_text(
        "none may be registered here; an administrator allows folders with COMMITGYM_LOCAL_ROOTS")
    _register(page, str(tmp_path / "textkit"))
    _location_refused(page, "COMMITGYM_LOCAL_ROOTS")
    _shot(page, screenshot_dir, "register-refused")

    # --- an administrator allows the folder as the form says; the form now names it ----------------
    settings.COMMITGYM_LOCAL_ROOTS = [str(tmp_path)]
    page.goto(base + "/repositories/")
    expect(page.locator("#register .help").first).to_contain_text(f"only under {tmp_path}")

    # --- locations that cannot work are refused on submit, with the reason -------------------------
    _register(page, "ftp://git.example.org/textkit.git")
    _location_refused(page, "ftp")
    _register(page, str(tmp_path / "no-such-folder"))
    _location_refused(page, "Nothing is at")
    _register(page, str(tmp_path))
    _location_refused(page, "is not a git repository")
    _shot(page, screenshot_dir, "register-bad-location")

    # --- the sample repository registers and mines -------------------------------------------------
    _register(page, str(tmp_path / "textkit"))
    repository = Repository.objects.get()
    expect(page).to_have_url(f"{base}/repositories/{repository.pk}/")
    mining = page.locator(f"#job-{repository.mining_jobs.get().pk}")
    expect(mining.locator(".badge")).to_have_text("Succeeded", timeout=MINING_MS)
    expect(mining).to_contain_text(f"{len(sample)} of {len(sample)} commits")

    # --- validate from the repository page, and watch the validations run ---------------------------
    page.reload()
    waiting = Task.objects.filter(repository=repository, state="mined").count()
    validate = page.locator("#act-validate")
    expect(validate).to_have_text(f"Validate waiting tasks ({waiting})")
    expect(page.locator("#act-write_issues")).to_be_disabled()  # nothing is valid yet
    _shot(page, screenshot_dir, "repository-mined")
    validate.click()
    _bulk_watched(page, screenshot_dir, "validating", VALIDATING_MS, slow=True)
    assert not Task.objects.filter(repository=repository, state__in=("mined", "building", "validating")).exists()

    # --- write issues for the valid tasks from the repository page ----------------------------------
    looping = _issues_recorded(repository)
    valid = Task.objects.filter(repository=repository, state="valid").count()
    page.goto(f"{base}/repositories/{repository.pk}/")
    write = page.locator("#act-write_issues")
    expect(write).to_have_text(f"Write issues for valid tasks ({valid})")
    write.click()
    _bulk_watched(page, screenshot_dir, "writing-issues", WRITING_MS, slow=False)

    # --- the looping issue is held back from the queue and says why ---------------------------------
    looping.refresh_from_db()
    assert looping.state == "needs_review" and looping.issue_held_back
    page.goto(f"{base}/tasks/{looping.instance_id}/review/")
    problems = page.locator("#issue-problems")
    expect(problems).to_contain_text("Kept out of the review queue")
    expect(problems).to_contain_text("one sentence appears 20 times")
    expect(page.locator("#issue-admit")).to_be_visible()
    _shot(page, screenshot_dir, "review-degenerate-issue")

    # --- the queue hands out another task; reject it with a reason and no scores --------------------
    page.locator("#nav-queue").click()
    expect(page).to_have_url(re.compile(r"/tasks/[^/]+/review/\?queue=1$"))
    rejected_id = re.search(r"/tasks/([^/]+)/review/", page.url).group(1)
    assert rejected_id != looping.instance_id
    expect(page.locator("#issue-problems")).to_have_count(0)
    reason = page.locator("#id_reject_reason")
    reason.select_option(index=1)
    reason_sentence = reason.locator("option:checked").inner_text()
    _shot(page, screenshot_dir, "review-reject")
    page.locator("#reject").click()
    expect(page.locator(".messages")).to_contain_text(f"{rejected_id} rejected.")
    review = Review.objects.get(task__instance_id=rejected_id)
    assert (review.decision, review.underspecified, review.false_negative, review.difficulty) == (
        "reject", None, None, "")
    assert Task.objects.get(instance_id=rejected_id).state == "rejected"

    # --- the task page lists that review -------------------------------------------------------------
    page.goto(f"{base}/tasks/{rejected_id}/")
    reviews = page.locator("#reviews table.reviews tbody tr")
    expect(reviews).to_have_count(1)
    expect(reviews.first).to_contain_text("carla")
    expect(reviews.first).to_contain_text("Rejected")
    expect(reviews.first).to_contain_text(reason_sentence)
    expect(reviews.first.locator("td").nth(3)).to_have_text("—")  # no scores were given
    expect(page.locator("#reviews").get_by_role("link", name="Open the review page")).to_be_visible()
    _shot(page, screenshot_dir, "task-reviews")

    assert not page_problems.items, "\n".join(page_problems.items)
