"""One way of validating, measured: run as a child of bench/validate.py, with the code of that way
first on the path (today's tree, or an earlier commit's for the baseline).

    python bench/_validate_cost.py COMMITS_JSON ENV_ROOT WORK_ROOT

COMMITS_JSON holds {"mirror": path, "commits": [[sha, parent, iso date], ...]}. Every commit is
validated twice: once to build (or reuse) its environment, unmeasured, then with every environment
built at hand, measured: the CPU seconds of this process and of every process it started (the
runs, their sandboxes, the copies), read from a cpuacct cgroup of its own, and the wall time. Where this tree can (it has grade/fresh_copy.py), the
CPU seconds of one run of the commit's own test files too: the unit costs are read in. Prints one
JSON line per commit.
"""

import atexit
import json
import os
import sys
import time
from datetime import datetime
from pathlib import Path
from typing import Callable

from worker.engine.env.builder import EnvironmentBuilder
from worker.engine.validate.pipeline import CommitToValidate, ValidationSettings, task_validate

try:
    from worker.engine.git.patches import commit_patches
    from worker.engine.git.working_copy import working_copy_write
    from worker.engine.grade.fresh_copy import fresh_copy_run
    from worker.engine.validate.pipeline import test_files_present
except ImportError:  # an earlier tree: the unit is measured with today's
    fresh_copy_run = None


def _unit_cpu(commit, builder, environment, work: Path, settings, cpu_seconds) -> float:
    """The CPU seconds of one run of the commit's own test files, on the commit."""
    copy = working_copy_write(commit.mirror_dir, commit.sha, work / f"unit-{commit.sha[:12]}")
    selection = test_files_present(commit_patches(commit.mirror_dir, commit.sha, commit.parent_sha,
                                                  commit.rules).test_files, copy)
    cpu = cpu_seconds()
    fresh_copy_run(builder, environment, copy, selection, scratch=work, limits=settings.limits,
                   per_test_timeout=settings.per_test_timeout)
    return cpu_seconds() - cpu


CPUACCT = Path("/sys/fs/cgroup/cpuacct")  # cgroup v1's CPU accounting: a run's sandbox stays in it


def _cpu_counter() -> Callable[[], float]:
    """The CPU seconds used so far by this process and every process it started, read from a
    cpuacct cgroup made for it: a sandbox's processes are not its waited-for children, so its own
    rusage would not count them."""
    if not (CPUACCT / "cpuacct.usage").is_file():
        sys.exit("validation's cost needs cgroup v1's cpuacct hierarchy at /sys/fs/cgroup/cpuacct (and root)")
    group = CPUACCT / f"commitgym-bench-{os.getpid()}"
    group.mkdir()
    (group / "cgroup.procs").write_text(str(os.getpid()))

    def leave() -> None:
        (CPUACCT / "cgroup.procs").write_text(str(os.getpid()))
        group.rmdir()

    atexit.register(leave)
    return lambda: int((group / "cpuacct.usage").read_text()) / 1e9


def main() -> None:
    cpu_seconds = _cpu_counter()
    spec = json.loads(Path(sys.argv[1]).read_text())
    builder = EnvironmentBuilder(env_root=Path(sys.argv[2]), uv=Path(sys.executable).parent / "uv")
    work = Path(sys.argv[3])
    settings = ValidationSettings(per_test_timeout=30, suite_seconds=300)
    commits = [CommitToValidate(mirror_dir=Path(spec["mirror"]), sha=sha, parent_sha=parent,
                                committed_at=datetime.fromisoformat(date)) for sha, parent, date in spec["commits"]]
    environments = []
    for commit in commits:
        result = task_validate(commit, builder=builder, work_root=work, settings=settings, reusable=environments)
        if result.environment and not result.environment_reused:
            environments.append(result.environment)
    for commit in commits:
        cpu, started = cpu_seconds(), time.monotonic()
        result = task_validate(commit, builder=builder, work_root=work, settings=settings, reusable=environments)
        cpu, wall, oracle = cpu_seconds() - cpu, time.monotonic() - started, result.oracle
        unit = None
        if fresh_copy_run is not None and result.verdict == "valid":
            unit = _unit_cpu(commit, builder, result.environment, work, settings, cpu_seconds)
        print(json.dumps({"sha": commit.sha, "cpu": cpu, "wall": wall, "unit": unit,
                          "runs": len(result.runs), "verdict": result.verdict, "reason": result.reason,
                          "fail_to_pass": oracle.fail_to_pass if oracle else [],
                          "pass_to_pass": oracle.pass_to_pass if oracle else [],
                          "flaky": oracle.flaky if oracle else []}), flush=True)


if __name__ == "__main__":
    main()
