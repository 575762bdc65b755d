"""Generated tests: what the test writer is shown, the test files taken from its answer, and why
each file is kept (its tests fail before the fix and pass after) or dropped."""

import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from worker.engine.llm.prompts import MESSAGE_CHARS, PATCH_CHARS, clip_head
from worker.engine.run.pytest_run import FAILING, PASSING
from worker.engine.grade.oracle import UNKNOWN, Oracle

CODE_CHARS = 8_000  # of the files the patch changes, as they were before it
MAX_FILES = 3  # code blocks taken from one answer
_CODE_BLOCK = re.compile(r"```(?:python|py)?[ \t]*\n(.*?)```", re.S)
FILE_PREFIX = "test_commitgym_generated"


def generation_prompt_variables(*, commit_message: str, source_patch: str, files_before: dict[str, str]) -> dict[str, str]:
    code = "\n\n".join(f"# {path}\n{text}" for path, text in sorted(files_before.items()))
    return {"commit_message": clip_head(commit_message.strip(), MESSAGE_CHARS),
            "source_patch": clip_head(source_patch, PATCH_CHARS),
            "code_before": clip_head(code, CODE_CHARS) or "(no file existed before)"}


def generated_files_from_answer(answer: str) -> list[str]:
    """The Python code blocks of an answer that define at least one test function."""
    blocks = [block.strip() + "\n" for block in _CODE_BLOCK.findall(answer)]
    return [block for block in blocks if re.search(r"^\s*(async\s+)?def test_\w*\(", block, re.M)][:MAX_FILES]


def generated_file_write(repo: Path, index: int, content: str) -> str:
    """Write a generated test file at the repository's root, never through a link the repository
    planted there; returns its path relative to the root."""
    for attempt in range(100):
        name = f"{FILE_PREFIX}_{index}{'_' + str(attempt) if attempt else ''}.py"
        try:
            descriptor = os.open(repo / name, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o644)
        except FileExistsError:
            continue
        with os.fdopen(descriptor, "w", encoding="utf-8") as file:
            file.write(content)
        return name
    raise RuntimeError("no free name for a generated test file")


# Why a generated file was dropped ("" when it was kept).
DropReason = Literal["", "passes_before", "fails_after", "errors", "flaky", "no_tests", "untrusted_run"]


@dataclass(frozen=True)
class GeneratedFileVerdict:
    path: str
    kept: bool
    reason: DropReason
    fail_to_pass: list[str] = field(default_factory=list)
    before: list[dict[str, str]] = field(default_factory=list)  # this file's outcomes in each run
    after: list[dict[str, str]] = field(default_factory=list)


def generated_file_verdicts(paths: list[str], oracle: Oracle, before: list[dict[str, str]],
                            after: list[dict[str, str]]) -> list[GeneratedFileVerdict]:
    """Keep a file when some of its tests are Fail-to-Pass; else say why it was dropped."""
    verdicts = []
    for path in paths:
        mine = lambda runs: [{t: s for t, s in run.items() if t.split("::")[0] == path} for run in runs]  # noqa: E731
        file_before, file_after = mine(before), mine(after)
        tests = {test for run in file_before + file_after for test in run}
        f2p = [test for test in oracle.fail_to_pass if test in tests]
        statuses = lambda runs: {s for run in runs for s in run.values()} - {UNKNOWN}  # noqa: E731
        if f2p:
            reason = ""
        elif not tests:
            reason = "no_tests"  # nothing collected: a syntax or import error
        elif any(test in tests for test in oracle.flaky):
            reason = "flaky"
        elif "ERROR" in statuses(file_before) | statuses(file_after):
            reason = "errors"
        elif statuses(file_before) & PASSING and not statuses(file_before) & FAILING:
            reason = "passes_before"
        else:
            reason = "fails_after"
        verdicts.append(GeneratedFileVerdict(path, bool(f2p), reason, f2p, file_before, file_after))
    return verdicts
