"""What every sandbox backend shares: the `Sandbox` protocol, its limits and result, and the
pieces both backends use (a user id per run, a clean environment, the output kept, the status).

A backend runs `argv` with a working copy as the only writable place and returns a `RunResult`
whose status a person can read; see `local` (bubblewrap) and `docker` (a container per run).
"""

import fcntl
import os
import random
import signal
import stat
import tempfile
import time
from contextlib import contextmanager
from dataclasses import dataclass
from functools import partial
from pathlib import Path, PurePosixPath
from typing import BinaryIO, Callable, Iterator, Literal, Optional, Protocol, Sequence, Union

# Each run gets a user id of its own from this range, so its process limit is its own and,
# at the end, every process it left behind (a daemon, a namespace's init) can be found and killed.
SANDBOX_UIDS = range(200_000, 204_096)
_SIGNAL_EXIT = 128  # bubblewrap exits with 128 + N when the process was killed by signal N


# "ok", "failed" (non-zero exit), "timeout" (wall or CPU time), "out_of_memory",
# "output_limit" (a file grew past file_bytes, or the output past output_file_bytes),
# "disk_limit" (the working copy grew by more than disk_bytes), "killed" (another signal)
RunStatus = Literal["ok", "failed", "timeout", "out_of_memory", "output_limit", "disk_limit", "killed"]
# Mounted read-only: a path, or (path, where the sandbox sees it), e.g. an environment's virtualenv.
ReadOnlyMount = Union[Path, tuple[Path, str]]


class SandboxUnavailable(Exception):
    """No isolation is available here and the operator has not allowed running without it."""


@dataclass(frozen=True)
class Limits:
    wall_seconds: float = 600
    cpu_seconds: int = 600
    memory_bytes: int = 4 << 30  # address space
    processes: int = 256
    file_bytes: int = 1 << 30  # any one file written, standard output included
    tmp_bytes: int = 512 << 20  # /tmp and /dev/shm are memory: each is capped
    output_bytes: int = 4 << 20  # output kept for the record
    output_file_bytes: int = 64 << 20  # output the worker holds on its disk before the run is stopped
    disk_bytes: int = 8 << 30  # growth of the working copy (and files it deleted but holds open) before it is stopped
    disk_files: int = 1_000_000  # files and folders the working copy may gain
    open_files: int = 4096  # descriptors each process may hold


@dataclass(frozen=True)
class RunResult:
    status: RunStatus
    exit_code: Optional[int]
    output: bytes  # standard output and error, interleaved, at most Limits.output_bytes
    output_truncated: bool
    seconds: float
    started_at: float = 0.0  # time.monotonic() as the process started

    @property
    def ok(self) -> bool:
        return self.status == "ok"


class Sandbox(Protocol):
    """A place to run untrusted code; `LocalSandbox` and `DockerSandbox` are the backends."""

    read_only: Sequence[ReadOnlyMount]

    @property
    def isolated(self) -> bool:
        """False only for a local sandbox allowed to run without bubblewrap."""

    def run(self, argv: Sequence[str], *, workdir: Path, network: bool = False, limits: Limits = Limits(),
            env: Optional[dict] = None, mount_at: Optional[str] = None, cwd: Optional[str] = None) -> RunResult:
        """Run `argv` with `workdir` as the only writable place, which the sandbox sees at `mount_at`
        (default: its own path), from `cwd` inside the sandbox (default: there)."""


def read_only_mounts(entries: Sequence[ReadOnlyMount]) -> list[tuple[Path, str]]:
    """(host path, where the sandbox sees it) for each read-only mount, the host path resolved; a
    host path that is a link is refused (it may have been planted by code that ran in a sandbox)."""
    pairs = []
    for entry in entries:
        source, target = entry if isinstance(entry, tuple) else (entry, str(entry))
        if Path(source).is_symlink():
            raise PermissionError(f"{source} is a symbolic link: refusing to mount it")
        pairs.append((Path(source).resolve(), str(target)))
    return pairs


@contextmanager
def sandbox_file_open(directory: Union[Path, int], relative: str) -> Iterator[Optional[BinaryIO]]:
    """A file that code in a sandbox could have written or replaced, opened as it was left: no link
    followed at any component below `directory` (a folder we made, or a handle to one taken before
    the run), a plain file only, never blocking on a pipe or device. None when it is anything else."""
    parts = PurePosixPath(relative).parts
    if not parts or any(part in ("..", "/") for part in parts):
        yield None
        return
    fd = None
    try:
        folder = os.dup(directory) if isinstance(directory, int) else os.open(
            directory, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)
    except OSError:
        yield None
        return
    try:
        for part in parts[:-1]:
            below = os.open(part, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW, dir_fd=folder)
            os.close(folder)
            folder = below
        fd = os.open(parts[-1], os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK, dir_fd=folder)
    except OSError:
        pass
    finally:
        os.close(folder)
    if fd is not None and not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        fd = None
    if fd is None:
        yield None
        return
    with os.fdopen(fd, "rb") as file:
        yield file


def sandbox_file_read(directory: Union[Path, int], relative: str, *, max_bytes: int = 64 << 20) -> bytes:
    """What `sandbox_file_open` finds, at most `max_bytes` of it; b"" when it is not a plain file."""
    with sandbox_file_open(directory, relative) as file:
        return file.read(max_bytes) if file is not None else b""


def sandbox_file_create(directory: Path, relative: str, data: bytes) -> bool:
    """Write a new file below a folder code in a sandbox may have shaped, making the folders on the
    way: no link followed at any component, nothing there already replaced. False when a link, a
    file or anything else stands in the way."""
    parts = PurePosixPath(relative).parts
    if not parts or any(part in ("..", "/", ".") for part in parts):
        return False
    try:
        folder = os.open(directory, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)
    except OSError:
        return False
    try:
        for part in parts[:-1]:
            try:
                os.mkdir(part, 0o755, dir_fd=folder)
            except FileExistsError:
                pass
            below = os.open(part, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW, dir_fd=folder)
            os.close(folder)
            folder = below
        fd = os.open(parts[-1], os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o644, dir_fd=folder)
    except OSError:
        return False
    finally:
        os.close(folder)
    with os.fdopen(fd, "wb") as file:
        file.write(data)
    return True


SANDBOX_PATH = "/usr/local/bin:/usr/bin:/bin"


def clean_environment(home: str, extra: Optional[dict]) -> dict:
    """Nothing of the worker's environment (its secrets included) reaches the sandbox."""
    env = {
        "PATH": SANDBOX_PATH,
        "HOME": home,
        "LANG": "C.UTF-8",
        "TMPDIR": "/tmp",
        "PYTHONDONTWRITEBYTECODE": "1",
    }
    env.update(extra or {})
    return env


@contextmanager
def run_as_user() -> Iterator[Optional[int]]:
    """A user id no other run holds (None when not root: the run keeps ours); when the run
    ends, every process of that user is killed."""
    if os.geteuid() != 0:
        yield None
        return
    locks = _uid_locks()
    locks.mkdir(mode=0o700, exist_ok=True)
    start = random.randrange(len(SANDBOX_UIDS))
    for offset in range(len(SANDBOX_UIDS)):
        uid = SANDBOX_UIDS[(start + offset) % len(SANDBOX_UIDS)]
        fd = os.open(locks / str(uid), os.O_CREAT | os.O_RDWR, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            continue
        try:
            yield uid
        finally:
            _kill_user(uid)
            os.close(fd)
        return
    raise SandboxUnavailable("every sandbox user id is in use")


def _uid_locks() -> Path:
    return Path(tempfile.gettempdir()) / "commitgym-sandbox-uids"


def sandbox_user_held(uid: int) -> bool:
    """Whether a live run holds the sandbox user `uid`: a process or container of a user no run holds was
    left behind (run_as_user kills the user's processes before it lets the user go)."""
    try:
        fd = os.open(_uid_locks() / str(uid), os.O_RDONLY)
    except FileNotFoundError:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return True
    finally:
        os.close(fd)
    return False


def _user_processes(uid: int) -> list[int]:
    """Live processes whose real user is `uid` (read from status: a process that is not
    dumpable, bubblewrap's for one, has a /proc folder owned by root). Plain system calls: every
    run ends with this look at every process."""
    pids, wanted = [], f"Uid:\t{uid}\t".encode()
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            fd = os.open(f"/proc/{entry}/status", os.O_RDONLY)
        except (FileNotFoundError, ProcessLookupError):
            continue
        try:
            text = os.read(fd, 8192)
        except ProcessLookupError:
            continue
        finally:
            os.close(fd)
        if wanted in text and b"State:\tZ" not in text:  # a zombie is dead already
            pids.append(int(entry))
    return pids


def _kill_user(uid: int) -> None:
    for _ in retries():
        pids = _user_processes(uid)
        if not pids:
            return
        for pid in pids:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass


def retries(seconds: float = 1.0, first_wait: float = 0.0005, longest_wait: float = 0.02) -> Iterator[None]:
    """Attempts for about `seconds`, each after a wait twice the last (from `first_wait` up to
    `longest_wait`): what the kernel finishes within a millisecond, a dead run's cgroup emptying
    say, is not kept waiting a whole long wait, and what takes longer is not spun on."""
    deadline, wait = time.monotonic() + seconds, first_wait
    while True:
        yield
        if time.monotonic() >= deadline:
            return
        time.sleep(wait)
        wait = min(2 * wait, longest_wait)


def hand_over(workdir: Path, uid: Optional[int]) -> None:
    """The run's user owns the working copy, and only it."""
    if uid is None:
        return
    for _, dirs, files, folder in os.fwalk(workdir):  # each name changed through its folder's handle
        for name in dirs + files:
            os.chown(name, uid, uid, dir_fd=folder, follow_symlinks=False)
    os.chown(workdir, uid, uid, follow_symlinks=False)


def folder_usage(folder: Path) -> tuple[int, int]:
    """(the disk its files use, how many entries it holds), links never followed. Entries that
    go while it is walked are skipped; a folder that cannot be read raises (it cannot be measured)."""
    total, entries, stack = 0, 0, [str(folder)]
    while stack:
        try:
            listed = list(os.scandir(stack.pop()))
        except (FileNotFoundError, NotADirectoryError):
            continue
        for entry in listed:
            entries += 1
            try:
                total += entry.stat(follow_symlinks=False).st_blocks * 512
                if entry.is_dir(follow_symlinks=False):
                    stack.append(entry.path)
            except FileNotFoundError:
                pass
    return total, entries


def deleted_open_bytes(uid: Optional[int], device: int, processes: Optional[Callable[[], list[int]]] = None) -> int:
    """The disk held by files on `device` the user's processes deleted but keep open (a walk misses
    them). `processes` lists the run's processes where something cheaper than a look at every
    process's status knows them (its cgroup)."""
    if uid is None:
        return 0
    total, seen = 0, set()
    for pid in (processes or partial(_user_processes, uid))():
        try:
            descriptors = os.listdir(f"/proc/{pid}/fd")
        except OSError:
            continue
        for fd in descriptors:
            try:
                held = os.stat(f"/proc/{pid}/fd/{fd}")
            except OSError:
                continue
            if stat.S_ISREG(held.st_mode) and held.st_nlink == 0 and held.st_dev == device \
                    and held.st_ino not in seen:
                seen.add(held.st_ino)
                total += held.st_blocks * 512
    return total


class RunWatch:
    """What a run may not outgrow while it runs, looked at every so often: its working copy
    (`disk_bytes` and `disk_files` more than at the start, files it deleted but holds open included)
    and its output file on the worker's disk. A working copy that is a file system of its own (a
    capped folder, disk.py) is measured by that file system's counts, which hold everything the run
    wrote, deleted files still open included, at no cost; any other is walked, spaced so the walk
    takes at most a fifth of the time. Between two looks a run can overshoot by what it writes
    meanwhile, and no single file can pass `file_bytes`."""

    def __init__(self, workdir: Path, output_fd: Optional[int], limits: Limits, uid: Optional[int],
                 processes: Optional[Callable[[], list[int]]] = None, *, own_file_system: bool = False):
        self.workdir, self.output_fd, self.limits, self.uid = workdir, output_fd, limits, uid
        self.processes = processes  # the run's processes, where its cgroup lists them
        self.own_file_system = own_file_system
        self.start_bytes, self.start_entries = self._usage()
        self.device = os.stat(workdir).st_dev
        self.interval, self.next_look = 0.5, time.monotonic() + 0.5

    def _usage(self) -> tuple[int, int]:
        if self.own_file_system:
            counts = os.statvfs(self.workdir)
            return (counts.f_blocks - counts.f_bfree) * counts.f_frsize, counts.f_files - counts.f_ffree
        return folder_usage(self.workdir)

    def wait_slice(self) -> float:
        return max(0.05, self.next_look - time.monotonic())

    def breach(self, *, now: bool = False) -> Optional[RunStatus]:
        """The status to stop the run with, if it outgrew a limit; None otherwise (and, unless `now`,
        before it is time to look)."""
        if not now and time.monotonic() < self.next_look:
            return None
        if self.output_fd is not None and os.fstat(self.output_fd).st_size > self.limits.output_file_bytes:
            return "output_limit"
        started = time.monotonic()
        try:
            used, entries = self._usage()
        except OSError:
            return "disk_limit"  # a working copy that cannot be measured is not let grow
        if not self.own_file_system:
            used += deleted_open_bytes(self.uid, self.device, self.processes)
        grown = used - self.start_bytes
        self.interval = max(0.5, 5 * (time.monotonic() - started))
        self.next_look = time.monotonic() + self.interval
        gained = entries - self.start_entries
        return "disk_limit" if grown > self.limits.disk_bytes or gained > self.limits.disk_files else None


def run_watched(wait_for: Callable[[float], Optional[int]], kill: Callable[[], None], watch: RunWatch,
                wall_seconds: float) -> tuple[Optional[int], Optional[RunStatus]]:
    """Wait for a run to end (`wait_for(seconds)`: its exit code, or None while it runs), stopping it
    at its deadline or once it outgrows a limit: (exit code or None, "timeout" / the limit's status or None)."""
    deadline = time.monotonic() + wall_seconds
    while True:
        left = deadline - time.monotonic()
        if left <= 0:
            kill()
            return None, "timeout"
        exit_code = wait_for(min(left, watch.wait_slice()))
        if exit_code is not None:  # a run that outgrew a limit between two looks still did
            return exit_code, watch.breach(now=True)
        breach = watch.breach()
        if breach:
            kill()
            return None, breach


def head_and_tail(output, size: int, keep: int) -> bytes:
    """All of the output, or its first and last halves: errors tend to be at the end."""
    output.seek(0)
    if size <= keep:
        return output.read()
    head = output.read(keep // 2)
    output.seek(size - (keep - keep // 2))
    tail = output.read(keep - keep // 2)
    return head + f"\n[... {size - keep} bytes cut ...]\n".encode() + tail


def status_from_exit(exit_code: int, output: bytes, isolated: bool) -> RunStatus:
    if exit_code == 0:
        return "ok"
    signal_number = exit_code - _SIGNAL_EXIT if isolated and exit_code > _SIGNAL_EXIT else -exit_code
    if signal_number == signal.SIGXCPU:
        return "timeout"
    if signal_number == signal.SIGXFSZ:
        return "output_limit"
    if b"MemoryError" in output or b"Cannot allocate memory" in output:
        return "out_of_memory"
    if signal_number in (signal.SIGKILL, signal.SIGSEGV, signal.SIGBUS, signal.SIGABRT):
        return "killed"
    return "failed"
