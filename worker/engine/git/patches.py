"""A commit as two patches: the source patch (the fix) and the test patch (its tests)."""

import re
from dataclasses import dataclass
from pathlib import Path

from worker.engine.git.headers import diff_git_paths
from worker.engine.git.repo import git_run, require_sha
from worker.engine.test_files import TestFileRules


@dataclass(frozen=True)
class CommitPatches:
    source_patch: str  # every non-test file: what a candidate patch has to get right
    test_patch: str  # the test files, put in place before grading
    test_files: list[str]


NO_PATCHES = CommitPatches(source_patch="", test_patch="", test_files=[])
# diff-tree names each commit it diffs on a line of its own. No line of a patch can be 40 hex
# digits alone: diff lines start with a sign, a space or a word, and a binary patch's lines are
# never 40 characters long.
_COMMIT_LINE = re.compile(r"^([0-9a-f]{40})\n", re.MULTILINE)
_FILE_HEADER = re.compile(r"^diff --git ", re.MULTILINE)


def commit_patches(mirror_dir: Path, sha: str, parent_sha: str, rules: TestFileRules, *,
                   context_lines: int = 3) -> CommitPatches:
    """Split the commit's diff against its parent (the empty tree for a root commit) by file kind.
    Patches to apply keep git's 3 lines of context; more is for people reading them."""
    return commits_patches(mirror_dir, [(sha, parent_sha)], rules, context_lines=context_lines)[require_sha(sha)]


def commits_patches(mirror_dir: Path, commits: list[tuple[str, str]], rules: TestFileRules, *,
                    context_lines: int = 3) -> dict[str, CommitPatches]:
    """{sha: its patches} for many (sha, parent sha) pairs, read from one git process: a release of
    thousands of tasks cannot start a few git processes per task. Each file's part of a commit's
    diff goes to the patch its kind decides, in git's order; renames are a deletion and an addition."""
    if not commits:
        return {}
    lines = "".join(f"{require_sha(sha)} {require_sha(parent)}\n" if parent else f"{require_sha(sha)}\n"
                    for sha, parent in commits)
    output = git_run(["diff-tree", "--stdin", "--root", "-p", "--binary", "--no-renames", "--no-ext-diff",
                      "--no-textconv", "--src-prefix=a/", "--dst-prefix=b/", f"-U{context_lines}"],
                     cwd=mirror_dir, input=lines, timeout=3600)
    found = {require_sha(sha): NO_PATCHES for sha, _ in commits}
    starts = list(_COMMIT_LINE.finditer(output))
    for number, start in enumerate(starts):
        end = starts[number + 1].start() if number + 1 < len(starts) else len(output)
        if start.group(1) in found:
            found[start.group(1)] = _split(output[start.end():end], rules)
    return found


def _split(diff: str, rules: TestFileRules) -> CommitPatches:
    heads = [match.start() for match in _FILE_HEADER.finditer(diff)]
    tests, sources, test_files = [], [], []
    for number, head in enumerate(heads):
        part = diff[head:heads[number + 1] if number + 1 < len(heads) else len(diff)]
        _, new = diff_git_paths(part[:part.find("\n")].encode())  # the same path: no renames here
        path = new.decode("utf-8", "replace")
        if rules.kind(path) == "test":
            tests.append(part)
            test_files.append(path)
        else:
            sources.append(part)
    return CommitPatches(source_patch="".join(sources), test_patch="".join(tests), test_files=test_files)
