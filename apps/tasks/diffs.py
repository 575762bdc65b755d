"""A patch for people to read: unified (Pygments' diff lexer) or split into old and new side by side,
each line highlighted as the code it is."""

from dataclasses import dataclass, field

from django.utils.html import escape
from django.utils.safestring import SafeString, mark_safe
from unidiff import PatchSet
from unidiff.errors import UnidiffParseError

from apps.pages import diff_html


@dataclass
class SplitRow:
    old_number: int | None
    old_html: SafeString | str
    new_number: int | None
    new_html: SafeString | str
    kind: str  # context | change | hunk


@dataclass
class PatchFile:
    path: str
    added: int
    removed: int
    unified_html: SafeString
    rows: list[SplitRow] = field(default_factory=list)


def _lexer(path: str):
    # Pygments is imported at call: 0.14 s that every command's and worker's start would pay otherwise.
    from pygments.lexers import TextLexer, get_lexer_for_filename
    from pygments.util import ClassNotFound

    try:
        return get_lexer_for_filename(path, stripnl=False)
    except ClassNotFound:
        return TextLexer()


def _line_html(lexer, text: str) -> SafeString:
    """One line, highlighted; Pygments escapes it."""
    from pygments import highlight
    from pygments.formatters import HtmlFormatter

    formatter = HtmlFormatter(nowrap=True)
    return mark_safe(highlight(text.rstrip("\n") + "\n", lexer, formatter).rstrip("\n"))


def _split_rows(patched) -> list[SplitRow]:
    lexer, rows = _lexer(patched.path), []
    for hunk in patched:
        rows.append(SplitRow(None, escape(str(hunk).split("\n", 1)[0]), None, "", "hunk"))
        removed, added = [], []

        def flush():
            for i in range(max(len(removed), len(added))):
                old = removed[i] if i < len(removed) else None
                new = added[i] if i < len(added) else None
                rows.append(SplitRow(old.source_line_no if old else None, _line_html(lexer, old.value) if old else "",
                                     new.target_line_no if new else None, _line_html(lexer, new.value) if new else "",
                                     "change"))
            removed.clear()
            added.clear()

        for line in hunk:
            if line.is_removed:
                removed.append(line)
            elif line.is_added:
                added.append(line)
            elif line.is_context:
                flush()
                html = _line_html(lexer, line.value)
                rows.append(SplitRow(line.source_line_no, html, line.target_line_no, html, "context"))
        flush()
    return rows


def patch_files(text: str, *, split: bool) -> list[PatchFile] | None:
    """The patch's files for display; None when it cannot be parsed."""
    try:
        patch = PatchSet(text)
    except UnidiffParseError:
        return None
    return [PatchFile(f.path, f.added, f.removed, diff_html(str(f)), _split_rows(f) if split else [])
            for f in patch]
