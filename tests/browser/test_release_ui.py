"""Releasing from a dataset's page in a real browser: the form keeps what was entered when it is
refused and says why, the release is a job followed on its page, and a version is withdrawn with
why."""

import pytest
from django.contrib.auth.models import Group, User
from playwright.sync_api import expect

from apps.datasets.candidates.imports import instances_import
from apps.datasets.models import Dataset, Release
from apps.jobs.models import Job
from apps.jobs.services import job_run
from tests.conftest import wait_until
from tests.worker.test_swebench_files import instance, jsonl

pytestmark = pytest.mark.e2e


def test_a_curator_releases_a_dataset_and_withdraws_the_version(live_server, new_page, page_problems, tmp_path,
                                                                settings):
    settings.COMMITGYM_RELEASE_DIR = tmp_path / "releases"
    instances_import(path=jsonl(tmp_path / "octo.jsonl", [instance(f"octo__calc-{n}", base_commit=f"{n:040d}")
                                                           for n in range(1, 4)]))
    dataset = Dataset.objects.get(name="octo")
    User.objects.create_user(username="dana", password="dana-password-1").groups.add(
        Group.objects.get_or_create(name="curator")[0])
    page = new_page()
    page.goto(f"{live_server.url}/datasets/{dataset.pk}/")
    page.get_by_label("User name").fill("dana")
    page.get_by_label("Password").fill("dana-password-1")
    page.get_by_role("button", name="Log in").click()
    page.get_by_role("link", name="Release…").click()
    expect(page.get_by_label("Name")).to_have_value("octo")
    # Imported instances are valid, not accepted: refused, saying why, with the form as it was.
    page.get_by_label("Name").fill("octo-preview")
    page.get_by_role("button", name="Release").click()
    expect(page.get_by_role("alert")).to_contain_text("no task of the dataset 'octo' is accepted")
    expect(page.get_by_label("Name")).to_have_value("octo-preview")
    page.get_by_label("Valid", exact=True).check()
    page.get_by_role("button", name="Release").click()
    expect(page.locator("#release-progress")).to_contain_text("Being written")
    release = Release.objects.get(name="octo-preview")
    # Run here; a worker of the suite that took the message first runs it there: wait for its end.
    job_run(job_id=release.job_id)
    wait_until(lambda: Job.objects.filter(id=release.job_id).exclude(state__in=Job.ACTIVE_STATES).exists(),
               what="the release's end")
    ended = Job.objects.get(id=release.job_id)
    assert ended.state == "succeeded", (ended.error_code, ended.error_message)
    page.reload()
    expect(page.get_by_role("heading", level=1)).to_contain_text("octo-preview@1")
    expect(page.get_by_role("heading", level=1)).to_contain_text("Preview")
    expect(page.get_by_role("link", name="instances.jsonl")).to_be_visible()
    expect(page.locator("pre.manifest")).to_contain_text('"tasks": 3')
    page.get_by_label("Why").fill("built before the oracle was fixed")
    page.get_by_role("button", name="Withdraw octo-preview@1").click()
    expect(page.locator(".notice").last).to_contain_text("built before the oracle was fixed")
    expect(page.get_by_role("heading", level=1)).to_contain_text("Withdrawn")
    assert page_problems.items == []
