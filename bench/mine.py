"""Mining speed and memory, against `git log -p` measured in the same run.

Goals: the mining job's own time over a whole history at most 1.2x the git
floor (`git log -p`, merges listed without a diff as the walk lists them), the
median of five runs each paired with a floor run just before it, printed with
their spread; re-mining after 10 new commits under 2 s; memory flat as history
grows. Uses a synthetic history (no network); set
BENCH_MINE_REPO=/path/to/a/clone to measure a real repository too.

Every figure is taken with the embedded database (SQLite); the whole-history
ones again with PostgreSQL (a database of the bench's own, `commitgym_minebench`
on DATABASE_URL's server or the local one), in a second process.
"""

import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import tracemalloc
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from _database import bench_database_url, database_recreate  # noqa: E402

WORKDIR = Path(tempfile.mkdtemp(prefix="commitgym-bench-"))
POSTGRESQL = "--postgresql" in sys.argv  # the second process: whole histories on PostgreSQL
os.environ["COMMITGYM_VAR_DIR"] = str(WORKDIR / "var")
os.environ["CELERY_BROKER_URL"] = "filesystem://"  # the jobs run here, as a worker would run them
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "apps.settings")
GIVEN_DATABASE_URL = os.environ.pop("DATABASE_URL", "")  # its server, for the PostgreSQL figures
if POSTGRESQL:
    os.environ["DATABASE_URL"] = bench_database_url("commitgym_minebench", GIVEN_DATABASE_URL)
    database_recreate(os.environ["DATABASE_URL"])

import django  # noqa: E402

django.setup()

from _report import report  # noqa: E402
from _synthetic_history import commits_append, history_write  # noqa: E402
from django.core.management import call_command  # noqa: E402

from apps.jobs.services import job_run  # noqa: E402
from apps.repositories.services import (  # noqa: E402
    mining_job_start,
    repository_delete,
    repository_register,
)


def git_log_floor(repo: Path, revisions: list[str], runs: int = 3) -> float:
    best = float("inf")
    for _ in range(runs):
        started = time.perf_counter()
        subprocess.run(["git", "log", "-p", *revisions], cwd=repo, check=True, stdout=subprocess.DEVNULL)
        best = min(best, time.perf_counter() - started)
    return best


def mine(repo: Path):
    repository = repository_register(location=str(repo), name=f"bench/{repo.name}-{time.monotonic_ns()}")
    job, _ = mining_job_start(repository=repository)
    job_run(job_id=job.job_id)
    job.refresh_from_db()
    assert job.state == "succeeded", job.error_message
    return repository, job


def peak_memory_mb(repo: Path) -> float:
    tracemalloc.start()
    repository, _ = mine(repo)
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    repository_delete(repository=repository)
    return peak / 1e6


def whole_history(repo: Path, label: str, pairs: int = 5) -> None:
    """The median of `pairs` mining runs, each just after a floor run of its own: the machine is
    shared, and a pair sees the same machine."""
    from django.db import connection

    floors, minings = [], []
    for _ in range(pairs):
        floors.append(git_log_floor(repo, ["HEAD"], runs=1))
        repository, job = mine(repo)
        minings.append(job.seconds)
        repository_delete(repository=repository)
    ratios = sorted(mined / floor for mined, floor in zip(minings, floors))
    name = f"mine.whole_history.{label}.{connection.vendor}"
    report(name, statistics.median(minings), "s", statistics.median(floors))
    print(f"{name}.paired: median ratio {statistics.median(ratios):.2f} of {pairs} pairs "
          f"(spread {ratios[0]:.2f} to {ratios[-1]:.2f}: " + ", ".join(f"{r:.2f}" for r in ratios) + ")", flush=True)


def remine_ten(repo: Path) -> None:
    repository, _ = mine(repo)
    old_tip = subprocess.run(["git", "rev-parse", "HEAD"], cwd=repo, capture_output=True, text=True).stdout.strip()
    commits_append(repo, 10, start_index=100_000)
    job, _ = mining_job_start(repository=repository)
    job_run(job_id=job.job_id)
    job.refresh_from_db()
    assert job.new_commits == 10, job.new_commits
    report("mine.remine_after_10_commits", job.seconds, "s", git_log_floor(repo, ["HEAD", f"^{old_tip}"]))
    print(f"mine.remine_after_10_commits.goal: under 2 s: {'met' if job.seconds < 2 else 'NOT met'}", flush=True)
    repository_delete(repository=repository)


def main() -> None:
    call_command("migrate", verbosity=0)
    # The jobs run here as in a worker's pool process, which leaves what it loaded before its first
    # job out of the garbage collector's full passes.
    from worker.tasks import pool_heap_freeze

    pool_heap_freeze()
    real = Path(os.environ["BENCH_MINE_REPO"]) if os.environ.get("BENCH_MINE_REPO") else None
    try:
        small, large, largest = WORKDIR / "history-3000", WORKDIR / "history-6000", WORKDIR / "history-12000"
        history_write(large, 6000)
        whole_history(large, "synthetic_6000")
        if real:
            whole_history(real, real.name)
        if POSTGRESQL:
            return
        history_write(small, 3000)
        history_write(largest, 12000)
        # Read-ahead and the blob cache fill up to their bounds, then memory stays where it is.
        report("mine.peak_python_memory_12000_vs_3000", peak_memory_mb(largest), "MB", peak_memory_mb(small))
        remine_ten(small)
    finally:
        shutil.rmtree(WORKDIR, ignore_errors=True)
        if POSTGRESQL:
            from django.db import connections

            connections.close_all()
            database_recreate(os.environ["DATABASE_URL"], create=False)
    subprocess.run([sys.executable, __file__, "--postgresql"], check=True,
                   env={**os.environ, "DATABASE_URL": GIVEN_DATABASE_URL})


if __name__ == "__main__":
    main()
