"""Does a Python file change do more than edit comments, blank lines and docstrings?

Parsing whole files with `ast` for every candidate commit costs many times
git's own diff, so the check works on the lines the diff changed: it blanks
the parts of those lines that lie inside docstrings (found with one scan of
the file for triple quotes), drops comments and blank lines, and compares
what is left of the deleted lines with what is left of the added lines,
block by block.
"""

import re
from bisect import bisect_right

_TRIPLE_QUOTE = re.compile(rb'"""|\'\'\'')
_STRING_PREFIX = re.compile(rb"[rRuU]?$")

ChangeBlock = tuple[list[int], list[int]]  # (deleted line numbers in old, added line numbers in new)
Span = tuple[int, int, int, int]  # docstring from (line, column) to (line, column), lines 1-based, end exclusive


def _previous_code_line(lines: list[bytes], index: int) -> bytes:
    for i in range(index - 1, -1, -1):
        code = lines[i].split(b"#", 1)[0].strip()
        if code:
            return code
    return b""


def _docstring_spans(source: bytes, lines: list[bytes]) -> list[Span]:
    """Triple-quoted strings that stand alone after a block opener (or open the module)."""
    spans, position, line_number, counted_to = [], 0, 1, 0
    while match := _TRIPLE_QUOTE.search(source, position):
        quote, start = match.group(), match.start()
        end = source.find(quote, match.end())
        end = len(source) if end < 0 else end + 3
        line_number += source.count(b"\n", counted_to, start)
        line_start = source.rfind(b"\n", 0, start) + 1
        if _STRING_PREFIX.match(source[line_start:start].strip()):
            previous = _previous_code_line(lines, line_number - 1)
            if not previous or previous.endswith(b":"):
                end_line = line_number + source.count(b"\n", start, end)
                end_col = end - (source.rfind(b"\n", 0, end) + 1)
                spans.append((line_number, start - line_start, end_line, end_col))
        line_number += source.count(b"\n", start, end)
        position = counted_to = end
    return spans


def _line_without_docstrings(line: bytes, number: int, spans: list[Span], span_starts: list[int]) -> bytes:
    for i in range(bisect_right(span_starts, number) - 1, -1, -1):
        start_line, start_col, end_line, end_col = spans[i]
        if end_line < number:
            break
        left = start_col if start_line == number else 0
        right = end_col if end_line == number else len(line)
        line = line[:left] + b" " * (right - left) + line[right:]
    return line


def _code_parts(source: bytes, line_numbers: list[int]) -> dict[int, bytes]:
    """What is left of each given line (1-based) without docstrings, comments and trailing blanks;
    lines with nothing left are omitted."""
    if not line_numbers:
        return {}
    lines = source.split(b"\n")
    spans = _docstring_spans(source, lines) if b'""' in source or b"''" in source else []
    span_starts = [span[0] for span in spans]
    parts = {}
    for number in line_numbers:
        if number > len(lines):
            continue
        code = lines[number - 1]
        if spans:
            code = _line_without_docstrings(code, number, spans, span_starts)
        if b"#" in code and b"'" not in code and b'"' not in code:
            code = code.split(b"#", 1)[0]
        code = code.rstrip()
        if code:
            parts[number] = code
    return parts


def is_semantic_python_change(old: bytes, new: bytes, blocks: list[ChangeBlock]) -> bool:
    """True unless, in every block of changed lines, the deleted and the added lines differ
    only in comments, blank lines and docstrings. (A line moved elsewhere shows as two
    blocks, so it counts as a change.)"""
    old_parts = _code_parts(old, [n for deleted, _ in blocks for n in deleted])
    new_parts = _code_parts(new, [n for _, added in blocks for n in added])
    return any(
        [old_parts[n] for n in deleted if n in old_parts] != [new_parts[n] for n in added if n in new_parts]
        for deleted, added in blocks
    )
