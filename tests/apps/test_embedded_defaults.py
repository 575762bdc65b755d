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
