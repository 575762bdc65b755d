"""Run tests with the plain runner (plain_runner.py: ours, not pytest) in a sandbox and read what it
says of each: the second opinion on a flagged candidate's grade.

Like a pytest run (pytest_run.py), it runs with no network, the working copy below the sandbox's
folder, the runner's results written through a file whose name it removes, each line signed with a
key that exists only in the runner's memory and numbered; a line that fails the check, or lines
after the end, make the run `untrusted` and its outcomes say nothing.
"""

import hashlib
import hmac
import json
import os
import secrets
import shutil
import tempfile
from contextlib import ExitStack
from dataclasses import dataclass, field
from pathlib import Path
from typing import Optional

from worker.engine.git.working_copy import tree_remove
from worker.engine.run.patch_first import PatchFirst, patch_first_served
from worker.engine.sandbox.base import Limits, RunStatus

RUNNER_SOURCE = Path(__file__).with_name("plain_runner.py")
RESULTS_BYTES = 16 << 20  # read of the results at most


@dataclass(frozen=True)
class PlainRun:
    outcomes: dict[str, str]  # test id -> PASSED/FAILED/ERROR/SKIPPED/XFAIL
    not_run: dict[str, str]  # test id -> why the plain runner does not run it
    status: RunStatus
    exit_code: Optional[int]
    output: bytes
    seconds: float
    complete: bool = True  # the runner reached its end
    untrusted: str = ""
    why: dict[str, str] = field(default_factory=dict)  # test id -> what a test that did not pass raised


def plain_run(*, sandbox, workdir: Path, repo_dir: Path, python: str, selection: list[str], per_test_timeout: float,
              limits: Limits, extra_env: Optional[dict] = None, mount_at: Optional[str] = None,
              first: Optional[PatchFirst] = None) -> PlainRun:
    """`python plain_runner.py` over the node ids of `selection`, in `repo_dir`, inside `sandbox`: the
    arguments mean what they mean to pytest_run (`per_test_timeout` is not used: the sandbox's wall
    time bounds the run)."""
    workdir, repo_dir = Path(workdir).resolve(), Path(repo_dir).resolve()
    if workdir not in repo_dir.parents:
        raise ValueError(f"the repository {repo_dir} must be inside the sandbox's working folder {workdir}")
    folder = Path(tempfile.mkdtemp(prefix="commitgym-plain-", dir=workdir))

    def inside(path: Path) -> str:
        return f"{mount_at}/{path.relative_to(workdir)}" if mount_at else str(path)

    try:
        runner = folder / "plain_runner.py"
        shutil.copyfile(RUNNER_SOURCE, runner)
        results = folder / "results.jsonl"
        results.touch()
        key = secrets.token_bytes(32)
        (folder / "request").write_text(json.dumps({"key": key.hex(), "results": inside(results),
                                                    "tests": list(selection)}))
        results_fd = os.open(results, os.O_RDONLY | os.O_NOFOLLOW)
        try:
            argv = [python, "-E", "-s", "-S", inside(runner)]
            with ExitStack() as stack:
                if first is not None:
                    argv = [*stack.enter_context(patch_first_served(first, folder, repo_dir, inside)), *argv]
                result = sandbox.run(argv, workdir=workdir, network=False, limits=limits, env=dict(extra_env or {}),
                                     mount_at=mount_at, cwd=inside(repo_dir))
            data = os.read(results_fd, RESULTS_BYTES) if os.fstat(results_fd).st_size else b""
        finally:
            os.close(results_fd)
    finally:
        tree_remove(folder)  # the run can write in it: thousands of folders deep, say
    events, untrusted = results_check(data, key)
    ended = any(event.get("event") == "end" for event in events)
    outcomes, why = {}, {}
    for event in [] if untrusted else events:
        if event.get("event") == "start":  # FAILED until its result comes: the process may end in it
            outcomes[event["test"]], why[event["test"]] = "FAILED", "the process ended during the test"
        elif event.get("event") == "result":
            outcomes[event["test"]] = event["status"]
            why.pop(event["test"], None)
            if event.get("why"):
                why[event["test"]] = event["why"]
    not_run = {} if untrusted else {e["test"]: e["why"] for e in events if e.get("event") == "not_run"}
    seconds = result.seconds
    if first is not None and first.released_at:
        seconds = max(0.0, seconds - (first.released_at - result.started_at))
    return PlainRun(outcomes=outcomes, not_run=not_run, status=result.status, exit_code=result.exit_code,
                    output=result.output, seconds=seconds, complete=ended, untrusted=untrusted, why=why)


def results_check(data: bytes, key: bytes) -> tuple[list[dict], str]:
    """The runner's events, and why they cannot be believed ("" when they can)."""
    events = []
    for number, line in enumerate(data.split(b"\n")[:-1]):
        mac, _, body = line.partition(b" ")
        if not hmac.compare_digest(mac, hmac.new(key, body, hashlib.sha256).hexdigest().encode()):
            return events, f"results_tampered: line {number + 1} was not written by the runner"
        event = json.loads(body)
        if event.get("seq") != number:
            return events, f"results_tampered: line {number + 1} is out of order"
        if events and events[-1].get("event") == "end":
            return events, "results_tampered: lines follow the runner's end"
        events.append(event)
    return events, ""
