"""A release's files (worker/engine/release/): rows any SWE-bench reader reads one a line, the same
rows in Parquet, checksums that catch a changed file, and chat messages from trajectories."""

import json

import pyarrow.parquet
import pytest

from worker.engine.release.records import SWEBENCH_FIELDS, ReleasedTask, instance_row, release_schema
from worker.engine.release.training import trajectory_messages
from worker.engine.release.writers import JsonLines, ParquetRows, file_sha256, files_check, manifest_write

AWKWARD = "line\u2028separator\x85next\x0cfeed\x1c\u2029 é ✓ \U0001f600 \"quoted\" \\ end"


def task(number: int, **fields) -> ReleasedTask:
    return ReleasedTask(**{"instance_id": f"o__r-{number}", "repo": "o/r", "base_commit": "a" * 40,
                           "patch": "diff --git a/x.py b/x.py\n", "test_patch": "", "problem_statement": AWKWARD,
                           "fail_to_pass": ("tests/test_x.py::test_a[1 2]",), "pass_to_pass": (), **fields})


def test_rows_split_on_any_line_break_still_give_one_row_a_line_and_parquet_holds_the_same(tmp_path):
    rows = [instance_row(task(1)), instance_row(task(2, mutation_score=0.5, underspecified=1, environment_key="k",
                                                     suite_args=("-p", "no:xdist")))]
    jsonl, parquet = JsonLines(tmp_path / "i.jsonl"), ParquetRows(tmp_path / "i.parquet", release_schema())
    for row in rows:
        jsonl.write([row])
        parquet.write([row])
    written = [jsonl.close(), parquet.close()]
    text = (tmp_path / "i.jsonl").read_text()
    assert text.isascii()
    # SWE-bench's loader reads a local .jsonl with str.splitlines(), which breaks at \u2028 and \x85 too.
    assert [json.loads(line) for line in text.splitlines()] == rows
    assert rows[0]["problem_statement"] == AWKWARD and rows[0]["FAIL_TO_PASS"] == '["tests/test_x.py::test_a[1 2]"]'
    assert rows[0]["commitgym_test_command"] == "" and rows[1]["commitgym_test_command"].endswith(" -p no:xdist")
    assert pyarrow.parquet.read_table(tmp_path / "i.parquet").to_pylist() == rows
    assert [(file.name, file.rows) for file in written] == [("i.jsonl", 2), ("i.parquet", 2)]
    assert all(file.sha256 == file_sha256(tmp_path / file.name) for file in written)
    assert list(rows[0])[:len(SWEBENCH_FIELDS)] == list(SWEBENCH_FIELDS)


def test_a_file_is_never_written_over_and_a_changed_one_is_caught(tmp_path):
    jsonl = JsonLines(tmp_path / "i.jsonl")
    jsonl.write([{"a": 1}])
    described = [jsonl.close().described()]
    with pytest.raises(FileExistsError):
        JsonLines(tmp_path / "i.jsonl")
    manifest = manifest_write(tmp_path, {"files": described})
    with pytest.raises(FileExistsError):
        manifest_write(tmp_path, {})
    assert files_check(tmp_path, [*described, manifest.described()]) == []
    (tmp_path / "i.jsonl").write_text('{"a": 2}\n')
    assert files_check(tmp_path, described) == ["i.jsonl is not the file that was released (its checksum differs)"]
    (tmp_path / "i.jsonl").unlink()
    assert files_check(tmp_path, described) == ["i.jsonl is missing"]


def test_a_trajectory_becomes_turns_with_empty_parts_left_out():
    steps = [{"thought": "Read it", "action": "cat a.py", "observation": "x = 1"},
             {"thought": "", "action": "", "observation": "nothing"},
             {"thought": "Done", "action": "", "observation": ""}]
    messages = trajectory_messages(repo="o/r", problem_statement="x is 1", steps=steps)
    assert [(m["role"], m["content"]) for m in messages[1:]] == [
        ("user", "x is 1"), ("assistant", "Read it\n\n```\ncat a.py\n```"), ("user", "x = 1"), ("user", "nothing"),
        ("assistant", "Done")]
    assert messages[0]["role"] == "system" and "o/r" in messages[0]["content"]
