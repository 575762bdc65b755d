"""Does a Python file change do more than edit comments, blank lines and docstrings?

Parsing whole files with `ast` for every candidate commit costs many times
git's own diff, so the check works on the lines the diff changed: it blanks
the parts of those lines that lie inside docstrings (triple-quoted strings
found by one scan for triple quotes), drops comments and blank lines, and
compares what is left of the deleted lines with what is left of the added
lines, block by block. The scan can be fooled by a triple quote inside a
comment or an ordinary string: when it finds no change in a file where that
may have happened, the syntax trees without docstrings decide.
"""

import ast
import re
from bisect import bisect_left
from itertools import accumulate

_TRIPLE_QUOTE = re.compile(rb'"""|\'\'\'')
_STRING_PREFIX = re.compile(rb"[rRuU]?$")

ChangeBlock = tuple[list[int], list[int]]  # (deleted line numbers in old, added line numbers in new)


class _TripleQuotes:
    """Finds the next triple quote (either kind) before `end`. Two plain finds, each redone
    only once passed, cost a fraction of one regular expression over the same bytes."""

    def __init__(self, source: bytes, end: int):
        self.source, self.end = source, end
        self.next = {quote: -2 for quote in (b'"""', b"\'\'\'")}  # -2: not looked for yet

    def __call__(self, position: int) -> tuple[int, bytes]:
        for quote, at in self.next.items():
            if -1 != at < position:
                self.next[quote] = self.source.find(quote, position, self.end)
        found = [(at, quote) for quote, at in self.next.items() if at >= 0]
        return min(found) if found else (-1, b"")


def _previous_code_line(lines: list[bytes], index: int) -> bytes:
    for i in range(index - 1, -1, -1):
        code = lines[i].split(b"#", 1)[0].strip()
        if code:
            return code
    return b""


def _is_docstring(source: bytes, lines: list[bytes], lengths_sum: list[int], start: int) -> bool:
    """A string standing alone after a block opener (or opening the module)."""
    line_start = source.rfind(b"\n", 0, start) + 1
    if not _STRING_PREFIX.match(source[line_start:start].strip()):
        return False
    index = bisect_left(range(len(lines)), start, key=lambda i: lengths_sum[i] + i)
    previous = _previous_code_line(lines, index)
    return not previous or previous.endswith(b":")


def _code_parts(source: bytes, line_numbers: list[int]) -> dict[int, bytes]:
    """What is left of each given line (1-based) without docstrings, comments and trailing blanks;
    lines with nothing left are omitted."""
    lines = source.split(b"\n")
    wanted = sorted({n for n in line_numbers if 0 < n <= len(lines)})
    if not wanted:
        return {}
    # Line n ends (at its newline) at offset lengths_sum[n - 1] + n - 1.
    lengths_sum = list(accumulate(map(len, lines)))
    wanted_ends = [lengths_sum[n - 1] + n - 1 for n in wanted]
    wanted_starts = [end - len(lines[n - 1]) for n, end in zip(wanted, wanted_ends)]
    text = {n: bytearray(lines[n - 1]) for n in wanted}
    position = 0
    next_quote = _TripleQuotes(source, wanted_ends[-1] + 1)
    while (found := next_quote(position))[0] >= 0:
        start, quote = found
        end = source.find(quote, start + 3)
        end = position = len(source) if end < 0 else end + 3
        first = bisect_left(wanted_ends, start)
        if first == len(wanted) or wanted_starts[first] >= end:
            continue
        if not _is_docstring(source, lines, lengths_sum, start):
            continue
        for i in range(first, len(wanted)):
            if wanted_starts[i] >= end:
                break
            left, right = max(start, wanted_starts[i]), min(end, wanted_ends[i])
            offset = wanted_starts[i]
            text[wanted[i]][left - offset:right - offset] = b" " * (right - left)
    parts = {}
    for number, line in text.items():
        code = bytes(line)
        if b"#" in code and b"'" not in code and b'"' not in code:
            code = code.split(b"#", 1)[0]
        code = code.rstrip()
        if code:
            parts[number] = code
    return parts


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
    position = 0
    while match := _TRIPLE_QUOTE.search(source, position):
        start = match.start()
        prefix = source[source.rfind(b"\n", 0, start) + 1:start]
        if b"#" in prefix or (prefix.count(b"'") + prefix.count(b'"')) % 2:
            return True
        end = source.find(match.group(), start + 3)
        if end < 0:
            return False
        position = end + 3
    return False


def is_semantic_python_change(old: bytes, new: bytes, blocks: list[ChangeBlock]) -> bool:
    """True unless, in every block of changed lines, the deleted and the added lines differ
    only in comments, blank lines and docstrings. (A line moved elsewhere shows as two
    blocks, so it counts as a change.)"""
    if _lines_differ(old, new, blocks):
        return True
    return (_scan_may_be_fooled(old) or _scan_may_be_fooled(new)) and _trees_differ(old, new)
