"""A working copy with a hard size: a file system of its own, on a sparse image file.

The watch in base.py stops a run that outgrows its working copy, but only at its next look. Where
the worker is root and can attach loop devices, a run's fresh working copy gets an ext4 file system
of its own, sized to what the copy holds plus the run's `disk_bytes` and `disk_files` (a little
more, so the watch still names the limit): a write past it fails with ENOSPC however fast it
comes. Elsewhere the watch alone holds.

Every run needs a fresh, empty file system, and grading makes one for every candidate:
- mkfs on an 8 GiB sparse image takes about 6 ms here; a copy of the 160 kB it wrote, from an
  image made once per size and kept, a fraction of one. Sizes are rounded up (by at most 1/32) so
  that the runs of one task share a template.
- Each copy gets a directory hash seed of its own, the seed that decides the order a folder lists
  its files in: with one seed for all, every rerun of a task would list them in one order, and a
  test that depends on that order would never show as flaky. The templates have no metadata
  checksums, so the superblock takes a new seed with no checksum to write again.
- The image is attached to a loop device that lets go of it by itself once unmounted, and mounted
  and unmounted by system calls: the mount and umount programs took 10 to 20 ms each (they scan
  every loop device and mount), the calls about 2 ms each. LOOP_CONFIGURE needs Linux 5.8.
- At the end the file system is shut down before it is unmounted, so nothing the run wrote is
  written back to an image about to be removed.
"""

import ctypes
import errno
import fcntl
import os
import shutil
import stat
import struct
import subprocess
import tempfile
import time
import uuid
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator, Optional, Union

from worker.engine.sandbox.base import Limits, folder_usage

_SLACK = 1.05  # past the cap, so the watch sees the breach and names it before the file system refuses
_IMAGE_SUFFIX = ".commitgym-disk"
_TEMPLATES_KEPT = 16
# What mkfs writes with lazy initialisation is a few hundred kB in short runs; a longer run of data
# means the file system cannot find holes (SEEK_DATA unsupported), and the copy would read every byte.
_MAX_DATA_RUN = 64 << 20
# No journal and no blocks kept for growing it (it never grows): half of mkfs's time goes on those.
# No metadata checksums: the superblock's hash seed is rewritten in each copy (uninit_bg keeps the
# inode tables lazily initialised without them).
_FEATURES = "^has_journal,^resize_inode,^metadata_csum,uninit_bg"
# ext4's superblock: at byte 1024; its magic number, read-only features and directory hash seed.
_SUPERBLOCK, _MAGIC_AT, _MAGIC, _RO_FEATURES_AT, _METADATA_CSUM, _HASH_SEED_AT = 1024, 0x38, 0xEF53, 0x64, 0x400, 0xEC

_LOOP_CTL_GET_FREE, _LOOP_CONFIGURE, _LO_FLAGS_AUTOCLEAR = 0x4C82, 0x4C0A, 4
_LOOP_CONFIG_BYTES, _LO_FLAGS_AT = 304, 8 + 52  # struct loop_config; lo_flags inside its loop_info64
_MS_NOSUID, _MS_NODEV, _MNT_DETACH = 2, 4, 2
_EXT4_IOC_SHUTDOWN, _EXT4_GOING_FLAGS_NOLOGFLUSH = 0x8004587D, 2
_LOOP_MAJOR = 7
_libc = ctypes.CDLL(None, use_errno=True)  # the C library the interpreter runs on


def capped_folders_available() -> bool:
    return os.geteuid() == 0 and shutil.which("mkfs.ext4") is not None and os.path.exists("/dev/loop-control")


@contextmanager
def capped_folder(folder: Path, *, holds: Path, limits: Limits) -> Iterator[bool]:
    """`folder` (made empty here) on a file system of its own, big enough for what `holds` uses
    plus the limits; True if it is, False where this machine cannot (the folder is plain then)."""
    folder.mkdir(parents=True, exist_ok=True)
    image = folder.with_name(folder.name + _IMAGE_SUFFIX)
    mount = None
    try:
        mount = _mounted(folder, image, holds, limits) if capped_folders_available() else None
        yield mount is not None
    finally:
        if mount is not None:
            _shut_down(folder, mount.device)
            _unmounted(folder)
        image.unlink(missing_ok=True)
        if mount is not None:
            os.close(mount.lock)  # once its name is gone: no sweep can take a lock on it after


def capped_folder_is(folder: Path) -> bool:
    """Whether `folder` is a capped folder, mounted: the file system below it holds nothing else. No
    code in a sandbox can make one look so (it can neither mount on the worker's side nor write beside
    its own folder)."""
    folder = Path(folder)
    return os.path.ismount(folder) and folder.with_name(folder.name + _IMAGE_SUFFIX).is_file()


@dataclass(frozen=True)
class _Mount:
    device: int  # the file system's, as the worker mounted it: the end shuts down that one only
    lock: int  # a handle on the image, locked while the worker uses it: the sweep leaves it alone


def _mounted(folder: Path, image: Path, holds: Path, limits: Limits) -> Optional[_Mount]:
    used, entries = folder_usage(holds)
    inodes = _rounded(int((entries + limits.disk_files) * _SLACK) + 1024)
    # and the file system's own blocks: its inode tables (256 bytes an inode), bitmaps, no journal
    size = _rounded(int((used + limits.disk_bytes) * _SLACK) + inodes * 256 + (8 << 20))
    lock, mounted = None, False
    try:
        if not _empty_image(image, size, inodes):
            return None
        lock = os.open(image, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
        fcntl.flock(lock, fcntl.LOCK_EX)  # before the mount: no sweep takes it for a dead worker's
        # The loop device gets a handle of its own (_loop_attached): it keeps its file open as long as
        # the mount lasts, and a lock on that one would outlive a dead worker.
        _loop_mount(image, folder)
        mounted = True
        (folder / "lost+found").rmdir()  # nothing of the file system's own in the run's folder
        return _Mount(os.stat(folder).st_dev, lock)
    except BaseException as error:  # a job's time limit, say, lands anywhere: nothing is left mounted
        if mounted:
            _unmounted(folder)
        if lock is not None:
            os.close(lock)
        if isinstance(error, OSError):
            return None
        raise


def _rounded(value: int) -> int:
    """`value` rounded up to a step of between 1/64 and 1/32 of it."""
    step = 1 << max(value.bit_length() - 6, 0)
    return -(-value // step) * step


def _empty_image(image: Path, size: int, inodes: int) -> bool:
    """An empty ext4 file system at `image` with a hash seed of its own: a copy of the kept
    template of its size, or made here."""
    try:
        template = _template(size, inodes)
        if template is not None and _sparse_copied(template, image):
            if _hash_seed_renewed(image):
                return True
            template.unlink(missing_ok=True)  # not an image this module made: the next run makes it anew
    except OSError:  # a template another worker pruned meanwhile, say
        pass
    image.unlink(missing_ok=True)
    return _file_system_made(image, size, inodes)


def _file_system_made(image: Path, size: int, inodes: int) -> bool:
    """An empty ext4 file system of `size` bytes and `inodes` inodes in a sparse file at `image`."""
    with open(image, "wb") as sparse:
        sparse.truncate(size)
    return subprocess.run(["mkfs.ext4", "-q", "-F", "-m", "0", "-O", _FEATURES, "-N", str(inodes),
                           "-E", "lazy_itable_init=1,lazy_journal_init=1,nodiscard", str(image)],
                          capture_output=True).returncode == 0


def _hash_seed_renewed(image: Path) -> bool:
    """A new directory hash seed in the image's superblock; False (the image left as it was) when the
    superblock is not one this module's mkfs wrote."""
    with open(image, "r+b") as file:
        superblock = bytearray(os.pread(file.fileno(), 1024, _SUPERBLOCK))
        if len(superblock) < 1024 or struct.unpack_from("<H", superblock, _MAGIC_AT)[0] != _MAGIC or \
                struct.unpack_from("<I", superblock, _RO_FEATURES_AT)[0] & _METADATA_CSUM:
            return False
        os.pwrite(file.fileno(), uuid.uuid4().bytes, _SUPERBLOCK + _HASH_SEED_AT)
    return True


def _template(size: int, inodes: int) -> Optional[Path]:
    """The kept empty image of this size (made now if missing; None if it cannot be). Root's only:
    no run reaches it."""
    folder = Path(tempfile.gettempdir()) / "commitgym-disk-templates"
    folder.mkdir(mode=0o700, exist_ok=True)
    made = os.lstat(folder)
    if not stat.S_ISDIR(made.st_mode) or made.st_uid != os.geteuid() or made.st_mode & 0o077:
        return None  # a folder someone else made or can write to: its images could be anything
    template = folder / f"{size}-{inodes}.img"
    try:
        os.utime(template, follow_symlinks=False)  # the newest are kept
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
    with open(os.open(source, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC), "rb") as reading, \
            open(target, "wb") as writing:
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


def _loop_mount(image: Path, folder: Path) -> None:
    """Mount the file system in `image` at `folder` (nosuid, nodev) through a loop device of its own,
    which the kernel lets go of once the file system is unmounted and no longer used."""
    device, device_fd = _loop_attached(image)
    try:
        # noinit_itable: no kernel thread zeroes the inode tables behind the run; no inode there is read
        if _libc.mount(device.encode(), os.fsencode(folder), b"ext4", _MS_NOSUID | _MS_NODEV, b"noinit_itable"):
            raise _libc_error(f"mount {device} on {folder}")
    finally:
        os.close(device_fd)  # the mount holds the device now (or, when it failed, nothing does)


def _loop_attached(image: Path) -> tuple[str, int]:
    """A free loop device with `image` behind it, cleared by the kernel once the last user lets go;
    its path and an open handle (another worker may take the same free device: then the next)."""
    control = os.open("/dev/loop-control", os.O_RDWR | os.O_CLOEXEC)
    try:
        backing = os.open(image, os.O_RDWR | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError:
        os.close(control)
        raise
    try:
        config = bytearray(_LOOP_CONFIG_BYTES)
        struct.pack_into("<I", config, 0, backing)
        struct.pack_into("<I", config, _LO_FLAGS_AT, _LO_FLAGS_AUTOCLEAR)
        for _ in range(64):
            device = f"/dev/loop{fcntl.ioctl(control, _LOOP_CTL_GET_FREE)}"
            device_fd = os.open(device, os.O_RDWR | os.O_CLOEXEC)
            try:
                fcntl.ioctl(device_fd, _LOOP_CONFIGURE, bytes(config))
                return device, device_fd
            except OSError as error:
                os.close(device_fd)
                if error.errno != errno.EBUSY:
                    raise
        raise OSError(errno.EBUSY, "no loop device stayed free")
    finally:
        os.close(backing)
        os.close(control)


def _shut_down(folder: Path, device: int) -> None:
    """Stop the run's file system at once, nothing written back: what the run left is thrown away,
    and writing it out through the loop device made the unmount take 6 ms instead of 2 (more for a
    large copy). Only the file system on `device`, the one the worker mounted there: were it gone
    (another's sweep), the same call would stop whatever file system holds the folder now. ext4
    logs each one ("shut down requested")."""
    try:
        root = os.open(folder, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)
    except OSError:
        return
    try:
        if os.fstat(root).st_dev != device or os.major(device) != _LOOP_MAJOR:
            return
        fcntl.ioctl(root, _EXT4_IOC_SHUTDOWN, struct.pack("<I", _EXT4_GOING_FLAGS_NOLOGFLUSH))
    except OSError:
        pass  # then the unmount writes it back
    finally:
        os.close(root)


def _unmounted(folder: Union[Path, str]) -> bool:
    """Detach the file system mounted at `folder` (lazily: a process still in it keeps it until it
    leaves); whether it was."""
    return _libc.umount2(os.fsencode(folder), _MNT_DETACH) == 0


def _libc_error(what: str) -> OSError:
    number = ctypes.get_errno()
    return OSError(number, f"{what}: {os.strerror(number)}")


def capped_folders_sweep(root: Path) -> list[str]:
    """Unmount the capped folders below `root` that a dead worker left mounted (a live worker holds
    a lock on each of its images); the mount points."""
    root = str(Path(root).resolve())
    left = []
    for line in Path("/proc/self/mountinfo").read_text().splitlines():
        point = line.split()[4].replace("\\040", " ")
        if point.startswith(root + os.sep) and _left_by_the_dead(Path(point + _IMAGE_SUFFIX)) and _unmounted(point):
            left.append(point)
    return left


def _left_by_the_dead(image: Path) -> bool:
    try:
        held = os.open(image, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError:
        return False
    try:
        fcntl.flock(held, fcntl.LOCK_EX | fcntl.LOCK_NB)
        return True
    except BlockingIOError:
        return False  # a live worker's
    finally:
        os.close(held)
