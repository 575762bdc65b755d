"""The task list's tools act on the list on screen: a curator filters it (through htmx, the page not
reloaded), then bulk-rejects and saves a view; only the tasks the filtered list showed change, and
the view keeps the filters shown. A real worker runs the bulk action."""

import pytest
from django.http import QueryDict
from playwright.sync_api import expect

from apps.repositories.services import repository_register
from apps.tasks.models import BulkAction, SavedView, Task
from tests.browser.conftest import log_in, page_screenshot
from tests.conftest import commits_and_tasks_make, user_with_role, wait_until

pytestmark = pytest.mark.e2e


def _list_filtered_by_state(page, state: str, count: int) -> None:
    """Pick a state in the filters and wait for htmx to swap the results in."""
    url = page.url
    page.locator("#id_state").select_option(state)
    expect(page.locator("#task-count")).to_have_text(f"{count} tasks")
    assert page.url != url  # the address follows the filters (hx-push-url): no reload happened


def test_a_bulk_reject_and_a_saved_view_take_the_filters_on_screen(live_server, celery_worker, git_repo, new_page,
                                                                   page_problems, screenshot_dir):
    git_repo.commit("Initial library", {"lib/calc.py": "def add(a, b):\n    return a - b\n"})
    curator = user_with_role("carla", "curator")
    repository = repository_register(location=str(git_repo.path), user=curator)
    tasks = commits_and_tasks_make(repository, 12)
    broken, invalid = tasks[:7], tasks[7:]
    Task.objects.filter(id__in=[t.id for t in broken]).update(state="environment_failed", reason="install_failed")
    Task.objects.filter(id__in=[t.id for t in invalid]).update(state="invalid", reason="no_fail_to_pass")

    page = new_page()
    log_in(page, live_server.url, "carla", "pw-carla")
    page.goto(live_server.url + "/tasks/")
    expect(page.locator("#task-count")).to_have_text("12 tasks")
    _list_filtered_by_state(page, "environment_failed", 7)

    # The bulk action confirms the 7 shown, names the filter, and runs on those alone.
    page.locator("details.list-tools > summary").click()
    page.locator("#bulk-action").select_option("reject")
    page.get_by_role("button", name="Continue…").click()
    expect(page.locator("#bulk-count")).to_contain_text("This will reject 7 tasks")
    expect(page.locator("#bulk-filters")).to_contain_text("State Environment Failed")
    expect(page.locator("#bulk-shown-differs")).to_have_count(0)
    page.locator("#bulk-reason").select_option("environment_broken")
    page_screenshot(page, screenshot_dir / "bulk-confirm.png")
    page.locator("#bulk-run").click()
    expect(page.locator("#bulk-state")).to_have_text("succeeded", timeout=60_000)
    assert BulkAction.objects.get().task_count == 7
    assert sorted(Task.objects.filter(state="rejected").values_list("id", flat=True)) == sorted(t.id for t in broken)
    assert Task.objects.filter(id__in=[t.id for t in invalid], state="invalid").count() == 5

    # A view saved after filtering again keeps the filter on screen, not the page's first address.
    page.goto(live_server.url + "/tasks/")
    _list_filtered_by_state(page, "invalid", 5)
    page.locator("details.list-tools > summary").click()
    page.locator("#view-name").fill("Invalid ones")
    page.get_by_role("button", name="Save view").click()
    expect(page.locator("#task-count")).to_have_text("5 tasks")
    saved = wait_until(lambda: SavedView.objects.filter(name="Invalid ones").first())
    assert QueryDict(saved.query).dict() == {"sort": "-updated", "state": "invalid"}
    assert page_problems.items == []
