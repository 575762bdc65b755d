"""A commit as two patches: the source patch (the fix) and the test patch (its tests)."""

import os
import re
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from worker.engine.git.headers import diff_git_paths
from worker.engine.git.repo import git_output, require_sha
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
_COMMIT_LINE = re.compile(rb"^([0-9a-f]{40})\n", re.MULTILINE)
_FILE_HEADER = re.compile(rb"^diff --git ", re.MULTILINE)
_DIFF_ARGS = ["-p", "--binary", "--no-renames", "--no-ext-diff", "--no-textconv", "--src-prefix=a/", "--dst-prefix=b/"]


def commit_patches(mirror_dir: Path, sha: str, parent_sha: str, rules: TestFileRules, *,
                   context_lines: int = 3) -> CommitPatches:
    """Split the commit's diff against its parent (the empty tree for a root commit) by file kind.
    Patches to apply keep git's 3 lines of context; more is for people reading them."""
    return commits_patches(mirror_dir, [(sha, parent_sha)], rules, context_lines=context_lines)[require_sha(sha)]


def commits_patches(mirror_dir: Path, commits: list[tuple[str, str]], rules: TestFileRules, *,
                    context_lines: int = 3) -> dict[str, CommitPatches]:
    """{sha: its patches} for many (sha, parent sha) pairs, read from one git process: a release of
    thousands of tasks cannot start a few git processes per task. Each file's part of a commit's
    diff goes to the patch its kind decides, in git's order; renames are a deletion and an addition.
    A text file whose diff is not UTF-8 (a latin-1 test fixture, say) is diffed again as binary:
    patches are text, and such lines would not survive as text."""
    if not commits:
        return {}
    lines = "".join(f"{require_sha(sha)} {require_sha(parent)}\n" if parent else f"{require_sha(sha)}\n"
                    for sha, parent in commits)
    output = git_output(["diff-tree", "--stdin", "--root", *_DIFF_ARGS, f"-U{context_lines}"],
                        cwd=mirror_dir, input=lines, timeout=3600)
    parents = {require_sha(sha): parent for sha, parent in commits}
    found = {sha: NO_PATCHES for sha in parents}
    starts = list(_COMMIT_LINE.finditer(output))
    for number, start in enumerate(starts):
        end = starts[number + 1].start() if number + 1 < len(starts) else len(output)
        sha = start.group(1).decode()
        if sha in found:
            found[sha] = _split(output[start.end():end], rules,
                                lambda path: _binary_diff(mirror_dir, sha, parents[sha], path))
    return found


def _split(diff: bytes, rules: TestFileRules, binary_diff: Callable[[bytes], str]) -> CommitPatches:
    heads = [match.start() for match in _FILE_HEADER.finditer(diff)]
    tests, sources, test_files = [], [], []
    for number, head in enumerate(heads):
        raw = diff[head:heads[number + 1] if number + 1 < len(heads) else len(diff)]
        _, new = diff_git_paths(raw[:raw.find(b"\n")])  # the same path: no renames here
        try:
            part = raw.decode("utf-8")
        except UnicodeDecodeError:
            part = binary_diff(new)
        path = new.decode("utf-8", "replace")
        if rules.kind(path) == "test":
            tests.append(part)
            test_files.append(path)
        else:
            sources.append(part)
    return CommitPatches(source_patch="".join(sources), test_patch="".join(tests), test_files=test_files)


def _binary_diff(mirror_dir: Path, sha: str, parent: str, path: bytes) -> str:
    """One file's diff in a commit, as git's binary patch (ASCII whatever the file holds)."""
    with tempfile.TemporaryDirectory(prefix="commitgym-attributes-") as folder:
        attributes = Path(folder) / "attributes"
        attributes.write_text("* binary\n")  # only the one path below is diffed
        # Paths quoted, as git does by default: a name that is not UTF-8 is kept as octal escapes.
        commits = [parent, sha] if parent else ["--root", sha]
        output = git_output(["-c", f"core.attributesFile={attributes}", "-c", "core.quotePath=true", "diff-tree",
                             *_DIFF_ARGS, *commits, "--", f":(literal){os.fsdecode(path)}"], cwd=mirror_dir)
    return output.decode("ascii")
