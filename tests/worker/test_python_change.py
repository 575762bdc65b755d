import pytest

from worker.engine.python_change import is_semantic_python_change

BASE = b'''"""Module docs."""


def area(r):
    """Area of a circle."""
    # pi is close enough
    return 3.14 * r * r
'''


@pytest.mark.parametrize("new, semantic", [
    (BASE.replace(b"Module docs.", b"Better module docs."), False),
    (BASE.replace(b"Area of a circle.", b"Area of a disc."), False),
    (BASE.replace(b"# pi is close enough", b"# an approximation"), False),
    (BASE.replace(b"    return", b"\n    return"), False),
    (BASE.replace(b'    """Area of a circle."""\n', b""), False),
    (BASE.replace(b"3.14", b"3.14159"), True),
    (BASE.replace(b"r * r", b"r ** 2"), True),
    (BASE + b"\nPI = 3.14\n", True),
])
def test_only_code_changes_count(new, semantic):
    assert is_semantic_python_change(BASE, new) is semantic


def test_new_file_with_code_is_semantic_and_empty_one_is_not():
    assert is_semantic_python_change(b"", b"x = 1\n")
    assert not is_semantic_python_change(b"", b"# just a comment\n")
    assert not is_semantic_python_change(b"", b'"""Docs only."""\n')


def test_python2_code_is_compared_without_comments():
    old = b"print 'hi'  # greet\n"
    assert not is_semantic_python_change(old, b"print 'hi'  # say hello\n")
    assert is_semantic_python_change(old, b"print 'bye'  # greet\n")


def test_unparseable_code_counts_as_a_change():
    assert is_semantic_python_change(b"def f(:\n  '''", b"def f(:\n  '''x")
