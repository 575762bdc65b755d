"""The Commit Mine in a real browser: log in, register, watch the job, read the funnel and the commits.

The web app runs in pytest-django's live server; the mining job it publishes goes through
Redis to a real Celery worker process; both use the test database (see tests/conftest.py).
"""

import re
from collections import Counter

import pytest
from playwright.sync_api import expect

from apps.repositories.models import Repository
from tests.browser.conftest import log_in, page_screenshot
from tests.conftest import user_with_role
from worker.demo.sample_repo import sample_repo_write

pytestmark = pytest.mark.e2e

JOB_TIMEOUT_MS = 60_000


def _funnel_row(page, label: str):
    return page.locator("#funnel tbody tr").filter(has=page.locator("th", has_text=label))


def test_curator_mines_the_sample_repository_in_a_browser(
    live_server, celery_worker, new_page, page_problems, screenshot_dir, tmp_path
):
    sample = sample_repo_write(tmp_path / "textkit")
    reasons = Counter(commit.expected_drop_reason for commit in sample)
    kept_total = reasons[None]
    assert len(sample) == 37 and reasons["patch_too_long"] > 0
    kept = next(commit for commit in sample if commit.expected_drop_reason is None and commit.fail_to_pass)
    user_with_role("carla", "curator")
    user_with_role("anton", "annotator")
    base = live_server.url

    # --- the curator logs in and registers the repository -----------------------------------
    page = new_page()
    log_in(page, base, "carla", "pw-carla")
    expect(page.locator("#register")).to_be_visible()
    page.get_by_label("Location").fill(str(tmp_path / "textkit"))
    page.get_by_role("button", name="Register and mine").click()

    repository = Repository.objects.get()
    assert repository.name == "local/textkit"
    expect(page).to_have_url(f"{base}/repositories/{repository.pk}/")
    expect(page.get_by_role("heading", name="local/textkit")).to_be_visible()
    expect(page.locator(".messages")).to_contain_text("queued for local/textkit")

    # --- htmx polls the job until the worker process has mined every commit -----------------
    job = page.locator("#job-" + str(repository.mining_jobs.get().pk))
    expect(job.locator(".badge")).to_have_text("Succeeded", timeout=JOB_TIMEOUT_MS)
    expect(job).to_contain_text(f"{len(sample)} of {len(sample)} commits")
    expect(job).to_contain_text(f"{len(sample)} new")

    # The finished job tells the page to reload its funnel, without a page load.
    expect(_funnel_row(page, "Commits in the history").locator("td.num").first).to_have_text(str(len(sample)))
    expect(_funnel_row(page, "Python change beyond comments").locator("td.num").first).to_have_text(
        str(kept_total))
    expect(_funnel_row(page, "patch characters").locator("td.num").nth(1)).to_have_text(
        f"−{reasons['patch_too_long']}")
    expect(page.locator("#funnel .bar")).to_have_count(8)  # the history, then merges and each of the six filters
    page_screenshot(page, screenshot_dir / "repository-detail.png")

    # Only the job cell and the funnel update in place; a page load shows what the job learnt.
    page.reload()
    facts = page.locator("dl.facts")
    expect(facts.locator("dt:text-is('Default branch') + dd")).to_have_text("main")
    expect(facts.locator("dt:text-is('Mined up to') + dd code")).to_have_text(sample[-1].sha[:10])
    expect(page.locator("section", has=page.get_by_role("heading", name="Mining jobs"))
           .locator("tbody tr td").nth(3)).not_to_have_text("—")

    # --- the repository list shows the counts --------------------------------------------------
    page.get_by_role("link", name="Repositories", exact=True).first.click()
    row = page.locator("table.table tbody tr").filter(has_text="local/textkit")
    expect(row.locator("td.num").nth(0)).to_have_text(str(len(sample)))
    expect(row.locator("td.num").nth(1)).to_have_text(str(kept_total))
    expect(row.locator(".badge")).to_have_text("Succeeded")
    page_screenshot(page, screenshot_dir / "repository-list.png")

    # --- the commit list, filtered by a drop reason (htmx swaps the results in place) -----------
    row.get_by_role("link", name="local/textkit").click()
    page.get_by_role("link", name="browse the commit list").click()
    expect(page.get_by_role("heading", name="Commits", exact=True)).to_be_visible()
    expect(page.locator("#commit-results > p.muted")).to_have_text(f"{len(sample)} commits")
    page.locator("#id_status").select_option("patch_too_long")
    expect(page.locator("#commit-results > p.muted")).to_have_text(f"{reasons['patch_too_long']} commits")
    rows = page.locator("#commit-results table.commits tbody tr")
    expect(rows).to_have_count(reasons["patch_too_long"])
    expect(rows.locator(".badge-dropped")).to_have_text(["patch_too_long"] * reasons["patch_too_long"])
    expect(page).to_have_url(re.compile(rf"/repositories/{repository.pk}/commits/\?status=patch_too_long(&|$)"))

    page.locator("#id_status").select_option("kept")
    expect(rows).to_have_count(kept_total)

    # --- a kept commit: its diff in Source and Tests parts, highlighted --------------------------
    page.get_by_role("link", name=kept.sha[:10], exact=True).click()
    expect(page).to_have_url(f"{base}/repositories/{repository.pk}/commits/{kept.sha}/")
    expect(page.locator("h1")).to_have_text(kept.subject)
    expect(page.locator(".verdict .badge-kept")).to_have_text("kept")
    for part, css in (("Source", ".diff-source"), ("Tests", ".diff-tests")):
        section = page.locator(css)
        expect(section.locator("h3")).to_contain_text(part)
        expect(section.locator(".diff-file .highlight pre").first).to_be_visible()
        # Pygments marks added lines; the stylesheet colours them (so both loaded).
        added = section.locator(".highlight .gi").first
        expect(added).to_be_visible()
        assert added.evaluate("e => getComputedStyle(e).color") == "rgb(0, 132, 0)"
    page_screenshot(page, screenshot_dir / "commit-detail.png")

    # --- an annotator reads, but may not register ---------------------------------------------
    annotator = new_page()
    log_in(annotator, base, "anton", "pw-anton")
    expect(annotator.locator("table.table tbody tr").filter(has_text="local/textkit")).to_be_visible()
    expect(annotator.locator("#register")).to_have_count(0)
    expect(annotator.get_by_role("button", name="Register and mine")).to_have_count(0)

    # A hand-made POST with a valid CSRF token: refused by the role check, not by CSRF.
    page_problems.allow("/repositories/", 403)
    status, body = annotator.evaluate(
        """async (location) => {
            const token = JSON.parse(document.body.getAttribute("hx-headers"))["X-CSRFToken"];
            const response = await fetch("/repositories/", {
                method: "POST",
                body: new URLSearchParams({csrfmiddlewaretoken: token, location: location}),
            });
            return [response.status, await response.text()];
        }""",
        str(tmp_path / "textkit-copy"),
    )
    assert status == 403, body[:500]
    assert "Only curators and admins can change repositories." in body and "CSRF verification failed" not in body
    assert Repository.objects.count() == 1

    assert not page_problems.items, "\n".join(page_problems.items)
