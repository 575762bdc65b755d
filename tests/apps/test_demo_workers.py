"""The demo's workers on the embedded default (SQLite, the filesystem broker): a process per kind of
work, so a light job never waits behind a long test or model job, and several processes write to the
one SQLite file at once with no "database is locked" anywhere; stopped, they end their running jobs."""

import json
import os
import sqlite3
import subprocess
import sys

from django.conf import settings

from apps.datasets.demo import demo_workers_start, demo_workers_stop
from tests.conftest import wait_until
from worker.demo.sample_repo import sample_repo_write

# Run in a `manage.py shell` of the embedded default: a chore (a job of the tests' own) sent to a queue.
SEND = """
import json, time
from celery import current_app
from apps.jobs.models import Job
from apps.jobs.registry import CELERY_JOB
from apps.repositories.services import mining_job_start, repository_register
from tests.jobkind.models import Chore
from tests.jobkind.work import chore_start

def send(queue, **chore):
    job = chore_start(chore=Chore.objects.create(name=queue, **chore))
    current_app.send_task(CELERY_JOB, args=[job.id], queue=queue)
    return job.id
"""
# Long jobs on the tests and llm queues, many short ones writing progress behind them, then, once a long
# one runs, a mining job (the light queue's). Prints the ids.
JOBS = SEND + """
long = [send(queue, steps=40, step_seconds=0.25) for queue in ("tests", "llm")]
short = [send(queue, steps=60, step_seconds=0.02) for queue in ("tests", "llm") for _ in range(3)]
deadline = time.monotonic() + 60
while not Job.objects.filter(id__in=long, state="running").exists() and time.monotonic() < deadline:
    time.sleep(0.1)
mining = mining_job_start(repository=repository_register(location=SAMPLE))[0].job_id
short += [send("mining", steps=60, step_seconds=0.01) for _ in range(2)]
print(json.dumps({"long": long, "short": short, "mining": mining}))
"""
LAST = SEND + "print(send('tests', steps=20, step_seconds=0.3))\n"


def test_light_work_runs_beside_long_tests_and_model_jobs_with_no_database_lock_and_jobs_end_at_a_stop(
        tmp_path):
    var = tmp_path / "var"
    sample_repo_write(tmp_path / "sample")
    env = {**{name: value for name, value in os.environ.items() if name not in ("DATABASE_URL", "CELERY_BROKER_URL")},
           "COMMITGYM_VAR_DIR": str(var), "DJANGO_SETTINGS_MODULE": "tests.settings"}  # with the tests' chores

    def manage(*args: str) -> str:
        done = subprocess.run([sys.executable, "manage.py", *args], cwd=settings.BASE_DIR, env=env,
                              capture_output=True, text=True, timeout=300)
        assert done.returncode == 0, done.stderr
        return done.stdout

    def one(query: str, *args):
        with sqlite3.connect(var / "commitgym.sqlite3") as db:
            return db.execute(query, args).fetchone()[0]

    manage("migrate", "--verbosity", "0")
    workers = demo_workers_start(log_dir=var, env=env)
    try:
        for worker in workers:
            wait_until(lambda: "ready." in worker.log.read_text() or worker.process.poll() is not None, timeout=90,
                       what=f"the {worker.name} worker to start")
            assert worker.process.poll() is None, worker.log.read_text()
        ids = json.loads(manage("shell", "--verbosity", "0", "-c",
                                f"SAMPLE = {str(tmp_path / 'sample')!r}\n" + JOBS).splitlines()[-1])
        every = [*ids["long"], *ids["short"], ids["mining"]]

        def jobs() -> dict:
            with sqlite3.connect(var / "commitgym.sqlite3") as db:
                rows = db.execute(f"SELECT id, state, error_message, finished_at FROM jobs_job WHERE id IN "
                                  f"({','.join('?' * len(every))})", every).fetchall()
            return {row[0]: row[1:] for row in rows}

        ended = wait_until(lambda: (found := jobs()) and all(row[0] not in ("queued", "running")
                                                             for row in found.values()) and found,
                           timeout=180, what="every job's end")
        # Stopping the workers while a job runs lets it end first (a warm shutdown).
        last = int(manage("shell", "--verbosity", "0", "-c", LAST).splitlines()[-1])
        wait_until(lambda: one("SELECT state FROM jobs_job WHERE id = ?", last) == "running", timeout=60,
                   what="the last job to start")
    finally:
        demo_workers_stop(workers)
    logs = "".join(worker.log.read_text(errors="replace") for worker in workers)
    assert {job_id: (state, error) for job_id, (state, error, _) in ended.items()} == \
        {job_id: ("succeeded", "") for job_id in every}, logs[-3000:]
    assert "database is locked" not in logs
    # The mining job, sent while a long job ran on each of the other queues, ended before either of them.
    assert ended[ids["mining"]][2] < min(ended[job_id][2] for job_id in ids["long"])
    assert [worker.name for worker in workers] == ["light", "tests", "llm"]
    # Stopped while it ran, the last job ended first: its worker's main process alone was told to stop.
    assert one("SELECT state FROM jobs_job WHERE id = ?", last) == "succeeded"
    assert one("SELECT finished FROM jobkind_chorerun WHERE job_id = ?", last) == 1
