import pytest

from worker.engine.mine.filters import CommitStats, MiningFilters, drop_reason
from worker.engine.test_files import TestFileRules

KEPT = dict(source_file_count=1, lines_added=1, patch_chars=100, python_change=True)


@pytest.mark.parametrize("path, is_test", [
    ("test_parser.py", True),
    ("pkg/test_parser.py", True),
    ("pkg/parser_test.py", True),
    ("conftest.py", True),
    ("src/pkg/conftest.py", True),
    ("tests/helpers.py", True),
    ("pkg/test/data.json", True),
    ("a/tests/b/c.txt", True),
    ("pkg/parser.py", False),
    ("pkg/testing.py", False),
    ("pkg/attest_thing.py", False),
    ("contest.py", False),
    ("latest/x.py", False),
    ("test_data.json", False),
    ("pkg/tests.py", False),
])
def test_test_file_detection(path, is_test):
    assert TestFileRules().is_test(path) is is_test


def test_test_file_rules_are_configurable():
    rules = TestFileRules(file_globs=("*_spec.py",), dir_names=("spec",))
    assert rules.is_test("pkg/parser_spec.py") and rules.is_test("spec/x.py")
    assert not rules.is_test("tests/test_x.py")


@pytest.mark.parametrize("changes, reason", [
    ({"source_file_count": 5}, None),
    ({"source_file_count": 6}, "too_many_files"),
    ({"source_file_count": 3, "other_file_count": 2}, None),
    ({"source_file_count": 3, "other_file_count": 3}, "too_many_files"),
    ({"lines_added": 60, "lines_deleted": 40}, None),
    ({"lines_added": 60, "lines_deleted": 41}, "too_many_lines"),
    ({"patch_chars": 2000}, None),
    ({"patch_chars": 2001}, "patch_too_long"),
    ({"python_change": False}, "no_python_change"),
    ({"source_file_count": 0, "other_file_count": 1}, "no_python_change"),
    ({"has_binary": True}, "binary_file"),
])
def test_each_filter_at_its_boundary(changes, reason):
    assert drop_reason(CommitStats(**{**KEPT, **changes}), MiningFilters()) == reason


def test_filters_run_in_a_fixed_order_and_keep_the_first_reason():
    everything_wrong = CommitStats(has_binary=True, source_file_count=9, lines_added=500,
                                   patch_chars=9000, python_change=False)
    assert drop_reason(everything_wrong, MiningFilters()) == "binary_file"
    everything_wrong.has_binary = False
    assert drop_reason(everything_wrong, MiningFilters()) == "too_many_files"
    everything_wrong.source_file_count = 1
    assert drop_reason(everything_wrong, MiningFilters()) == "too_many_lines"
    everything_wrong.lines_added = 1
    assert drop_reason(everything_wrong, MiningFilters()) == "patch_too_long"
    everything_wrong.patch_chars = 1
    assert drop_reason(everything_wrong, MiningFilters()) == "no_python_change"


def test_custom_limits_apply():
    stats = CommitStats(**{**KEPT, "source_file_count": 2})
    assert drop_reason(stats, MiningFilters(max_files=1)) == "too_many_files"
    assert drop_reason(stats, MiningFilters(max_files=2)) is None


def test_the_python_check_must_have_run_for_commits_that_reach_it():
    with pytest.raises(ValueError):
        drop_reason(CommitStats(source_file_count=1), MiningFilters())
