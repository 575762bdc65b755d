"""Back-translation: the issue a user who hit the bug would have filed, written by a model from
the commit message, the source patch and the failing output; and the leak check that scores how
much of the fix such a text gives away."""

import io
import keyword
import re
import tokenize
import zlib
from collections import Counter
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
    literals: list[str] = field(default_factory=list)  # numbers and strings the patch adds, found in the text
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


# Literals too common to prove anything when a text holds them.
_TRIVIAL_LITERALS = {"0", "1", "2", "-1", "0.0", "1.0", "", " ", "-", "_", ",", ".", ":", "/"}


def _literals(lines: list[str]) -> set[str]:
    """The number and string literals of Python lines (strings by their content), tokenized line by
    line: a patch's lines are fragments, and a line that does not tokenize gives what it can."""
    found = set()
    for line in lines:
        try:
            for token in tokenize.generate_tokens(io.StringIO(line.strip() + "\n").readline):
                if token.type == tokenize.NUMBER:
                    found.add(token.string)
                elif token.type == tokenize.STRING:
                    body = re.sub(r"^[rRbBuUfF]*('{3}|\"{3}|'|\")", "", token.string)
                    found.add(re.sub(r"('{3}|\"{3}|'|\")$", "", body))
        except (tokenize.TokenError, IndentationError, SyntaxError):
            continue
    # A one-character literal (a digit, a letter) is in every text: proof of nothing.
    return {literal for literal in found if literal not in _TRIVIAL_LITERALS and 2 <= len(literal) <= 200}


def _literal_in(literal: str, text: str) -> bool:
    if re.fullmatch(r"[0-9._xXoObBjJeE+-]+", literal):  # a number, not a part of another one
        return re.search(rf"(?<![0-9.]){re.escape(literal)}(?![0-9])", text) is not None
    return len(literal) >= 3 and literal in text


def leak_check(text: str, *, source_patch: str, fail_to_pass: list[str]) -> LeakReport:
    """How much of the fix `text` reveals: the patch's added lines quoted, the identifiers the patch
    introduces named, the Fail-to-Pass tests named, the literals it adds (a new delay of 2.5, a new
    message) given. The score is the largest share of the four."""
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
    literals = sorted(_literals(added) - _literals(other))
    found_literals = [literal for literal in literals if _literal_in(literal, text)]
    shares = [len(found) / len(pool) for found, pool in
              ((found_lines, lines), (found_names, introduced), (found_tests, tests), (found_literals, literals))
              if pool]
    return LeakReport(score=round(max(shares, default=0.0), 3), added_lines=found_lines, identifiers=found_names,
                      test_names=found_tests, literals=found_literals,
                      counts={"added_lines": len(lines), "identifiers": len(introduced), "test_names": len(tests),
                              "literals": len(literals)})


# --- text that went wrong -------------------------------------------------------------------------

REPEATED_SENTENCE_TIMES = 3  # one sentence this many times is a model stuck in a loop
REPEATED_NGRAM_SHARE = 0.3  # of the word 4-grams, repeats of an earlier one
COMPRESSION_RATIO = 3.5  # zlib's ratio; people's prose compresses to about 2-2.5
_MIN_MEASURED_CHARS = 300  # shorter texts compress poorly whatever they say


@dataclass(frozen=True)
class Degeneration:
    compression_ratio: float  # bytes / zlib-compressed bytes
    repeated_ngrams: float  # share of word 4-grams that repeat an earlier one
    repeated_sentence: str  # the most repeated sentence, when it repeats
    repeats: int  # how many times it appears
    degenerate: bool
    why: str  # in words, with the measured values against their limits ("" when not degenerate)


def degeneration(text: str) -> Degeneration:
    """Whether a model's text is degenerate (stuck repeating itself), and the measures that say so."""
    data = text.encode("utf-8", "replace")
    ratio = round(len(data) / max(len(zlib.compress(data, 9)), 1), 2)
    words = re.findall(r"\w+", text.lower())
    grams = [tuple(words[i:i + 4]) for i in range(max(len(words) - 3, 0))]
    repeated = round(1 - len(set(grams)) / len(grams), 3) if grams else 0.0
    sentences = Counter(re.sub(r"\s+", " ", part).strip().lower() for part in re.split(r"(?<=[.!?])\s+|\n+", text)
                        if len(part.strip()) >= 20)
    sentence, times = sentences.most_common(1)[0] if sentences else ("", 0)
    why = []
    if times >= REPEATED_SENTENCE_TIMES:
        why.append(f"one sentence appears {times} times (a loop from {REPEATED_SENTENCE_TIMES})")
    if len(data) >= _MIN_MEASURED_CHARS and repeated >= REPEATED_NGRAM_SHARE:
        why.append(f"{repeated:.0%} of its 4-word runs repeat (at most {REPEATED_NGRAM_SHARE:.0%} expected)")
    if len(data) >= _MIN_MEASURED_CHARS and ratio >= COMPRESSION_RATIO:
        why.append(f"it compresses {ratio:.1f} times (prose: under {COMPRESSION_RATIO})")
    return Degeneration(compression_ratio=ratio, repeated_ngrams=repeated,
                        repeated_sentence=sentence if times > 1 else "", repeats=times if times > 1 else 0,
                        degenerate=bool(why), why="; ".join(why))
