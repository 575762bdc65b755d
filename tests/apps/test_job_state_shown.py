"""Wherever a job's state is shown (the jobs page, a repository's mining jobs, a bulk action's page), it
says when the job started, how long it has run (counting on while it runs, final once it ended) and, for
a model job, its calls done of calls planned: one snippet, the same words everywhere."""

import re
from datetime import timedelta

import pytest
from django.urls import reverse
from django.utils import timezone

from apps.jobs.models import Job
from apps.jobs.services import job_run
from apps.jobs.templatetags.job_pages import duration
from apps.tasks.models import BulkAction, Task
from tests.conftest import commits_and_tasks_make

pytestmark = pytest.mark.django_db

STARTED = r"started <time datetime=\"[^\"]+\">\d{4}-\d\d-\d\d \d\d:\d\d:\d\d</time>"


def test_durations_read_as_people_say_them():
    assert [duration(seconds) for seconds in (0, 4.23, 38.9, 187, 754.2, 7530)] == [
        "0.0 s", "4.2 s", "38 s", "3 min 07 s", "12 min 34 s", "2 h 05 min"]


def test_the_jobs_page_says_when_each_job_started_how_long_it_ran_and_a_model_jobs_calls(curator_client, curator):
    now = timezone.now()
    running = Job.objects.create(kind="judge", subject_label="octo__calc-1", requested_by=curator, state="running",
                                 progress_done=10, progress_total=26, started_at=now - timedelta(seconds=95))
    cancelled = Job.objects.create(kind="judge", subject_label="octo__calc-2", requested_by=curator,
                                   state="cancelled", progress_done=10, progress_total=26,
                                   started_at=now - timedelta(seconds=800), finished_at=now, seconds=754.2)
    waiting = Job.objects.create(kind="backtranslate", subject_label="octo__calc-3", requested_by=curator)
    page = curator_client.get(reverse("jobs:list")).content.decode()

    def row(job) -> str:
        return re.search(rf'<tr id="job-{job.id}">.*?</tr>', page, re.S).group(0)

    # Running: its elapsed time so far, which the page counts on from (data-elapsed), and its calls.
    assert re.search(STARTED + r', running for <span class="job-elapsed" data-elapsed="9[5-7]\.\d">1 min 3[5-7] s'
                               r"</span>", row(running)), row(running)
    assert re.search(r"10 of 26 model calls, about 2 min 3\d s left", row(running)), row(running)
    # Ended: its own time, final (nothing counts on), and the calls it made of those it planned.
    assert re.search(STARTED + r', ran <span class="job-elapsed">12 min 34 s</span>', row(cancelled))
    assert "data-elapsed" not in row(cancelled) and "10 of 26 model calls" in row(cancelled)
    assert "waiting for a worker since" in row(waiting) and "model calls" not in row(waiting)


def test_a_repositorys_mining_jobs_say_when_they_started_and_how_long_they_ran(curator_client, small_repository):
    page = curator_client.get(reverse("repositories:detail", args=[small_repository.pk])).content.decode()
    assert re.search(STARTED + r', ran <span class="job-elapsed">\d+\.\d s</span>', page), page
    assert re.search(r"\d+ of \d+ commits", page)


def test_a_bulk_action_page_gives_its_jobs_model_calls_and_its_own_jobs_time(curator_client, small_repository,
                                                                            monkeypatch):
    monkeypatch.setattr("apps.jobs.services.job_dispatch", lambda job_id, front=False: None)
    valid = commits_and_tasks_make(small_repository, 2, start=10)
    Task.objects.filter(id__in=[task.id for task in valid]).update(state="valid")
    curator_client.post(reverse("repositories:act", args=[small_repository.pk]),
                        {"action": "write_issues", "expected": "2"})
    bulk = BulkAction.objects.get(action="write_issues")
    job_run(job_id=bulk.job_id)
    first, second = Job.objects.filter(kind="backtranslate").order_by("id")
    Job.objects.filter(id=first.id).update(state="succeeded", progress_done=1, progress_total=1,
                                           started_at=timezone.now(), finished_at=timezone.now(), seconds=3)
    Job.objects.filter(id=second.id).update(state="running", progress_done=0, progress_total=1,
                                            started_at=timezone.now())
    page = curator_client.get(reverse("tasks:bulk", args=[bulk.pk])).content.decode()
    assert "0 queued · 1 running · 1 finished · 0 failed of 2" in page
    assert '<span id="bulk-calls">1 of 2 model calls</span>' in page
    # The action's own job: its state, when it started and how long it took.
    own = page[page.index(f"job {bulk.job_id}</a>"):]
    assert re.match(rf'job {bulk.job_id}</a>: <span class="job-state"><span class="badge badge-succeeded">Succeeded'
                    r'</span>\s*<span class="job-time small">· ' + STARTED + r", ran", own), own[:600]
