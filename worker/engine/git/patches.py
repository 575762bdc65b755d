"""A commit as two patches: the source patch (the fix) and the test patch (its tests)."""

from dataclasses import dataclass
from pathlib import Path

from worker.engine.git.repo import git_run, require_sha
from worker.engine.mine.filters import TestFileRules

EMPTY_TREE = "4b825dc642cb6eb9a060e54bf8d69288fbee4904"  # git's id of the empty tree


@dataclass(frozen=True)
class CommitPatches:
    source_patch: str  # every non-test file: what a candidate patch has to get right
    test_patch: str  # the test files, put in place before grading
    test_files: list[str]


def _diff(mirror_dir: Path, parent: str, sha: str, paths: list[str], context_lines: int) -> str:
    if not paths:
        return ""
    pathspecs = [f":(literal){path}" for path in paths]
    return git_run(["diff", "--binary", "--no-ext-diff", "--no-textconv", "--src-prefix=a/", "--dst-prefix=b/",
                    f"-U{context_lines}", parent, sha, "--", *pathspecs], cwd=mirror_dir)


def commit_patches(mirror_dir: Path, sha: str, parent_sha: str, rules: TestFileRules, *,
                   context_lines: int = 3) -> CommitPatches:
    """Split the commit's diff against its parent (the empty tree for a root commit) by file kind.
    Patches to apply keep git's 3 lines of context; more is for people reading them."""
    parent = require_sha(parent_sha) if parent_sha else EMPTY_TREE
    changed = git_run(["diff", "--name-only", "--no-renames", "-z", parent, require_sha(sha)], cwd=mirror_dir)
    paths = [path for path in changed.split("\0") if path]
    tests = [path for path in paths if rules.kind(path) == "test"]
    others = [path for path in paths if rules.kind(path) != "test"]
    return CommitPatches(
        source_patch=_diff(mirror_dir, parent, sha, others, context_lines),
        test_patch=_diff(mirror_dir, parent, sha, tests, context_lines),
        test_files=tests,
    )
