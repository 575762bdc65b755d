"""One test run in a fresh copy of a working copy: what validation and grading both run."""

import tempfile
import time
from functools import partial
from pathlib import Path
from typing import Optional, Sequence

from worker.engine.env.builder import BuiltEnvironment, EnvironmentBuilder
from worker.engine.env.files import environment_files_lay
from worker.engine.env.recipes import ENV, WORKSPACE
from worker.engine.git.working_copy import tree_remove, working_copy_clone
from worker.engine.run.patch_first import PatchFirst
from worker.engine.run.pytest_run import TestRun, pytest_run
from worker.engine.sandbox.base import Limits
from worker.engine.sandbox.disk import capped_folder


def fresh_copy_run(builder: EnvironmentBuilder, environment: BuiltEnvironment, repo: Path, selection: list[str], *,
                   scratch: Path, limits: Limits, per_test_timeout: float,
                   first: Optional[PatchFirst] = None, runner=pytest_run,
                   untrusted: Sequence[str] = ()) -> tuple[TestRun, float]:
    """One pytest run of `selection` in the environment, in a fresh copy of the working copy `repo`
    made under `scratch` and thrown away after: nothing a run writes is seen by the next. With
    `first`, its patch is applied to the copy in the run's sandbox before the tests, and the
    environment's files are laid after its steps (a file the patch makes wins, as in any copy).
    `runner` runs the tests (pytest_run's arguments; run/plain_run.py for a second opinion).
    `untrusted`: the copy's files that are a candidate's own (pytest_run's; a patch applied first
    brings its own). Returns the run and the seconds the copy took."""
    sandbox = builder.environment_sandbox(environment)
    fresh = Path(tempfile.mkdtemp(prefix="run-", dir=scratch))
    try:
        # A file system of its own where the worker can: the run's writes stop at its disk limit.
        with capped_folder(fresh, holds=repo, limits=limits):
            copy_started = time.monotonic()
            working_copy_clone(repo, fresh / "repo")
            if first is None:
                environment_files_lay(environment.path, fresh / "repo")
            else:
                first.then.append(partial(environment_files_lay, environment.path))
            copy_seconds = time.monotonic() - copy_started
            run = runner(sandbox=sandbox, workdir=fresh, repo_dir=fresh / "repo", python=f"{ENV}/bin/python",
                         selection=selection, per_test_timeout=per_test_timeout, limits=limits,
                         mount_at=WORKSPACE, first=first, **({"untrusted": untrusted} if untrusted else {}))
    finally:
        tree_remove(fresh)  # a plain folder holds what the run made, thousands of folders deep maybe
    return run, copy_seconds
