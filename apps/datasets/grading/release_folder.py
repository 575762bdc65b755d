"""A release folder evaluated on a database that never validated its tasks: its instances imported,
each task's base tree taken from the release's source archive, and each task's environment made again
from the release's own files by a job of the tests queue: its lock, as of its dates, the project
installed on its setup tree, every step in the sandbox (worker/engine/env/builder.py `rebuilt`). On the
docker backend it is then sealed into an image of its own that the runs use as it is. A folder from
elsewhere is never given to `docker build`: its steps would run outside the sandbox, on the build
network. Tasks this database holds already (it made the release) are graded where they are."""

import json
import shutil
import tempfile
from pathlib import Path

from django.conf import settings
from django.db import transaction

from apps.environments.models import Environment
from apps.environments.selectors import environment_present
from apps.jobs.models import Job
from apps.jobs.on_demand import WorkerOnDemand
from apps.jobs.services import JobFailed, job_start
from apps.tasks.models import ImportedInstance, Task, Validation
from apps.tasks.services import environment_builder
from worker.engine.env.builder import EnvironmentFailed
from worker.engine.env.images import ImageBuildFailed, environment_image_make
from worker.engine.env.rebuild import ENVIRONMENTS, EnvironmentToRelease, archive_name_plain, key_plain, unreleasable
from worker.engine.release.writers import MANIFEST, files_check
from worker.engine.sandbox.docker import engine_errors

from ..candidates.imports import ImportUnreadable, instances_import
from ..models import Dataset
from ..selectors import INSTANCES, dataset_tasks
from .grades import grading_validation

RELEASE_VALIDATION = "release_validation"
INSTANCES_JSONL = "instances.jsonl"


class FolderRefused(ValueError):
    """The folder cannot be evaluated; the message says why."""


def release_folder_tasks(folder: Path, *, backend: str, stderr, timeout: float) -> tuple[str, object]:
    """(the release's label, its tasks here), each with an environment to grade in, made where missing."""
    manifest = _manifest(folder)
    label = f"{manifest.get('release')}@{manifest.get('version')}"
    ids = [json.loads(line)["instance_id"] for line in (folder / INSTANCES_JSONL).read_text().splitlines() if line]
    here = Task.objects.filter(instance_id__in=ids)
    if here.count() == len(ids) and not here.filter(source=Task.Source.IMPORTED).exists():
        return label, here  # this database made the release: its tasks grade in their own environments
    try:
        imported = instances_import(path=folder / INSTANCES_JSONL, dataset_name=label)
    except ImportUnreadable as unreadable:
        raise FolderRefused(f"the release's instances cannot be read: {unreadable}") from None
    for row in imported.refused:
        stderr.write(f"{row['instance_id'] or 'row ' + str(row['row'])}: {row['reason']}")
    tasks = dataset_tasks(Dataset.objects.get(name=label)).filter(INSTANCES)
    _sources_noted(folder, manifest, tasks)
    _environments_made(tasks, backend=backend, stderr=stderr, timeout=timeout)
    return label, tasks


def _manifest(folder: Path) -> dict:
    try:
        manifest = json.loads((folder / MANIFEST).read_text())
    except (OSError, ValueError) as error:
        raise FolderRefused(f"{folder} is not a release folder: its {MANIFEST} cannot be read ({error})") from None
    changed = files_check(folder, manifest.get("files") or [])
    if changed:
        raise FolderRefused(f"the release's files are not as its manifest says: {'; '.join(changed)}")
    if not manifest.get("environments"):
        raise FolderRefused(f"{folder} carries no environments (a release written before they were, or of tasks "
                            "that have none): nothing to grade in")
    return manifest


def _listed(manifest: dict) -> set[str]:
    """The files the manifest's checksums cover (files_check checked them)."""
    return {file.get("name") for file in manifest.get("files") or []}


def _sources_noted(folder: Path, manifest: dict, tasks) -> None:
    """Each imported task's base tree (the release's archive of it) and environment folder, noted."""
    listed = _listed(manifest)
    for entry in manifest["environments"]:
        if not entry.get("dockerfile") or not key_plain(str(entry.get("key"))):
            continue
        archives = dict(line.split(" ", 1) for line in
                        (folder / ENVIRONMENTS / entry["key"] / "tasks").read_text().splitlines() if " " in line)
        for task_id, instance_id in tasks.filter(instance_id__in=entry["tasks"]).values_list("id", "instance_id"):
            archive = archives.get(instance_id, "")
            # Never a path out of the folder, nor a file its checksums do not cover.
            archive = archive if archive_name_plain(archive) and archive in listed else ""
            ImportedInstance.objects.filter(task_id=task_id).update(
                source_archive=str(folder / archive) if archive else "",
                release_environment=str(folder / ENVIRONMENTS / entry["key"]))


def _environments_made(tasks, *, backend: str, stderr, timeout: float) -> None:
    """A release validation of each task with none: the jobs make the environments, and are waited for."""
    backend = backend or settings.COMMITGYM_SANDBOX
    pending = []
    for task in tasks.exclude(imported_instance__source_archive=""):
        if _environment_here(task, backend):
            continue
        with transaction.atomic():
            job, created = job_start(kind=RELEASE_VALIDATION, subject=task)
            if created:
                Validation.objects.create(job=job, task=task, backend=backend)
        pending.append(job.id)
    if not pending:
        return
    ended = lambda: not Job.objects.filter(id__in=pending, state__in=Job.ACTIVE_STATES).exists()  # noqa: E731
    queued = lambda: Job.objects.filter(id__in=pending, state=Job.State.QUEUED).exists()  # noqa: E731
    with WorkerOnDemand(queues="tests", stderr=stderr) as worker:
        worker.wait_until(ended, queued=queued, timeout=timeout, what="the release's environments")
    for job in Job.objects.filter(id__in=pending).exclude(state=Job.State.SUCCEEDED):
        stderr.write(f"{job.subject_label}: its environment could not be made: {job.error_message}")


def _environment_here(task: Task, backend: str) -> bool:
    try:
        grading_validation(task, backend)
    except JobFailed:
        return False
    return True


def release_validation_work(job, progress) -> None:
    """The registered `run`: the task's environment from its release folder (one made already for the
    same environment, backend and repository is reused), and the task made gradable there with the
    instance's oracle. On the docker backend the environment is sealed into an image of its own, which
    the runs use as it is (an image gone from the engine is sealed again from the folder on disk)."""
    validation = Validation.objects.select_related("task__imported_instance", "task__repository").get(job=job)
    instance = validation.task.imported_instance
    files = Path(instance.release_environment)
    released = released_environment(files)
    environment = next((env for env in Environment.objects.filter(
        recipe_key=f"release:{released.key}", backend=validation.backend, repository=validation.task.repository)
        if Path(env.path).is_dir()), None)
    if environment is None:
        environment = _rebuilt(validation, files, released, progress)
    if validation.backend == "docker" and not (environment.sealed_image and environment_present(environment)):
        _sealed(environment)
    progress.complete(lambda: Validation.objects.filter(id=validation.id).update(
        verdict="valid", reason="from_release", environment=environment, fail_to_pass=instance.fail_to_pass,
        pass_to_pass=instance.pass_to_pass))


def released_environment(files: Path) -> EnvironmentToRelease:
    """The environment as the folder's manifest describes it, every part that reaches a path or a command
    checked as a release checks it before writing it."""
    manifest = json.loads((files.parent.parent / MANIFEST).read_text())
    entry = next((entry for entry in manifest["environments"] if entry.get("key") == files.name), None)
    if entry is None or not entry.get("dockerfile"):
        raise JobFailed("no_environment", f"the release has no files of environment {files.name}")
    # Its folder goes whole into the sandbox: only the files the manifest's checksums cover, none a link.
    listed = _listed(manifest)
    strays = sorted(path.name for path in files.iterdir()
                    if f"{ENVIRONMENTS}/{files.name}/{path.name}" not in listed or path.is_symlink() or not path.is_file())
    if files.is_symlink() or strays:
        raise JobFailed("no_environment", f"the release's environment {files.name} holds what its manifest does not "
                                          f"list, or links: {', '.join(strays) or files.name}")
    released = EnvironmentToRelease(
        key=entry["key"], python_version=str(entry.get("python_version")), lock="",
        strategy=str(entry.get("install_strategy")), setup_archive=entry.get("setup_archive") or "", tasks=(),
        tool_version=str(entry.get("built_by") or "").removeprefix("uv "), as_of=entry.get("as_of") or "",
        lifted=entry.get("lifted") or {}, generated=tuple((files / "generated").read_text().splitlines()))
    why = unreleasable(released)
    if why:
        raise JobFailed("no_environment", f"the release's environment {files.name} is not as commitgym writes one: "
                                          f"{why}")
    return released


def _rebuilt(validation: Validation, files: Path, released: EnvironmentToRelease, progress) -> Environment:
    setup = files.parent.parent / released.setup_archive if released.setup_archive else None
    builder = environment_builder(validation.task.repository, validation.backend)
    work = Path(tempfile.mkdtemp(prefix="release-env-", dir=progress.work_dir()))
    work.chmod(0o755)
    try:
        built = builder.rebuilt(work, released, files, setup)
    except EnvironmentFailed as failed:
        said = failed.attempts[-1].said if failed.attempts else ""
        raise JobFailed("environment_failed", f"the release's environment {files.name} could not be made again "
                                              f"here: {said[-2000:]}") from None
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return Environment.objects.get_or_create(key=built.key, defaults={
        "python_version": built.python_version, "lock": built.lock, "image": built.image,
        "recipe_key": f"release:{released.key}", "path": str(built.path), "repository": validation.task.repository,
        "backend": validation.backend, "strategy": released.strategy[:255], "as_of": released.as_of,
        "lifted": released.lifted, "generated_files": list(built.generated)})[0]


def _sealed(environment: Environment) -> None:
    """The environment copied into an image of its own (its Python's image, then one COPY, no network)."""
    tag = f"commitgym-environment:{environment.key}"
    try:
        made = environment_image_make(Path(environment.path), environment.image, tag)
    except ImageBuildFailed as failed:
        raise JobFailed("image_build_failed", f"the image of environment {environment.key}: {failed}: "
                                              f"{failed.log[-2000:]}") from None
    except engine_errors() as error:
        raise JobFailed("no_engine", f"the Docker engine could not build {tag}: {error}") from None
    Environment.objects.filter(id=environment.id).update(sealed_image=made.image_id)
    environment.sealed_image = made.image_id
