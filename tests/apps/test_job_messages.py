"""A job's messages: on the embedded default's broker (apps/jobs/transport.py) a reader never sees
one half written, and a file in the queue that is not one is set aside without ending the worker;
on either broker, a job the sweep sends again goes ahead of the jobs waiting."""

import os
import subprocess
import sys
import threading
from queue import Empty

import pytest
from django.conf import settings
from django.utils import timezone
from kombu import Connection

from apps.jobs import services
from apps.jobs.models import Job
from apps.jobs.transport import TRANSPORT
from tests.conftest import commands_database_url, process_group_kill, wait_until, worker_start
from tests.jobkind.models import Chore
from tests.jobkind.work import chore_start


def test_a_reader_never_sees_a_message_half_written(tmp_path):
    """Large messages put while another connection reads as fast as it can. Kombu's own transport
    writes each file in place: its reader takes files still empty or cut short (JSONDecodeError)."""
    options = {"data_folder_in": str(tmp_path), "data_folder_out": str(tmp_path),
               "control_folder": str(tmp_path / "control"), "set_aside_folder": str(tmp_path / "set-aside")}
    count, size = 6, 8 << 20
    received, errors, stop = [], [], threading.Event()

    def read() -> None:
        with Connection("filesystem://", transport=TRANSPORT, transport_options=options) as connection:
            queue = connection.SimpleQueue("race")
            while len(received) + len(errors) < count and not stop.is_set():
                try:
                    message = queue.get(block=False)
                except Empty:
                    continue
                except Exception as error:  # noqa: BLE001 - what the reader saw is the test's finding
                    errors.append(repr(error)[:200])
                    continue
                received.append((message.payload["n"], len(message.payload["text"])))
                message.ack()

    reader = threading.Thread(target=read)
    reader.start()
    try:
        with Connection("filesystem://", transport=TRANSPORT, transport_options=options) as connection:
            queue = connection.SimpleQueue("race")
            for n in range(count):
                queue.put({"n": n, "text": "abcdef"[n] * size})
        reader.join(60)
    finally:
        stop.set()
        reader.join()
    assert errors == []
    assert received == [(n, size) for n in range(count)]
    assert not os.path.exists(options["set_aside_folder"])  # nothing was taken for a broken message


@pytest.mark.e2e
def test_a_worker_sets_aside_a_file_that_is_not_a_message_and_goes_on(transactional_db, tmp_path, monkeypatch):
    """A worker on the embedded default's broker meets an empty message file (read before it was
    written) and one cut short, ahead of a job's: both are set aside, said in its log, and the job
    runs. On kombu's own transport the worker died: "Unrecoverable error: JSONDecodeError"."""
    var = tmp_path / "var"
    env = {"CELERY_BROKER_URL": "filesystem://", "COMMITGYM_VAR_DIR": str(var)}
    queue = var / "queue"
    queue.mkdir(parents=True)
    broken = {"1-0-empty.chores.msg": b"", "1-1-cut.chores.msg": b'{"body": "eyJhcmdzIjog'}
    for name, content in broken.items():
        (queue / name).write_bytes(content)
    with monkeypatch.context() as patch:
        patch.setattr(services, "job_dispatch", lambda job_id, front=False: None)
        job = chore_start(chore=Chore.objects.create(name="after the broken ones", steps=1))
    embedded_python(env, f"from apps.jobs.services import job_dispatch; job_dispatch({job.id})")
    worker = worker_start(tmp_path, "files", "chores", env)
    try:
        wait_until(lambda: Job.objects.get(id=job.id).state == "succeeded", timeout=60, what="the job to run")
        assert worker.poll() is None
    finally:
        process_group_kill(worker)
    set_aside = queue / "set-aside"
    assert {path.name: path.read_bytes() for path in set_aside.iterdir()} == broken  # kept as they were
    assert not list(queue.glob("*.msg"))
    log = (tmp_path / "files.log").read_text()
    assert log.count("is not a whole message") == 2 and str(set_aside / "1-0-empty.chores.msg") in log
    assert "Unrecoverable error" not in log


def embedded_python(env: dict, code: str) -> str:
    """Run `code` in a process of its own with the product's settings, the tests' database and
    `env` (the broker): what it prints."""
    done = subprocess.run([sys.executable, "manage.py", "shell", "-c", code], cwd=settings.BASE_DIR,
                          env={**os.environ, "DATABASE_URL": commands_database_url(), **env},
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    return done.stdout


@pytest.mark.e2e
@pytest.mark.parametrize("broker", ["redis", "filesystem"])
def test_a_job_sent_again_is_taken_before_the_jobs_queued_before_it(broker, transactional_db, tmp_path, monkeypatch):
    """Two jobs wait on a queue no worker consumes yet; a third, queued long before, lost its
    message: the sweep sends it again, and the worker that comes takes it first."""
    env = {"CELERY_BROKER_URL": settings.CELERY_BROKER_URL}
    if broker == "filesystem":
        env = {"CELERY_BROKER_URL": "filesystem://", "COMMITGYM_VAR_DIR": str(tmp_path / "var")}
    else:
        import redis

        client = redis.Redis.from_url(settings.CELERY_BROKER_URL)
        client.delete(*(key for key in client.keys("chores*")), "chores")
    with monkeypatch.context() as patch:
        patch.setattr(services, "job_dispatch", lambda job_id, front=False: None)
        lost, first, second = (chore_start(chore=Chore.objects.create(name=name, steps=1))
                               for name in ("lost", "first", "second"))
    Job.objects.filter(id=lost.id).update(message_id="gone", dispatched_at=timezone.now() - timezone.timedelta(hours=1))
    swept = embedded_python(env, f"from apps.jobs.services import job_dispatch, jobs_sweep\n"
                                 f"job_dispatch({first.id}); job_dispatch({second.id}); print(jobs_sweep())")
    assert "'resent': 1" in swept
    worker = worker_start(tmp_path, "orderly", "chores", env)
    try:
        wait_until(lambda: not Job.objects.filter(kind="chore").exclude(state="succeeded").exists(), timeout=60,
                   what="the three jobs to run")
    finally:
        process_group_kill(worker)
    taken = list(Job.objects.filter(kind="chore").order_by("started_at").values_list("id", flat=True))
    assert taken == [lost.id, first.id, second.id]
