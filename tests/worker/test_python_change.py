import difflib

import pytest

from worker.engine.mine.python_change import edit_is_semantic, is_semantic_python_change
from worker.engine.mine.walk import PythonFileChange


def _edits(old: bytes, new: bytes):
    """The runs of changed lines of a unified diff with three lines of context, as git's."""
    diff = difflib.diff_bytes(difflib.unified_diff, old.split(b"\n"), new.split(b"\n"), n=3, lineterm=b"")
    hunks = b"\n".join(list(diff)[2:])
    return PythonFileChange(old_path="m.py", new_path="m.py", old_blob=None, new_blob=None, hunks=hunks).edits


def _semantic(old: bytes, new: bytes) -> bool:
    """Blocks of changed line numbers as a diff gives them, then the check; told from the diff and
    the file after the change alone, where that can tell, it says the same."""
    edits = _edits(old, new)
    semantic = is_semantic_python_change(old, new, [edit.numbers for edit in edits])
    assert edit_is_semantic(new, edits) in (None, semantic)
    return semantic


BASE = b'''"""Module docs."""
import math


def area(r):
    """Area of a circle.

    Long explanation
    over several lines.
    """
    # pi is close enough
    return 3.14 * r * r  # the formula


class Shape:
    \'\'\'A shape.\'\'\'

    sides = 0
    query = """
    select 1
    """
'''


@pytest.mark.parametrize("old, new", [
    (b"Module docs.", b"Better module docs."),
    (b"Area of a circle.", b"Area of a disc."),
    (b"over several lines.", b"over several lines, reworded."),
    (b"    Long explanation\n", b""),
    (b"# pi is close enough", b"# an approximation"),
    (b"  # the formula", b"  # area formula"),
    (b"    return", b"\n    return"),
    (b"A shape.", b"Any shape."),
])
def test_comments_docstrings_and_blank_lines_are_not_semantic(old, new):
    assert BASE.count(old) == 1
    assert _semantic(BASE, BASE.replace(old, new)) is False


@pytest.mark.parametrize("old, new", [
    (b"3.14 * r", b"math.pi * r"),
    (b"r * r", b"r ** 2"),
    (b"    sides = 0", b"    sides = 1"),
    (b"    select 1", b"    select 2"),  # a string that is not a docstring
    (b"    return 3.14", b"        return 3.14"),  # indentation is code in Python
    (b"import math\n", b"import math\nimport os\n"),
])
def test_code_changes_are_semantic(old, new):
    assert BASE.count(old) == 1
    assert _semantic(BASE, BASE.replace(old, new)) is True


def test_new_files():
    assert _semantic(b"", b"x = 1\n")
    assert not _semantic(b"", b"# just a comment\n")
    assert not _semantic(b"", b'"""Docs only."""\n')
    assert not _semantic(b"", b"")


def test_moving_lines_around_is_semantic():
    assert _semantic(b"a = 1\nb = a\n", b"b = a\na = 1\n")


def test_python2_code_works_too():
    old = b"print 'hi'  # greet\n"
    assert _semantic(old, b"print 'bye'  # greet\n")
    assert not _semantic(b"def f():\n    '''Doc.'''\n    print x\n", b"def f():\n    '''Docs.'''\n    print x\n")


def test_a_triple_quote_inside_a_string_does_not_hide_a_code_change():
    old = b'QUOTE = \'"""\'\n\n\ndef f(x):\n    """Doc.\n\n    Returns:\n        x\n    """\n    return x + 1\n'
    assert _semantic(old, old.replace(b"x + 1", b"x + 2"))
    # Fooled the other way, the scan errs towards keeping the commit (a docstring edit counts).


@pytest.mark.parametrize("old, new, semantic", [
    (b"    Long explanation\n", b"    A longer explanation\n", False),  # inside a docstring
    (b"    select 1", b"    select 2", True),  # inside a string that is no docstring
    (b"# pi is close enough", b"# an approximation", False),
    (b"r * r", b"r ** 2", True),
    (b"    sides = 0\n", b"", True),  # a deletion alone
    (b"    Long explanation\n", b"", False),
])
def test_a_change_without_triple_quotes_is_told_from_the_diff_and_the_file_after_it(old, new, semantic):
    changed = BASE.replace(old, new)
    assert edit_is_semantic(changed, _edits(BASE, changed)) is semantic
    assert _semantic(BASE, changed) is semantic


def test_a_change_with_a_triple_quote_or_a_scan_that_may_be_fooled_is_left_to_the_whole_files():
    changed = BASE.replace(b"Module docs.", b"Better module docs.")
    assert edit_is_semantic(changed, _edits(BASE, changed)) is None
    fooling = b"QUOTE = '\"\"\"'\n" + BASE
    changed = fooling.replace(b"# pi is close enough", b"# an approximation")
    assert edit_is_semantic(changed, _edits(fooling, changed)) is None


def test_a_change_to_the_code_line_that_says_whether_a_string_is_a_docstring_is_read_from_both_files():
    # The closing quote of the first string sits after a '#': the line above the second string, for
    # whether it is a docstring, is "a" before the change and "a:" after it.
    old = b'def g():\n    """\n    a\n# """\n    """\n    x\n    """\n'
    new = old.replace(b"    a\n", b"    a:\n").replace(b"    x\n", b"    y\n")
    assert edit_is_semantic(new, _edits(old, new)) is None
    assert _semantic(old, new) is True
