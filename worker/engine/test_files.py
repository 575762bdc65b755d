"""Which of a repository's files are tests: below every stage that splits a commit or a candidate into
its test and non-test parts (git's patches, mining, grading, the verifiers)."""

from dataclasses import dataclass
from fnmatch import fnmatchcase
from typing import Literal

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
