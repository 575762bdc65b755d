"""A working copy with a hard size: a file system of its own, on a sparse image file.

The watch in base.py stops a run that outgrows its working copy, but only at its next look. Where
the worker is root and can loop-mount, a run's fresh working copy gets an ext4 file system of
its own, sized to what the copy holds plus the run's `disk_bytes` and `disk_files` (a little
more, so the watch still names the limit): a write past it fails with ENOSPC however fast it
comes. Making, mounting and removing an 8 GiB image costs about 13 ms here (sparse, lazily
initialised); elsewhere the watch alone holds.
"""

import os
import shutil
import subprocess
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

from worker.engine.sandbox.base import Limits, folder_usage

_SLACK = 1.05  # past the cap, so the watch sees the breach and names it before the file system refuses
_IMAGE_SUFFIX = ".commitgym-disk"


def capped_folders_available() -> bool:
    return os.geteuid() == 0 and shutil.which("mkfs.ext4") is not None and shutil.which("mount") is not None


@contextmanager
def capped_folder(folder: Path, *, holds: Path, limits: Limits) -> Iterator[bool]:
    """`folder` (made empty here) on a file system of its own, big enough for what `holds` uses
    plus the limits; True if it is, False where this machine cannot (the folder is plain then)."""
    folder.mkdir(parents=True, exist_ok=True)
    image = folder.with_name(folder.name + _IMAGE_SUFFIX)
    mounted = capped_folders_available() and _mounted(folder, image, holds, limits)
    try:
        yield mounted
    finally:
        if mounted:
            subprocess.run(["umount", "-l", str(folder)], capture_output=True)
        image.unlink(missing_ok=True)


def capped_folder_is(folder: Path) -> bool:
    """Whether `folder` is a capped folder, mounted: the file system below it holds nothing else. No
    code in a sandbox can make one look so (it can neither mount on the worker's side nor write beside
    its own folder)."""
    folder = Path(folder)
    return os.path.ismount(folder) and folder.with_name(folder.name + _IMAGE_SUFFIX).is_file()


def _mounted(folder: Path, image: Path, holds: Path, limits: Limits) -> bool:
    used, entries = folder_usage(holds)
    inodes = int((entries + limits.disk_files) * _SLACK) + 1024
    # and the file system's own blocks: its inode tables (256 bytes an inode), bitmaps, no journal
    size = int((used + limits.disk_bytes) * _SLACK) + inodes * 256 + (8 << 20)
    try:
        with open(image, "wb") as sparse:
            sparse.truncate(size)
        # No journal and no blocks kept for growing it (it never grows): half of mkfs's time goes on those.
        made = subprocess.run(["mkfs.ext4", "-q", "-F", "-m", "0", "-O", "^has_journal,^resize_inode",
                               "-N", str(inodes), "-E", "lazy_itable_init=1,lazy_journal_init=1,nodiscard",
                               str(image)], capture_output=True)
        if made.returncode != 0:
            return False
        mount = subprocess.run(["mount", "-o", "loop,nosuid,nodev", str(image), str(folder)], capture_output=True)
        if mount.returncode != 0:
            return False
    except OSError:
        return False
    try:
        (folder / "lost+found").rmdir()  # nothing of the file system's own in the run's folder
        return True
    except OSError:
        subprocess.run(["umount", "-l", str(folder)], capture_output=True)
        return False


def capped_folders_sweep(root: Path) -> list[str]:
    """Unmount the capped folders below `root` that a dead worker left mounted; the mount points."""
    root = str(Path(root).resolve())
    left = []
    for line in Path("/proc/self/mountinfo").read_text().splitlines():
        point = line.split()[4].replace("\\040", " ")
        if point.startswith(root + os.sep) and Path(point + _IMAGE_SUFFIX).exists():
            if subprocess.run(["umount", "-l", point], capture_output=True).returncode == 0:
                left.append(point)
    return left
