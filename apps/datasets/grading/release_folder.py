"""A release folder evaluated on a database that never validated its tasks: its instances imported,
each task's environment made again from the release's own files by a job of the tests queue (on the
docker backend, its image built from its Dockerfile, which runs use as it is; elsewhere a virtualenv
made from its lock, as of its dates, the project installed on its setup tree: worker/engine/env/builder.py
`rebuilt`), and each task's base tree taken from the release's source archive. Tasks this database holds
already (it made the release) are graded where they are."""

import json
import shutil
import tempfile
from pathlib import Path

from django.conf import settings
from django.db import transaction
from docker.errors import DockerException
from requests import RequestException

from apps.environments.models import Environment
from apps.jobs.models import Job
from apps.jobs.on_demand import WorkerOnDemand
from apps.jobs.services import JobFailed, job_start
from apps.tasks.models import ImportedInstance, Task, Validation
from apps.tasks.services import environment_builder
from worker.engine.env.builder import EnvironmentFailed
from worker.engine.env.files import environment_files
from worker.engine.env.images import ImageBuildFailed, ImageToBuild, image_build, image_generated_files
from worker.engine.env.rebuild import ENVIRONMENTS, EnvironmentToRelease
from worker.engine.sandbox.docker import docker_client
from worker.engine.release.writers import MANIFEST, files_check

from ..candidates.imports import ImportUnreadable, instances_import
from ..release_images import base_present, build_ca_bundle, build_log_kept, release_image_tag
from ..models import Dataset
from ..selectors import INSTANCES, dataset_tasks

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


def _sources_noted(folder: Path, manifest: dict, tasks) -> None:
    """Each imported task's base tree (the release's archive of it) and environment folder, noted."""
    for entry in manifest["environments"]:
        if not entry.get("dockerfile"):
            continue
        archives = dict(line.split(" ", 1) for line in
                        (folder / ENVIRONMENTS / entry["key"] / "tasks").read_text().splitlines() if " " in line)
        for task_id, instance_id in tasks.filter(instance_id__in=entry["tasks"]).values_list("id", "instance_id"):
            archive = archives.get(instance_id, "")
            ImportedInstance.objects.filter(task_id=task_id).update(
                source_archive=str(folder / archive) if archive else "",
                release_environment=str(folder / ENVIRONMENTS / entry["key"]))


def _environments_made(tasks, *, backend: str, stderr, timeout: float) -> None:
    """A release validation of each task with none: the jobs make the environments, and are waited for."""
    backend = backend or settings.COMMITGYM_SANDBOX
    pending = []
    for task in tasks.exclude(validations__verdict="valid", validations__backend=backend,
                              validations__job__state=Job.State.SUCCEEDED).exclude(imported_instance__source_archive=""):
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


def release_validation_work(job, progress) -> None:
    """The registered `run`: the task's environment from its release folder (one made already for the
    same environment and backend is reused), and the task made gradable there with the instance's oracle.
    On the docker backend that is the release's environment image, built from its Dockerfile, which the
    runs use as it is; elsewhere (or with no archive of the setup tree to build it on) a virtualenv made
    again from the lock in the sandbox."""
    validation = Validation.objects.select_related("task__imported_instance", "task__repository").get(job=job)
    instance = validation.task.imported_instance
    files = Path(instance.release_environment)
    entry = next((entry for entry in json.loads((files.parent.parent / MANIFEST).read_text())["environments"]
                  if entry["key"] == files.name), None)
    if entry is None or not entry.get("dockerfile"):
        raise JobFailed("no_environment", f"the release has no files of environment {files.name}")
    in_image = validation.backend == "docker" and bool(entry.get("setup_archive"))
    marker = f"release:{files.name}"
    environment = next((env for env in Environment.objects.filter(recipe_key=marker, backend=validation.backend,
                                                                  in_image=in_image) if _still_there(env)), None)
    if environment is None:
        environment = (_image_made if in_image else _rebuilt)(validation, files, entry, progress)
    progress.complete(lambda: Validation.objects.filter(id=validation.id).update(
        verdict="valid", reason="from_release", environment=environment, fail_to_pass=instance.fail_to_pass,
        pass_to_pass=instance.pass_to_pass))


def _still_there(environment: Environment) -> bool:
    if not Path(environment.path).is_dir():
        return False
    if not environment.in_image:
        return True
    try:
        docker_client(timeout=30).images.get(environment.image)
    except (DockerException, RequestException):
        return False
    return True


def _released(files: Path, entry: dict) -> EnvironmentToRelease:
    return EnvironmentToRelease(
        key=entry["key"], python_version=entry["python_version"], lock="", strategy=entry["install_strategy"],
        setup_archive=entry.get("setup_archive") or "", tasks=(), tool_version="", as_of=entry.get("as_of") or "",
        lifted=entry.get("lifted") or {}, generated=tuple((files / "generated").read_text().splitlines()))


def _rebuilt(validation: Validation, files: Path, entry: dict, progress) -> Environment:
    released = _released(files, entry)
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
    return _environment_recorded(validation, released, key=built.key, image=built.image, path=built.path,
                                 lock=built.lock, generated=built.generated, python_version=built.python_version)


def _image_made(validation: Validation, files: Path, entry: dict, progress) -> Environment:
    """The environment's image built from the release's Dockerfile, as `release_images` builds it, and the
    files its install generated copied out of it for the runs' fresh copies."""
    released, folder = _released(files, entry), files.parent.parent
    manifest = json.loads((folder / MANIFEST).read_text())
    image = ImageToBuild(key=released.key, tag=release_image_tag(manifest["release"], manifest["version"], released.key),
                         base=base_present(entry["base"]), archives=(released.setup_archive,))
    progress.report(0)
    try:
        made = image_build(folder, image, extra_ca=build_ca_bundle(), network=settings.COMMITGYM_IMAGE_BUILD_NETWORK)
        path = Path(settings.COMMITGYM_ENV_DIR) / "docker" / "release-images" / made.image_id.removeprefix("sha256:")[:24]
        shutil.rmtree(environment_files(path), ignore_errors=True)  # an earlier try's, perhaps half written
        path.mkdir(parents=True, exist_ok=True)
        generated = image_generated_files(made.image_id, environment_files(path))
    except ImageBuildFailed as failed:
        log = build_log_kept(f"release-validation-{validation.id}-{image.key}", failed.log)
        raise JobFailed("image_build_failed", f"the image of environment {image.key}: {failed}; its log is in {log}") \
            from None
    except (DockerException, RequestException) as error:
        raise JobFailed("no_engine", f"the Docker engine could not build {image.tag}: {error}") from None
    lock = "".join(line.removesuffix("\\").strip() + "\n" for line in (files / "requirements.lock").read_text().splitlines()
                   if line.strip() and not line[0].isspace())
    return _environment_recorded(validation, released, key=f"image-{released.key}"[:64], image=made.image_id, path=path,
                                 lock=lock, generated=generated, python_version=entry["python_version"], in_image=True)


def _environment_recorded(validation: Validation, released: EnvironmentToRelease, *, key: str, path: Path,
                          generated, **fields) -> Environment:
    environment, _ = Environment.objects.update_or_create(key=key, defaults={
        **fields, "recipe_key": f"release:{released.key}", "path": str(path), "repository": validation.task.repository,
        "backend": validation.backend, "strategy": released.strategy[:255], "as_of": released.as_of,
        "lifted": released.lifted, "generated_files": list(generated)})
    return environment
