"""Wherever a job's state is shown (the jobs page, a repository's mining jobs, a bulk action's page, a
task's validation and its issue and test writers), it says when the job started, how long it has run (counting on while it runs, final once it ended) and, for
a model job, its calls done of calls planned: one snippet, the same words everywhere."""

import re
from datetime import timedelta

import pytest
from django.urls import reverse
from django.utils import timezone

from apps.jobs.models import Job
from apps.jobs.services import job_run
from apps.jobs.templatetags.job_pages import duration
from apps.llm.models import LanguageJob
from apps.tasks.models import BulkAction, Task
from tests.conftest import commits_and_tasks_make, validation_make

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
    curator_client.post(reverse("tasks:repository_act", args=[small_repository.pk]),
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


def test_a_tasks_page_gives_its_validation_and_its_writers_their_start_their_time_and_their_calls(
        curator_client, small_repository):
    task = Task.objects.get(repository=small_repository, commit__message__startswith="Fix add")
    now = timezone.now()
    validation = validation_make(task, verdict="invalid", reason="no_fail_to_pass")
    Job.objects.filter(id=validation.job_id).update(started_at=now - timedelta(seconds=200), finished_at=now,
                                                    seconds=187.4)
    Task.objects.filter(id=task.id).update(state="invalid", reason="no_fail_to_pass")
    writers = {}
    for kind, state, seconds_ago in (("backtranslate", "cancelled", 600), ("generate_tests", "running", 42)):
        job = Job.objects.create(kind=kind, subject_type="tasks.task", subject_id=task.id,
                                 subject_label=task.instance_id, state=state, progress_done=1, progress_total=1,
                                 started_at=now - timedelta(seconds=seconds_ago))
        writers[kind] = LanguageJob.objects.create(job=job, task=task, kind=kind)
    Job.objects.filter(kind="backtranslate").update(finished_at=now, seconds=65, progress_done=0)
    LanguageJob.objects.filter(kind="backtranslate").update(detail="cancelled before its results were stored")
    page = curator_client.get(reverse("tasks:detail", args=[task.instance_id])).content.decode()
    facts = page[page.index("<dt>Job</dt>"):]
    assert re.match(r'<dt>Job</dt><dd><span class="job-state"><span class="badge badge-succeeded">Succeeded</span>\s*'
                    r'<span class="job-time small">· ' + STARTED + r', ran <span class="job-elapsed">3 min 07 s', facts)
    issue = re.search(r'<p class="issue-job.*?</p>', page, re.S).group(0)
    assert re.search(STARTED + r', ran <span class="job-elapsed">1 min 05 s</span>', issue), issue
    assert "0 of 1 model calls" in issue and ">Cancelled<" in issue and "cancelled before its results" in issue
    tests = re.search(r'<p class="generation-job.*?</p>', page, re.S).group(0)
    assert re.search(STARTED + r', running for <span class="job-elapsed" data-elapsed="4[2-4]\.\d">4[2-4] s', tests)
    assert "1 of 1 model calls" in tests
