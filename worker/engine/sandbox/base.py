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
from pathlib import Path, PurePosixPath
from typing import BinaryIO, Iterator, Literal, Optional, Protocol, Sequence, Union

# Each run gets a user id of its own from this range, so its process limit is its own and,
# at the end, every process it left behind (a daemon, a namespace's init) can be found and killed.
SANDBOX_UIDS = range(200_000, 204_096)
_SIGNAL_EXIT = 128  # bubblewrap exits with 128 + N when the process was killed by signal N


# "ok", "failed" (non-zero exit), "timeout" (wall or CPU time), "out_of_memory",
# "output_limit" (a file or the output grew past file_bytes), "killed" (another signal)
RunStatus = Literal["ok", "failed", "timeout", "out_of_memory", "output_limit", "killed"]
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


@dataclass(frozen=True)
class RunResult:
    status: RunStatus
    exit_code: Optional[int]
    output: bytes  # standard output and error, interleaved, at most Limits.output_bytes
    output_truncated: bool
    seconds: float

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


@contextmanager
def sandbox_file_open(directory: Union[Path, int], relative: str) -> Iterator[Optional[BinaryIO]]:
    """A file that code in a sandbox could have written or replaced, opened as it was left: no link
    followed at any component below `directory` (a folder we made, or a handle to one taken before
    the run), a plain file only, never blocking on a pipe or device. None when it is anything else."""
    parts = PurePosixPath(relative).parts
    if not parts or any(part in ("..", "/") for part in parts):
        yield None
        return
    folder = os.dup(directory) if isinstance(directory, int) else os.open(directory, os.O_RDONLY | os.O_DIRECTORY)
    fd = None
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
    locks = Path(tempfile.gettempdir()) / "commitgym-sandbox-uids"
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


def _user_processes(uid: int) -> list[int]:
    """Live processes whose real user is `uid` (read from status: a process that is not
    dumpable, bubblewrap's for one, has a /proc folder owned by root)."""
    pids, wanted = [], f"Uid:\t{uid}\t".encode()
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/status", "rb") as status:
                    text = status.read()
                if wanted in text and b"State:\tZ" not in text:  # a zombie is dead already
                    pids.append(int(entry))
            except (FileNotFoundError, ProcessLookupError):
                pass
    return pids


def _kill_user(uid: int) -> None:
    for _ in range(50):
        pids = _user_processes(uid)
        if not pids:
            return
        for pid in pids:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        time.sleep(0.02)


def hand_over(workdir: Path, uid: Optional[int]) -> None:
    """The run's user owns the working copy, and only it."""
    if uid is None:
        return
    for root, dirs, files in os.walk(workdir):
        for name in dirs + files:
            os.lchown(os.path.join(root, name), uid, uid)
    os.chown(workdir, uid, uid)


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
