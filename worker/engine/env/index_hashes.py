"""The package index's SHA-256 of every file of each pinned distribution of a lock, read from the
index's simple API (PEP 691's JSON): a rebuild then installs only those very files. Nothing is
downloaded or run; a distribution the index does not list, or an index that cannot be reached,
gets no hashes, and why is said."""

import json
import re
import ssl
import urllib.parse
import urllib.request
from typing import Callable, Optional

from packaging.utils import (
    InvalidSdistFilename,
    InvalidWheelFilename,
    canonicalize_name,
    parse_sdist_filename,
    parse_wheel_filename,
)
from packaging.version import InvalidVersion, Version

PYPI_SIMPLE = "https://pypi.org/simple/"
_PINNED = re.compile(r"^(?P<name>[A-Za-z0-9][A-Za-z0-9._-]*)(\[[^\]]*\])?==(?P<version>[A-Za-z0-9.+!_-]+)$")
ACCEPT = "application/vnd.pypi.simple.v1+json"


def simple_page(url: str, *, timeout: float = 20, cafile: Optional[str] = None) -> dict:
    context = ssl.create_default_context(cafile=cafile)
    asked = urllib.request.Request(url, headers={"Accept": ACCEPT})
    with urllib.request.urlopen(asked, timeout=timeout, context=context) as answer:
        return json.load(answer)


def lock_hashes(lock: str, *, index: str = PYPI_SIMPLE,
                page: Callable[[str], dict] = simple_page) -> tuple[dict[str, list[str]], list[str]]:
    """({pinned line: [sha256, ...]}, why some lines have none). An index that cannot be reached is
    asked once: the rest of the lock is then left without hashes."""
    hashes, missing = {}, []
    for line in (line.strip() for line in lock.splitlines()):
        pinned = _PINNED.match(line)
        if not pinned:
            continue
        name, version = canonicalize_name(pinned["name"]), pinned["version"]
        try:
            files = page(urllib.parse.urljoin(index, f"{name}/")).get("files") or []
        except (OSError, ValueError) as error:
            return hashes, [*missing, f"the index {index} could not be read ({error}): no hashes"]
        found = sorted({file["hashes"]["sha256"] for file in files if _of_version(file, name, version)
                        and isinstance(file.get("hashes"), dict) and file["hashes"].get("sha256")})
        if found:
            hashes[line] = found
        else:
            missing.append(f"{line}: the index lists no file of it with a SHA-256")
    return hashes, missing


def _of_version(file: dict, name: str, version: str) -> bool:
    filename = str(file.get("filename") or "")
    try:
        if filename.endswith(".whl"):
            found_name, found_version, _, _ = parse_wheel_filename(filename)
        else:
            found_name, found_version = parse_sdist_filename(filename)
        return found_name == name and found_version == Version(version)
    except (InvalidWheelFilename, InvalidSdistFilename, InvalidVersion):
        return False
