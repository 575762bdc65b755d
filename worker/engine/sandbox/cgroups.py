"""Limits on a whole run, not on each of its processes: a memory and a pids cgroup per run.

rlimits bound each process alone (three processes of 700 MB fit under a 1 GB RLIMIT_AS, and
pages written to a tmpfs count against none of them). A cgroup counts every process of the run
and the tmpfs pages they write. cgroup v2 is used where the host has its memory and pids
controllers there, else v1's `memory` and `pids` hierarchies; the worker must be root. Each run's
cgroups sit below the worker's own, named after the run's user id, and are removed at its end.
The docker backend needs none of this: the engine gives every container its own cgroup.
"""

import os
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator, Optional

from worker.engine.sandbox.base import SandboxUnavailable, retries

ROOT = Path("/sys/fs/cgroup")


@dataclass
class RunCgroup:
    """The cgroup folders of one run; a process joins by writing 0 into each of `join_files`."""

    folders: list[Path]
    version: int

    @property
    def join_files(self) -> list[str]:
        """Where the run's first process writes 0 to move itself into the run's cgroups. In v1 it
        moves its one thread, through `tasks`: a thread that moves itself takes no lock on every
        thread group of the machine, whose taking waits out an RCU grace period (5 to 20 ms here)."""
        return [str(folder / ("tasks" if self.version == 1 else "cgroup.procs")) for folder in self.folders]

    def processes(self) -> list[int]:
        """The run's live processes: every one it starts is in its cgroup, and none can leave it."""
        return _procs(self.folders[0])

    def out_of_memory(self) -> bool:
        """Whether the kernel killed a process of the run for the memory limit."""
        memory = self.folders[0]
        name = "memory.events" if self.version == 2 else "memory.oom_control"
        counts = dict(line.split()[:2] for line in _read(memory / name).splitlines() if len(line.split()) >= 2)
        return counts.get("oom_kill", "0") != "0"

    def remove(self) -> None:
        """Kill whatever is left in it, then remove the folders (a cgroup goes only once it is empty)."""
        for folder in self.folders:
            if (folder / "cgroup.kill").exists():  # v2 kills the whole cgroup at once
                try:
                    (folder / "cgroup.kill").write_text("1")
                except OSError:
                    pass
            for _ in retries():
                for pid in _procs(folder):
                    try:
                        os.kill(pid, 9)
                    except ProcessLookupError:
                        pass
                try:
                    folder.rmdir()
                    break
                except FileNotFoundError:
                    break
                except OSError:
                    pass  # not empty yet


def _procs(folder: Path) -> list[int]:
    return [int(pid) for pid in _read(folder / "cgroup.procs").split()]


def _read(path: Path) -> str:
    try:
        return path.read_text()
    except OSError:
        return ""


def _own_path(controller: str) -> Optional[str]:
    """This process's cgroup for `controller` (v1), or its v2 path for controller "", from /proc/self/cgroup."""
    for line in _read(Path("/proc/self/cgroup")).splitlines():
        _, controllers, path = line.split(":", 2)
        if (controller and controller in controllers.split(",")) or (not controller and controllers == ""):
            return path
    return None


def _v2_parent() -> Optional[Path]:
    own = _own_path("")
    if own is None or not (ROOT / "cgroup.controllers").exists():
        return None
    parent = ROOT / own.lstrip("/")
    if not {"memory", "pids"} <= set(_read(parent / "cgroup.subtree_control").split()):
        return None
    return parent


def _v1_parents() -> Optional[tuple[Path, Path]]:
    memory, pids = _own_path("memory"), _own_path("pids")
    if memory is None or pids is None:
        return None
    parents = ROOT / "memory" / memory.lstrip("/"), ROOT / "pids" / pids.lstrip("/")
    return parents if all((parent / "cgroup.procs").exists() for parent in parents) else None


def cgroups_available() -> bool:
    return os.geteuid() == 0 and (_v2_parent() is not None or _v1_parents() is not None)


class CgroupUnavailable(SandboxUnavailable):
    """The machine has cgroups for the worker, and the run's could not be made: it does not run."""


@contextmanager
def run_cgroup(name: str, *, memory_bytes: int, processes: int) -> Iterator[Optional[RunCgroup]]:
    """The run's cgroups with its limits, or None where this machine gives the worker none
    (not root, no memory or pids controller): the rlimits alone apply then. Where it has them and
    they cannot be made, the run is refused rather than run with less than it should."""
    cgroup = _made(name, memory_bytes, processes) if cgroups_available() else None
    if cgroup is None and cgroups_available():
        raise CgroupUnavailable(f"the run's memory and pids cgroups could not be made below {ROOT}")
    try:
        yield cgroup
    finally:
        if cgroup is not None:
            cgroup.remove()


def _made(name: str, memory_bytes: int, processes: int) -> Optional[RunCgroup]:
    parent = _v2_parent()
    if parent is not None:
        cgroup = RunCgroup([parent / f"commitgym-{name}"], 2)
        limits = {"memory.max": memory_bytes, "memory.swap.max": 0, "pids.max": processes}
    else:
        parents = _v1_parents()
        if parents is None:
            return None
        cgroup = RunCgroup([folder / f"commitgym-{name}" for folder in parents], 1)
        # Swap counted too where the kernel accounts it (memsw after the plain limit, which it may not be under).
        limits = {"memory.limit_in_bytes": memory_bytes, "memory.memsw.limit_in_bytes": memory_bytes,
                  "pids.max": processes}
    cgroup.remove()  # one a run of this user id left (this run holds the id's lock): its limits may not fit
    try:
        for folder in cgroup.folders:
            folder.mkdir()
        for setting, value in limits.items():
            for folder in cgroup.folders:
                if (folder / setting).exists():
                    (folder / setting).write_text(str(value))
        return cgroup
    except OSError:
        cgroup.remove()
        return None


def cgroups_sweep() -> list[str]:
    """Remove the cgroups of runs a dead worker left (empty ones only: a live run's has processes)."""
    removed = []
    parents = [_v2_parent()] if _v2_parent() is not None else list(_v1_parents() or ())
    for parent in parents:
        for folder in parent.glob("commitgym-*"):
            try:
                folder.rmdir()
                removed.append(str(folder))
            except OSError:
                pass
    return removed
