"""Curation in a real browser: a curator logs in, takes tasks from the queue, scores the rubric,
edits an issue, and accepts and rejects with keyboard shortcuts; the same decision works with
JavaScript off. Screenshots of the list and review pages are written to var/screenshots/."""

import re

import pytest
from django.contrib.auth.models import Group, User
from playwright.sync_api import expect

from apps.repositories.services import repository_register
from apps.tasks.models import IssueVersion, Review, Task
from tests.browser.conftest import page_screenshot
from tests.conftest import mine_now, task_put_in_review

pytestmark = pytest.mark.e2e


def _repository_with_fixes(git_repo):
    git_repo.commit("Initial library", {"lib/calc.py": "def add(a, b):\n    return a - b\n\n\n"
                                                       "def mul(a, b):\n    return a + b\n\n\n"
                                                       "def neg(a):\n    return a\n"})
    git_repo.commit("Fix add returning the difference", {
        "lib/calc.py": "def add(a, b):\n    return a + b\n\n\ndef mul(a, b):\n    return a + b\n\n\n"
                       "def neg(a):\n    return a\n",
        "tests/test_add.py": "from lib.calc import add\n\n\ndef test_add():\n    assert add(2, 3) == 5\n"})
    git_repo.commit("Fix mul adding instead of multiplying", {
        "lib/calc.py": "def add(a, b):\n    return a + b\n\n\ndef mul(a, b):\n    return a * b\n\n\n"
                       "def neg(a):\n    return a\n",
        "tests/test_mul.py": "from lib.calc import mul\n\n\ndef test_mul():\n    assert mul(2, 3) == 6\n"})
    git_repo.commit("Fix neg returning its argument", {
        "lib/calc.py": "def add(a, b):\n    return a + b\n\n\ndef mul(a, b):\n    return a * b\n\n\n"
                       "def neg(a):\n    return -a\n",
        "tests/test_neg.py": "from lib.calc import neg\n\n\ndef test_neg():\n    assert neg(2) == -2\n"})
    curator = User.objects.create_user(username="carla", password="carla-password-1")
    curator.groups.add(Group.objects.get_or_create(name="curator")[0])
    repository = repository_register(location=str(git_repo.path), user=curator)
    mine_now(repository)
    tasks = []
    for task in Task.objects.filter(repository=repository).exclude(commit__parent_sha="").order_by("commit__committed_at", "id"):
        name = task.commit.subject.split()[1]
        tasks.append(task_put_in_review(task, fail_to_pass=[f"tests/test_{name}.py::test_{name}"],
                                        issue=f"{name}() gives the wrong answer <b>for 2 and 3</b>"))
    return repository, tasks


def _log_in(page, base: str) -> None:
    page.goto(base + "/tasks/")
    page.get_by_label("User name").fill("carla")
    page.get_by_label("Password").fill("carla-password-1")
    page.get_by_role("button", name="Log in").click()
    expect(page.get_by_role("heading", name="Tasks", exact=True)).to_be_visible()


def _score(page, underspecified: str, false_negative: str, difficulty: str) -> None:
    form = page.locator("#review-form")
    form.locator("fieldset").nth(0).get_by_label(underspecified, exact=True).check()
    form.locator("fieldset").nth(1).get_by_label(false_negative, exact=True).check()
    form.get_by_label(difficulty).check()


def test_curator_reviews_the_queue_with_keyboard_shortcuts(live_server, git_repo, new_page, page_problems,
                                                           screenshot_dir, browser):
    repository, tasks = _repository_with_fixes(git_repo)
    first, second, third = tasks
    base = live_server.url
    page = new_page()
    _log_in(page, base)

    # The list: every task waiting for review, with its summary; a screenshot.
    rows = page.locator("table.tasks tbody tr")
    expect(rows).to_have_count(4)  # and the root commit's task, which has no parent to validate on
    expect(page.locator("#id_state")).to_contain_text("Needs Review (3)")
    page_screenshot(page, screenshot_dir / "task_list.png")

    # The queue hands out the oldest task waiting, and holds it.
    page.locator("#nav-queue").click()
    expect(page).to_have_url(re.compile(rf"/tasks/{first.instance_id}/review/\?queue=1$"))
    expect(page.locator("#commit-message")).to_contain_text("Fix add returning the difference")
    expect(page.locator("#issue-text")).to_have_value("add() gives the wrong answer <b>for 2 and 3</b>")
    expect(page.locator("#gold-patch .diff-file").first).to_contain_text("lib/calc.py")
    expect(page.locator("#gold-patch")).to_contain_text("return a + b")
    expect(page.locator("#tests")).to_contain_text("tests/test_add.py::test_add")
    expect(page.locator("#tests")).to_contain_text("FAILED")
    page_screenshot(page, screenshot_dir / "review_page.png")

    # ? opens the help; Esc closes it.
    page.keyboard.press("?")
    expect(page.locator("#shortcuts")).to_be_visible()
    page.keyboard.press("Escape")
    expect(page.locator("#shortcuts")).to_be_hidden()

    # e edits the issue; typing "a" there types, it does not accept.
    page.keyboard.press("e")
    expect(page.locator("#issue-text")).to_be_focused()
    page.keyboard.type("\nSeen with add(2, 3) == -1; a")
    page.locator("#issue-save").click()
    expect(page.locator(".messages")).to_contain_text("Saved as version 2")
    expect(page).to_have_url(re.compile(rf"/tasks/{first.instance_id}/review/\?queue=1$"))
    expect(page.locator("#issue-pane h2")).to_contain_text("version 2, edited by carla")
    assert Task.objects.get(id=first.id).state == "needs_review"

    # Score the rubric and accept with a: the next task arrives without a full reload.
    page.evaluate("window.reviewPageMarker = 1")
    _score(page, "0", "1", "under 15 minutes")
    page.keyboard.press("a")
    expect(page).to_have_url(re.compile(rf"/tasks/{second.instance_id}/review/\?queue=1$"))
    expect(page.locator(".messages")).to_contain_text(f"{first.instance_id} accepted.")
    assert page.evaluate("window.reviewPageMarker") == 1  # the same document: htmx swapped the review in
    assert Task.objects.get(id=first.id).state == "accepted"

    # Reject with r: it asks for a reason first, then rejects.
    _score(page, "1", "3", "15 minutes to 1 hour")
    page.keyboard.press("r")
    expect(page.locator("#id_reject_reason")).to_be_focused()
    expect(page.locator("#reject-hint")).to_be_visible()
    assert Task.objects.get(id=second.id).state == "needs_review"
    page.locator("#id_reject_reason").select_option("tests_too_narrow")
    page.keyboard.press("Escape")
    page.keyboard.press("r")
    expect(page).to_have_url(re.compile(rf"/tasks/{third.instance_id}/review/\?queue=1$"))
    expect(page.locator(".messages")).to_contain_text(f"{second.instance_id} rejected.")
    second.refresh_from_db()
    assert (second.state, second.reason) == ("rejected", "tests_too_narrow")
    review = Review.objects.get(task=second)
    assert (review.underspecified, review.false_negative, review.difficulty) == (1, 3, "15 min - 1 hour")

    # k goes back to the task reviewed before; j goes on through the queue.
    page.keyboard.press("k")
    expect(page).to_have_url(re.compile(rf"/tasks/{second.instance_id}/review/"))
    expect(page.locator("#task-state")).to_have_text("Rejected")
    expect(page.locator("#rubric table.reviews")).to_contain_text("tests_too_narrow")
    page.keyboard.press("j")
    expect(page).to_have_url(re.compile(rf"/tasks/{third.instance_id}/review/\?queue=1$"))

    # A refused decision keeps the page and says why: accepting with failing scores.
    page_problems.allow(f"/tasks/{third.instance_id}/review/submit/", 400)
    _score(page, "3", "0", "1 to 4 hours")
    page.keyboard.press("a")
    expect(page.locator("#refusal")).to_contain_text("keep")
    assert Task.objects.get(id=third.id).state == "needs_review"

    # With JavaScript off, the same decision works as a plain form.
    context = browser.new_context(java_script_enabled=False, viewport={"width": 1280, "height": 900})
    try:
        plain = context.new_page()
        page_problems.watch(plain)
        _log_in(plain, base)
        plain.goto(f"{base}/tasks/{third.instance_id}/review/")
        _score(plain, "0", "0", "under 15 minutes")
        plain.locator("#accept").click()
        expect(plain.locator(".messages")).to_contain_text(f"{third.instance_id} accepted.")
    finally:
        context.close()
    assert Task.objects.get(id=third.id).state == "accepted"
    assert IssueVersion.objects.filter(task=first, author="person").count() == 1

    # The list shows where each task ended up.
    page.goto(base + f"/tasks/?repository={repository.pk}")
    expect(page.locator("#id_state")).to_contain_text("Accepted (2)")
    expect(page.locator("#id_state")).to_contain_text("Rejected (1)")
    assert not page_problems.items, page_problems.items
