"""A release's environment and task images built on the local Docker engine from the release folder's
Dockerfiles (worker/engine/env/rebuild.py), as anyone would build them by hand.

The build context is the part of the folder the Dockerfile reads: the environment's folder, the
archive of its setup commit, and for a task image the task's archive (its `source` stage copies
`sources/`, whatever is there); `extra-ca.crt` is this machine's CA bundle where its proxy needs
one. The engine's classic builder builds it, on the network the operator sets.

An environment built here in the sandbox is also sealed into an image of its own (`environment_image_make`)
for runs that use the image as it is: a build that only copies, with no network."""

import io
import re
import tarfile
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Optional

from worker.engine.env.rebuild import ENVIRONMENTS, EXTRA_CA
from worker.engine.env.recipes import ENV
from worker.engine.sandbox.docker import docker_client

_STEP = re.compile(r"^Step (\d+/\d+) : (.*)$")
LOG_KEPT = 4 << 20  # of a build's output, the end


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
    with tempfile.TemporaryFile() as context:
        _context_write(context, folder, image, extra_ca)
        context.seek(0)
        args = {"BASE": image.base, **({"TASK": image.task} if image.task else {})}
        stream = client.api.build(fileobj=context, custom_context=True, dockerfile=f"{ENVIRONMENTS}/{image.key}/Dockerfile",
                                  target="task" if image.task else "environment", buildargs=args, tag=image.tag,
                                  network_mode=network, rm=True, forcerm=True, decode=True, pull=False)
        _stream_read(stream, said)
    return _built(client, image.tag, started)


def environment_image_make(environment: Path, python_image: str, tag: str, *, timeout: float = 3600) -> BuiltImage:
    """An image holding an environment built here in the sandbox: its Python's image with the environment
    copied in at /workspace/env. The build runs nothing (one COPY, no network): the environment's files,
    which code in the sandbox made, are only copied, links as links."""
    client = docker_client(timeout=timeout)
    started = time.monotonic()
    with tempfile.TemporaryFile() as context:
        with tarfile.open(fileobj=context, mode="w") as tar:
            dockerfile = f"FROM {python_image}\nCOPY env {ENV}\n".encode()
            info = tarfile.TarInfo("Dockerfile")
            info.size, info.mode = len(dockerfile), 0o644
            tar.addfile(info, io.BytesIO(dockerfile))
            for path, name in _tree(environment, "env"):
                tar.add(path, arcname=name, recursive=False)
        context.seek(0)
        _stream_read(client.api.build(fileobj=context, custom_context=True, tag=tag, network_mode="none", rm=True,
                                      forcerm=True, decode=True, pull=False))
    return _built(client, tag, started)


def _built(client, tag: str, started: float) -> BuiltImage:
    built = client.images.get(tag)
    return BuiltImage(tag, built.id, time.monotonic() - started, int(built.attrs.get("Size") or 0))


def _tree(top: Path, name: str):
    """(path, name in the archive) of `top` and everything below it, folders before what they hold; no
    link followed, however deep (no recursion)."""
    waiting = [(top, name)]
    while waiting:
        path, arcname = waiting.pop()
        yield path, arcname
        if path.is_dir() and not path.is_symlink():
            waiting.extend((below, f"{arcname}/{below.name}") for below in sorted(path.iterdir(), reverse=True))


def _stream_read(stream, said: Callable[[str], None] = lambda line: None) -> None:
    """Follow a build's output; ImageBuildFailed with the step that failed (its Dockerfile line) and the log."""
    log, step = [], ""
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
