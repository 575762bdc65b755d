"""A release's images built on the local engine from the release's own Dockerfiles, as a job: every
environment's image, then the task images asked for (worker/engine/env/images.py). What was built is
kept with the job's row and shown on the release's page; the manifest gets each environment image's id
(its rows and archives are never changed)."""

import logging
import re
from pathlib import Path

from django.conf import settings
from django.db import transaction

from apps.jobs.services import JobFailed, job_start
from worker.engine.env.images import ImageBuildFailed, ImageToBuild, image_build
from worker.engine.release.writers import MANIFEST, manifest_write
from worker.engine.sandbox.docker import HOST_CA_BUNDLE, docker_client, engine_errors

from .models import Release, ReleaseImages

log = logging.getLogger(__name__)
LOCAL_BASES = re.compile(r"debian:(\w+)-slim")  # a public Debian image, and the local build of the same release


class ImagesRefused(ValueError):
    """The images cannot be built as asked; the message says why."""


def release_images_start(*, release: Release, tasks: list[str] = (), user=None) -> ReleaseImages:
    if release.kind != Release.Kind.INSTANCES or release.version is None:
        raise ImagesRefused(f"{release} is not a written release")
    if release.withdrawn_at is not None:
        raise ImagesRefused(f"{release} was withdrawn ({release.withdrawn_reason or 'no reason given'}): its images "
                            "are not built")
    environments = _buildable(release)
    if not environments:
        raise ImagesRefused(f"{release} carries no environment that can be built (written before releases held "
                            "them, its tasks have none, or its manifest says why not)")
    known = {task: entry for entry in environments for task in entry["tasks"]}
    unknown = sorted(set(tasks) - set(known))
    if unknown:
        raise ImagesRefused(f"no environment of {release} serves {', '.join(unknown)}")
    unarchived = sorted(task for task in tasks if not _task_archive(release, known[task]["key"], task))
    if unarchived:
        raise ImagesRefused(f"the release holds no source archive of the base commit of {', '.join(unarchived)}: "
                            "its task image cannot be built")
    with transaction.atomic():
        build = ReleaseImages.objects.create(release=release, tasks=list(dict.fromkeys(tasks)), created_by=user)
        build.job, _ = job_start(kind="release_images", subject=build, user=user)
        build.save(update_fields=["job"])
    return build


def release_images_work(job, progress) -> None:
    """The registered `run`: each image in turn, its progress counted in images. A failed build stops
    the job with the step that failed, its log kept; the images built before it are kept too."""
    build = ReleaseImages.objects.select_related("release").get(job=job)
    release, built = build.release, []
    try:
        planned = images_planned(build.release, build.tasks)
    except engine_errors() as error:
        raise JobFailed("no_engine", f"the Docker engine does not answer: {error}") from None
    extra_ca = _extra_ca()
    progress.report(0, len(planned))
    for number, (kind, image) in enumerate(planned):
        try:
            made = image_build(Path(release.folder), image, extra_ca=extra_ca,
                               network=settings.COMMITGYM_IMAGE_BUILD_NETWORK)
        except ImageBuildFailed as failed:
            kept = _log_kept(f"{build.id}-{image.key}{'-' + image.task if image.task else ''}", failed.log)
            ReleaseImages.objects.filter(id=build.id).update(images=built, log=str(kept))
            what = f"the task image of {image.task}" if image.task else f"the image of environment {image.key}"
            raise JobFailed("image_build_failed", f"{what}: {failed}; its log is in {kept}") from None
        except engine_errors() as error:  # the engine itself: not there, or refusing
            ReleaseImages.objects.filter(id=build.id).update(images=built)
            raise JobFailed("no_engine", f"the Docker engine could not build {image.tag}: {error}") from None
        built.append({"kind": kind, "key": image.key, "task": image.task or None, "tag": made.tag,
                      "image_id": made.image_id, "seconds": round(made.seconds, 2), "size": made.size})
        progress.report(number + 1, len(planned))
    def store():
        ReleaseImages.objects.filter(id=build.id).update(images=built)
        _manifest_images_noted(release, built)

    progress.complete(store)


def _manifest_images_noted(release: Release, built: list[dict]) -> None:
    """Each environment image's id in the release's manifest, in its folder and its row (its own checksum
    with it): the rows and files it lists are unchanged. An id is this engine's: another builds its own."""
    release = Release.objects.select_for_update().get(id=release.id)
    ids = {image["key"]: image["image_id"] for image in built if image["kind"] == "environment"}
    manifest = release.manifest
    for entry in manifest.get("environments") or []:
        if entry.get("key") in ids:
            entry["image_id"] = ids[entry["key"]]
    try:
        written = manifest_write(Path(release.folder), manifest, replacing=True)
    except OSError as error:  # the folder moved, or is read-only: the images stay recorded with the job
        log.warning("the manifest of %s could not be given its images' ids: %s", release, error)
        return
    files = [file for file in release.files if file["name"] != MANIFEST] + [written.described()]
    Release.objects.filter(id=release.id).update(manifest=manifest, files=files)


def images_planned(release: Release, tasks: list[str]) -> list[tuple[str, ImageToBuild]]:
    """("environment" | "task", the image) in build order: every environment, then each task asked."""
    planned, by_task = [], {}
    for entry in _buildable(release):
        setup = tuple(filter(None, [entry.get("setup_archive")]))
        image = ImageToBuild(key=entry["key"], tag=_tag(release, entry["key"]), base=_base(entry["base"]),
                             archives=setup if "setup_archive" in entry else _all_archives(release))
        planned.append(("environment", image))
        by_task.update({task: image for task in entry["tasks"]})
    for task in tasks:
        environment = by_task[task]
        archives = (*environment.archives, *filter(None, [_task_archive(release, environment.key, task)]))
        planned.append(("task", ImageToBuild(key=environment.key, tag=_tag(release, environment.key, task),
                                             base=environment.base, task=task, archives=tuple(dict.fromkeys(archives)))))
    return planned


def _buildable(release: Release) -> list[dict]:
    return [entry for entry in release.manifest.get("environments") or [] if entry.get("dockerfile")]


def _tag(release: Release, key: str, task: str = "") -> str:
    """commitgym-release/NAME:VERSION-KEY[-TASK], each part in the characters an image reference allows."""
    name = re.sub(r"[^a-z0-9]+", "-", release.name.lower()).strip("-") or "release"
    label = re.sub(r"[^a-z0-9_.-]+", "-", f"{release.version}-{key}{'-' + task if task else ''}".lower())
    return f"commitgym-release/{name}:{label[:128]}"


def _base(base: str) -> str:
    """The Dockerfile's default base where the engine has it; else the local build of the same Debian
    release (no registry may be reachable); else the default, which the engine then looks for."""
    present = {tag for image in docker_client(timeout=30).images.list() for tag in image.tags}
    debian = LOCAL_BASES.fullmatch(base)
    local = f"commitgym-base:{debian.group(1)}" if debian else ""
    if base in present or not local or local not in present:
        return base
    return local


def _task_archive(release: Release, key: str, task: str) -> str:
    listed = Path(release.folder) / "environments" / key / "tasks"
    for line in listed.read_text().splitlines():
        instance, _, archive = line.partition(" ")
        if instance == task:
            return archive
    return ""


def _all_archives(release: Release) -> tuple[str, ...]:
    return tuple(f"sources/{path.name}" for path in sorted((Path(release.folder) / "sources").glob("*.tar.gz")))


def _extra_ca() -> bytes:
    """The CA bundle this machine's builds need (COMMITGYM_CA_BUNDLE, else the host's, as the docker
    sandbox mounts it)."""
    path = Path(settings.COMMITGYM_CA_BUNDLE) if settings.COMMITGYM_CA_BUNDLE else HOST_CA_BUNDLE
    return path.read_bytes() if path.is_file() else b""


def _log_kept(stem: str, log: str) -> Path:
    """A failed build's log, under var/image-builds/STEM.log (STEM cleaned to a file name)."""
    folder = Path(settings.VAR_DIR) / "image-builds"
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{re.sub(r'[^A-Za-z0-9_.-]+', '-', stem)}.log"
    path.write_text(log)
    return path
