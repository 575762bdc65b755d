"""A patch shown with more of the code around it: each file's hunks applied to the file as it was,
then diffed again with the context asked for. Plain text in and out; where a file cannot be read or
a hunk does not fit it, that file keeps the context it came with."""

import difflib
from typing import Mapping, Optional

from unidiff import PatchSet
from unidiff.errors import UnidiffParseError


def _patched(old: list[str], patched_file) -> Optional[list[str]]:
    """The file's lines after its hunks, or None where a hunk's old lines are not the file's."""
    new, at = [], 0  # `at`: old lines used so far
    for hunk in patched_file:
        start = max(hunk.source_start - 1, 0)
        if start < at:
            return None
        new.extend(old[at:start])
        at = start
        for line in hunk:
            if line.is_added:
                new.append(line.value if line.value.endswith("\n") else line.value + "\n")
                continue
            if at >= len(old) or old[at].rstrip("\r\n") != line.value.rstrip("\r\n"):
                return None
            if line.is_context:
                new.append(old[at])
            at += 1
    return new + old[at:]


def patch_with_context(patch: str, old_files: Mapping[str, Optional[str]], context_lines: int) -> str:
    """The patch again with `context_lines` of context per hunk; `old_files` holds each changed file's
    text as it was before (None, or absent, where it could not be read)."""
    try:
        files = PatchSet(patch)
    except UnidiffParseError:
        return patch
    if not files:
        return patch
    parts = []
    for patched_file in files:
        old_text = old_files.get(patched_file.path)
        if patched_file.is_binary_file or patched_file.is_added_file or patched_file.is_removed_file or not old_text:
            parts.append(str(patched_file))
            continue
        old = [line if line.endswith("\n") else line + "\n" for line in old_text.splitlines(keepends=True)]
        new = _patched(old, patched_file)
        if new is None:
            parts.append(str(patched_file))
            continue
        header = f"diff --git a/{patched_file.path} b/{patched_file.path}\n"
        body = "".join(difflib.unified_diff(old, new, f"a/{patched_file.path}", f"b/{patched_file.path}",
                                            n=context_lines))
        parts.append(header + body if body.endswith("\n") else header + body + "\n")
    return "".join(parts)
