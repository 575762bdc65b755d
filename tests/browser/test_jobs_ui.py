"""The jobs page in a real browser: a running job's row follows the job while it runs, and the page
stops asking once nothing runs; each job says when it started and how long it has run (counting on in
the page), a model job its calls done of calls planned. Screenshots are written to
var/screenshots/jobs.png and var/screenshots/jobs_model_calls.png."""

import re

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
    expect(row).to_contain_text("2 of 10")
    expect(page.locator("#jobs")).to_have_attribute("hx-trigger", "every 2s")
    expect(page.locator("#workers")).to_be_visible()  # fetched apart from the page
    page_screenshot(page, screenshot_dir / "jobs.png")
    Job.objects.filter(id=job.id).update(progress_done=7)
    expect(row).to_contain_text("7 of 10", timeout=10_000)  # no reload: the section swapped itself in
    Job.objects.filter(id=job.id).update(state="succeeded", progress_done=10, finished_at=timezone.now())
    expect(row.locator(".badge")).to_have_text("Succeeded", timeout=10_000)
    expect(page.locator("#jobs")).not_to_have_attribute("hx-trigger", "every 2s")
    expect(page.get_by_role("button", name="Retry")).to_have_count(1)  # the failed one's
    assert page_problems.items == []


def test_the_jobs_page_shows_a_model_jobs_start_its_elapsed_time_counting_and_its_calls(
        live_server, new_page, page_problems, screenshot_dir):
    curator = User.objects.create_user(username="carla", password="carla-password-1")
    curator.groups.add(Group.objects.get_or_create(name="curator")[0])
    started = timezone.now() - timezone.timedelta(seconds=75)
    job = Job.objects.create(kind="judge", subject_label="octo__calc-1", requested_by=curator, state="running",
                             progress_done=3, progress_total=26, worker="llm@host", started_at=started)
    page = new_page()
    page.goto(live_server.url + "/jobs/")
    page.get_by_label("User name").fill("carla")
    page.get_by_label("Password").fill("carla-password-1")
    page.get_by_role("button", name="Log in").click()
    row = page.locator(f"#job-{job.id}")
    expect(row.locator(".badge")).to_have_text("Running")
    expect(row.locator(".job-time")).to_contain_text(f"started {timezone.localtime(started):%Y-%m-%d %H:%M:%S}")
    expect(row.locator(".job-progress")).to_contain_text("3 of 26 model calls")
    elapsed = row.locator(".job-elapsed")
    expect(elapsed).to_have_text(re.compile(r"1 min 1[5-9] s"))
    first = elapsed.text_content()
    expect(elapsed).not_to_have_text(first, timeout=5_000)  # it counts on while the job runs
    page_screenshot(page, screenshot_dir / "jobs_model_calls.png")
    Job.objects.filter(id=job.id).update(progress_done=11)
    expect(row.locator(".job-progress")).to_contain_text("11 of 26 model calls", timeout=10_000)
    Job.objects.filter(id=job.id).update(state="cancelled", finished_at=timezone.now(), seconds=92.4)
    expect(row.locator(".badge")).to_have_text("Cancelled", timeout=10_000)
    expect(row.locator(".job-time")).to_contain_text("ran 1 min 32 s")
    page.wait_for_timeout(1_500)
    expect(row.locator(".job-time")).to_contain_text("ran 1 min 32 s")  # final: it counts no more
    expect(row.locator(".job-progress")).to_have_text("· 11 of 26 model calls")
    assert page_problems.items == []
