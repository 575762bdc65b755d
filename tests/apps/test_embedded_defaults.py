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
