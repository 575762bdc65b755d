"""Mining speed and memory, against `git log -p --no-merges` measured in the same run.

Goals (issue: Commit Mine): the mining job's own time over a whole history at
most 1.5x the git floor; re-mining after 10 new commits under 2 s; memory flat
as history grows. Uses a synthetic history (no network); set
BENCH_MINE_REPO=/path/to/a/clone to measure a real repository too.
"""

import os
import shutil
import subprocess
import sys
import tempfile
import time
import tracemalloc
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

WORKDIR = Path(tempfile.mkdtemp(prefix="commitgym-bench-"))
os.environ.setdefault("COMMITGYM_VAR_DIR", str(WORKDIR / "var"))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "apps.settings")

import django  # noqa: E402

django.setup()

from django.core.management import call_command  # noqa: E402

from apps.repositories.services import (  # noqa: E402
    mining_job_run,
    mining_job_start,
    repository_delete,
    repository_register,
)
from _synthetic_history import commits_append, history_write  # noqa: E402


def report(name: str, value: float, unit: str, baseline: float, baseline_unit: str = "") -> None:
    ratio = value / baseline if baseline else float("inf")
    print(f"{name}: {value:.3f} {unit} (baseline: {baseline:.3f} {baseline_unit or unit}, ratio: {ratio:.2f})",
          flush=True)


def git_log_floor(repo: Path, revisions: list[str], runs: int = 3) -> float:
    best = float("inf")
    for _ in range(runs):
        started = time.perf_counter()
        subprocess.run(["git", "log", "-p", "--no-merges", *revisions], cwd=repo, check=True,
                       stdout=subprocess.DEVNULL)
        best = min(best, time.perf_counter() - started)
    return best


def mine(repo: Path):
    repository = repository_register(location=str(repo), name=f"bench/{repo.name}-{time.monotonic_ns()}")
    job, _ = mining_job_start(repository=repository)
    mining_job_run(job_id=job.id)
    job.refresh_from_db()
    assert job.state == "succeeded", job.error_message
    return repository, job


def best_mining_seconds(repo: Path, runs: int = 3) -> float:
    best = float("inf")
    for _ in range(runs):
        repository, job = mine(repo)
        best = min(best, job.seconds)
        repository_delete(repository=repository)
    return best


def peak_memory_mb(repo: Path) -> float:
    tracemalloc.start()
    repository, _ = mine(repo)
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    repository_delete(repository=repository)
    return peak / 1e6


def whole_history(repo: Path, label: str) -> None:
    floor = git_log_floor(repo, ["HEAD"])
    report(f"mine.whole_history.{label}", best_mining_seconds(repo), "s", floor)


def remine_ten(repo: Path) -> None:
    repository, _ = mine(repo)
    old_tip = subprocess.run(["git", "rev-parse", "HEAD"], cwd=repo, capture_output=True, text=True).stdout.strip()
    commits_append(repo, 10, start_index=100_000)
    job, _ = mining_job_start(repository=repository)
    mining_job_run(job_id=job.id)
    job.refresh_from_db()
    assert job.new_commits == 10, job.new_commits
    report("mine.remine_after_10_commits", job.seconds, "s", git_log_floor(repo, ["HEAD", f"^{old_tip}"]))
    print(f"mine.remine_after_10_commits.goal: under 2 s: {'met' if job.seconds < 2 else 'NOT met'}", flush=True)
    repository_delete(repository=repository)


def main() -> None:
    call_command("migrate", verbosity=0)
    try:
        small, large, largest = WORKDIR / "history-3000", WORKDIR / "history-6000", WORKDIR / "history-12000"
        history_write(small, 3000)
        history_write(large, 6000)
        history_write(largest, 12000)
        whole_history(large, "synthetic_6000")
        # Read-ahead and the blob cache fill up to their bounds, then memory stays where it is.
        report("mine.peak_python_memory_12000_vs_3000", peak_memory_mb(largest), "MB", peak_memory_mb(small))
        remine_ten(small)
        if os.environ.get("BENCH_MINE_REPO"):
            real = Path(os.environ["BENCH_MINE_REPO"])
            whole_history(real, real.name)
    finally:
        shutil.rmtree(WORKDIR, ignore_errors=True)


if __name__ == "__main__":
    main()
