"""The Pythons a sandbox can run (a runtime: a version, and for docker the image it lives in),
and which of them to try first for a commit of a given date."""

import re
import shutil
from dataclasses import dataclass
from datetime import date, datetime
from typing import Sequence

from worker.engine.env.recipes import declared_python
from worker.engine.sandbox.base import SANDBOX_PATH
from worker.engine.sandbox.docker import docker_client

# When each Python came out: a commit was written for the Pythons of its day.
PYTHON_RELEASES = {
    "2.7": date(2010, 7, 3),
    "3.6": date(2016, 12, 23), "3.7": date(2018, 6, 27), "3.8": date(2019, 10, 14), "3.9": date(2020, 10, 5),
    "3.10": date(2021, 10, 4), "3.11": date(2022, 10, 24), "3.12": date(2023, 10, 2), "3.13": date(2024, 10, 7),
    "3.14": date(2025, 10, 7),
}


@dataclass(frozen=True)
class Runtime:
    """A Python a sandbox can run: `python<version>` on its PATH, in `image` for the docker backend."""

    version: str  # "3.11"
    image: str = ""

    @property
    def interpreter(self) -> str:
        return f"python{self.version}"

    @property
    def python2(self) -> bool:
        return is_python2(self.version)


def is_python2(version: str) -> bool:
    """Python 2: uv makes no environment for it and resolves nothing for it (the builder uses
    virtualenv and pip there), and it is tried only where Python 3 cannot run the code."""
    return version.startswith("2.")


def local_runtimes() -> tuple[Runtime, ...]:
    """The Pythons installed on this machine where the local sandbox finds them, newest first."""
    found = [version for version in PYTHON_RELEASES
             if not is_python2(version) and shutil.which(f"python{version}", path=SANDBOX_PATH)]
    return tuple(Runtime(version) for version in sorted(found, key=_version_tuple, reverse=True))


def _version_tuple(version: str) -> tuple[int, ...]:
    return tuple(int(part) for part in version.split(".")[:2])


PYTHON_VERSION = re.compile(r"[0-9]{1,2}\.[0-9]{1,3}\.[0-9]{1,3}([a-z]{1,2}[0-9]{1,3})?\+?")  # platform.python_version()
# The Pythons of each Debian release, for base images built with `manage.py build_base_images`: its
# python3, and on bullseye (the last release to carry it) Python 2.7, with the virtualenv that makes
# its environments.
DEBIAN_PYTHONS = {"bullseye": ("3.9", "2.7"), "bookworm": ("3.11",), "trixie": ("3.13",)}
DEBIAN_PACKAGES = {"bullseye": ("python2.7", "python3-virtualenv")}


def python_order(runtimes: Sequence[Runtime], recipe: dict[str, str], as_of: datetime) -> list[Runtime]:
    """The Pythons to try: those the repository allows (all, if it allows none of them), the newest
    one released by the commit's date first, then older ones, then the ones that came later; Python
    2 last of all (the builder tries it only for code no Python 3 here runs)."""
    allowed = declared_python(recipe)
    fitting = [r for r in runtimes if allowed is None or any(allowed.contains(f"{r.version}.{p}") for p in (0, 99))]

    def rank(runtime: Runtime) -> tuple:
        released = PYTHON_RELEASES.get(runtime.version, date.max)
        later = released > as_of.date()
        version = _version_tuple(runtime.version)
        return (runtime.python2, later, version if later else tuple(-part for part in version))

    return sorted(fitting or runtimes, key=rank)


def default_images() -> list[tuple[str, str]]:
    """(Python version, image) to look for: the official slim image, then our Debian-built one."""
    debian = {version: release for release, versions in DEBIAN_PYTHONS.items() for version in versions}
    images = []
    for version in reversed(PYTHON_RELEASES):
        if not is_python2(version):  # Python 2's official image has no Python 3 to run virtualenv
            images.append((version, f"python:{version}-slim"))
        if version in debian:
            images.append((version, f"commitgym-base:{debian[version]}"))
    return images


def docker_runtimes(images: Sequence[tuple[str, str]]) -> tuple[Runtime, ...]:
    """For each Python version, the first of its `images` the engine has (none are pulled)."""
    import docker

    try:
        present = {tag for image in docker_client(timeout=30).images.list() for tag in image.tags}
    except docker.errors.DockerException:
        return ()
    runtimes: dict[str, Runtime] = {}
    for version, image in images:
        if version not in runtimes and (image in present or f"{image}:latest" in present):
            runtimes[version] = Runtime(version, image)
    return tuple(runtimes.values())
