"""Pages on a phone (390 px wide): no page is wider than the screen, the navigation folds into a
menu that opens, tables scroll inside their own box, and a repository's URL is not broken letter by
letter. Screenshots: var/screenshots/phone-*.png."""

import pytest
from playwright.sync_api import expect

from tests.browser.conftest import page_screenshot, repository_with_a_task_in_review
from tests.browser.test_dataset_ui import judged_dataset

pytestmark = pytest.mark.e2e

PHONE = {"width": 390, "height": 844}

# Elements sticking out past the right edge of the screen, named for the failure message.
OVERFLOWING = """() => [...document.querySelectorAll('body *')].filter(e => {
    const box = e.getBoundingClientRect();
    if (box.right <= 391 || box.width === 0) return false;
    for (let p = e.parentElement; p; p = p.parentElement) {  // inside a box that scrolls: fine
        if (['auto', 'scroll'].includes(getComputedStyle(p).overflowX) && p !== document.body
            && p !== document.documentElement) return false;
    }
    return true;
}).slice(0, 8).map(e => e.tagName.toLowerCase() + (e.id ? '#' + e.id : '') + (e.className && typeof e.className === 'string' ? '.' + e.className.split(' ').join('.') : '') + ' ' + Math.round(e.getBoundingClientRect().right))"""


def _fits(page, name: str, screenshot_dir) -> None:
    width = page.evaluate("document.documentElement.scrollWidth")
    assert width <= PHONE["width"], f"{name} is {width} px wide: {page.evaluate(OVERFLOWING)}"
    page_screenshot(page, screenshot_dir / f"phone-{name}.png")


def test_pages_fit_a_phone_and_the_navigation_folds(live_server, browser, git_repo, page_problems, screenshot_dir,
                                                    tmp_path):
    _, task = repository_with_a_task_in_review(git_repo)
    dataset = judged_dataset(tmp_path)

    context = browser.new_context(viewport=PHONE, locale="en-US", timezone_id="UTC", is_mobile=True, has_touch=True)
    context.set_default_timeout(15_000)
    page = context.new_page()
    page_problems.watch(page)
    try:
        page.goto(live_server.url + "/")
        page.get_by_label("User name").fill("carla")
        page.get_by_label("Password").fill("pw-carla")
        page.get_by_role("button", name="Log in").click()

        # The navigation is folded into a menu; opening it shows the links.
        nav_link = page.locator(".nav").get_by_role("link", name="Repositories")
        expect(nav_link).to_be_hidden()
        page.get_by_role("button", name="Menu").click()
        expect(nav_link).to_be_visible()
        nav_link.click()

        expect(page.get_by_role("heading", name="Repositories", exact=True)).to_be_visible()
        _fits(page, "repositories", screenshot_dir)
        url = page.locator("table .url").first
        assert url.bounding_box()["width"] >= 150, "the repository's URL is squeezed into a narrow column"

        page.goto(f"{live_server.url}/tasks/")
        _fits(page, "tasks", screenshot_dir)
        table = page.locator("table.tasks")
        assert table.evaluate("t => t.scrollWidth > t.parentElement.clientWidth"), "the table should scroll in its box"

        page.goto(f"{live_server.url}/tasks/{task.instance_id}/review/")
        expect(page.locator("#commit-message")).to_be_visible()
        _fits(page, "review", screenshot_dir)

        page.goto(f"{live_server.url}/datasets/{dataset.pk}/")
        expect(page.locator("svg.chart").first).to_be_visible()
        _fits(page, "dataset", screenshot_dir)
    finally:
        context.close()
    assert page_problems.items == []
