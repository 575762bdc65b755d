"""A released task as one row: every field SWE-bench's loader reads, in its shapes (the test lists
as JSON strings), and commitgym's own fields under keys of their own (`commitgym_...`), so that a
tool that knows only SWE-bench's fields reads a release as it reads SWE-bench."""

import json
from dataclasses import dataclass
from functools import lru_cache
from typing import Optional

# The fields of a SWE-bench instance, in SWE-bench's order.
SWEBENCH_FIELDS = ("repo", "instance_id", "base_commit", "patch", "test_patch", "problem_statement", "hints_text",
                   "created_at", "version", "FAIL_TO_PASS", "PASS_TO_PASS", "environment_setup_commit")
# commitgym's own: how its environment was built and how people judged the task (their Parquet types).
OWN_FIELDS = {
    "commitgym_python_version": "string",  # the environment's Python
    "commitgym_lock": "string",  # the resolved packages, as `uv pip freeze` prints them
    "commitgym_install_strategy": "string",  # the install attempt that built the environment
    "commitgym_test_command": "string",  # run from the repository's root, the test ids after it
    "commitgym_environment_key": "string",  # tasks with the same key share one environment
    "commitgym_mutation_score": "float64",  # the share of the gold patch's mutants the tests catch
    "commitgym_underspecified": "int64",  # the reviews' rubric (SWE-bench Verified's), most severe
    "commitgym_false_negative": "int64",
    "commitgym_difficulty": "string",
}
TEST_COMMAND = "python -m pytest -rA -p no:cacheprovider"


@lru_cache(maxsize=None)
def release_schema():
    """The rows' Parquet schema. pyarrow (with numpy) is imported here, when a release is written: at
    module level it was half a second of every command's and worker's start."""
    import pyarrow

    return pyarrow.schema([(name, pyarrow.string()) for name in SWEBENCH_FIELDS]
                          + [(name, getattr(pyarrow, kind)()) for name, kind in OWN_FIELDS.items()])


@dataclass(frozen=True)
class ReleasedTask:
    instance_id: str
    repo: str  # owner/name
    base_commit: str  # the commit a candidate patch applies to
    patch: str  # the source patch (the fix)
    test_patch: str  # the test patch, split from it by the repository's test-file rules
    problem_statement: str
    fail_to_pass: tuple[str, ...]
    pass_to_pass: tuple[str, ...]
    hints_text: str = ""
    created_at: str = ""
    version: str = ""
    environment_setup_commit: str = ""
    python_version: str = ""
    lock: str = ""
    install_strategy: str = ""
    suite_args: tuple[str, ...] = ()  # what the suite needs to collect, after TEST_COMMAND
    environment_key: str = ""
    mutation_score: Optional[float] = None
    underspecified: Optional[int] = None
    false_negative: Optional[int] = None
    difficulty: str = ""


def instance_row(task: ReleasedTask) -> dict:
    """The task as a release writes it, in release_schema()'s order."""
    command = " ".join([TEST_COMMAND, *task.suite_args]) if task.environment_key else ""
    return {
        "repo": task.repo, "instance_id": task.instance_id, "base_commit": task.base_commit, "patch": task.patch,
        "test_patch": task.test_patch, "problem_statement": task.problem_statement, "hints_text": task.hints_text,
        "created_at": task.created_at, "version": task.version,
        "FAIL_TO_PASS": json.dumps(list(task.fail_to_pass)), "PASS_TO_PASS": json.dumps(list(task.pass_to_pass)),
        "environment_setup_commit": task.environment_setup_commit,
        "commitgym_python_version": task.python_version, "commitgym_lock": task.lock,
        "commitgym_install_strategy": task.install_strategy, "commitgym_test_command": command,
        "commitgym_environment_key": task.environment_key, "commitgym_mutation_score": task.mutation_score,
        "commitgym_underspecified": task.underspecified, "commitgym_false_negative": task.false_negative,
        "commitgym_difficulty": task.difficulty,
    }
