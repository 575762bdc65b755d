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
import resource
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
from worker.engine.sandbox.cgroups import RunCgroup, run_cgroup
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
        isolated = self.isolated
        if not isolated and not self.allow_unsandboxed:
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
            command = [*(self._isolation_prefix(workdir, inside, cwd or inside, limits, extra) if isolated else []),
                       *(proxy.wrap(argv, INSIDE if isolated else str(proxy.folder)) if proxy else argv)]
            watch = RunWatch(workdir, output.fileno(), limits, uid, cgroup.processes if cgroup and isolated else None,
                             own_file_system=capped_folder_is(workdir))
            started = time.monotonic()
            process = _started_gated(command, uid, limits, cgroup if isolated else None, cwd=workdir, stdout=output,
                                     env=clean_environment(inside, {**(proxy.environment() if proxy else {}),
                                                                    **(env or {})}))
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
            status = status_from_exit(exit_code, kept, isolated)
        return RunResult(status=status, exit_code=exit_code, output=kept,
                         output_truncated=written > limits.output_bytes, seconds=seconds, started_at=started)

    def _read_only(self) -> list[tuple[Path, str]]:
        return read_only_mounts(self.read_only)

    def _isolation_prefix(self, workdir: Path, inside: str, cwd: str, limits: Limits,
                          extra: list[tuple[Path, str]]) -> list[str]:
        # a network of its own: loopback
        args = [_host_program("bwrap"), "--unshare-all", "--die-with-parent", "--new-session"]
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


# The run's first process (a shell, one thread) moves itself into the run's cgroups, then waits on
# its standard input until the worker has set its rlimits; then it becomes the run, as the run's
# user. Every process the run starts inherits both. The worker sets the limits while the process is
# still root (it may not on another user's process without CAP_SYS_RESOURCE), and setpriv makes it
# the run's user: Python starts a process as another user only by a fork, which costs more.
_START = ["/bin/sh", "-c", 'while [ "$1" != -- ]; do echo 0 > "$1" || exit 125; shift; done; shift; '
          'read answer; [ "$answer" = go ] || exit 125; exec "$@" </dev/null', "commitgym-start"]


def _started_gated(command: list[str], uid: Optional[int], limits: Limits, cgroup: Optional[RunCgroup], *,
                   cwd: Path, stdout, env: dict) -> subprocess.Popen:
    """`command` started as the run's user, in its cgroups, with its limits in place before it runs; a
    run whose limits cannot be set does not run."""
    as_user = [] if uid is None else [_host_program("setpriv"), f"--reuid={uid}", f"--regid={uid}", "--clear-groups",
                                      "--"]
    gate_read, gate_write = os.pipe()
    try:
        process = subprocess.Popen([*_START, *(cgroup.join_files if cgroup else []), "--", *as_user, *command],
                                   cwd=cwd, stdin=gate_read, stdout=stdout, stderr=subprocess.STDOUT, env=env,
                                   start_new_session=True)
    except BaseException:
        os.close(gate_write)
        raise
    finally:
        os.close(gate_read)
    try:
        for limit, values in _rlimits(limits).items():
            resource.prlimit(process.pid, limit, values)
        os.write(gate_write, b"go\n")
    except (ProcessLookupError, BrokenPipeError):
        pass  # it ended before it could run anything (its cgroups refused it): its exit and words say so
    except OSError as error:
        _kill_group(process)
        raise SandboxUnavailable(f"the run's limits could not be set, so it did not run: {error}") from None
    finally:
        os.close(gate_write)
    return process


def _host_program(name: str) -> str:
    """The program's path as the worker finds it, on its own PATH: the run's first process is root,
    and the run's environment (its PATH included) is the caller's to set."""
    found = shutil.which(name)
    if found is None:
        raise SandboxUnavailable(f"{name} is not on the worker's PATH, so no run can start: install it "
                                 f"(Debian: util-linux for setpriv, bubblewrap for bwrap)")
    return found


def _rlimits(limits: Limits) -> dict[int, tuple[int, int]]:
    """(soft, hard) of each rlimit on every process of the run: CPU time past the soft limit gets
    SIGXCPU (a timeout), 5 s more SIGKILL."""
    return {resource.RLIMIT_AS: (limits.memory_bytes,) * 2,
            resource.RLIMIT_CPU: (limits.cpu_seconds, limits.cpu_seconds + 5),
            resource.RLIMIT_FSIZE: (limits.file_bytes,) * 2,
            resource.RLIMIT_NPROC: (limits.processes,) * 2,
            resource.RLIMIT_NOFILE: (limits.open_files,) * 2}


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


