"""Small edits of Python source made into patches: which lines a patch adds, whether a text parses,
its tokens, and the patch from one text of a file to another. Mutants and the judge's style probes
both make candidates this way."""

import ast
import difflib
import io
import tokenize
from typing import Optional

from unidiff import PatchSet
from unidiff.constants import LINE_TYPE_NO_NEWLINE
from unidiff.errors import UnidiffParseError


def added_lines(patch: str) -> dict[str, set[int]]:
    """Per file, the line numbers (after the fix) of the lines the patch adds."""
    try:
        files = PatchSet(patch)
    except UnidiffParseError:
        return {}
    return {patched.path: {line.target_line_no for hunk in patched for line in hunk if line.is_added}
            for patched in files}


def parses(text: str) -> bool:
    try:
        ast.parse(text)
    except (SyntaxError, ValueError):
        return False
    return True


def file_diff(path: str, before: Optional[str], after: str) -> str:
    """A patch git applies, from `before` (None: no such file) to `after`."""
    old = (before or "").splitlines(keepends=True)
    new = after.splitlines(keepends=True)
    for lines in (old, new):
        if lines and not lines[-1].endswith("\n"):
            lines[-1] += "\n\\ No newline at end of file\n"
    header = f"diff --git a/{path} b/{path}\n" + ("new file mode 100644\n" if before is None else "")
    body = difflib.unified_diff(old, new, "/dev/null" if before is None else f"a/{path}", f"b/{path}", n=3)
    return header + "".join(body)


def python_tokens(text: str) -> list[tokenize.TokenInfo]:
    try:
        return list(tokenize.generate_tokens(io.StringIO(text).readline))
    except (tokenize.TokenError, SyntaxError):
        return []


def patch_applied(patch: str, before: dict[str, Optional[str]]) -> dict[str, Optional[str]]:
    """The text of each file of `before` (path -> text, None where it does not exist) once the patch is
    applied, worked out in memory (the patch is anyone's: nothing is written or run); None for a file
    the patch removes, leaves out, or whose hunks do not match its text."""
    try:
        files = {patched.path: patched for patched in PatchSet(patch)}
    except UnidiffParseError:
        return dict.fromkeys(before)
    return {path: _file_applied(files[path], text) if path in files else None for path, text in before.items()}


def _file_applied(patched, text: Optional[str]) -> Optional[str]:
    if patched.target_file == "/dev/null" or patched.is_binary_file:
        return None
    lines = (text or "").splitlines(keepends=True)
    out, cursor = [], 0
    for hunk in patched:
        start = max(hunk.source_start - 1, 0) if hunk.source_length else hunk.source_start
        if start < cursor or start > len(lines):
            return None
        out += lines[cursor:start]
        cursor = start
        previous = None
        for line in hunk:
            if line.line_type == LINE_TYPE_NO_NEWLINE:  # the line before it ends the file with no newline
                if previous is not None and (previous.is_added or previous.is_context) and out:
                    out[-1] = out[-1].rstrip("\n")
                continue
            if line.is_context or line.is_removed:
                if cursor >= len(lines) or lines[cursor].rstrip("\n") != line.value.rstrip("\n"):
                    return None
                cursor += 1
            if line.is_context or line.is_added:
                out.append(line.value)
            previous = line
    out += lines[cursor:]
    return "".join(out)
