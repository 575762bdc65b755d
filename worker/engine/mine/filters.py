"""Which files are tests, and which commits the mining filters keep."""

from dataclasses import dataclass, field
from fnmatch import fnmatchcase
from typing import Literal, Optional

# What mining counts a changed file as: a test, a non-test Python file (source), or anything else.
FileKind = Literal["test", "source", "other"]
DEFAULT_TEST_FILE_GLOBS = ("test_*.py", "*_test.py", "conftest.py")
DEFAULT_TEST_DIR_NAMES = ("test", "tests")


@dataclass(frozen=True)
class TestFileRules:
    """A path is a test file if its file name matches a glob or a folder on its path is named like a test folder."""

    file_globs: tuple[str, ...] = DEFAULT_TEST_FILE_GLOBS
    dir_names: tuple[str, ...] = DEFAULT_TEST_DIR_NAMES
    __test__ = False  # not a pytest test class

    def is_test(self, path: str) -> bool:
        *folders, name = path.split("/")
        if any(folder in self.dir_names for folder in folders):
            return True
        return any(fnmatchcase(name, glob) for glob in self.file_globs)

    def kind(self, path: str) -> FileKind:
        """"test", "source" (a non-test .py file) or "other"."""
        if self.is_test(path):
            return "test"
        return "source" if path.endswith(".py") else "other"


@dataclass(frozen=True)
class MiningFilters:
    """The paper's defaults."""

    max_files: int = 5
    max_lines: int = 100
    max_patch_chars: int = 2000


@dataclass
class CommitStats:
    """What the filters look at, for one commit diffed against its parent."""

    # Lists of paths are capped for huge commits; the counts stay exact.
    source_files: list[str] = field(default_factory=list)  # non-test .py
    test_files: list[str] = field(default_factory=list)
    other_files: list[str] = field(default_factory=list)  # non-test, not .py
    source_file_count: int = 0
    test_file_count: int = 0
    other_file_count: int = 0
    has_binary: bool = False
    has_large_file: bool = False  # a file over the mining limit (never read whole)
    lines_added: int = 0  # non-test
    lines_deleted: int = 0  # non-test
    patch_chars: int = 0  # non-test part of the unified diff
    # None: not checked yet (only checked for commits that pass the size filters).
    python_change: Optional[bool] = None

    @property
    def non_test_file_count(self) -> int:
        return self.source_file_count + self.other_file_count

    @property
    def lines_edited(self) -> int:
        return self.lines_added + self.lines_deleted

    @property
    def tests_changed(self) -> bool:
        return self.test_file_count > 0


def size_drop_reason(stats: CommitStats, filters: MiningFilters) -> Optional[str]:
    """The first size filter that fails, in the fixed order; None if all pass."""
    if stats.has_large_file:
        return "file_too_large"
    if stats.has_binary:
        return "binary_file"
    if stats.non_test_file_count > filters.max_files:
        return "too_many_files"
    if stats.lines_edited > filters.max_lines:
        return "too_many_lines"
    if stats.patch_chars > filters.max_patch_chars:
        return "patch_too_long"
    return None


def drop_measured(reason: str, stats: CommitStats, filters: MiningFilters) -> str:
    """A size filter's measured value against its threshold, in words ("" for the other reasons)."""
    if reason == "too_many_files":
        return f"{stats.non_test_file_count:,} non-test files; the filter allows {filters.max_files:,}"
    if reason == "too_many_lines":
        return f"{stats.lines_edited:,} edited non-test lines; the filter allows {filters.max_lines:,}"
    if reason == "patch_too_long":
        return f"{stats.patch_chars:,} characters of non-test diff; the filter allows {filters.max_patch_chars:,}"
    return ""


def drop_reason(stats: CommitStats, filters: MiningFilters) -> Optional[str]:
    """The first filter that fails; None keeps the commit.

    The Python check runs last and needs `stats.python_change` filled in for
    commits that pass the size filters.
    """
    reason = size_drop_reason(stats, filters)
    if reason:
        return reason
    if not stats.source_file_count:
        return "no_python_change"
    if stats.python_change is None:
        raise ValueError("python_change must be checked before the last filter")
    return None if stats.python_change else "no_python_change"
