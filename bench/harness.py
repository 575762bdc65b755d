"""A release's images, and commitgym as the harness for predictions.

Goals (issue: tasks leave with their environments):
- `release_images` on a release of the sample repository's valid tasks, cold: each environment
  image's build at most 1.5x the time uv takes to install the same lock into an empty virtual
  environment with an empty cache, in a container of the same base, measured in the same run, plus
  5 s per image (printed against that budget); each task layer under 2 s (printed against unpacking
  the same source archive in a container of the same base).
- `evaluate` on 26 predictions of one task, its environment built: within 1.3x of `grade` on the
  same candidates (the harness adds no cost of its own), both through a real worker, concurrency 2.

PostgreSQL: a database of the bench's own, `commitgym_harnessbench`; Redis: CELERY_BROKER_URL, or the
local one's database 13; the local Docker engine (make test starts one).
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

WORKDIR = Path(tempfile.mkdtemp(prefix="commitgym-bench-harness-"))
WORKDIR.chmod(0o755)  # the sandbox user reaches the working copies below it
os.environ["COMMITGYM_VAR_DIR"] = str(WORKDIR / "var")
os.environ["COMMITGYM_RELEASE_DIR"] = str(WORKDIR / "releases")
os.environ.setdefault("CELERY_BROKER_URL", "redis://127.0.0.1:6379/13")
os.environ["COMMITGYM_SANDBOX"] = "local"
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "apps.settings")
os.environ["DATABASE_URL"] = bench_database_url("commitgym_harnessbench", os.environ.get("DATABASE_URL", ""))
database_recreate(os.environ["DATABASE_URL"])

import django  # noqa: E402

django.setup()

from _report import report  # noqa: E402
from django.core.management import call_command  # noqa: E402

from apps.datasets.release_images import images_planned, release_images_start  # noqa: E402
from apps.datasets.releases import release_start, scope_of_repository  # noqa: E402
from apps.jobs.services import job_run  # noqa: E402
from apps.repositories.services import mining_job_start, repository_register  # noqa: E402
from apps.tasks.models import IssueVersion, Task  # noqa: E402
from apps.tasks.selectors import task_patches  # noqa: E402
from apps.tasks.services import task_validation_start  # noqa: E402
from worker.demo.sample_repo import sample_repo_write  # noqa: E402
from worker.engine.env.rebuild import EnvironmentToRelease, cutoff_args  # noqa: E402
from worker.engine.sandbox.docker import HOST_CA_BUNDLE  # noqa: E402

PREDICTIONS = 26
CONCURRENCY = 2
UV = Path(sys.executable).parent / "uv"


def validated_repository():
    commits = sample_repo_write(WORKDIR / "textkit")
    repository = repository_register(location=str(WORKDIR / "textkit"))
    mining, _ = mining_job_start(repository=repository)
    job_run(job_id=mining.job_id)
    for commit in commits:
        if commit.kind == "fix_with_test" and commit.expected_drop_reason is None:
            validation = task_validation_start(task=Task.objects.get(commit__sha=commit.sha), backend="local")
            job_run(job_id=validation.job_id)
    valid = Task.objects.filter(repository=repository, verdict="valid")
    for task in valid:
        IssueVersion.objects.create(task=task, number=1, author="person", text=f"Broken: {task.instance_id}")
    valid.update(state="accepted")
    return repository


def released(repository):
    release = release_start(name="harnessbench", scope=scope_of_repository(repository))
    job_run(job_id=release.job_id)
    release.refresh_from_db()
    assert release.version, release.job.error_message
    return release


def images(release) -> None:
    environments = release.manifest["environments"]
    task = environments[0]["tasks"][0]
    planned = images_planned(release, [task])
    # Cold: no layer of an earlier run's images to reuse.
    subprocess.run(["docker", "rmi", "-f", *(image.tag for _, image in planned)], capture_output=True)
    subprocess.run(["docker", "image", "prune", "-f"], capture_output=True)
    build = release_images_start(release=release, tasks=[task])
    job_run(job_id=build.job_id)
    build.refresh_from_db()
    assert len(build.images) == len(planned), build.job.error_message
    folder = Path(release.folder)
    for (kind, image), made in zip(planned, build.images):
        if kind == "environment":
            entry = next(entry for entry in environments if entry["key"] == image.key)
            install = uv_install_seconds(image.base, folder / entry["lock"], entry)
            report(f"release_images environment {image.key}", made["seconds"], "s", 1.5 * install + 5,
                   f"s: 1.5 x {install:.3f} s, uv installing the same lock into an empty venv with an empty cache in "
                   "a container of the same base, + 5 s; goal ratio <= 1")
        else:
            unpack = unpack_seconds(image.base, folder, image.archives[-1])
            report(f"release_images task layer {image.task}", made["seconds"], "s", unpack,
                   "s (unpacking its source archive in a container of the same base; goal: under 2 s)")
    subprocess.run(["docker", "rmi", "-f", *(made["tag"] for made in build.images)], capture_output=True)


def uv_install_seconds(base: str, lock: Path, entry: dict) -> float:
    environment = EnvironmentToRelease(key=entry["key"], python_version=entry["python_version"], lock="",
                                       strategy="", setup_archive="", tasks=(), tool_version="",
                                       as_of=entry["as_of"] or "", lifted=entry["lifted"])
    python = "python" + ".".join(entry["python_version"].split(".")[:2])
    script = (f"/opt/uv venv -q --python {python} /tmp/env && /opt/uv pip install -q --python /tmp/env/bin/python "
              f"--no-deps {' '.join(cutoff_args(environment))} -r /lock")
    return _timed(["docker", "run", "--rm", "--network", "host", "-v", f"{UV}:/opt/uv:ro", "-v", f"{lock}:/lock:ro",
                   "-v", f"{HOST_CA_BUNDLE}:/ca.crt:ro", "-e", "SSL_CERT_FILE=/ca.crt", "-e",
                   "UV_CACHE_DIR=/tmp/uv-cache", base, "sh", "-c", script])


def unpack_seconds(base: str, folder: Path, archive: str) -> float:
    return _timed(["docker", "run", "--rm", "--network", "none", "-v", f"{folder / archive}:/a.tar.gz:ro", base, "sh",
                   "-c", "mkdir -p /workspace/repo && tar -xzf /a.tar.gz -C /workspace/repo --strip-components=1"])


def _timed(argv: list[str]) -> float:
    started = time.perf_counter()
    subprocess.run(argv, check=True, capture_output=True)
    return time.perf_counter() - started


def harness(repository) -> None:
    """The same 26 patches of one task: graded as runs by `grade`, then evaluated as predictions."""
    task = Task.objects.filter(repository=repository, verdict="valid").order_by("instance_id").first()
    gold = task_patches(task=task).source_patch
    note = lambda i: (f"diff --git a/notes_{i}.py b/notes_{i}.py\nnew file mode 100644\n--- /dev/null\n"  # noqa: E731
                      f"+++ b/notes_{i}.py\n@@ -0,0 +1 @@\n+NOTE = {i}\n")
    patches = [note(i) + (gold if i % 2 else "") for i in range(PREDICTIONS)]
    for label in ("grade", "evaluate"):
        rows = [{"instance_id": task.instance_id, "model_name_or_path": f"{label}-{i}", "model_patch": patch}
                for i, patch in enumerate(patches)]
        (WORKDIR / f"{label}.jsonl").write_text("".join(json.dumps(row) + "\n" for row in rows))
    worker = subprocess.Popen(
        [sys.executable, "-m", "celery", "-A", "worker.celery_app", "worker", "-Q", "tests", "--concurrency",
         str(CONCURRENCY), "--without-gossip", "--without-mingle", "--loglevel", "WARNING"],
        env={**os.environ, "COMMITGYM_MIRROR_DIR": str(repository.mirror_dir.parent)},
        stdout=subprocess.DEVNULL, stderr=open(WORKDIR / "worker.log", "wb"), start_new_session=True)
    try:
        time.sleep(8)  # the worker and its pool up before either clock starts
        graded = _timed_manage("import_predictions", str(WORKDIR / "grade.jsonl")) + _timed_manage(
            "grade", task.instance_id)
        evaluated = _timed_manage("evaluate", repository.name, str(WORKDIR / "evaluate.jsonl"))
    finally:
        worker.terminate()
        worker.wait(timeout=60)
    report(f"evaluate {PREDICTIONS} predictions of one task", evaluated, "s", graded,
           f"s (import_predictions then grade, the same {PREDICTIONS} patches; goal ratio <= 1.3)")


def _timed_manage(*args: str) -> float:
    started = time.perf_counter()
    done = subprocess.run([sys.executable, str(Path(__file__).resolve().parent.parent / "manage.py"), *args],
                          cwd=WORKDIR, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    return time.perf_counter() - started


def main() -> None:
    call_command("migrate", verbosity=0)
    repository = validated_repository()
    images(released(repository))
    harness(repository)


if __name__ == "__main__":
    try:
        main()
    finally:
        django.db.connections.close_all()
        database_recreate(os.environ["DATABASE_URL"], create=False)
