"""A working copy with a hard size: a file system of its own, on a sparse image file.

The watch in base.py stops a run that outgrows its working copy, but only at its next look. Where
the worker is root and can loop-mount, a run's fresh working copy gets an ext4 file system of
its own, sized to what the copy holds plus the run's `disk_bytes` and `disk_files` (a little
more, so the watch still names the limit): a write past it fails with ENOSPC however fast it
comes. Elsewhere the watch alone holds.

Every run needs a fresh, empty file system. `mkfs.ext4` on an 8 GiB sparse image takes about
13 ms here; copying the few MB it wrote, from an image made once per size and kept, about 3 ms.
Sizes are rounded up (by at most 1/32) so that runs of one repository share a template.
"""

import errno
import os
import shutil
import subprocess
import tempfile
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator, Optional

from worker.engine.sandbox.base import Limits, folder_usage

_SLACK = 1.05  # past the cap, so the watch sees the breach and names it before the file system refuses
_IMAGE_SUFFIX = ".commitgym-disk"
_TEMPLATES_KEPT = 16
# What mkfs writes with lazy initialisation is a few MB in short runs; a longer run of data means
# the file system cannot find holes (SEEK_DATA unsupported), and the copy would read every byte.
_MAX_DATA_RUN = 64 << 20


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


def _mounted(folder: Path, image: Path, holds: Path, limits: Limits) -> bool:
    used, entries = folder_usage(holds)
    inodes = _rounded(int((entries + limits.disk_files) * _SLACK) + 1024)
    # and the file system's own blocks: its inode tables (256 bytes an inode), bitmaps, no journal
    size = _rounded(int((used + limits.disk_bytes) * _SLACK) + inodes * 256 + (8 << 20))
    try:
        if not _empty_image(image, size, inodes):
            return False
        mount = subprocess.run(["mount", "-o", "loop,nosuid,nodev", str(image), str(folder)], capture_output=True)
        if mount.returncode != 0:
            return False
        (folder / "lost+found").rmdir()  # nothing of the file system's own in the run's folder
        return True
    except OSError:
        return False


def _rounded(value: int) -> int:
    """`value` rounded up to a step of between 1/64 and 1/32 of it."""
    step = 1 << max(value.bit_length() - 6, 0)
    return -(-value // step) * step


def _empty_image(image: Path, size: int, inodes: int) -> bool:
    """An empty ext4 file system at `image`: a copy of the kept template of its size, or made here."""
    try:
        template = _template(size, inodes)
        if template is not None and _sparse_copied(template, image):
            return True
    except OSError:  # a template another worker pruned meanwhile, say
        image.unlink(missing_ok=True)
    return _file_system_made(image, size, inodes)


def _file_system_made(image: Path, size: int, inodes: int) -> bool:
    """An empty ext4 file system of `size` bytes and `inodes` inodes in a sparse file at `image`."""
    with open(image, "wb") as sparse:
        sparse.truncate(size)
    return subprocess.run(["mkfs.ext4", "-q", "-F", "-m", "0", "-O", "^has_journal", "-N", str(inodes), "-E",
                           "lazy_itable_init=1,lazy_journal_init=1", str(image)], capture_output=True).returncode == 0


def _template(size: int, inodes: int) -> Optional[Path]:
    """The kept empty image of this size (made now if missing; None if it cannot be). Root's only:
    no run reaches it."""
    folder = Path(tempfile.gettempdir()) / "commitgym-disk-templates"
    folder.mkdir(mode=0o700, exist_ok=True)
    template = folder / f"{size}-{inodes}.img"
    try:
        os.utime(template)  # the newest are kept
        return template
    except FileNotFoundError:
        pass
    making = folder / f".{template.name}.{os.getpid()}.{time.monotonic_ns()}"
    try:
        if not _file_system_made(making, size, inodes):
            return None
        making.rename(template)  # whole, or not there: another worker may be making the same
    finally:
        making.unlink(missing_ok=True)
    _templates_prune(folder)
    return template


def _sparse_copied(source: Path, target: Path) -> bool:
    """Copy `source` to `target` with its holes left holes; False (and no target) where the file
    system does not say where its holes are."""
    with open(source, "rb") as reading, open(target, "wb") as writing:
        writing.truncate(os.fstat(reading.fileno()).st_size)
        for start, end in _data_runs(reading.fileno()):
            if end - start > _MAX_DATA_RUN:
                break
            while start < end:
                start += os.pwrite(writing.fileno(), os.pread(reading.fileno(), min(end - start, 1 << 20), start),
                                   start)
        else:
            return True
    target.unlink()
    return False


def _data_runs(fd: int) -> Iterator[tuple[int, int]]:
    """(start, end) of each run of data in the file, holes skipped."""
    size, offset = os.fstat(fd).st_size, 0
    while offset < size:
        try:
            start = os.lseek(fd, offset, os.SEEK_DATA)
        except OSError as error:
            if error.errno == errno.ENXIO:  # only a hole is left
                return
            raise
        offset = os.lseek(fd, start, os.SEEK_HOLE)
        yield start, offset


def _templates_prune(folder: Path) -> None:
    """Beyond the newest `_TEMPLATES_KEPT` (another worker may prune at the same time)."""
    used = {}
    for path in folder.glob("*.img"):
        try:
            used[path] = path.stat().st_mtime
        except FileNotFoundError:
            continue
    for old in sorted(used, key=used.get, reverse=True)[_TEMPLATES_KEPT:]:
        old.unlink(missing_ok=True)


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
