"""Run untrusted code (a repository's install scripts and tests, patches, generated tests).

One interface, `Sandbox.run`, with limits and a status a person can read. The
`local` backend uses bubblewrap: the process sees the system's /usr and /etc
read-only, its working copy and the paths it is given, a private /tmp, /proc
and /dev, no other process and no network unless asked; it runs as an
unprivileged user (root ignores the process limit), with rlimits on address
space, CPU time, file size and processes, and its whole namespace is killed at
the deadline.
"""

import fcntl
import os
import random
import shutil
import signal
import stat
import subprocess
import tempfile
import time
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterator, Optional, Sequence, Union

# Each run gets a user id of its own from this range, so its process limit is its own and,
# at the end, every process it left behind (a daemon, a namespace's init) can be found and killed.
SANDBOX_UIDS = range(200_000, 204_096)
_SIGNAL_EXIT = 128  # bubblewrap exits with 128 + N when the process was killed by signal N


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
    # "ok", "failed" (non-zero exit), "timeout" (wall or CPU time), "out_of_memory",
    # "output_limit" (a file or the output grew past file_bytes), "killed" (another signal)
    status: str
    exit_code: Optional[int]
    output: bytes  # standard output and error, interleaved, at most Limits.output_bytes
    output_truncated: bool
    seconds: float

    @property
    def ok(self) -> bool:
        return self.status == "ok"


@dataclass
class LocalSandbox:
    """bubblewrap + rlimits + an unprivileged user; see the module's docstring."""

    # Mounted read-only: a path, or (path, where the sandbox sees it), e.g. an environment's virtualenv.
    read_only: Sequence[Union[Path, tuple[Path, str]]] = field(default_factory=tuple)
    # Without bubblewrap, untrusted code does not run unless the operator says so here.
    allow_unsandboxed: bool = False

    @staticmethod
    def available() -> bool:
        return shutil.which("bwrap") is not None

    @property
    def isolated(self) -> bool:
        return self.available()

    def run(
        self,
        argv: Sequence[str],
        *,
        workdir: Path,
        network: bool = False,
        limits: Limits = Limits(),
        env: Optional[dict] = None,
        mount_at: Optional[str] = None,
        cwd: Optional[str] = None,
    ) -> RunResult:
        """Run `argv` with `workdir` as the only writable place, which the sandbox sees at `mount_at`
        (default: its own path), from `cwd` inside the sandbox (default: there)."""
        if not self.isolated and not self.allow_unsandboxed:
            raise SandboxUnavailable(
                "bubblewrap (bwrap) is not installed, so untrusted code cannot be isolated here. "
                "Install it (Debian: apt-get install bubblewrap) or allow unsandboxed runs explicitly.")
        workdir = workdir.resolve()
        _require_reachable([workdir, *(source for source, _ in self._read_only())])
        with _run_as() as uid, tempfile.TemporaryFile() as output:
            _hand_over(workdir, uid)
            inside = mount_at or str(workdir)
            command = [*self._limits_prefix(limits, uid),
                       *self._isolation_prefix(workdir, inside, cwd or inside, network, limits), *argv]
            started = time.monotonic()
            process = subprocess.Popen(
                command, cwd=workdir, stdin=subprocess.DEVNULL, stdout=output, stderr=subprocess.STDOUT,
                env=_clean_environment(inside, env), start_new_session=True,
            )
            timed_out = False
            try:
                process.wait(timeout=limits.wall_seconds)
            except subprocess.TimeoutExpired:
                timed_out = True
                _kill_group(process)
            seconds = time.monotonic() - started
            written = output.seek(0, os.SEEK_END)
            kept = _head_and_tail(output, written, limits.output_bytes)
        if timed_out:
            status = "timeout"
        elif written >= limits.file_bytes and process.returncode != 0:
            status = "output_limit"
        else:
            status = _status(process.returncode, kept, self.isolated)
        return RunResult(status=status, exit_code=None if timed_out else process.returncode, output=kept,
                         output_truncated=written > limits.output_bytes, seconds=seconds)

    def _limits_prefix(self, limits: Limits, uid: Optional[int]) -> list[str]:
        prefix = [
            "prlimit", f"--as={limits.memory_bytes}", f"--cpu={limits.cpu_seconds}:{limits.cpu_seconds + 5}",
            f"--fsize={limits.file_bytes}", f"--nproc={limits.processes}", "--",
        ]
        if uid is not None:
            prefix += ["setpriv", f"--reuid={uid}", f"--regid={uid}", "--clear-groups", "--"]
        return prefix

    def _read_only(self) -> list[tuple[Path, str]]:
        pairs = []
        for entry in self.read_only:
            source, target = entry if isinstance(entry, tuple) else (entry, str(entry))
            if Path(source).is_symlink():  # it may have been planted by code that ran in a sandbox
                raise PermissionError(f"{source} is a symbolic link: refusing to mount it")
            pairs.append((Path(source).resolve(), str(target)))
        return pairs

    def _isolation_prefix(self, workdir: Path, inside: str, cwd: str, network: bool, limits: Limits) -> list[str]:
        if not self.isolated:
            return []
        args = ["bwrap", "--unshare-all", "--die-with-parent", "--new-session"]
        if network:
            args.append("--share-net")
        args += ["--ro-bind", "/usr", "/usr", "--ro-bind", "/etc", "/etc"]
        for top in ("bin", "sbin", "lib", "lib32", "lib64", "libx32"):
            host = Path("/") / top
            if host.is_symlink():
                args += ["--symlink", os.readlink(host), str(host)]
            elif host.is_dir():
                args += ["--ro-bind", str(host), str(host)]
        tmp_size = str(limits.tmp_bytes)
        args += ["--proc", "/proc", "--dev", "/dev", "--size", tmp_size, "--tmpfs", "/tmp",
                 "--size", tmp_size, "--tmpfs", "/dev/shm", "--bind", str(workdir), inside]
        for source, target in self._read_only():  # after the working copy: they may sit inside it
            args += ["--ro-bind", str(source), target]
        return [*args, "--chdir", cwd, "--"]


def sandbox_file_read(path: Path, *, max_bytes: int = 64 << 20) -> bytes:
    """Read a file that code in a sandbox could have replaced: never through a link, never a
    pipe or device (which could block or never end), at most `max_bytes`. b"" if it is not a
    plain file."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError:
        return b""
    with os.fdopen(fd, "rb") as file:
        if not stat.S_ISREG(os.fstat(file.fileno()).st_mode):
            return b""
        return file.read(max_bytes)


SANDBOX_PATH = "/usr/local/bin:/usr/bin:/bin"


def _clean_environment(home: str, extra: Optional[dict]) -> dict:
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


def _require_reachable(paths: list[Path]) -> None:
    """The sandbox user must be able to walk to each path it is given."""
    if os.geteuid() != 0:
        return
    for path in paths:
        for folder in reversed(Path(path).resolve().parents):
            if not os.stat(folder).st_mode & 0o001:
                raise PermissionError(f"{folder} is closed to other users, so the sandbox cannot reach {path}")


@contextmanager
def _run_as() -> Iterator[Optional[int]]:
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


def _hand_over(workdir: Path, uid: Optional[int]) -> None:
    """The run's user owns the working copy, and only it."""
    if uid is None:
        return
    for root, dirs, files in os.walk(workdir):
        for name in dirs + files:
            os.lchown(os.path.join(root, name), uid, uid)
    os.chown(workdir, uid, uid)


def _head_and_tail(output, size: int, keep: int) -> bytes:
    """All of the output, or its first and last halves: errors tend to be at the end."""
    output.seek(0)
    if size <= keep:
        return output.read()
    head = output.read(keep // 2)
    output.seek(size - (keep - keep // 2))
    tail = output.read()
    return head + f"\n[... {size - keep} bytes cut ...]\n".encode() + tail


def _kill_group(process: subprocess.Popen) -> None:
    """Killing bubblewrap ends the namespace and every process in it."""
    try:
        os.killpg(process.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    process.wait()


def _status(exit_code: int, output: bytes, isolated: bool) -> str:
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
