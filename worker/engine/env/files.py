"""An environment's files: the environment sealed once built, and the files its install wrote into
the working copy (a version file, say), kept beside it and laid into every run's fresh copy. Every
folder here was shaped by code in a sandbox: nothing is followed through a link."""

import os
import shutil
import stat
from pathlib import Path

from worker.engine.sandbox.base import sandbox_file_create, sandbox_file_read

# Folders of a working copy an install or a collection writes that runs do not need.
_NOT_GENERATED = {"__pycache__", ".pytest_cache", "build", "dist", ".eggs", ".tox", ".git", ".uv-cache"}
# Never kept from what an install wrote: what changes how pytest or the interpreter starts, which a
# candidate's patch may not change either (grading drops it as tampering).
_NEVER_GENERATED = {"conftest.py", "sitecustomize.py", "usercustomize.py", "pytest.ini", ".pytest.ini", "tox.ini",
                    "setup.cfg", "pyproject.toml", "setup.py"}
GENERATED_FILES = 500  # files kept from what an install wrote into the working copy, at most
GENERATED_SCAN = 200_000  # files of a working copy looked at, at most
GENERATED_BYTES = 32 << 20

def working_copy_files(repo: Path) -> set[str]:
    """The plain files of a working copy, relative to it, outside the folders nothing needs kept; no
    link followed, the working copy's own name included (code in the sandbox may have swapped it)."""
    found: set[str] = set()
    try:
        top = os.open(repo, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)
    except OSError:
        return found
    try:
        for root, dirs, files, _fd in os.fwalk(".", dir_fd=top, follow_symlinks=False):
            dirs[:] = [name for name in dirs if name not in _NOT_GENERATED]
            for name in files:
                path = os.path.normpath(os.path.join(root, name))
                if name.endswith((".pyc", ".pyo", ".pth")) or name in _NEVER_GENERATED or "\n" in path:
                    continue
                if stat.S_ISREG(os.lstat(name, dir_fd=_fd).st_mode):
                    found.add(path)
                if len(found) > GENERATED_SCAN:
                    return set()  # a working copy this large is no install's doing: keep nothing
    finally:
        os.close(top)
    return found


def environment_files(environment_path: Path) -> Path:
    """Where the files an environment's install wrote into the working copy are kept."""
    return environment_path.with_name(environment_path.name + ".files")


def generated_files_keep(repo: Path, paths: list[str], files: Path) -> None:
    files.mkdir(parents=True)
    total = 0
    try:
        top = os.open(repo, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)
    except OSError:
        paths, top = [], None
    for path in paths[:GENERATED_FILES]:
        data = sandbox_file_read(top, path, max_bytes=GENERATED_BYTES - total)
        total += len(data)
        if total >= GENERATED_BYTES:
            break
        sandbox_file_create(files, path, data)
    if top is not None:
        os.close(top)
    environment_seal(files)


def environment_files_lay(environment_path: Path, repo: Path) -> list[str]:
    """Lay the files the environment's install generated into a fresh working copy, where the copy
    has nothing at that path (a file of the commit, or of a patch, always wins); returns those laid."""
    files = environment_files(environment_path)
    if not files.is_dir() or files.is_symlink():
        return []
    laid = []
    for path in sorted(working_copy_files(files)):
        if sandbox_file_create(repo, path, sandbox_file_read(files, path, max_bytes=GENERATED_BYTES)):
            laid.append(path)
    return laid


def environment_seal(path: Path) -> None:
    """A finished environment belongs to the worker, readable by every sandbox user, writable by none.
    A file hard-linked elsewhere (into a working copy, say) is replaced by a copy of its own."""
    for root, dirs, files in os.walk(path):  # `path` is a real folder: os.walk does not follow links below it
        for name in dirs + files:
            item = os.path.join(root, name)
            info = os.lstat(item)
            if stat.S_ISREG(info.st_mode) and info.st_nlink > 1:
                shutil.copy2(item, item + ".copy", follow_symlinks=False)
                os.replace(item + ".copy", item)
            os.lchown(item, 0, 0)
            if not stat.S_ISLNK(info.st_mode):
                os.chmod(item, stat.S_IMODE(os.lstat(item).st_mode) & ~0o022)
    os.chown(path, 0, 0)
    path.chmod(0o755)
