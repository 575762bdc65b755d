"""The first page after logging in says what the product does and leads along its two paths: a
repository to its tasks to the review of one, and a repository to its dataset to a task's candidates
to the matrix. Each step is followed by clicking, as a newcomer would. Screenshot:
var/screenshots/first-page.png."""

import re

import pytest
from playwright.sync_api import expect

from apps.datasets.models import Candidate
from tests.browser.conftest import log_in, page_screenshot, repository_with_a_task_in_review

pytestmark = pytest.mark.e2e


def _repository_with_candidates(git_repo):
    repository, task = repository_with_a_task_in_review(git_repo)
    Candidate.objects.create(task=task, source="gold", patch="diff --git a/x b/x\n", outcome="resolved")
    Candidate.objects.create(task=task, source="empty", patch="", outcome="no")
    return repository, task


def test_the_first_page_says_what_the_product_does_and_leads_along_both_paths(live_server, git_repo, new_page,
                                                                             page_problems, screenshot_dir):
    repository, task = _repository_with_candidates(git_repo)
    page = new_page()
    log_in(page, live_server.url, "carla", "pw-carla", then=None)
    expect(page.locator("#what-it-does")).to_contain_text("executable software-engineering tasks")
    expect(page.locator("#path-tasks")).to_contain_text("1 waiting")
    expect(page.locator("#path-patches")).to_contain_text("2 candidates")
    page_screenshot(page, screenshot_dir / "first-page.png")

    # Making tasks: the repository's tasks, then the review queue hands out the one waiting.
    page.locator("#path-tasks").get_by_role("link", name="Tasks").click()
    expect(page.get_by_role("heading", name="Tasks", exact=True)).to_be_visible()
    expect(page.locator("table.tasks tbody")).to_contain_text(task.instance_id)
    page.go_back()
    page.locator("#path-tasks").get_by_role("link", name="Review").click()
    expect(page).to_have_url(re.compile(rf"/tasks/{task.instance_id}/review/\?queue=1$"))

    # Choosing patches: the repository, its dataset, a task's candidates, the matrix.
    page.goto(live_server.url + "/")
    page.locator("#path-patches").get_by_role("link", name="A repository").click()
    expect(page.get_by_role("heading", name=repository.name)).to_be_visible()
    page.locator("#repository-dataset").click()
    expect(page.locator("h1")).to_contain_text(repository.name)
    page.get_by_role("link", name="candidates").first.click()
    expect(page).to_have_url(re.compile(rf"/tasks/{task.instance_id}/candidates/$"))
    page.get_by_role("link", name="the matrix").click()
    expect(page).to_have_url(re.compile(rf"/tasks/{task.instance_id}/matrix/$"))
    assert page_problems.items == []
