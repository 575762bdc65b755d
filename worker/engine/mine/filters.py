"""Which commits the mining filters keep (which files are tests: worker.engine.test_files)."""

from dataclasses import dataclass, field
from typing import Optional


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
