"""Does a Python file change do more than edit comments, blank lines and docstrings?

Parsing whole files with `ast` for every candidate commit costs many times
git's own diff, so the check works on the lines the diff changed: it blanks
the parts of those lines that lie inside docstrings (triple-quoted strings
found by one scan for triple quotes), drops comments and blank lines, and
compares what is left of the deleted lines with what is left of the added
lines, block by block. The scan can be fooled by a triple quote inside a
comment or an ordinary string: when it finds no change in a file where that
may have happened, the syntax trees without docstrings decide.

Where no changed line holds a triple quote, the file before the change has the
same strings as the file after it, so the changed lines of both sides are read
from the diff and only the file after the change is scanned (`edit_is_semantic`).
"""

import ast
import re
from bisect import bisect_left
from dataclasses import dataclass
from itertools import accumulate
from typing import Iterator, Optional

_STRING_PREFIX = re.compile(rb"[rRuU]?$")

ChangeBlock = tuple[list[int], list[int]]  # (deleted line numbers in old, added line numbers in new)


@dataclass
class LineEdit:
    """A run of changed lines, as a diff shows it."""

    old_at: int  # the first deleted line's number in the old file; for an addition, the line after it
    new_at: int  # the first added line's number in the new file; for a deletion, the line after it
    deleted: list[bytes]
    added: list[bytes]

    @property
    def numbers(self) -> ChangeBlock:
        return (list(range(self.old_at, self.old_at + len(self.deleted))),
                list(range(self.new_at, self.new_at + len(self.added))))


def _strings(source: bytes, limit: int) -> Iterator[tuple[int, int]]:
    """(start, end) of each triple-quoted string that begins before `limit`, in order; one left
    open ends with the source. Two plain finds, each redone only once passed, cost a fraction of
    one regular expression over the same bytes."""
    find = source.find
    double, single = find(b'"""', 0, limit), find(b"'''", 0, limit)
    while double >= 0 or single >= 0:
        start, quote = (double, b'"""') if single < 0 or 0 <= double < single else (single, b"'''")
        end = find(quote, start + 3)
        end = len(source) if end < 0 else end + 3
        yield start, end
        if 0 <= double < end:
            double = find(b'"""', end, limit)
        if 0 <= single < end:
            single = find(b"'''", end, limit)


def _previous_code(source: bytes, line_start: int) -> tuple[bytes, int]:
    """The code of the nearest line above the one starting at `line_start` that has any, and where
    that line begins (b"", 0 where none has)."""
    end = line_start - 1
    while end >= 0:
        begin = source.rfind(b"\n", 0, end) + 1
        code = source[begin:end].split(b"#", 1)[0].strip()
        if code:
            return code, begin
        end = begin - 1
    return b"", 0


def _is_docstring(source: bytes, start: int) -> bool:
    """A string standing alone after a block opener (or opening the module)."""
    line_start = source.rfind(b"\n", 0, start) + 1
    if not _STRING_PREFIX.match(source[line_start:start].strip()):
        return False
    previous, _ = _previous_code(source, line_start)
    return not previous or previous.endswith(b":")


def _code_parts(source: bytes, line_numbers: list[int]) -> dict[int, bytes]:
    """What is left of each given line (1-based) without docstrings, comments and trailing blanks;
    lines with nothing left are omitted. Only the source up to the last given line is read."""
    wanted = sorted({n for n in line_numbers if n > 0})
    if not wanted:
        return {}
    lines = source.split(b"\n", wanted[-1])  # the lines up to the last wanted one, then the rest
    if len(lines) <= wanted[-1]:
        wanted = [n for n in wanted if n <= len(lines)]
        if not wanted:
            return {}
    # Line n ends (at its newline) at offset lengths_sum[n - 1] + n - 1.
    lengths_sum = list(accumulate(map(len, lines[:wanted[-1]])))
    wanted_ends = [lengths_sum[n - 1] + n - 1 for n in wanted]
    wanted_starts = [end - len(lines[n - 1]) for n, end in zip(wanted, wanted_ends)]
    text = {n: bytearray(lines[n - 1]) for n in wanted}
    for start, end in _strings(source, wanted_ends[-1] + 1):
        first = bisect_left(wanted_ends, start)
        if first == len(wanted) or wanted_starts[first] >= end or not _is_docstring(source, start):
            continue
        for i in range(first, len(wanted)):
            if wanted_starts[i] >= end:
                break
            left, right = max(start, wanted_starts[i]), min(end, wanted_ends[i])
            offset = wanted_starts[i]
            text[wanted[i]][left - offset:right - offset] = b" " * (right - left)
    parts = {}
    for number, line in text.items():
        if code := _line_code(bytes(line)):
            parts[number] = code
    return parts


def _line_code(line: bytes) -> bytes:
    """The line without its comment (where no quote could hold the '#') and trailing blanks."""
    if b"#" in line and b"'" not in line and b'"' not in line:
        line = line.split(b"#", 1)[0]
    return line.rstrip()


def _lines_differ(old: bytes, new: bytes, blocks: list[ChangeBlock]) -> bool:
    old_parts = _code_parts(old, [n for deleted, _ in blocks for n in deleted])
    new_parts = _code_parts(new, [n for _, added in blocks for n in added])
    return any(
        [old_parts[n] for n in deleted if n in old_parts] != [new_parts[n] for n in added if n in new_parts]
        for deleted, added in blocks
    )


def _without_docstrings(tree: ast.AST) -> ast.AST:
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            body = node.body
            if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant) \
                    and isinstance(body[0].value.value, str):
                node.body = body[1:] or ([] if isinstance(node, ast.Module) else [ast.Pass()])
    return tree


def _trees_differ(old: bytes, new: bytes) -> bool:
    """Compare syntax trees without docstrings; code this Python cannot parse (say, Python 2) gives False."""
    try:
        return ast.dump(_without_docstrings(ast.parse(old))) != ast.dump(_without_docstrings(ast.parse(new)))
    except (SyntaxError, ValueError):
        return False


def _scan_may_be_fooled(source: bytes) -> bool:
    """A triple quote after a '#' or an unpaired quote on its line may sit inside a comment or
    an ordinary string, where the scan would take it for the start or end of a docstring."""
    for start, _ in _strings(source, len(source)):
        prefix = source[source.rfind(b"\n", 0, start) + 1:start]
        if b"#" in prefix or (prefix.count(b"'") + prefix.count(b'"')) % 2:
            return True
    return False


def edit_is_semantic(new: bytes, edits: list[LineEdit]) -> Optional[bool]:
    """`is_semantic_python_change` read from the file after the change and the diff alone; None
    where that cannot tell: a changed line holds a triple quote, or the scan may be fooled where
    no code changed (the caller rebuilds the file before the change then)."""
    changed = b"\n".join(line for edit in edits for line in (*edit.deleted, *edit.added))
    if b'"""' in changed or b"'''" in changed:
        return None
    # The strings before a run of changed lines are the same on both sides, and none begins or ends
    # in it: the run lies wholly inside a string on both sides, or wholly outside. Whether that string
    # is a docstring is told by the code line above it, which must then be the same on both sides.
    starts = _line_starts(new, [edit.new_at for edit in edits])
    ends = _line_starts(new, [edit.new_at + len(edit.added) for edit in edits])
    strings = list(_strings(new, max(starts, default=0)))
    taken, around = 0, None  # the strings that begin before the run, and the last of them
    for at, edit in sorted(zip(starts, edits), key=lambda pair: pair[0]):
        while taken < len(strings) and strings[taken][0] < at:
            around, taken = strings[taken], taken + 1
        if around is not None and around[1] > at:
            opener = new.rfind(b"\n", 0, around[0]) + 1
            _, above = _previous_code(new, opener)
            if any(above <= end and start <= opener for start, end in zip(starts, ends)):
                return None  # a changed line may be what says whether it is a docstring
            if _is_docstring(new, around[0]):
                continue
        if [code for code in map(_line_code, edit.deleted) if code] != \
                [code for code in map(_line_code, edit.added) if code]:
            return True
    return None if _scan_may_be_fooled(new) else False


def _line_starts(source: bytes, numbers: list[int]) -> list[int]:
    """Where each given line (1-based) begins; the end of the source for a line past it."""
    if not numbers:
        return []
    lines = source.split(b"\n", max(max(numbers) - 1, 0))
    lengths_sum = [0, *accumulate(map(len, lines))]  # line n begins at lengths_sum[n - 1] + n - 1
    starts = []
    for number in numbers:
        before = min(max(number - 1, 0), len(lines))  # the lines before it
        starts.append(min(lengths_sum[before] + before, len(source)))
    return starts


def is_semantic_python_change(old: bytes, new: bytes, blocks: list[ChangeBlock]) -> bool:
    """True unless, in every block of changed lines, the deleted and the added lines differ
    only in comments, blank lines and docstrings. (A line moved elsewhere shows as two
    blocks, so it counts as a change.)"""
    if _lines_differ(old, new, blocks):
        return True
    return (_scan_may_be_fooled(old) or _scan_may_be_fooled(new)) and _trees_differ(old, new)
