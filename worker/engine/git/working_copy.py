"""Working copies: the repository at a commit, laid out as `<workdir>/repo`, and patches applied to it.

The files come from our own mirror (`git archive`, unpacked with tarfile's "data"
filter, so no member lands outside the folder); patches, which may be anyone's, are
applied inside the sandbox.
"""

import hashlib
import os
import shutil
import stat
import subprocess
import tarfile
import tempfile
from pathlib import Path

from worker.engine.git.repo import GIT_CONFIG, GitError, git_environment, git_run, require_sha
from worker.engine.sandbox.base import Limits, RunResult

PATCH_FILE = ".commitgym.patch"  # beside the repository, never inside it
# What the worker walks of a working copy, at most. Deeper, Python 3.11's recursive walks (copytree,
# rmtree, fwalk: a frame a folder) would fail, and longer, the worker's absolute paths into a copy
# would pass PATH_MAX (4,096 bytes); no repository's own tree comes near either.
TREE_DEPTH_MAX = 256
PATH_BYTES_MAX = 2048


class TreeTooDeep(ValueError):
    """A working copy nested deeper, or with a path longer, than the worker walks."""


def working_copy_write(mirror_dir: Path, sha: str, workdir: Path) -> Path:
    """`<workdir>/repo` with the tree of `sha`; returns that folder."""
    repo = workdir / "repo"
    repo.mkdir(parents=True)
    _export_everything(mirror_dir)
    # git's errors go to a file: a pipe nobody reads while the archive is read could fill and stop git.
    with git_environment() as env, tempfile.TemporaryFile() as errors:
        archive = subprocess.Popen(["git", *GIT_CONFIG, "archive", "--format=tar", require_sha(sha)],
                                   cwd=mirror_dir, env=env, stdout=subprocess.PIPE, stderr=errors)
        try:
            with tarfile.open(fileobj=archive.stdout, mode="r|") as tar:
                tar.extractall(repo, filter="data")
        except tarfile.FilterError as refused:
            archive.kill()
            raise GitError("unsafe_tree", f"the commit's tree cannot be checked out safely: {refused}") from None
        except tarfile.ReadError as unreadable:
            broken = unreadable  # git stopped before writing a whole archive: its exit says why
        else:
            broken = None
        finally:
            archive.wait()
            archive.stdout.close()
            errors.seek(0)
            message = errors.read(4000).decode("utf-8", "replace").strip()
    if archive.returncode < 0:
        raise GitError("git_failed", f"git archive stopped on signal {-archive.returncode} while reading the "
                       "commit's tree (a tree nested thousands of folders deep does this).")
    if archive.returncode != 0:
        raise GitError("git_failed", message or f"git archive failed (exit {archive.returncode})")
    if broken is not None:
        raise GitError("git_failed", f"the archive of the commit's tree cannot be read: {broken}")
    return repo


def working_copy_clone(source: Path, target: Path) -> Path:
    """A real copy of a working copy for one run: new files (a hard link would let the run write
    into the source, which its sandbox user owns), links copied as links, never followed."""
    target.parent.mkdir(parents=True, exist_ok=True)
    shutil.copytree(source, target, symlinks=True)
    return target


def _export_everything(mirror_dir: Path) -> None:
    """A repository's `export-ignore` attributes (often on tests/) must not thin our copies."""
    attributes = mirror_dir / git_run(["rev-parse", "--git-path", "info/attributes"], cwd=mirror_dir).strip()
    line = "* -export-ignore -export-subst\n"
    if not attributes.exists() or line not in attributes.read_text():
        attributes.parent.mkdir(exist_ok=True)
        with attributes.open("a") as file:
            file.write(line)


# `git apply` of a patch that is anyone's, onto a copy that is anyone's, in a sandbox. With no
# repository (GIT_DIR names none, so git looks for none: a copy laid out as a bare repository, HEAD,
# objects/, refs/ and a config naming a filter for every file, would otherwise make git run that
# filter) and no configuration but its own, git runs nothing else.
PATCH_APPLY_ARGV = ("env", "GIT_DIR=/dev/null/no-repository", "GIT_CONFIG_NOSYSTEM=1", "GIT_CONFIG_GLOBAL=/dev/null",
                    "git", "apply", "--binary", "--whitespace=nowarn")


def patch_apply(sandbox, workdir: Path, patch: str, *, limits: Limits = Limits(wall_seconds=120)
                ) -> RunResult:
    """Apply a unified diff to `<workdir>/repo` inside the sandbox (local or docker). An empty
    patch applies trivially."""
    if not patch.strip():
        return RunResult(status="ok", exit_code=0, output=b"", output_truncated=False, seconds=0.0)
    (workdir / PATCH_FILE).write_text(patch)
    return sandbox.run([*PATCH_APPLY_ARGV, f"../{PATCH_FILE}"],
                       workdir=workdir, cwd=str(workdir / "repo"), limits=limits)


def tree_state(root: Path) -> dict[str, tuple]:
    """{path relative to root: ("file", mode bits, sha256) | ("link", target) | ("dir",) | ("other",)},
    links never followed, each name looked at through its folder's handle (no path is too long to
    open). TreeTooDeep where folders nest deeper than TREE_DEPTH_MAX or a path is longer than
    PATH_BYTES_MAX: nothing below is walked."""
    found, top = {}, str(root)
    for folder, dirs, files, folder_fd in os.fwalk(top, follow_symlinks=False, onerror=_raised):
        prefix = folder[len(top) + 1:]
        prefix += "/" if prefix else ""
        if dirs and prefix.count("/") >= TREE_DEPTH_MAX:
            raise TreeTooDeep(f"it has folders nested more than {TREE_DEPTH_MAX} deep ({_cut(prefix)})")
        for name in dirs + files:
            relative = prefix + name
            if len(relative) > PATH_BYTES_MAX // 4 and len(os.fsencode(relative)) > PATH_BYTES_MAX:
                raise TreeTooDeep(f"it has a path longer than {PATH_BYTES_MAX} bytes ({_cut(relative)})")
            info = os.stat(name, dir_fd=folder_fd, follow_symlinks=False)
            if stat.S_ISLNK(info.st_mode):
                found[relative] = ("link", os.readlink(name, dir_fd=folder_fd))
            elif stat.S_ISDIR(info.st_mode):
                found[relative] = ("dir",)
            elif stat.S_ISREG(info.st_mode):
                handle = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK, dir_fd=folder_fd)
                with open(handle, "rb") as file:  # read in chunks: a file may be large
                    digest = hashlib.file_digest(file, "sha256").hexdigest()
                found[relative] = ("file", info.st_mode & 0o111, digest)
            else:
                found[relative] = ("other",)
    return found


def _raised(error: OSError) -> None:
    raise error  # a folder that cannot be read would hide what is in it


def _cut(path: str) -> str:
    return path if len(path) <= 80 else f"{path[:80]}…"


def tree_remove(path: Path) -> None:
    """`path` and everything below it, however deep: Python 3.11's rmtree recurses a frame a folder,
    so a tree nested thousands of folders deep is left to rm, which does not."""
    try:
        shutil.rmtree(path, ignore_errors=True)
    except RecursionError:
        subprocess.run(["rm", "-rf", "--one-file-system", "--", str(path)], check=False,
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def _no_follow(path, flags):
    return os.open(path, flags | os.O_NOFOLLOW | os.O_NONBLOCK)


def paths_changed(before: dict, after: dict) -> set[str]:
    """Paths added, removed or changed. A folder made or removed is not one: its files are."""
    return {path for path in before.keys() | after.keys()
            if before.get(path) != after.get(path) and not {before.get(path), after.get(path)} <= {("dir",), None}}
