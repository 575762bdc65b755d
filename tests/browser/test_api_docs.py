"""The API's documentation in a real browser: Swagger UI's scripts and styles come from this server
(a server without internet reaches no CDN), and it lists the operations from the schema; a token made
on the account page is shown once."""

from urllib.parse import urlsplit

import pytest
from playwright.sync_api import expect

from tests.browser.conftest import log_in, page_screenshot
from tests.conftest import user_with_role

pytestmark = pytest.mark.e2e


def test_the_api_docs_render_with_no_request_leaving_the_server(live_server, transactional_db, new_page,
                                                               page_problems, screenshot_dir):
    user_with_role("carla", "curator")
    page = new_page()
    hosts = []
    page.on("request", lambda request: hosts.append(urlsplit(request.url).netloc))
    log_in(page, live_server.url, "carla", "pw-carla", then="/api/docs/")
    expect(page.locator(".swagger-ui .info .title")).to_contain_text("commitgym API")
    expect(page.locator("#operations-repositories-repositories_list")).to_be_visible()
    expect(page.locator("#operations-jobs-jobs_cancel_create")).to_be_visible()
    page_screenshot(page, screenshot_dir / "api-docs.png")
    assert hosts and set(hosts) == {urlsplit(live_server.url).netloc}, set(hosts)

    page.goto(live_server.url + "/accounts/tokens/")
    page.locator("#token-name").fill("notebook")
    page.locator("#token-create").click()
    secret = page.locator("#token-secret").inner_text()
    assert secret.startswith("cg_")
    page.goto(live_server.url + "/accounts/tokens/")
    expect(page.locator("#tokens")).to_contain_text("notebook")
    assert secret not in page.content()
    assert not page_problems.items, page_problems.items
