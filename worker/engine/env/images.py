"""A release's environment and task images built on the local Docker engine from the release folder's
Dockerfiles (worker/engine/env/rebuild.py), as anyone would build them by hand.

The build context is the part of the folder the Dockerfile reads: the environment's folder, the
archive of its setup commit, and for a task image the task's archive (its `source` stage copies
`sources/`, whatever is there); `extra-ca.crt` is this machine's CA bundle where its proxy needs
one. The engine's classic builder builds it, on the network the operator sets."""

import io
import re
import tarfile
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Optional

from worker.engine.env.files import GENERATED_BYTES, generated_files_unpack
from worker.engine.env.rebuild import ENVIRONMENTS, EXTRA_CA, GENERATED
from worker.engine.sandbox.docker import DEADLINE_LABEL, LABEL, docker_client

_STEP = re.compile(r"^Step (\d+/\d+) : (.*)$")
LOG_KEPT = 4 << 20  # of a build's output, the end
GENERATED_ARCHIVE_BYTES = 2 * GENERATED_BYTES  # of an image's generated files, read at most


@dataclass(frozen=True)
class ImageToBuild:
    key: str  # the environment's
    tag: str
    base: str  # BASE for the Dockerfile
    task: str = ""  # an instance id: the task image; "" the environment image
    archives: tuple[str, ...] = ()  # the source archives the context needs (relative to the folder)


@dataclass(frozen=True)
class BuiltImage:
    tag: str
    image_id: str
    seconds: float
    size: int  # bytes, the image's whole size as the engine reports it


class ImageBuildFailed(Exception):
    def __init__(self, step: str, message: str, log: str):
        super().__init__(f"step {step or '?'} failed: {message}")
        self.step, self.message, self.log = step, message, log


def image_build(folder: Path, image: ImageToBuild, *, extra_ca: Optional[bytes], network: str = "host",
                said: Callable[[str], None] = lambda line: None, timeout: float = 3600) -> BuiltImage:
    """Build one image; ImageBuildFailed with the failing step (its Dockerfile line) and the log. Its
    RUN steps (the project's install among them) have `network`: a bridge where one may be made, the
    host's where not, as the operator sets it."""
    client = docker_client(timeout=timeout)
    started = time.monotonic()
    log, step = [], ""
    with tempfile.TemporaryFile() as context:
        _context_write(context, folder, image, extra_ca)
        context.seek(0)
        args = {"BASE": image.base, **({"TASK": image.task} if image.task else {})}
        stream = client.api.build(fileobj=context, custom_context=True, dockerfile=f"{ENVIRONMENTS}/{image.key}/Dockerfile",
                                  target="task" if image.task else "environment", buildargs=args, tag=image.tag,
                                  network_mode=network, rm=True, forcerm=True, decode=True, pull=False)
        for chunk in stream:
            text = chunk.get("stream") or ""
            if text:
                log.append(text)
                for line in text.splitlines():
                    found = _STEP.match(line.strip())
                    if found:
                        step = f"{found.group(1)} `{found.group(2)}`"
                        said(line.strip())
            if "error" in chunk:
                message = str(chunk.get("errorDetail", {}).get("message") or chunk["error"]).strip()
                raise ImageBuildFailed(step, message, _tail("".join(log) + message))
    built = client.images.get(image.tag)
    return BuiltImage(image.tag, built.id, time.monotonic() - started, int(built.attrs.get("Size") or 0))


def image_generated_files(image: str, files: Path, *, inside: str = GENERATED) -> list[str]:
    """The files an environment image kept of what its install generated (`inside` it), copied out
    into `files` as a built environment keeps them (env/files.py), for each run's fresh copy. The
    image's code does not run: its folder is read from a container that is made, never started."""
    import docker

    client = docker_client(timeout=300)
    container = client.containers.create(image, ["true"], network_disabled=True, labels={
        LABEL: "1", DEADLINE_LABEL: str(int(time.time()) + 600)})
    try:
        with tempfile.TemporaryFile() as archive:
            try:
                stream, _ = container.get_archive(inside)
            except docker.errors.NotFound:
                stream = []
            written = 0
            for chunk in stream:
                written += len(chunk)
                if written > GENERATED_ARCHIVE_BYTES:
                    break  # no install generates this much: what came so far is read, within its bounds
                archive.write(chunk)
            archive.seek(0)
            if not written:
                files.mkdir(parents=True)
                return []
            with tarfile.open(fileobj=archive, mode="r|") as tar:
                return generated_files_unpack(tar, files)
    finally:
        container.remove(force=True)


def _tail(text: str) -> str:
    return text[-LOG_KEPT:]


def _context_write(target, folder: Path, image: ImageToBuild, extra_ca: Optional[bytes]) -> None:
    with tarfile.open(fileobj=target, mode="w") as tar:
        environment = folder / ENVIRONMENTS / image.key
        for path in sorted(environment.iterdir()):
            if path.is_file() and not path.is_symlink():
                tar.add(path, arcname=str(path.relative_to(folder)), recursive=False)
        for archive in image.archives:
            path = folder / archive
            if path.is_file() and not path.is_symlink():
                tar.add(path, arcname=archive, recursive=False)
        if not image.archives:  # the source stage copies sources/: the folder is there, if empty
            info = tarfile.TarInfo("sources")
            info.type, info.mode = tarfile.DIRTYPE, 0o755
            tar.addfile(info)
        ca = extra_ca if extra_ca is not None else b""
        info = tarfile.TarInfo(EXTRA_CA)
        info.size, info.mode = len(ca), 0o644
        tar.addfile(info, io.BytesIO(ca))
