"""Back-translation: the issue a user who hit the bug would have filed, written by a model from
the commit message, the source patch and the failing output; and the leak check that scores how
much of the fix such a text gives away."""

import keyword
import re
from dataclasses import dataclass, field

from unidiff import PatchSet

from worker.engine.llm.prompts import MESSAGE_CHARS, PATCH_CHARS, clip_head, clip_tail

OUTPUT_CHARS = 3_000  # of the failing output the issue writer is shown, at most
_IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_MIN_LEAKED_LINE = 12  # shorter added lines ("return x", "pass") prove nothing when quoted
_PLAIN_WORD = re.compile(r"[a-z]{1,7}")  # "slug", "items": words an honest report uses too
_COMMON = set(keyword.kwlist) | {"self", "None", "True", "False", "return", "print", "assert", "value", "result",
                                 "data", "text", "list", "dict", "str", "int", "len", "range", "args", "kwargs"}


def issue_prompt_variables(*, commit_message: str, source_patch: str, failing_output: str) -> dict[str, str]:
    """The issue writer's inputs, cut to fit: the start of the message and patch, the end of the output
    (pytest prints the failures' summary last)."""
    return {"commit_message": clip_head(commit_message.strip(), MESSAGE_CHARS),
            "source_patch": clip_head(source_patch, PATCH_CHARS),
            "failing_output": clip_tail(failing_output.strip(), OUTPUT_CHARS) or "(no output)"}


def issue_text(answer: str) -> str:
    """The issue as stored: the answer without a chat preamble or a wrapping code fence."""
    text = answer.strip()
    text = re.sub(r"^(sure|here is|here's)[^\n]*:\s*\n", "", text, flags=re.I)
    fenced = re.fullmatch(r"```[a-z]*\n(.*)\n```", text, flags=re.S)
    return (fenced.group(1) if fenced else text).strip()


@dataclass(frozen=True)
class LeakReport:
    score: float  # 0 (reveals nothing of the fix) .. 1 (reveals all of one kind)
    added_lines: list[str] = field(default_factory=list)  # lines the patch adds, found in the text
    identifiers: list[str] = field(default_factory=list)  # names the patch introduces, found in the text
    test_names: list[str] = field(default_factory=list)  # F2P test function names, found in the text
    counts: dict[str, int] = field(default_factory=dict)  # how many of each kind there were to find


def _patch_lines(patch: str) -> tuple[list[str], list[str]]:
    """(added lines, every other line) of a unified diff's hunks."""
    added, other = [], []
    try:
        files = PatchSet(patch)
    except Exception:  # unidiff's own errors, or text that is not a diff
        return added, other
    for patched in files:
        for hunk in patched:
            for line in hunk:
                (added if line.is_added else other).append(line.value.rstrip("\n"))
    return added, other


def leak_check(text: str, *, source_patch: str, fail_to_pass: list[str]) -> LeakReport:
    """How much of the fix `text` reveals: the patch's added lines quoted, the identifiers the patch
    introduces named, the Fail-to-Pass tests named. The score is the largest share of the three."""
    added, other = _patch_lines(source_patch)
    lines = sorted({line.strip() for line in added if len(line.strip()) >= _MIN_LEAKED_LINE})
    before = set(_IDENTIFIER.findall("\n".join(other)))
    introduced = sorted({name for name in _IDENTIFIER.findall("\n".join(added))
                         if name not in before and name not in _COMMON and not _PLAIN_WORD.fullmatch(name)})
    tests = sorted({test.split("::")[-1].split("[")[0] for test in fail_to_pass})
    words = set(_IDENTIFIER.findall(text))
    squashed = re.sub(r"\s+", " ", text)
    found_lines = [line for line in lines if re.sub(r"\s+", " ", line) in squashed]
    found_names = [name for name in introduced if name in words]
    found_tests = [name for name in tests if name in words]
    shares = [len(found) / len(pool) for found, pool in
              ((found_lines, lines), (found_names, introduced), (found_tests, tests)) if pool]
    return LeakReport(score=round(max(shares, default=0.0), 3), added_lines=found_lines, identifiers=found_names,
                      test_names=found_tests,
                      counts={"added_lines": len(lines), "identifiers": len(introduced), "test_names": len(tests)})
