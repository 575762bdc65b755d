"""Releasing 10,000 tasks, against writing the same bytes by hand.

Goal (issue: releases): releasing 10,000 accepted tasks takes under 30 s, and at most 3x the time of
reading their rows and writing the same bytes with `json.dumps` and pyarrow alone, in the same run.

The tasks are 10,000 commits of a synthetic history, each validated (one shared environment), with
an issue and a review; their patches live in the repository's mirror, as a mined task's do. So the
floor reads what a release reads, with nothing of ours in between: the rows with three plain
queries, the patches with one `git diff-tree` over the same commits (a second figure leaves the git
read out of the floor), then the release's own rows written with json.dumps and pyarrow.

PostgreSQL: a database of the bench's own, `commitgym_releasebench` on DATABASE_URL's server or the
local one.
"""

import json
import os
import subprocess
import sys
import tempfile
import time
from datetime import datetime
from datetime import timezone as dt_timezone
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from _database import bench_database_url, database_recreate  # noqa: E402

WORKDIR = Path(tempfile.mkdtemp(prefix="commitgym-bench-release-"))
TASKS = int(os.environ.get("BENCH_RELEASE_TASKS", "10000"))
os.environ["COMMITGYM_VAR_DIR"] = str(WORKDIR / "var")
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "apps.settings")
os.environ["DATABASE_URL"] = bench_database_url("commitgym_releasebench", os.environ.get("DATABASE_URL", ""))
database_recreate(os.environ["DATABASE_URL"])

import django  # noqa: E402

django.setup()

import pyarrow  # noqa: E402
import pyarrow.parquet  # noqa: E402
from _report import report  # noqa: E402
from _synthetic_history import history_write  # noqa: E402
from django.core.management import call_command  # noqa: E402
from django.db import connection  # noqa: E402

from apps.datasets.models import Release  # noqa: E402
from apps.datasets.releases import release_start, scope_of_repository  # noqa: E402
from apps.environments.models import Environment  # noqa: E402
from apps.jobs.models import Job  # noqa: E402
from apps.jobs.services import job_run  # noqa: E402
from apps.repositories.models import Commit, Repository  # noqa: E402
from apps.tasks.models import IssueVersion, Review, Task, Validation  # noqa: E402
from apps.tasks.states import task_instance_id  # noqa: E402
from worker.engine.git.repo import mirror_sync  # noqa: E402
from worker.engine.release.records import release_schema  # noqa: E402

LOCK = "".join(f"package-{n}=={n % 7}.{n % 13}.{n % 5}\n" for n in range(40))
ISSUE = ("Calling the helper with an empty list raises IndexError instead of returning None. " * 6).strip()


def seed() -> Repository:
    """TASKS accepted tasks on real commits, with what a release reads of each."""
    from django.contrib.auth.models import User

    history_write(WORKDIR / "project", TASKS + 1)
    repository = Repository.objects.create(name="bench/released", url=str(WORKDIR / "project"))
    mirror_sync(str(WORKDIR / "project"), repository.mirror_dir)
    log = subprocess.run(["git", "log", "--reverse", "--format=%H %P %ct"], cwd=repository.mirror_dir,
                         capture_output=True, text=True, check=True).stdout.split("\n")
    pairs = [line.split() for line in log if len(line.split()) == 3][:TASKS]
    reviewer = User.objects.create(username="reviewer")
    environment = Environment.objects.create(key="b" * 64, python_version="3.11.7", lock=LOCK,
                                             path=str(WORKDIR / "env"), strategy="uv pip install -e .")
    commits = Commit.objects.bulk_create([Commit(
        repository=repository, sha=sha, parent_sha=parent, author_name="Bench", author_email="b@example.com",
        authored_at=datetime.fromtimestamp(int(when), tz=dt_timezone.utc),
        committed_at=datetime.fromtimestamp(int(when), tz=dt_timezone.utc), message="Change")
        for sha, parent, when in pairs], batch_size=2000)
    tasks = Task.objects.bulk_create([Task(
        instance_id=task_instance_id(owner="bench", name="released", sha=commit.sha), repository=repository,
        commit=commit, state="accepted", verdict="valid", fail_to_pass_count=2, underspecified=0, false_negative=1,
        review_count=1) for commit in commits], batch_size=2000)
    jobs = Job.objects.bulk_create([Job(kind="validation", subject_type="tasks.task", subject_id=task.id,
                                        state="succeeded") for task in tasks], batch_size=2000)
    Validation.objects.bulk_create([Validation(
        job=job, task=task, verdict="valid", environment=environment, environment_reused=n > 0,
        fail_to_pass=[f"tests/test_mod{n % 60:02d}.py::test_case_{n}_{k}" for k in range(2)],
        pass_to_pass=[f"tests/test_mod{n % 60:02d}.py::test_other_{k}" for k in range(10)])
        for n, (job, task) in enumerate(zip(jobs, tasks))], batch_size=2000)
    IssueVersion.objects.bulk_create([IssueVersion(task=task, number=1, text=f"{ISSUE} ({task.instance_id})",
                                                   author="model") for task in tasks], batch_size=2000)
    Review.objects.bulk_create([Review(task=task, reviewer=reviewer, decision="accept", underspecified=0,
                                       false_negative=1, difficulty="15 min - 1 hour") for task in tasks],
                               batch_size=2000)
    with connection.cursor() as cursor:
        cursor.execute("ANALYZE")
    return repository


def release_timed(repository: Repository) -> tuple[float, Release]:
    # Converting Python values, pyarrow imports pandas (about 1.5 s here), once in a worker's life.
    pyarrow.array(["warm"])
    release = release_start(name="bench", scope=scope_of_repository(repository), out=WORKDIR / "releases")
    started = time.perf_counter()
    if os.environ.get("BENCH_PROFILE"):
        import cProfile
        cProfile.runctx("job_run(job_id=release.job_id)", globals(), locals(), os.environ["BENCH_PROFILE"])
    else:
        job_run(job_id=release.job_id)
    seconds = time.perf_counter() - started
    release.refresh_from_db()
    assert release.state == "succeeded", release.job.error_message
    assert release.task_count == TASKS and release.job.progress_done == TASKS, release.task_count
    return seconds, release


def floor_read(repository: Repository) -> tuple[float, float]:
    """(seconds to read the rows from the database, seconds to read the patches from git)."""
    started = time.perf_counter()
    tasks = list(Task.objects.filter(repository=repository, state="accepted").order_by("instance_id").values_list(
        "id", "instance_id", "commit__sha", "commit__parent_sha", "commit__committed_at", "mutation_score"))
    ids = [row[0] for row in tasks]
    validations = list(Validation.objects.filter(task_id__in=ids).values_list(
        "task_id", "fail_to_pass", "pass_to_pass", "environment__key", "environment__lock"))
    issues = list(IssueVersion.objects.filter(task_id__in=ids).values_list("task_id", "text"))
    assert len(tasks) == len(validations) == len(issues) == TASKS
    database = time.perf_counter() - started
    started = time.perf_counter()
    lines = "".join(f"{row[2]} {row[3]}\n" for row in tasks)
    patches = subprocess.run(["git", "diff-tree", "--stdin", "-p", "--binary", "--no-renames"],
                             cwd=repository.mirror_dir, input=lines.encode(), capture_output=True, check=True).stdout
    assert patches
    return database, time.perf_counter() - started


def floor_write(rows: list[dict]) -> float:
    """Seconds to write the same rows with json.dumps and pyarrow alone."""
    out = WORKDIR / "floor"
    out.mkdir()
    started = time.perf_counter()
    with open(out / "instances.jsonl", "w") as file:
        for row in rows:
            file.write(json.dumps(row) + "\n")
    pyarrow.parquet.write_table(pyarrow.Table.from_pylist(rows, schema=release_schema()), out / "instances.parquet",
                                compression="zstd")
    return time.perf_counter() - started


def main() -> None:
    call_command("migrate", verbosity=0)
    started = time.perf_counter()
    repository = seed()
    print(f"# seeded {TASKS:,} tasks on real commits in {time.perf_counter() - started:.1f} s", flush=True)
    seconds, release = release_timed(repository)
    rows = [json.loads(line) for line in open(Path(release.folder) / "instances.jsonl")]
    assert len(rows) == TASKS and all(row["patch"] for row in rows)
    database, git = floor_read(repository)
    write = floor_write(rows)
    sizes = ", ".join(f"{file['name']} {file['bytes'] / 1e6:.1f} MB" for file in release.files)
    print(f"# release {release}: {sizes}; floor: database {database:.2f} s, git {git:.2f} s, write {write:.2f} s",
          flush=True)
    report(f"release of {TASKS:,} tasks (target under 30 s)", seconds, "s", 30.0)
    report(f"release of {TASKS:,} tasks against reading the rows and patches and writing them by hand "
           "(target ratio 3)", seconds, "s", database + git + write)
    report(f"release of {TASKS:,} tasks against reading the rows alone and writing them by hand", seconds, "s",
           database + write)


if __name__ == "__main__":
    main()
