"""The jobs page in a real browser: a running job's row follows the job while it runs, and the page
stops asking once nothing runs. A screenshot is written to var/screenshots/jobs.png."""

import pytest
from django.contrib.auth.models import Group, User
from django.utils import timezone
from playwright.sync_api import expect

from apps.jobs.models import Job
from tests.browser.conftest import page_screenshot
from tests.jobkind.models import Chore, ChoreRun

pytestmark = pytest.mark.e2e


def test_the_jobs_page_follows_a_running_job_and_stops_polling_when_it_ends(live_server, new_page, page_problems,
                                                                             screenshot_dir):
    curator = User.objects.create_user(username="carla", password="carla-password-1")
    curator.groups.add(Group.objects.get_or_create(name="curator")[0])
    chore = Chore.objects.create(name="tidy", steps=10)
    job = Job.objects.create(kind="chore", subject_type="jobkind.chore", subject_id=chore.id, subject_label=str(chore),
                             requested_by=curator, state="running", progress_done=2, progress_total=10, worker="w@host",
                             started_at=timezone.now() - timezone.timedelta(seconds=4))
    ChoreRun.objects.create(job=job, chore=chore)
    Job.objects.create(kind="chore", state="failed", error_code="worker_lost", subject_label="an older chore",
                       requested_by=curator)
    page = new_page()
    page.goto(live_server.url + "/jobs/")
    page.get_by_label("User name").fill("carla")
    page.get_by_label("Password").fill("carla-password-1")
    page.get_by_role("button", name="Log in").click()
    row = page.locator(f"#job-{job.id}")
    expect(row).to_contain_text("2 / 10")
    expect(page.locator("#jobs")).to_have_attribute("hx-trigger", "every 2s")
    expect(page.locator("#workers")).to_be_visible()  # fetched apart from the page
    page_screenshot(page, screenshot_dir / "jobs.png")
    Job.objects.filter(id=job.id).update(progress_done=7)
    expect(row).to_contain_text("7 / 10", timeout=10_000)  # no reload: the section swapped itself in
    Job.objects.filter(id=job.id).update(state="succeeded", progress_done=10, finished_at=timezone.now())
    expect(row.locator(".badge")).to_have_text("succeeded", timeout=10_000)
    expect(page.locator("#jobs")).not_to_have_attribute("hx-trigger", "every 2s")
    expect(page.get_by_role("button", name="Retry")).to_have_count(1)  # the failed one's
    assert page_problems.items == []
