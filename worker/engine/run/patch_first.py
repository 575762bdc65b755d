"""A patch applied in a test run's own sandbox before its tests start, with a look by the worker
in between.

Grading a candidate would otherwise take two sandboxes: one where `git apply` writes the
candidate's changes (the patch is anyone's, so git reads it only there) and one where the tests
run. Here one does both. A short script of ours starts the run: it applies the patch, says through
a named pipe whether it applied, and waits on a second pipe. Meanwhile the worker does the run's
`then` steps on the working copy (put right what the patch may not change, lay the environment's
files): nothing else runs in the sandbox then (git has ended, having run nothing of anyone's: see
PATCH_APPLY_ARGV; the tests have not started), so the copy holds still while it is looked at.
Then the worker lets the tests start, or ends the run. Nothing the tests do afterwards can change
what the worker saw or decided.
"""

import os
import select
import shlex
import threading
import time
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Iterator, Optional, Sequence

from worker.engine.git.working_copy import PATCH_APPLY_ARGV
from worker.engine.sandbox.base import hand_over

PATCH_NAME = "first.patch"

# $1 the patch, $2 the pipe that hears git's status, $3 the pipe that says "go"; the rest is the run.
# Git must have left nothing running: the script and the sandbox's own first process (its parent,
# or its parent's) are all there may be, else the patch counts as not applied here.
DRIVER = r"""
patch="$1" applied="$2" go="$3"; shift 3
""" + shlex.join(PATCH_APPLY_ARGV) + r""" "$patch" >/dev/null 2>&1
status=$?
for process in /proc/[0-9]*; do
  case "${process#/proc/}" in 1|$$|$PPID) ;; *) status=not-alone ;; esac
done
echo $status >"$applied"
read answer <"$go"
[ "$answer" = go ] || exit 0
exec "$@"
"""


@dataclass
class PatchFirst:
    patch: str
    # Done by the worker, in order, on the working copy once the patch applied; one that raises ends
    # the run before its tests (the error is kept in `error`).
    then: list[Callable[[Path], object]] = field(default_factory=list)
    applied: Optional[bool] = None  # None: the run ended before git did (its deadline, say)
    released_at: float = 0.0  # time.monotonic() as the tests were let start (0: they never were)
    error: Optional[BaseException] = None
    # The repository's files that are the patch's own once the steps are done (a step fills it): the
    # run's plugin is told, before the tests start, and watches what their code does to the run.
    untrusted: list[str] = field(default_factory=list)


@contextmanager
def patch_first_served(first: PatchFirst, folder: Path, repo: Path, inside: Callable[[Path], str]
                       ) -> Iterator[list[str]]:
    """The command that goes before the run's own (which the script `exec`s once let), with the
    patch and the two pipes in `folder` (the run's, outside the working copy `repo`); while the
    block lasts a thread of the worker answers the script."""
    patch_file, applied_pipe, go_pipe = folder / PATCH_NAME, folder / "applied", folder / "go"
    patch_file.write_text(first.patch)  # as patch_apply writes one
    os.mkfifo(applied_pipe, 0o600)
    os.mkfifo(go_pipe, 0o600)
    # Read-write ends of our own: neither side's open waits for the other, and a script killed
    # before it reads leaves no writer blocked here.
    applied_fd = os.open(applied_pipe, os.O_RDWR | os.O_NONBLOCK)
    go_fd = os.open(go_pipe, os.O_RDWR | os.O_NONBLOCK)
    ended_read, ended_write = os.pipe()
    helper = threading.Thread(target=_answer, args=(first, applied_fd, go_fd, ended_read, folder, repo), daemon=True)
    helper.start()
    try:
        yield ["/bin/sh", "-c", DRIVER, "commitgym-patch-first", inside(patch_file), inside(applied_pipe),
               inside(go_pipe)]
    finally:
        os.write(ended_write, b"x")
        helper.join()
        for fd in (applied_fd, go_fd, ended_read, ended_write):
            os.close(fd)


def _answer(first: PatchFirst, applied_fd: int, go_fd: int, ended_fd: int, folder: Path, repo: Path) -> None:
    poller = select.poll()
    poller.register(applied_fd, select.POLLIN)
    poller.register(ended_fd, select.POLLIN)
    if applied_fd not in dict(poller.poll()):
        return  # the run ended first
    first.applied = os.read(applied_fd, 16).strip() == b"0"
    answer = b"stop\n"
    try:
        if first.applied:
            for step in first.then:
                step(repo)
            if first.untrusted:
                untrusted_files_tell(folder, first.untrusted)
            owner = os.stat(folder, follow_symlinks=False).st_uid  # the run's user: the sandbox handed it over
            if owner != os.getuid():
                hand_over(repo, owner)  # what the steps wrote is the run's, as the rest of its copy
            answer, first.released_at = b"go\n", time.monotonic()
    except Exception as error:  # noqa: BLE001 - kept and raised by the caller once the run ended
        first.error = error
    finally:
        os.write(go_fd, answer)


def untrusted_files_tell(plugin_dir: Path, paths: Sequence[str]) -> None:
    """Tell the run's plugin which of the repository's files are the candidate's own (a file it reads
    and removes as it starts; written where nothing of the run has run yet, never through a link)."""
    fd = os.open(plugin_dir / "untrusted", os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o644)
    with os.fdopen(fd, "w", encoding="utf-8") as handle:
        handle.write("".join(f"{path}\n" for path in paths))
