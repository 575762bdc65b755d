"""Small edits of Python source made into patches: which lines a patch adds, whether a text parses,
its tokens, and the patch from one text of a file to another. Mutants and the judge's style probes
both make candidates this way."""

import ast
import difflib
import io
import tokenize
from typing import Optional

from unidiff import PatchSet
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
