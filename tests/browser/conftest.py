"""A real browser for UI tests: Chromium from Debian packages, driven by Playwright.

`deploy/dev/require.sh` (run by make test) installs /usr/bin/chromium; Playwright's Python wheel brings
its own driver and never downloads a browser here (do not run `playwright install`).
Nothing in this folder skips: a missing piece fails with a sentence saying what to do.
"""

import os
from pathlib import Path

import pytest

# Playwright's sync API runs an event loop in this thread (in a greenlet); the test's own
# ORM calls would otherwise be refused by Django as "sync in an async context".
os.environ["DJANGO_ALLOW_ASYNC_UNSAFE"] = "true"

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
VIEWPORT = {"width": 1280, "height": 900}


@pytest.fixture(scope="session")
def browser():
    """One headless Chromium for the session. A plain launch gives it a fresh profile in a
    temporary folder, removed when the browser closes."""
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        pytest.fail("the browser tests need Playwright's Python package: `make install` "
                    "(it is in the `test` extra of pyproject.toml)")
    if not (Path(CHROMIUM).is_file() and os.access(CHROMIUM, os.X_OK)):
        pytest.fail(f"the browser tests need Chromium at {CHROMIUM}: run make test (deploy/dev/require.sh) "
                    "(as root on Debian it installs the `chromium` package)")
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS)
        yield browser
        browser.close()


class PageProblems:
    """What went wrong in pages while a test ran: script errors, console errors, failed loads."""

    def __init__(self):
        self.items: list[str] = []
        # The app has no favicon; Chromium asks for one on every page.
        self.allowed_statuses: set[tuple[str, int]] = {("/favicon.ico", 404)}

    def allow(self, path: str, status: int) -> None:
        """An error response the test asks for on purpose (say, a 403)."""
        self.allowed_statuses.add((path, status))

    def watch(self, page) -> None:
        from urllib.parse import urlsplit

        page.on("pageerror", lambda error: self.items.append(f"script error on {page.url}: {error}"))
        # "Failed to load resource" repeats an error response, which `response` judges below.
        page.on("console", lambda msg: msg.type == "error" and not msg.text.startswith("Failed to load resource")
                and self.items.append(f"console error on {page.url}: {msg.text}"))
        # A request the page itself gave up (it was left while a poll was under way) is no fault.
        page.on("requestfailed", lambda request: request.failure != "net::ERR_ABORTED" and self.items.append(
            f"request failed: {request.method} {request.url}: {request.failure}"))

        def response(resp):
            path = urlsplit(resp.url).path
            if resp.status >= 400 and (path, resp.status) not in self.allowed_statuses:
                self.items.append(f"HTTP {resp.status} for {resp.request.method} {resp.url}")

        page.on("response", response)


@pytest.fixture
def page_problems():
    return PageProblems()


@pytest.fixture
def new_page(browser, page_problems):
    """new_page() -> a page in its own browser context (its own cookies), watched for problems."""
    contexts = []

    def make():
        context = browser.new_context(viewport=VIEWPORT, locale="en-US", timezone_id="UTC")
        context.set_default_timeout(15_000)
        contexts.append(context)
        page = context.new_page()
        page_problems.watch(page)
        return page

    yield make
    for context in contexts:
        context.close()


@pytest.fixture
def screenshot_dir(settings):
    path = Path(settings.BASE_DIR) / "var" / "screenshots"
    path.mkdir(parents=True, exist_ok=True)
    return path


MIN_SCREENSHOT_BYTES = 10 * 1024


def page_screenshot(page, path) -> None:
    """A screenshot of the whole page, which must show something."""
    page.screenshot(path=str(path), full_page=True)
    size = path.stat().st_size
    assert size > MIN_SCREENSHOT_BYTES, f"{path} is only {size} bytes: the page looks empty"


def log_in(page, base_url: str, username: str, password: str, then: str | None = "/repositories/") -> None:
    """Log in from the front page (every page asks for a login first); the first page follows, then
    the page at `then` (None: stay on the first page)."""
    from playwright.sync_api import expect

    page.goto(base_url + "/")
    expect(page.get_by_role("heading", name="Log in")).to_be_visible()
    page.get_by_label("User name").fill(username)
    page.get_by_label("Password").fill(password)
    page.get_by_role("button", name="Log in").click()
    expect(page.get_by_role("heading", name="commitgym", exact=True)).to_be_visible()
    expect(page.locator(".who")).to_contain_text(username)
    if then:
        page.goto(base_url + then)


def repository_with_a_task_in_review(git_repo):
    """A curator (carla, password pw-carla) and her repository, mined, with one fix waiting for review:
    (the repository, that task)."""
    from apps.repositories.services import repository_register
    from apps.tasks.models import Task
    from tests.conftest import mine_now, task_put_in_review, user_with_role

    git_repo.commit("Initial library", {"lib/calc.py": "def add(a, b):\n    return a - b\n"})
    git_repo.commit("Fix add returning the difference", {
        "lib/calc.py": "def add(a, b):\n    return a + b\n",
        "tests/test_add.py": "from lib.calc import add\n\n\ndef test_add():\n    assert add(2, 3) == 5\n"})
    repository = repository_register(location=str(git_repo.path), user=user_with_role("carla", "curator"))
    mine_now(repository)
    task = task_put_in_review(Task.objects.get(repository=repository, commit__parent_sha__gt=""),
                              fail_to_pass=["tests/test_add.py::test_add"], issue="add() subtracts")
    return repository, task
