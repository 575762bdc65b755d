"""Taking test files from a test writer's answer, writing them safely, and judging each."""

import os

import pytest

from worker.engine.validate.generated_tests import (
    generated_file_verdicts,
    generated_file_write,
    generated_files_from_answer,
)
from worker.engine.grade.oracle import oracle_from_runs


def test_code_blocks_with_tests_are_taken_and_the_rest_ignored():
    answer = ("Here you go:\n```python\nimport x\n\ndef test_a():\n    assert x.f() == 1\n```\n"
              "and a helper:\n```python\ndef helper():\n    pass\n```\n```\ndef test_b():\n    pass\n```")
    assert generated_files_from_answer(answer) == ["import x\n\ndef test_a():\n    assert x.f() == 1\n",
                                              "def test_b():\n    pass\n"]
    assert generated_files_from_answer("def test_a(): pass  (no code block)") == []
    assert len(generated_files_from_answer("```python\ndef test_x():\n    pass\n```\n" * 5)) == 3


def test_a_generated_file_is_never_written_through_a_planted_link(tmp_path):
    outside = tmp_path / "outside.txt"
    outside.write_text("keep me")
    repo = tmp_path / "repo"
    repo.mkdir()
    os.symlink(outside, repo / "test_commitgym_generated_1.py")
    name = generated_file_write(repo, 1, "def test_x():\n    pass\n")
    assert name == "test_commitgym_generated_1_1.py" and outside.read_text() == "keep me"
    assert (repo / name).read_text() == "def test_x():\n    pass\n"


@pytest.mark.parametrize("before, after, reason", [
    ({"g.py::test_a": "FAILED"}, {"g.py::test_a": "PASSED"}, ""),
    ({"g.py::test_a": "PASSED"}, {"g.py::test_a": "PASSED"}, "passes_before"),
    ({"g.py::test_a": "FAILED"}, {"g.py::test_a": "FAILED"}, "fails_after"),
    ({"g.py::test_a": "ERROR"}, {"g.py::test_a": "ERROR"}, "errors"),
    ({}, {}, "no_tests"),
])
def test_each_generated_file_is_kept_or_dropped_with_its_reason(before, after, reason):
    oracle = oracle_from_runs([before, before], [after, after])
    (verdict,) = generated_file_verdicts(["g.py"], oracle, [before, before], [after, after])
    assert (verdict.kept, verdict.reason) == (reason == "", reason)


def test_a_flaky_generated_test_is_dropped_as_flaky():
    before = [{"g.py::test_a": "FAILED"}, {"g.py::test_a": "PASSED"}]
    after = [{"g.py::test_a": "PASSED"}, {"g.py::test_a": "PASSED"}]
    (verdict,) = generated_file_verdicts(["g.py"], oracle_from_runs(before, after), before, after)
    assert (verdict.kept, verdict.reason) == (False, "flaky")
