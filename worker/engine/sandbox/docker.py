"""Run untrusted code in a Docker container: the `docker` sandbox backend.

Same interface and statuses as `LocalSandbox` (the `Sandbox` protocol of base.py): `run(argv, workdir=...)`
returns a `RunResult`. The engine's cgroups bound memory (`mem_limit`, no swap), processes
(`pids_limit`) and, optionally, CPUs; rlimits bound CPU time and the size of any file written.
The process runs as an unprivileged user with no capabilities, on a read-only root with a private
/tmp, sees its working copy (read-write) and the paths it is given (read-only), and has no network:
a run that may download reaches the package index alone, through the worker's proxy (index_proxy.py).

Its output goes to a file outside the container, so the file-size limit stops a flood exactly as
in the local sandbox (and the engine stores no log). At the wall-clock deadline the container is
killed; it is removed in every case. Should the worker itself die, the container still ends itself
(a `timeout` inside it, a little after the deadline) and `docker_sandbox_cleanup()` removes what is
left: every container is labelled `commitgym=1` with its deadline.
"""

import math
import os
import shutil
import tempfile
import time
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path, PurePosixPath
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
    sandbox_file_open,
    status_from_exit,
)
from worker.engine.sandbox.disk import capped_folder_is
from worker.engine.sandbox.index_proxy import DEFAULT_INDEX_HOSTS, index_reach

DEFAULT_IMAGE = "commitgym-base:bookworm"
LABEL = "commitgym"
DEADLINE_LABEL = "commitgym.deadline"  # epoch seconds after which the container may be removed by anyone
HOST_CA_BUNDLE = Path("/etc/ssl/certs/ca-certificates.crt")
OUTPUT_DIR = "/run/commitgym-output"  # where the container writes its output file
INNER_GRACE = 10  # seconds past the deadline at which the container ends itself
REMOVAL_GRACE = 60  # seconds past that at which anyone may remove it
_SIGXCPU_EXIT, _SIGXFSZ_EXIT, _SIGKILL_EXIT = 128 + 24, 128 + 25, 128 + 9


def engine_errors() -> tuple:
    """What the Docker SDK raises when no engine answers or it refuses, for `except engine_errors():`
    (the SDK and requests are imported at call: 0.3 s of every process's start otherwise)."""
    import docker.errors
    import requests

    return docker.errors.DockerException, requests.exceptions.RequestException


def docker_client(timeout: float = 60):
    import docker

    return docker.from_env(timeout=timeout)


@dataclass
class DockerSandbox:
    """A container per run; see the module's docstring."""

    read_only: Sequence[ReadOnlyMount] = field(default_factory=tuple)
    image: str = DEFAULT_IMAGE
    # No container has a network; a run with `network` reaches these hosts alone, through the
    # worker's proxy on a Unix socket mounted into the container (index_proxy.py).
    index_hosts: tuple[str, ...] = DEFAULT_INDEX_HOSTS
    # The host's CA bundle (with any TLS-inspecting proxy's CA), mounted read-only over the image's.
    ca_bundle: Optional[Path] = HOST_CA_BUNDLE
    cpus: Optional[float] = None  # CPUs the container may use at once (None: all)
    # Paths the image itself holds that the run must see (an environment built into the image at
    # /workspace/env): a working folder mounted above one is mounted entry by entry instead.
    image_paths: tuple[str, ...] = ()

    @staticmethod
    def available() -> bool:
        try:
            return bool(docker_client(timeout=5).ping())
        except Exception:
            return False

    @property
    def isolated(self) -> bool:
        return True

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
        """`Sandbox.run` (base.py) in a container of its own."""
        import docker

        try:
            client = docker_client(timeout=max(60.0, limits.wall_seconds + 30))
            config = client.images.get(self.image).attrs.get("Config") or {}
        except docker.errors.ImageNotFound:
            raise SandboxUnavailable(f"the sandbox image {self.image} is missing (deploy/dev/docker.sh or "
                                     f"manage.py build_base_images builds it)") from None
        except docker.errors.DockerException as error:
            raise SandboxUnavailable(f"no Docker engine answers here ({error}); deploy/dev/docker.sh starts one") \
                from None
        if config.get("Entrypoint") or config.get("Volumes"):
            # An entrypoint would run instead of the deadline and the output file; a volume would be
            # writable beside the read-only root, outside every limit.
            raise SandboxUnavailable(f"the image {self.image} sets an entrypoint or volumes: a sandbox runs only "
                                     "images without")
        workdir = workdir.resolve()
        inside = mount_at or str(workdir)
        output_dir = Path(tempfile.mkdtemp(prefix="commitgym-docker-output-"))
        output_dir.chmod(0o755)  # ours: the run can write its output file, never replace it
        output_handle = os.open(output_dir, os.O_RDONLY | os.O_DIRECTORY)
        output_fd = container = None
        try:
            with run_as_user() as uid, index_reach(network, self.index_hosts) as proxy:
                user = f"{uid}:{uid}" if uid is not None else f"{os.getuid()}:{os.getgid()}"
                hand_over(workdir, uid)
                output_fd = os.open("output", os.O_RDONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600,
                                    dir_fd=output_handle)  # kept open: its size is watched during the run
                if uid is not None:
                    os.chown("output", uid, uid, dir_fd=output_handle, follow_symlinks=False)
                container = client.containers.create(
                    self.image, self._command(proxy.wrap(argv) if proxy else argv, limits), **self._options(
                        workdir, inside, cwd or inside, output_dir, limits, user,
                        self._environment(inside, {**(proxy.environment() if proxy else {}), **(env or {})}),
                        [proxy.mount] if proxy else []))
                watch = RunWatch(workdir, output_fd, limits, uid, own_file_system=capped_folder_is(workdir))
                started = time.monotonic()
                container.start()
                exit_code, stopped = run_watched(partial(_exit_within, container), partial(_kill, container), watch,
                                                 limits.wall_seconds)
                seconds = time.monotonic() - started
                out_of_memory = bool((container.attrs if _reload(container) else {}).get("State", {})
                                     .get("OOMKilled"))
                with sandbox_file_open(output_handle, "output") as output:
                    written = os.fstat(output.fileno()).st_size if output is not None else 0
                    kept = head_and_tail(output, written, limits.output_bytes) if output is not None else b""
                kept += proxy.account().encode() if proxy else b""
        finally:
            if container is not None:
                _remove(container)
            if output_fd is not None:
                os.close(output_fd)
            os.close(output_handle)
            shutil.rmtree(output_dir, ignore_errors=True)
        if stopped:
            status = stopped
        elif exit_code == _SIGKILL_EXIT and seconds >= limits.wall_seconds:
            status, exit_code = "timeout", None  # the container's own timeout
        elif out_of_memory:
            status = "out_of_memory"
        elif exit_code == _SIGXFSZ_EXIT or (written >= limits.file_bytes and exit_code != 0):
            status = "output_limit"
        elif exit_code == _SIGXCPU_EXIT:
            status = "timeout"
        else:
            status = status_from_exit(exit_code, kept, isolated=True)
        return RunResult(status=status, exit_code=exit_code, output=kept,
                         output_truncated=written > limits.output_bytes, seconds=seconds, started_at=started)

    def _command(self, argv: Sequence[str], limits: Limits) -> list[str]:
        """The output to a file (so the file-size limit applies to it), and the container's own deadline."""
        inner = math.ceil(limits.wall_seconds) + INNER_GRACE
        return ["timeout", "-s", "KILL", str(inner),
                "/bin/sh", "-c", f'exec "$0" "$@" >{OUTPUT_DIR}/output 2>&1', *argv]

    def _environment(self, inside: str, extra: Optional[dict]) -> dict:
        env = clean_environment(inside, None)
        if self._entry_by_entry(inside):
            env["HOME"] = "/tmp"  # the image's folder at `inside` is read-only: a home the run may write
        if self.ca_bundle is not None and Path(self.ca_bundle).exists():
            env.update(SSL_CERT_FILE=str(HOST_CA_BUNDLE), PIP_CERT=str(HOST_CA_BUNDLE),
                       REQUESTS_CA_BUNDLE=str(HOST_CA_BUNDLE))
        env.update(extra or {})
        return env

    def _mounts(self, workdir: Path, inside: str, output_dir: Path, extra: list[tuple[Path, str]]) -> list:
        from docker.types import Mount

        mounts = [*self._workdir_mounts(workdir, inside), Mount(OUTPUT_DIR, str(output_dir), type="bind")]
        mounts += [Mount(target, str(source), type="bind", read_only=True) for source, target in extra]
        if self.ca_bundle is not None and Path(self.ca_bundle).exists():
            mounts.append(Mount(str(HOST_CA_BUNDLE), str(Path(self.ca_bundle).resolve()), type="bind",
                                read_only=True))
        mounts += [Mount(target, str(source), type="bind", read_only=True)
                   for source, target in read_only_mounts(self.read_only)]
        return mounts

    def _workdir_mounts(self, workdir: Path, inside: str) -> list:
        """The working folder at `inside`; where that would hide a path the image holds, each of the
        folder's entries at its own place below `inside` (the entries the run is given are all made
        before it starts; the image's own folder stays read-only, as the whole root is)."""
        from docker.types import Mount

        above = PurePosixPath(inside)
        if not self._entry_by_entry(inside):
            return [Mount(inside, str(workdir), type="bind")]
        mounts = []
        for entry in sorted(workdir.iterdir()):
            target = str(above / entry.name)
            if entry.is_symlink() or not (entry.is_dir() or entry.is_file()) or any(
                    PurePosixPath(target) == PurePosixPath(path) or PurePosixPath(target) in PurePosixPath(path).parents
                    for path in self.image_paths):
                continue  # a link would be followed on this machine; the image's paths stay the image's
            mounts.append(Mount(target, str(entry), type="bind"))
        return mounts

    def _entry_by_entry(self, inside: str) -> bool:
        return any(PurePosixPath(inside) in PurePosixPath(path).parents for path in self.image_paths)

    def _options(self, workdir: Path, inside: str, cwd: str, output_dir: Path, limits: Limits,
                 user: str, environment: dict, extra_mounts: list[tuple[Path, str]] = ()) -> dict:
        from docker.types import LogConfig, Ulimit

        deadline = time.time() + limits.wall_seconds + INNER_GRACE + REMOVAL_GRACE
        options = dict(
            user=user,
            working_dir=cwd,
            environment=environment,
            mounts=self._mounts(workdir, inside, output_dir, list(extra_mounts)),
            network_mode="none",  # a run with `network` reaches the index through the mounted proxy
            mem_limit=limits.memory_bytes,
            memswap_limit=limits.memory_bytes,  # no swap
            pids_limit=limits.processes,
            ulimits=[Ulimit(name="fsize", soft=limits.file_bytes, hard=limits.file_bytes),
                     Ulimit(name="cpu", soft=limits.cpu_seconds, hard=limits.cpu_seconds + 5),
                     Ulimit(name="core", soft=0, hard=0),
                     Ulimit(name="nofile", soft=limits.open_files, hard=limits.open_files)],
            read_only=True,
            tmpfs={"/tmp": f"rw,exec,nosuid,nodev,mode=1777,size={limits.tmp_bytes}"},  # memory: in mem_limit too
            shm_size=limits.tmp_bytes,
            cap_drop=["ALL"],
            security_opt=["no-new-privileges"],
            init=True,  # a real PID 1 reaps orphans; the command is not PID 1, so rlimit signals reach it
            log_config=LogConfig(type="none"),
            labels={LABEL: "1", DEADLINE_LABEL: str(int(deadline))},
            stdin_open=False,
            tty=False,
        )
        if self.cpus:
            options["nano_cpus"] = int(self.cpus * 1e9)
        return options


def _exit_within(container, seconds: float) -> Optional[int]:
    import requests

    try:
        return container.wait(timeout=seconds)["StatusCode"]
    except (requests.exceptions.ReadTimeout, requests.exceptions.ConnectionError):
        return None


def _reload(container) -> bool:
    try:
        container.reload()
        return True
    except Exception:
        return False


def _kill(container) -> None:
    try:
        container.kill()
    except Exception:  # it ended on its own meanwhile
        pass
    try:
        container.wait(timeout=30)
    except Exception:
        pass


def _remove(container) -> None:
    try:
        container.remove(force=True, v=True)
    except Exception:
        pass  # already gone; docker_sandbox_cleanup() catches anything else


def docker_sandbox_cleanup(now: Optional[float] = None) -> list[str]:
    """Remove every sandbox container past its deadline (left by a worker that died); the ids removed.
    Call it when a worker starts and now and then: containers of live runs are not touched."""
    import docker

    now = time.time() if now is None else now
    removed = []
    try:
        containers = docker_client(timeout=30).containers.list(all=True, filters={"label": f"{LABEL}=1"})
    except docker.errors.DockerException:
        return removed
    for container in containers:
        try:
            deadline = float(container.labels.get(DEADLINE_LABEL, "0"))
        except ValueError:
            deadline = 0
        if deadline <= now:
            _remove(container)
            removed.append(container.id)
    return removed
