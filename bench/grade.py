"""Candidates and their ground truth: how fast they are imported, and graded.

Goals (issue: candidates and grading):
- Importing a predictions file of 10,000 rows takes under 10 s, and at most 3x the time of
  `json.loads` over the same file plus one bulk insert of its rows. The tasks come from an instance
  file of 10,000 instances, imported first (its time is printed too, against the same kind of floor).
- Grading 26 candidates of one sample task, its environment warm, through a real worker with a
  concurrency of 2 (the local sandbox): wall time from the first job queued to the last one finished,
  at most 1.3x the sum of the pytest runs' own times (each run's time in its sandbox) / 2.

PostgreSQL: a database of the bench's own, `commitgym_gradebench` on DATABASE_URL's server or the
local one; Redis: CELERY_BROKER_URL, or the local one's database 13.
"""

import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from _database import bench_database_url, database_recreate  # noqa: E402

WORKDIR = Path(tempfile.mkdtemp(prefix="commitgym-bench-grade-"))
WORKDIR.chmod(0o755)  # the sandbox user reaches the working copies below it
ROWS = int(os.environ.get("BENCH_GRADE_ROWS", "10000"))
os.environ["COMMITGYM_VAR_DIR"] = str(WORKDIR / "var")
os.environ.setdefault("CELERY_BROKER_URL", "redis://127.0.0.1:6379/13")
os.environ["COMMITGYM_SANDBOX"] = "local"
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "apps.settings")
os.environ["DATABASE_URL"] = bench_database_url("commitgym_gradebench", os.environ.get("DATABASE_URL", ""))
database_recreate(os.environ["DATABASE_URL"])

import django  # noqa: E402

django.setup()

from _report import report  # noqa: E402
from django.core.management import call_command  # noqa: E402
from django.db import transaction  # noqa: E402

from apps.bulk_insert import rows_insert  # noqa: E402
from apps.datasets.candidates.imports import instances_import, predictions_import  # noqa: E402
from apps.datasets.grading.grades import candidate_grade_start, task_controls_ensure  # noqa: E402
from apps.datasets.models import Candidate, Grade, Run  # noqa: E402
from apps.jobs.models import Job  # noqa: E402
from apps.jobs.services import job_run  # noqa: E402
from apps.repositories.services import mining_job_start, repository_register  # noqa: E402
from apps.tasks.models import Task  # noqa: E402
from apps.tasks.services import task_validation_start  # noqa: E402
from worker.demo.sample_repo import sample_repo_write  # noqa: E402

CANDIDATES = 26
CONCURRENCY = 2


def patch(i: int, size: int = 1500) -> str:
    body = "".join(f"+    value_{i}_{line} = compute({line})\n" for line in range(size // 40))
    return f"diff --git a/pkg/mod_{i % 97}.py b/pkg/mod_{i % 97}.py\n--- a/pkg/mod_{i % 97}.py\n" \
           f"+++ b/pkg/mod_{i % 97}.py\n@@ -1,1 +1,{size // 40 + 1} @@\n def f():\n{body}"


def instance(i: int) -> dict:
    return {"instance_id": f"bench__lib-{i}", "repo": f"bench/lib{i % 12}", "base_commit": f"{i:040x}",
            "patch": patch(i), "test_patch": patch(i, 600).replace("pkg/", "tests/"),
            "problem_statement": f"Calling f() with {i} gives the wrong value.\n" * 5,
            "FAIL_TO_PASS": json.dumps([f"tests/test_mod.py::test_{i}"]),
            "PASS_TO_PASS": json.dumps([f"tests/test_mod.py::test_other_{n}" for n in range(20)]),
            "created_at": "2024-05-01T00:00:00Z", "version": "1.0"}


def prediction(i: int) -> dict:
    return {"instance_id": f"bench__lib-{i}", "model_name_or_path": "bench-agent", "model_patch": patch(i + 1)}


def file_write(path: Path, rows) -> Path:
    with path.open("w") as out:
        for row in rows:
            out.write(json.dumps(row) + "\n")
    return path


def floor_seconds(path: Path, make_row, model) -> float:
    """json.loads over every line, then one bulk insert of the rows it gives; the rows are taken away
    again in the same transaction."""
    started = time.perf_counter()
    with transaction.atomic():
        rows = [make_row(json.loads(line)) for line in path.read_text().splitlines()]
        rows_insert(model, rows)
        seconds = time.perf_counter() - started
        transaction.set_rollback(True)
    return seconds


def new_file(path: str, text: str) -> str:
    return (f"diff --git a/{path} b/{path}\nnew file mode 100644\n--- /dev/null\n+++ b/{path}\n@@ -0,0 +1 @@\n"
            f"+{text}\n")


def grading() -> None:
    commits = sample_repo_write(WORKDIR / "textkit")
    repository = repository_register(location=str(WORKDIR / "textkit"))
    mining, _ = mining_job_start(repository=repository)
    job_run(job_id=mining.job_id)
    fix = [c for c in commits if c.kind == "fix_with_test"][0]
    task = Task.objects.get(commit__sha=fix.sha)
    validation = task_validation_start(task=task, backend="local")
    job_run(job_id=validation.job_id)  # builds the environment: grading finds it warm
    validation.refresh_from_db()
    assert validation.verdict == "valid", (validation.verdict, validation.reason, validation.job.error_message)
    assert not task_controls_ensure(task)
    gold = Candidate.objects.get(task=task, source="gold").patch
    for i in range(CANDIDATES - 2):  # half right, half wrong, each in a run of its own
        patch = new_file(f"notes_{i}.py", f"NOTE = {i}") + (gold if i % 2 else "")
        Candidate.objects.create(task=task, source="import", run=Run.objects.create(name=f"grading-{i}"),
                                 kind="bench", patch=patch)
    worker = subprocess.Popen(
        [sys.executable, "-m", "celery", "-A", "worker.celery_app", "worker", "-Q", "tests", "--concurrency",
         str(CONCURRENCY), "--without-gossip", "--without-mingle", "--loglevel", "WARNING"],
        env={**os.environ, "COMMITGYM_MIRROR_DIR": str(repository.mirror_dir.parent)},
        stdout=subprocess.DEVNULL, stderr=open(WORKDIR / "worker.log", "wb"), start_new_session=True)
    try:
        time.sleep(8)  # the worker and its pool up before the clock starts
        started = time.time()
        grades = [candidate_grade_start(candidate=c, backend="local") for c in Candidate.objects.filter(task=task)]
        ids = [grade.id for grade in grades]
        # Looked at seldom, so the look takes no time from the two cores the worker grades on: the wall
        # ends when the worker says the last job ended, not when the look sees it.
        while Grade.objects.filter(id__in=ids, job__state__in=Job.ACTIVE_STATES).exists():
            time.sleep(0.5)
        wall = max(grade.job.finished_at for grade in Grade.objects.filter(id__in=ids)).timestamp() - started
    finally:
        worker.terminate()
        worker.wait(timeout=60)
    done = list(Grade.objects.filter(id__in=ids))
    failed = [grade.job.error_message for grade in done if grade.state != Job.State.SUCCEEDED]
    assert not failed and len(done) == CANDIDATES, failed
    pytest_seconds = sum(run["seconds"] for grade in done for run in grade.runs)
    report(f"grade {CANDIDATES} candidates, concurrency {CONCURRENCY}", wall, "s", pytest_seconds / CONCURRENCY,
           f"s (the pytest runs' own times / {CONCURRENCY})")


def main() -> None:
    call_command("migrate", verbosity=0)
    instances = file_write(WORKDIR / "instances.jsonl", (instance(i) for i in range(ROWS)))
    started = time.perf_counter()
    imported = instances_import(path=instances)
    instance_seconds = time.perf_counter() - started
    assert imported.counts["created"] == ROWS, imported.counts
    task_ids = dict(Task.objects.values_list("instance_id", "id"))
    run = Run.objects.create(name="floor")
    instance_floor = floor_seconds(instances, lambda row: dict(
        task_id=task_ids[row["instance_id"]], source="gold", run_id=run.id, kind="floor", patch=row["patch"]),
        Candidate)
    report(f"import {ROWS} instances", instance_seconds, "s", instance_floor)

    predictions = file_write(WORKDIR / "predictions.jsonl", (prediction(i) for i in range(ROWS)))
    prediction_floor = min(floor_seconds(predictions, lambda row: dict(
        task_id=task_ids[row["instance_id"]], source="import", run_id=run.id, kind="floor",
        patch=row["model_patch"]), Candidate) for _ in range(3))
    best = float("inf")
    for attempt in range(3):
        started = time.perf_counter()
        _, runs = predictions_import(path=predictions, run_name=f"bench-{attempt}")
        best = min(best, time.perf_counter() - started)
        assert runs[0].candidates == ROWS, runs[0].printed()
    report(f"import {ROWS} predictions", best, "s", prediction_floor, "s (json.loads + one bulk insert)")
    grading()


if __name__ == "__main__":
    try:
        main()
    finally:
        django.db.connections.close_all()
        database_recreate(os.environ["DATABASE_URL"], create=False)
