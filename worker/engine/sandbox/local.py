"""The `local` sandbox backend (see base.py for the interface and what both backends share).

It uses bubblewrap: the process sees the system's /usr and /etc
read-only, its working copy and the paths it is given, a private /tmp, /proc
and /dev, no other process and no network: a step that may download reaches the
package index alone, through the worker's proxy (index_proxy.py); it runs as an
unprivileged user (root ignores the process limit), with rlimits on address
space, CPU time, file size and processes per process, a memory and a pids cgroup
on the whole run (cgroups.py; its tmpfs pages included), a read-only root, and
its whole namespace is killed at the deadline.
"""

import os
import select
import shutil
import signal
import subprocess
import tempfile
import time
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Optional, Sequence

from worker.engine.sandbox.base import (
    Limits,
    ReadOnlyMount,
    RunResult,
    RunWatch,
    SandboxUnavailable,
    clean_environment,
    hand_over,
    head_and_tail,
    read_only_mounts,
    run_as_user,
    run_watched,
    status_from_exit,
)
from worker.engine.sandbox.cgroups import run_cgroup
from worker.engine.sandbox.disk import capped_folder_is
from worker.engine.sandbox.index_proxy import DEFAULT_INDEX_HOSTS, INSIDE, index_reach


@dataclass
class LocalSandbox:
    """bubblewrap + rlimits + an unprivileged user; see the module's docstring."""

    read_only: Sequence[ReadOnlyMount] = field(default_factory=tuple)
    # Without bubblewrap, untrusted code does not run unless the operator says so here.
    allow_unsandboxed: bool = False
    index_hosts: tuple[str, ...] = DEFAULT_INDEX_HOSTS  # what a run with `network` may reach

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
        """`Sandbox.run` (base.py) under bubblewrap, as an unprivileged user of its own."""
        if not self.isolated and not self.allow_unsandboxed:
            raise SandboxUnavailable(
                "bubblewrap (bwrap) is not installed, so untrusted code cannot be isolated here. "
                "Install it (Debian: apt-get install bubblewrap) or allow unsandboxed runs explicitly.")
        workdir = workdir.resolve()
        _require_reachable([workdir, *(source for source, _ in self._read_only())])
        with run_as_user() as uid, tempfile.TemporaryFile() as output, \
                index_reach(network, self.index_hosts) as proxy, \
                run_cgroup(str(uid), memory_bytes=limits.memory_bytes, processes=limits.processes) as cgroup:
            hand_over(workdir, uid)
            inside = mount_at or str(workdir)
            extra = [proxy.mount] if proxy else []
            command = [*(cgroup.join_prefix() if cgroup and self.isolated else []), *self._limits_prefix(limits, uid),
                       *self._isolation_prefix(workdir, inside, cwd or inside, limits, extra),
                       *(proxy.wrap(argv, INSIDE if self.isolated else str(proxy.folder)) if proxy else argv)]
            watch = RunWatch(workdir, output.fileno(), limits, uid,
                             cgroup.processes if cgroup and self.isolated else None,
                             own_file_system=capped_folder_is(workdir))
            started = time.monotonic()
            process = subprocess.Popen(
                command, cwd=workdir, stdin=subprocess.DEVNULL, stdout=output, stderr=subprocess.STDOUT,
                env=clean_environment(inside, {**(proxy.environment() if proxy else {}), **(env or {})}),
                start_new_session=True,
            )
            exit_code, stopped = run_watched(partial(_exit_within, process), partial(_kill_group, process), watch,
                                             limits.wall_seconds)
            seconds = time.monotonic() - started
            written = output.seek(0, os.SEEK_END)
            kept = head_and_tail(output, written, limits.output_bytes) + (proxy.account().encode() if proxy else b"")
            out_of_memory = bool(cgroup and cgroup.out_of_memory())
        if stopped:
            status = stopped
        elif out_of_memory:
            status = "out_of_memory"
        elif written >= limits.file_bytes and exit_code != 0:
            status = "output_limit"
        else:
            status = status_from_exit(exit_code, kept, self.isolated)
        return RunResult(status=status, exit_code=exit_code, output=kept,
                         output_truncated=written > limits.output_bytes, seconds=seconds, started_at=started)

    def _limits_prefix(self, limits: Limits, uid: Optional[int]) -> list[str]:
        prefix = [
            "prlimit", f"--as={limits.memory_bytes}", f"--cpu={limits.cpu_seconds}:{limits.cpu_seconds + 5}",
            f"--fsize={limits.file_bytes}", f"--nproc={limits.processes}", f"--nofile={limits.open_files}", "--",
        ]
        if uid is not None:
            prefix += ["setpriv", f"--reuid={uid}", f"--regid={uid}", "--clear-groups", "--"]
        return prefix

    def _read_only(self) -> list[tuple[Path, str]]:
        return read_only_mounts(self.read_only)

    def _isolation_prefix(self, workdir: Path, inside: str, cwd: str, limits: Limits,
                          extra: list[tuple[Path, str]]) -> list[str]:
        if not self.isolated:
            return []
        args = ["bwrap", "--unshare-all", "--die-with-parent", "--new-session"]  # a network of its own: loopback
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
        for source, target in [*self._read_only(), *extra]:  # after the working copy: they may sit inside it
            args += ["--ro-bind", str(source), target]
        # The root bubblewrap builds is a tmpfs of no size: read-only once everything is mounted on it.
        return [*args, "--remount-ro", "/", "--chdir", cwd, "--"]


def _require_reachable(paths: list[Path]) -> None:
    """The sandbox user must be able to walk to each path it is given."""
    if os.geteuid() != 0:
        return
    for path in paths:
        for folder in reversed(Path(path).resolve().parents):
            if not os.stat(folder).st_mode & 0o001:
                raise PermissionError(f"{folder} is closed to other users, so the sandbox cannot reach {path}")


def _exit_within(process: subprocess.Popen, seconds: float) -> Optional[int]:
    """The exit code if the process ends within `seconds`, else None. A pidfd wakes this the moment it
    ends (Popen.wait with a timeout polls, with sleeps growing to 50 ms: most of a short run)."""
    try:
        pidfd = os.pidfd_open(process.pid)
    except (AttributeError, OSError):  # an older kernel; or it has ended and been reaped
        pidfd = None
    if pidfd is None:
        try:
            return process.wait(timeout=seconds)
        except subprocess.TimeoutExpired:
            return None
    try:
        poller = select.poll()
        poller.register(pidfd, select.POLLIN)
        return process.wait() if poller.poll(max(0, int(seconds * 1000))) else None
    finally:
        os.close(pidfd)


def _kill_group(process: subprocess.Popen) -> None:
    """Killing bubblewrap ends the namespace and every process in it."""
    try:
        os.killpg(process.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    process.wait()


