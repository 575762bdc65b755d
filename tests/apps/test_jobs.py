"""One life for every background job, driven through a kind of the tests' own (tests/jobkind)."""

import os
import re
import sys
import time

import pytest
from django.db import connection
from django.db.migrations.executor import MigrationExecutor
from django.urls import reverse
from django.utils import timezone

from apps.jobs import services
from apps.jobs.models import Job
from apps.jobs.registry import JobKind, job_kind, job_kind_register
from apps.jobs.services import JobRefused, job_cancel, job_retry, job_run, job_start, jobs_sweep, work_dirs_sweep
from tests.conftest import process_group_kill, validation_make, wait_until, worker_start
from tests.jobkind.models import Chore, ChoreRun
from tests.jobkind.work import chore_start


@pytest.fixture(autouse=True)
def _work_dir(settings, tmp_path):
    """The sweep removes working copies no job of this database owns: only in the test's own folder."""
    settings.COMMITGYM_WORK_DIR = tmp_path / "work"


@pytest.fixture
def no_dispatch(monkeypatch):
    """Jobs stay queued: what was sent is recorded instead (the ids; those sent to the front also in
    `no_dispatch.front`)."""
    sent = SentJobs()
    monkeypatch.setattr(services, "job_dispatch", sent.append)
    return sent


class SentJobs(list):
    def __init__(self):
        super().__init__()
        self.front = []

    def append(self, job_id, front=False):
        super().append(job_id)
        if front:
            self.front.append(job_id)


# --- the lifecycle, in this process -------------------------------------------------------------


@pytest.mark.django_db
def test_a_kind_is_one_registration_and_an_unknown_kind_is_refused():
    assert job_kind("chore").queue == "chores" and job_kind("backtranslate").queue == "llm"
    with pytest.raises(LookupError, match="no job kind named 'nothing'"):
        job_start(kind="nothing")
    assert not Job.objects.exists()
    with pytest.raises(ValueError, match="registered already"):
        job_kind_register(JobKind(name="chore", label="Another", queue="mining", run="x.y"))


def test_a_pool_process_imports_its_jobs_services_as_it_starts_and_one_that_cannot_be_stops_nothing(
        monkeypatch, caplog):
    from apps.jobs import registry
    from worker.tasks import job_services_import

    monkeypatch.setitem(registry._KINDS, "broken", JobKind(name="broken", label="A", queue="chores",
                                                           run="tests.jobkind.nowhere.run"))
    monkeypatch.delitem(sys.modules, "tests.jobkind.work")  # put back as it was after the test
    job_services_import()
    assert "tests.jobkind.work" in sys.modules  # the chore kind's service, imported before any chore ran
    assert "the broken jobs' service cannot be imported" in caplog.text


def test_a_pool_process_leaves_what_it_loaded_as_it_started_out_of_the_collectors_passes():
    import gc

    from celery.signals import worker_process_init

    import worker.tasks  # noqa: F401 - its handlers connect as it loads, as in a worker

    assert gc.get_freeze_count() == 0
    try:
        worker_process_init.send(sender=None)
        assert gc.get_freeze_count() > 10_000  # Django's, Celery's and the services' objects
    finally:
        gc.unfreeze()


@pytest.mark.django_db
def test_a_job_of_a_kind_this_worker_does_not_know_fails_in_words():
    job = Job.objects.create(kind="gone")  # its app was removed since it was queued
    assert job_run(job_id=job.id)
    job.refresh_from_db()
    assert job.state == "failed" and "no job kind named 'gone'" in job.error_message


@pytest.mark.django_db
def test_a_job_runs_once_and_reports_its_progress(no_dispatch):
    chore = Chore.objects.create(name="sweep", steps=3)
    job = chore_start(chore=chore)
    again = chore_start(chore=chore)  # one active job per kind and subject
    assert again.id == job.id and Job.objects.count() == 1
    assert (job.state, job.subject_type, job.subject_id, job.subject_label) == (
        "queued", "jobkind.chore", chore.id, "chore sweep")
    assert job_run(job_id=job.id) and job_run(job_id=job.id)  # a second delivery changes nothing
    job.refresh_from_db()
    run = ChoreRun.objects.get(job=job)
    assert (job.state, job.progress_done, job.progress_total, run.started, run.finished) == ("succeeded", 3, 3, 1, 1)
    assert job.worker and job.seconds is not None and job.finished_at
    assert not os.path.exists(run.work_dir)  # its working copy went with it


@pytest.mark.django_db
def test_a_failed_job_says_why_calls_its_kinds_hook_once_and_can_be_retried(no_dispatch):
    chore = Chore.objects.create(name="broken", steps=3, fail_at=1)
    job = chore_start(chore=chore)
    job_run(job_id=job.id)
    job.refresh_from_db()
    assert (job.state, job.error_code, job.error_message) == ("failed", "worker_error", "the chore failed at step 1")
    assert job.error_sentence == "The job stopped on an unexpected error."
    assert ChoreRun.objects.get(job=job).failed_hook == 1
    again = job_retry(job=job)
    assert again.id != job.id and again.state == "queued" and again.subject_id == chore.id
    with pytest.raises(JobRefused, match="only failed or cancelled jobs are retried"):
        job_retry(job=again)


@pytest.mark.django_db
def test_cancelling_stops_a_queued_job_at_once_and_a_running_one_at_its_next_report(no_dispatch):
    chore = Chore.objects.create(name="long", steps=3)
    queued = chore_start(chore=chore)
    job_cancel(job=queued)
    queued.refresh_from_db()
    assert queued.state == "cancelled" and ChoreRun.objects.get(job=queued).failed_hook == 1
    with pytest.raises(JobRefused, match="has ended already"):
        job_cancel(job=queued)
    running = chore_start(chore=chore)
    Job.objects.filter(id=running.id).update(cancel_requested=True)
    job_run(job_id=running.id)
    running.refresh_from_db()
    assert running.state == "cancelled" and ChoreRun.objects.get(job=running).finished == 0
    validation = Job.objects.create(kind="validation")
    with pytest.raises(JobRefused, match="cannot be cancelled"):
        job_cancel(job=validation)


@pytest.mark.django_db
def test_the_sweep_resends_what_the_broker_lost_and_hands_dead_workers_jobs_on(no_dispatch, settings, monkeypatch):
    settings.COMMITGYM_JOB_REQUEUE_SECONDS = 60
    held = set()
    monkeypatch.setattr(services, "broker_message_ids", lambda queue: held)
    long_ago = timezone.now() - timezone.timedelta(hours=1)
    lost = chore_start(chore=Chore.objects.create(name="lost"))
    waiting = chore_start(chore=Chore.objects.create(name="waiting"))
    fresh = chore_start(chore=Chore.objects.create(name="fresh"))
    Job.objects.filter(id__in=[lost.id, waiting.id]).update(dispatched_at=long_ago, message_id="m-lost")
    Job.objects.filter(id=waiting.id).update(message_id="m-held")
    held.add("m-held")
    dead = chore_start(chore=Chore.objects.create(name="dead"))
    stopping = chore_start(chore=Chore.objects.create(name="stopping"))
    doomed = chore_start(chore=Chore.objects.create(name="doomed"))
    Job.objects.filter(id__in=[dead.id, stopping.id, doomed.id]).update(
        state="running", heartbeat_at=long_ago, dispatched_at=long_ago)
    Job.objects.filter(id=stopping.id).update(cancel_requested=True)
    Job.objects.filter(id=doomed.id).update(dispatches=settings.COMMITGYM_JOB_MAX_DISPATCHES + 1)
    gone = Job.objects.create(kind="gone")  # a kind nobody here knows: left for the worker that runs it
    Job.objects.filter(id=gone.id).update(created_at=long_ago)
    no_dispatch.clear()
    assert jobs_sweep() == {"resent": 1, "taken_over": 1, "ended": 2, "work_dirs_removed": 0}
    assert sorted(no_dispatch) == sorted(no_dispatch.front) == sorted([lost.id, dead.id])
    assert fresh.id not in no_dispatch
    lost.refresh_from_db()
    dead.refresh_from_db()
    # The dead worker's job is queued again (it runs nowhere now), both say why they were sent again.
    assert (lost.state, lost.resent_because, dead.state, dead.resent_because, dead.started_at) == (
        "queued", "message_lost", "queued", "worker_lost", None)
    assert lost.resent_at and dead.resent_at
    stopping.refresh_from_db()
    doomed.refresh_from_db()
    assert stopping.state == "cancelled" and (doomed.state, doomed.error_code) == ("failed", "worker_lost")
    assert [ChoreRun.objects.get(job=job).failed_hook for job in (stopping, doomed)] == [1, 1]


@pytest.mark.django_db
def test_working_copies_no_running_job_owns_are_removed(settings, tmp_path):
    settings.COMMITGYM_WORK_DIR = tmp_path / "work"
    running = Job.objects.create(kind="chore", state="running", lease_token="a" * 32)
    ended = Job.objects.create(kind="chore", state="failed", lease_token="b" * 32)
    names = [f"job-{running.id}-{'a' * 12}", f"job-{running.id}-{'c' * 12}",  # its lease; a lease it lost
             f"job-{ended.id}-{'b' * 12}", f"job-999999-{'d' * 12}", "validate-abc", "job-x"]
    for name in names:
        (settings.COMMITGYM_WORK_DIR / name).mkdir(parents=True)
        os.utime(settings.COMMITGYM_WORK_DIR / name, (time.time() - 3600, time.time() - 3600))
    (settings.COMMITGYM_WORK_DIR / f"job-{ended.id}-{'e' * 12}").mkdir()  # just made: a job being claimed now
    assert work_dirs_sweep() == 3
    assert sorted(path.name for path in settings.COMMITGYM_WORK_DIR.iterdir()) == sorted(
        [f"job-{running.id}-{'a' * 12}", "validate-abc", "job-x", f"job-{ended.id}-{'e' * 12}"])


# --- the jobs page ------------------------------------------------------------------------------


@pytest.mark.django_db
def test_the_jobs_page_shows_every_job_and_polls_only_while_one_runs(curator_client, annotator_client, curator,
                                                                    no_dispatch):
    chore = Chore.objects.create(name="page", steps=4)
    job = chore_start(chore=chore, user=curator)
    began = time.monotonic()
    Job.objects.filter(id=job.id).update(state="running", progress_done=1, progress_total=4,
                                         started_at=timezone.now() - timezone.timedelta(seconds=10), worker="w1")
    page = curator_client.get(reverse("jobs:list")).content.decode()
    ran = 10 + (time.monotonic() - began)  # at most this long when the page was made
    assert f'id="job-{job.id}"' in page and "chore page" in page and "1 of 4," in page
    # 3 steps left at a step per 10 s and the moment the request took: a busy machine makes it longer.
    left = re.search(r"about (\d+) s left", page)
    assert left and 30 <= int(left.group(1)) <= round(3 * ran), page
    running = re.search(r"started <time[^>]*>[\d :-]+</time>, running for <span[^>]*>(\d+) s<", page)
    assert running and 10 <= int(running.group(1)) <= round(ran), page
    assert 'hx-trigger="every 2s"' in page and ">Cancel<" in page and "w1" in page
    assert f'id="job-{job.id}"' not in curator_client.get(reverse("jobs:list") + "?kind=backtranslate").content.decode()
    assert f'id="job-{job.id}"' in curator_client.get(
        reverse("jobs:list") + f"?subject=jobkind.chore:{chore.id}").content.decode()
    assert annotator_client.post(reverse("jobs:cancel", args=[job.id])).status_code in (403, 404)
    curator_client.post(reverse("jobs:cancel", args=[job.id]))
    assert Job.objects.get(id=job.id).cancel_requested
    Job.objects.filter(id=job.id).update(state="failed", error_code="worker_lost")
    page = curator_client.get(reverse("jobs:list")).content.decode()
    assert 'hx-trigger="every 2s"' not in page and "stopped reporting" in page and ">Retry<" in page
    curator_client.post(reverse("jobs:retry", args=[job.id]))
    assert Job.objects.filter(kind="chore", state="queued").count() == 1
    workers = curator_client.get(reverse("jobs:workers")).content.decode()
    assert 'id="workers"' in workers


# --- through Redis and real worker processes ----------------------------------------------------


def test_the_broker_is_asked_whether_it_still_holds_a_message(settings):
    import redis
    from celery import current_app

    from apps.jobs.broker import broker_message_ids

    queue = "nobody-consumes-this"
    client = redis.Redis.from_url(settings.CELERY_BROKER_URL)
    client.delete(queue)
    message = current_app.send_task("worker.tasks.job_run_task", args=[0], queue=queue)
    try:
        held = broker_message_ids(queue)
        assert message.id in held and "some-other-message" not in held and "" not in held
    finally:
        client.delete(queue)
    assert message.id not in broker_message_ids(queue)


def test_the_filesystem_broker_holds_a_message_until_a_worker_fetches_it(settings, tmp_path):
    import json

    from apps.jobs.broker import broker_message_ids

    settings.CELERY_BROKER_URL = "filesystem://"
    settings.CELERY_BROKER_TRANSPORT_OPTIONS = {"data_folder_in": str(tmp_path)}
    (tmp_path / "1_x.mining.msg").write_text(json.dumps({"headers": {"id": "m-1"}, "body": ""}))
    (tmp_path / "2_y.tests.msg").write_text(json.dumps({"headers": {"id": "m-2"}, "body": ""}))
    (tmp_path / "3_z.mining.msg").write_text("not json")
    assert broker_message_ids("mining") == {"m-1"}  # not m-2: another queue's; not the unreadable one
    (tmp_path / "1_x.mining.msg").unlink()  # fetched by a worker
    assert broker_message_ids("mining") == set()
    settings.CELERY_BROKER_URL = "amqp://somewhere"
    assert broker_message_ids("mining") is None


@pytest.mark.e2e
def test_jobs_lost_to_the_broker_or_to_a_dead_worker_finish_exactly_once(transactional_db, settings, tmp_path,
                                                                         monkeypatch):
    import redis

    settings.COMMITGYM_WORK_DIR = tmp_path / "work"
    settings.COMMITGYM_JOB_REQUEUE_SECONDS = 0
    settings.COMMITGYM_JOB_STALE_SECONDS = 3
    env = {"COMMITGYM_JOB_STALE_SECONDS": "3", "COMMITGYM_JOB_HEARTBEAT_SECONDS": "1",
           "COMMITGYM_WORK_DIR": str(settings.COMMITGYM_WORK_DIR)}
    broker = redis.Redis.from_url(settings.CELERY_BROKER_URL)
    broker.delete("chores")
    first = worker_start(tmp_path, "first", "chores", env)
    second = None
    try:
        # A message lost while the job waits: the sweep sees the broker no longer holds it and sends it again.
        with monkeypatch.context() as patch:
            patch.setattr(services, "job_dispatch", lambda job_id: None)
            lost = chore_start(chore=Chore.objects.create(name="lost", steps=2))
        Job.objects.filter(id=lost.id).update(message_id="deleted-by-a-flush", dispatched_at=timezone.now())
        assert jobs_sweep()["resent"] == 1
        wait_until(lambda: Job.objects.get(id=lost.id).state == "succeeded", timeout=60, what="the lost job to end")
        assert jobs_sweep()["resent"] == 0  # nothing queued is lost any more
        run = ChoreRun.objects.get(job=lost)
        assert (run.started, run.finished) == (1, 1)

        # A worker killed mid-run: the job is handed to another, which finishes it once.
        slow = chore_start(chore=Chore.objects.create(name="slow", steps=4, step_seconds=1.5))
        wait_until(lambda: Job.objects.get(id=slow.id).progress_done >= 1, timeout=60, what="the slow job to start")
        process_group_kill(first)
        folder = ChoreRun.objects.get(job=slow).work_dir
        assert os.path.isdir(folder)  # left behind by the dead worker
        second = worker_start(tmp_path, "second", "chores", env)
        wait_until(lambda: jobs_sweep()["taken_over"] == 1, timeout=30, what="the dead worker's job to be handed on")
        assert not os.path.exists(folder)  # the dead worker's, removed as its job was queued again
        wait_until(lambda: Job.objects.get(id=slow.id).state == "succeeded", timeout=90, what="the slow job to end")
        run = ChoreRun.objects.get(job=slow)
        assert (run.started, run.finished, run.failed_hook) == (2, 1, 0)
        assert ChoreRun.objects.filter(chore=run.chore).count() == 1 and Job.objects.filter(kind="chore").count() == 2
        assert Job.objects.get(id=slow.id).worker.startswith("second@")
        assert not os.path.exists(ChoreRun.objects.get(job=slow).work_dir)  # the second worker's, removed as it ended
    finally:
        process_group_kill(first)
        if second is not None:
            process_group_kill(second)


@pytest.mark.e2e
def test_a_killed_workers_job_says_worker_lost_and_re_sent_once_the_sweep_has_seen_it(transactional_db, settings,
                                                                                      tmp_path, curator):
    import redis
    from django.test import Client

    settings.COMMITGYM_JOB_STALE_SECONDS = 3
    env = {"COMMITGYM_JOB_STALE_SECONDS": "3", "COMMITGYM_JOB_HEARTBEAT_SECONDS": "1",
           "COMMITGYM_WORK_DIR": str(settings.COMMITGYM_WORK_DIR)}
    broker = redis.Redis.from_url(settings.CELERY_BROKER_URL)
    broker.delete("chores", *broker.keys("chores*"))
    client = Client()
    client.force_login(curator)

    def row() -> str:
        page = client.get(reverse("jobs:list")).content.decode()
        return re.search(rf'<tr id="job-{job.id}">.*?</tr>', page, re.S).group(0)

    worker = worker_start(tmp_path, "doomed", "chores", env)
    try:
        job = chore_start(chore=Chore.objects.create(name="killed", steps=60, step_seconds=1), user=curator)
        wait_until(lambda: Job.objects.get(id=job.id).progress_done >= 1, timeout=60, what="the job to start")
    finally:
        process_group_kill(worker)
    assert "badge-running" in row() and "re-sent" not in row()  # its heartbeat is not stale yet
    wait_until(lambda: jobs_sweep()["taken_over"] == 1, timeout=30, what="the sweep to see the worker lost")
    shown = row()
    assert ">Queued</span>" in shown  # it runs nowhere: waiting for a worker, at the front of its queue
    assert re.search(r"worker lost, re-sent at \d{4}-\d\d-\d\d \d\d:\d\d:\d\d", shown), shown
    broker.delete("chores", *broker.keys("chores*"))


@pytest.mark.django_db
def test_a_task_page_says_its_validation_lost_its_worker_and_was_sent_again(small_repository, curator_client,
                                                                           no_dispatch):
    from apps.tasks.models import Task

    task = Task.objects.filter(repository=small_repository).first()
    validation = validation_make(task, state="running")
    long_ago = timezone.now() - timezone.timedelta(hours=1)
    Job.objects.filter(id=validation.job_id).update(started_at=long_ago, heartbeat_at=long_ago, dispatched_at=long_ago,
                                                    lease_token="a" * 32, worker="celery@gone")
    page = lambda: curator_client.get(reverse("tasks:detail", args=[task.instance_id])).content.decode()  # noqa: E731
    assert "building the environment and running the tests" in page() and "re-sent" not in page()
    assert jobs_sweep()["taken_over"] == 1
    shown = page()
    assert "waiting for a worker" in shown and "building the environment" not in shown
    assert re.search(r"worker lost, re-sent at \d{4}-\d\d-\d\d \d\d:\d\d:\d\d", shown)
    assert no_dispatch.front == [validation.job_id]


@pytest.mark.django_db
def test_the_workers_registry_says_which_queues_running_workers_consume(curator_client, settings):
    import socket
    import subprocess

    from apps.jobs.models import Worker
    from apps.jobs.selectors import queues_without_worker, workers_running

    ended = subprocess.Popen(["true"])
    ended.wait()  # its process number is free: a worker killed outright
    here, now = socket.gethostname(), timezone.now()
    for name, host, pid, queues, heartbeat in (
            ("alive@here", here, os.getpid(), ["tests"], now), ("killed@here", here, ended.pid, ["llm"], now),
            ("busy@there", "elsewhere", 1, ["curation"], now),
            ("quiet@there", "elsewhere", 2, ["mining"], now - timezone.timedelta(hours=1))):
        Worker.objects.create(name=name, host=host, pid=pid, queues=queues, started_at=heartbeat, heartbeat_at=heartbeat)
    assert [worker.name for worker in workers_running()] == ["alive@here", "busy@there"]
    assert queues_without_worker(["llm", "tests", "mining", "curation"]) == ["llm", "mining"]
    settings.CELERY_BROKER_URL = "filesystem://"  # no broker to ask: the registry says
    panel = curator_client.get(reverse("jobs:workers")).content.decode()
    assert "alive@here" in panel and "busy@there" in panel and "killed@" not in panel and "quiet@" not in panel


# --- the rows that were there before ------------------------------------------------------------


def _model_as_of(app: str, migration: str, model: str):
    """The database migrated back to `migration` of `app`, and `model` as it was there."""
    executor = MigrationExecutor(connection)
    executor.migrate([(app, migration)])
    return executor.loader.project_state([(app, migration)]).apps.get_model(app, model)


def _migrate_to_latest() -> None:
    """Forward again, to every app's latest migration (the tests after this one need them all)."""
    executor = MigrationExecutor(connection)
    executor.migrate(executor.loader.graph.leaf_nodes())


def test_existing_language_jobs_move_into_the_jobs_table(transactional_db, small_repository, curator):
    from apps.llm.models import LanguageJob
    from tests.conftest import commits_and_tasks_make

    task = commits_and_tasks_make(small_repository, 1)[0]
    old = _model_as_of("llm", "0003_model_call_finish_reason", "LanguageJob")
    done = old.objects.create(kind="backtranslate", task_id=task.id, state="done", outcome="written", seconds=1.5,
                              requested_by_id=curator.id, model="m")
    model_down = old.objects.create(kind="generate_tests", task_id=task.id, state="done", outcome="failed",
                                    detail="unreachable: no server")
    lost = old.objects.create(kind="generate_tests", task_id=task.id, state="failed", outcome="failed",
                              detail="The worker running this job stopped reporting.")
    waiting = [old.objects.create(kind="backtranslate", task_id=task.id, state="queued") for _ in range(2)]
    _migrate_to_latest()
    rows = {row.id: row for row in LanguageJob.objects.select_related("job")}
    assert (rows[done.id].job.state, rows[done.id].job.seconds, rows[done.id].job.requested_by_id) == (
        "succeeded", 1.5, curator.id)
    assert (rows[done.id].job.kind, rows[done.id].job.subject_type, rows[done.id].job.subject_id) == (
        "backtranslate", "tasks.task", task.id)
    assert (rows[model_down.id].state, rows[model_down.id].job.error_code, rows[model_down.id].outcome) == (
        "failed", "model_failed", "failed")
    assert (rows[lost.id].state, rows[lost.id].job.error_code) == ("failed", "worker_lost")
    # Two queued on one task (an old race): the newer stays queued for the sweep to send, the other ends.
    assert [rows[row.id].state for row in waiting] == ["failed", "queued"]


@pytest.mark.django_db
def test_a_person_sees_jobs_on_what_they_may_see_and_the_other_jobs_they_asked_for(small_repository, curator,
                                                                                  annotator):
    from django.contrib.auth.models import Group

    from apps.jobs.selectors import jobs_visible
    from apps.tasks.models import Task

    task = Task.objects.filter(repository=small_repository).first()
    on_task = Job.objects.create(kind="backtranslate", subject_type="tasks.task", subject_id=task.id,
                                 requested_by=curator)
    on_repository = Job.objects.create(kind="chore", subject_type="repositories.repository",
                                       subject_id=small_repository.id)
    chore_of_curator = Job.objects.create(kind="chore", subject_type="jobkind.chore", subject_id=1,
                                          requested_by=curator)
    mined = Job.objects.get(kind="mining")  # the fixture mined the repository
    assert set(jobs_visible(user=curator)) == {mined, on_task, on_repository, chore_of_curator}
    assert set(jobs_visible(user=annotator)) == {mined, on_task, on_repository}
    small_repository.allowed_groups.add(Group.objects.create(name="team-only"))
    # The repository is closed to them now: its jobs too, even one they asked for.
    assert set(jobs_visible(user=curator)) == {chore_of_curator}
    assert set(jobs_visible(user=annotator)) == set()


def test_existing_bulk_actions_move_into_the_jobs_table(transactional_db, curator):
    from apps.tasks.models import BulkAction

    old = _model_as_of("tasks", "0010_drop_repository_index_covered_by_others", "BulkAction")
    ended = timezone.now()
    done = old.objects.create(user_id=curator.id, action="reject", query="", task_ids=[1, 2], task_count=2,
                              state="done", changed=[[1, "mined", "", []]], finished_at=ended)
    undone = old.objects.create(user_id=curator.id, action="reopen", query="", task_ids=[3], task_count=1,
                                state="undone", finished_at=ended, undone_at=ended, undone_by_id=curator.id)
    broken = old.objects.create(user_id=curator.id, action="validate", query="", state="failed", error="boom")
    _migrate_to_latest()
    rows = {row.id: row for row in BulkAction.objects.select_related("job", "undo_job")}
    assert (rows[done.id].state, rows[done.id].job.kind, rows[done.id].job.progress_done) == ("succeeded",
                                                                                            "bulk_action", 1)
    assert rows[done.id].job.subject_type == "tasks.bulkaction" and rows[done.id].job.requested_by_id == curator.id
    assert (rows[undone.id].state, rows[undone.id].undo_job.kind, rows[undone.id].undo_job.state) == (
        "undone", "bulk_undo", "succeeded")
    assert (rows[broken.id].state, rows[broken.id].job.error_message) == ("failed", "boom")


@pytest.mark.django_db
def test_jobs_are_listed_retried_cancelled_and_swept_from_the_command_line(no_dispatch, capsys):
    import json

    from django.core.management import call_command
    from django.core.management.base import CommandError

    chore = Chore.objects.create(name="cli")
    failed = chore_start(chore=chore)
    Job.objects.filter(id=failed.id).update(state="failed", error_code="worker_lost")
    call_command("jobs", "list", "--json")
    line = json.loads(capsys.readouterr().out.splitlines()[0])
    assert (line["id"], line["state"], line["error_code"], line["subject"]) == (failed.id, "failed", "worker_lost",
                                                                             "chore cli")
    call_command("jobs", "retry", str(failed.id))
    again = Job.objects.exclude(id=failed.id).get()
    assert capsys.readouterr().out.strip() == f"job {failed.id}: queued again as job {again.id}"
    with pytest.raises(CommandError, match="2 of 2 jobs refused"):
        call_command("jobs", "retry", str(again.id), "999999")
    refusals = capsys.readouterr().err
    assert "only failed or cancelled jobs are retried" in refusals and "job 999999: no such job" in refusals
    call_command("jobs", "cancel", str(again.id))
    assert capsys.readouterr().out.strip() == f"job {again.id}: cancelled"
    call_command("jobs", "sweep", "--json")
    assert set(json.loads(capsys.readouterr().out)) == {"resent", "taken_over", "ended", "work_dirs_removed"}


def test_existing_validations_move_into_the_jobs_table(transactional_db, small_repository):
    from apps.tasks.models import Task, Validation

    first, second = Task.objects.filter(repository=small_repository).order_by("id")[:2]
    old = _model_as_of("tasks", "0012_bulk_action_lifecycle_fields_removed", "Validation")
    done = old.objects.create(task_id=first.id, state="done", verdict="valid", seconds=3.0, lease_token="t")
    broken = old.objects.create(task_id=first.id, state="failed", error="RuntimeError: disk full")
    lost = old.objects.create(task_id=first.id, state="failed", error="The worker running this validation stopped "
                                                                      "reporting.")
    waiting = [old.objects.create(task_id=second.id, state="queued") for _ in range(2)]
    _migrate_to_latest()
    rows = {row.id: row for row in Validation.objects.select_related("job")}
    assert (rows[done.id].state, rows[done.id].verdict, rows[done.id].job.seconds) == ("succeeded", "valid", 3.0)
    assert (rows[done.id].job.kind, rows[done.id].job.subject_id, rows[done.id].job.subject_label) == (
        "validation", first.id, first.instance_id)
    assert (rows[broken.id].state, rows[broken.id].job.error_code, rows[broken.id].error) == (
        "failed", "worker_error", "RuntimeError: disk full")
    assert rows[lost.id].job.error_code == "worker_lost"
    # Two queued on one task (an old race): the newer stays queued for the sweep to send, the other ends.
    assert [rows[row.id].state for row in waiting] == ["failed", "queued"]


def test_existing_mining_jobs_move_into_the_jobs_table(transactional_db, curator):
    from apps.repositories.models import MiningJob, Repository

    repository = Repository.objects.create(name="o/r", url="/nowhere")
    old = _model_as_of("repositories", "0004_drop_repository_index_covered_by_others", "MiningJob")
    done = old.objects.create(repository_id=repository.id, state="succeeded", requested_by_id=curator.id,
                              progress_done=7, progress_total=7, new_commits=7, seconds=0.5)
    broken = old.objects.create(repository_id=repository.id, state="failed", error_code="auth_failed",
                                error_message="denied")
    _migrate_to_latest()
    rows = {row.id: row for row in MiningJob.objects.select_related("job")}
    assert (rows[done.id].state, rows[done.id].progress_done, rows[done.id].new_commits, rows[done.id].seconds) == (
        "succeeded", 7, 7, 0.5)
    assert (rows[done.id].job.kind, rows[done.id].job.subject_id, rows[done.id].requested_by) == (
        "mining", repository.id, curator)
    assert (rows[broken.id].state, rows[broken.id].error_code, rows[broken.id].error_message) == (
        "failed", "auth_failed", "denied")


@pytest.mark.django_db
def test_a_long_job_a_person_started_says_so_on_whatever_page_they_are(curator_client, curator, small_repository):
    toasts = reverse("jobs:toasts")
    assert 'hx-get="' + toasts in curator_client.get(reverse("repositories:list")).content.decode()
    assert curator_client.get(toasts).status_code == 204  # the first poll starts the clock
    now = timezone.now()
    long = Job.objects.create(kind="mining", subject_type="repositories.repository", subject_id=small_repository.pk,
                              subject_label=small_repository.name, requested_by=curator, state="succeeded",
                              finished_at=now, seconds=95)
    Job.objects.create(kind="mining", subject_type="repositories.repository", subject_id=small_repository.pk,
                       subject_label="quick one", requested_by=curator, state="succeeded", finished_at=now, seconds=2)
    Job.objects.create(kind="mining", subject_type="repositories.repository", subject_id=small_repository.pk,
                       subject_label="someone else's", state="failed", finished_at=now, seconds=300)
    Job.objects.filter(id=long.id).update(finished_at=timezone.now())
    shown = curator_client.get(toasts).content.decode()
    assert f"Mining of <strong title=\"{small_repository.name}\">" in shown and "succeeded after 95 s" in shown
    assert reverse("repositories:detail", args=[small_repository.pk]) in shown
    assert "quick one" not in shown and "someone else" not in shown
    assert curator_client.get(toasts).status_code == 204  # said once


@pytest.mark.django_db
def test_many_jobs_ending_at_once_make_one_note(curator_client, curator, small_repository):
    toasts = reverse("jobs:toasts")
    curator_client.get(toasts)
    Job.objects.bulk_create([Job(kind="validation", subject_type="tasks.task", subject_id=n, subject_label=f"t{n}",
                                 requested_by=curator, state="failed" if n < 2 else "succeeded",
                                 finished_at=timezone.now(), seconds=60) for n in range(6)])
    shown = curator_client.get(toasts).content.decode()
    assert shown.count('class="toast') == 1 and "Several jobs you started ended, 2 of them failed" in shown
