"""`make demo`'s path: SQLite and a worker on the filesystem broker, nothing else started."""

import os
import sqlite3
import subprocess
import sys

from django.conf import settings

from worker.demo.sample_repo import sample_repo_write


def test_the_demo_mines_the_sample_repository_with_embedded_defaults(tmp_path):
    var = tmp_path / "var"
    commits = sample_repo_write(var / "sample-repo")
    env = {name: value for name, value in os.environ.items() if name not in ("DATABASE_URL", "CELERY_BROKER_URL")}
    env["COMMITGYM_VAR_DIR"] = str(var)
    for command in (["migrate", "--verbosity", "0"], ["demo", "--no-serve"]):
        done = subprocess.run([sys.executable, "manage.py", *command], cwd=settings.BASE_DIR, env=env,
                              capture_output=True, text=True, timeout=300)
        assert done.returncode == 0, done.stderr + (var / "demo-worker.log").read_text(errors="replace")
    with sqlite3.connect(var / "commitgym.sqlite3") as db:
        stored = dict(db.execute("SELECT sha, drop_reason FROM repositories_commit"))
        tasks = db.execute("SELECT t.state, COUNT(c.id) FROM tasks_task t LEFT JOIN tasks_taskstatechange c "
                           "ON c.task_id = t.id GROUP BY t.id").fetchall()
    assert stored == {commit.sha: commit.expected_drop_reason or "" for commit in commits}
    kept = [commit for commit in commits if commit.expected_drop_reason is None]
    assert len(tasks) == len(kept) and all(row == ("mined", 1) for row in tasks)


def test_mine_on_a_fresh_embedded_install_starts_a_worker_for_as_long_as_it_waits(tmp_path):
    """No worker runs and none was started by hand: `mine --json` starts one, prints its line, exits 0."""
    import json

    var = tmp_path / "var"
    commits = sample_repo_write(tmp_path / "sample")
    env = {name: value for name, value in os.environ.items() if name not in ("DATABASE_URL", "CELERY_BROKER_URL")}
    env["COMMITGYM_VAR_DIR"] = str(var)
    subprocess.run([sys.executable, "manage.py", "migrate", "--verbosity", "0"], cwd=settings.BASE_DIR, env=env,
                   check=True, timeout=300)
    done = subprocess.run([sys.executable, "manage.py", "mine", str(tmp_path / "sample"), "--json"],
                          cwd=settings.BASE_DIR, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    line = json.loads(done.stdout)
    assert (line["commits_seen"], line["new_commits"]) == (len(commits), len(commits))
    assert "starting one on 'mining'" in done.stderr
    assert "No hostname was supplied" not in done.stderr  # kombu's, about the filesystem broker: not the user's
    # The worker it started ends with it.
    left = subprocess.run(["pgrep", "-f", "worker -Q mining --concurrency 1 --without-gossip --without-mingle"],
                          capture_output=True, text=True)
    assert left.stdout == ""


def _embedded_env(var, **extra) -> dict:
    """The environment of a process on the embedded default (SQLite, the filesystem broker) in `var`."""
    env = {name: value for name, value in os.environ.items() if name not in ("DATABASE_URL", "CELERY_BROKER_URL")}
    return {**env, "COMMITGYM_VAR_DIR": str(var), **extra}


def _manage(env: dict, *args: str, timeout: float = 300) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "manage.py", *args], cwd=settings.BASE_DIR, env=env, capture_output=True,
                          text=True, timeout=timeout)


def _shell(env: dict, code: str) -> str:
    done = _manage(env, "shell", "--verbosity", "0", "-c", code)
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_a_command_waiting_on_a_job_whose_message_was_lost_has_it_sent_again_and_finished(tmp_path):
    """A mining job whose message is gone (a worker fetched it and died, or read it half written):
    `mine` waiting on it sweeps while it waits, so the job is sent again after
    COMMITGYM_JOB_REQUEUE_SECONDS and its worker finishes it, not at the end of the wait's time limit."""
    import json

    var = tmp_path / "var"
    sample_repo_write(tmp_path / "sample")
    env = _embedded_env(var, COMMITGYM_JOB_REQUEUE_SECONDS="2")
    assert _manage(env, "migrate", "--verbosity", "0").returncode == 0
    job_id = int(_shell(env, (
        "from apps.repositories.services import mining_job_start, repository_register\n"
        f"repository = repository_register(location={str(tmp_path / 'sample')!r})\n"
        "print(mining_job_start(repository=repository)[0].job_id)")))
    (message,) = (var / "queue").glob("*.mining.msg")
    message.unlink()  # lost
    done = _manage(env, "mine", str(tmp_path / "sample"), "--json", "--timeout", "60")
    assert done.returncode == 0, done.stderr + (var / "command-worker.log").read_text(errors="replace")
    assert "1 job(s) whose message was lost" in done.stderr
    assert json.loads(done.stdout)["new_commits"] > 0
    with sqlite3.connect(var / "commitgym.sqlite3") as db:
        state, dispatches, resent_because = db.execute(
            "SELECT state, dispatches, resent_because FROM jobs_job WHERE id = ?", (job_id,)).fetchone()
    # Sent again at least once; on a busy machine the worker the command starts may take longer than the
    # 2 s requeue to take it, and the sweep sends it once more (the job still runs once).
    assert (state, resent_because) == ("succeeded", "message_lost") and dispatches >= 2


def test_a_command_starts_no_second_worker_beside_a_busy_one_and_one_beside_a_dead_one(tmp_path):
    """A worker on `mining` is busy with a long job: `mine` waits for it rather than start a second
    worker to compete for the cores. Killed outright, the worker leaves its row in the workers'
    registry: the next `mine` sees its process gone and starts a worker of its own."""
    import signal

    from tests.conftest import wait_until

    var = tmp_path / "var"
    sample_repo_write(tmp_path / "sample")
    env = _embedded_env(var, DJANGO_SETTINGS_MODULE="tests.settings")  # with the tests' kind of job, chores
    assert _manage(env, "migrate", "--verbosity", "0").returncode == 0
    log = tmp_path / "busy.log"
    with open(log, "w") as output:
        busy = subprocess.Popen(
            [sys.executable, "-m", "celery", "-A", "worker.celery_app", "worker", "-Q", "chores,mining", "-n", "busy@%h",
             "--concurrency", "1", "--without-gossip", "--without-mingle", "-l", "INFO"],
            cwd=settings.BASE_DIR, env=env, stdout=output, stderr=subprocess.STDOUT, start_new_session=True)
    database = var / "commitgym.sqlite3"

    def one(query: str, *args):
        with sqlite3.connect(database) as db:
            return db.execute(query, args).fetchone()

    try:
        wait_until(lambda: one("SELECT COUNT(*) FROM jobs_worker WHERE name LIKE 'busy@%'")[0] == 1 or busy.poll(),
                   timeout=60, what="the worker to say it runs")
        assert busy.poll() is None, log.read_text()
        chore = int(_shell(env, (
            "from tests.jobkind.models import Chore\nfrom tests.jobkind.work import chore_start\n"
            "print(chore_start(chore=Chore.objects.create(name='long', steps=15, step_seconds=1)).id)")))
        wait_until(lambda: one("SELECT state FROM jobs_job WHERE id = ?", chore)[0] == "running", timeout=60,
                   what="the long job to start")
        done = _manage(env, "mine", str(tmp_path / "sample"), "--json", "--timeout", "120")
        assert done.returncode == 0, done.stderr
        assert "starting one" not in done.stderr and "waits for the worker already running on 'mining'" in done.stderr
        assert one("SELECT state FROM jobs_job WHERE id = ?", chore)[0] == "succeeded"  # the worker's first job
        assert one("SELECT worker FROM jobs_job WHERE kind = 'mining'")[0].startswith("busy@")

        os.killpg(busy.pid, signal.SIGKILL)
        busy.wait(timeout=30)
        assert one("SELECT COUNT(*) FROM jobs_worker WHERE name LIKE 'busy@%'")[0] == 1  # nothing removed it
        again = _manage(env, "mine", str(tmp_path / "sample"), "--json", "--timeout", "120")
        assert again.returncode == 0, again.stderr
        assert "none runs on 'mining': starting one on 'mining'" in again.stderr
        assert one("SELECT COUNT(*) FROM jobs_worker WHERE name LIKE 'command%'")[0] == 0  # it ended cleanly
    finally:
        if busy.poll() is None:
            os.killpg(busy.pid, signal.SIGKILL)
            busy.wait(timeout=30)
