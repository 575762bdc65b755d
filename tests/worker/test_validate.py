"""Validating the sample repository's commits for real, in the local sandbox."""

from datetime import datetime, timezone
from pathlib import Path

import pytest

from worker.demo.sample_repo import sample_repo_write
from worker.engine.env.builder import EnvironmentBuilder
from worker.engine.validate.pipeline import CommitToValidate, ValidationSettings, task_validate, task_validate_generated

UV = Path(__file__).resolve().parents[2] / ".venv" / "bin" / "uv"
FAST = ValidationSettings(reruns=1, per_test_timeout=20, suite_seconds=120)


@pytest.fixture(scope="module")
def place(open_module_folder):
    return open_module_folder


@pytest.fixture(scope="module")
def sample(place):
    commits = sample_repo_write(place / "sample")
    parents = {later.sha: earlier.sha for earlier, later in zip(commits, commits[1:])}
    return place / "sample", commits, parents


@pytest.fixture(scope="module", params=["local", "docker"])
def builder(place, request, docker_builder_make):
    """Every case runs with both sandboxes."""
    if request.param == "docker":
        return docker_builder_make(place / "envs-docker")
    return EnvironmentBuilder(env_root=place / "envs-local", uv=UV)


def _validate(sample, builder, place, commit, settings=FAST, reusable=()):
    repo, _, parents = sample
    target = CommitToValidate(mirror_dir=repo, sha=commit.sha, parent_sha=parents[commit.sha],
                              committed_at=datetime(2026, 6, 1, tzinfo=timezone.utc))
    return task_validate(target, builder=builder, work_root=place, settings=settings, reusable=reusable)


def _first(commits, kind, n=0):
    return [c for c in commits if c.kind == kind][n]


def test_a_fix_with_tests_validates_with_its_fail_to_pass_tests(sample, builder, place):
    _, commits, _ = sample
    fix = _first(commits, "fix_with_test", 1)
    result = _validate(sample, builder, place, fix)
    assert (result.verdict, result.reason) == ("valid", ""), result.attempts[-1].output if result.attempts else ""
    assert result.oracle.fail_to_pass == sorted(fix.fail_to_pass)
    assert result.oracle.pass_to_pass and not result.oracle.breaks
    runs = [(record.side, record.scope) for record in result.runs]
    assert runs == [("before", "suite"), ("after", "suite"), *[("after", "rerun")] * FAST.reruns]
    assert (result.gold.outcome, result.empty.outcome) == ("resolved", "no")

    later = _first(commits, "fix_with_test", 2)
    reused = _validate(sample, builder, place, later, reusable=[result.environment])
    assert reused.environment_reused and reused.environment.key == result.environment.key
    assert reused.verdict == "valid" and reused.oracle.fail_to_pass == sorted(later.fail_to_pass)


def test_a_fix_whose_test_data_is_latin1_validates(sample, builder, place):
    _, commits, _ = sample
    fix = _first(commits, "non_utf8_fix")
    result = _validate(sample, builder, place, fix)
    assert (result.verdict, result.oracle.fail_to_pass) == ("valid", sorted(fix.fail_to_pass)), result.reason


def test_a_commit_that_breaks_another_test_is_rejected(sample, builder, place):
    _, commits, _ = sample
    breaking = _first(commits, "breaks_other_test")
    result = _validate(sample, builder, place, breaking)
    assert (result.verdict, result.reason) == ("invalid", "breaks_other_tests")
    assert set(breaking.pass_to_fail) <= set(result.oracle.breaks)


GOOD_TEST = """from textkit.slug import slugify


def test_max_length_leaves_no_trailing_separator():
    assert slugify("hello big world", max_length=10) == "hello-big"
"""
PASSES_BEFORE = "from textkit.slug import slugify\n\n\ndef test_plain():\n    assert slugify('a b') == 'a-b'\n"
FAILS_AFTER = "def test_wrong():\n    assert 1 == 2\n"
BROKEN = "def test_broken(:\n"


def test_a_fix_without_tests_becomes_valid_through_a_generated_test(sample, builder, place):
    repo, commits, parents = sample
    fix = _first(commits, "fix_without_test")
    result = _validate(sample, builder, place, fix)
    assert (result.verdict, result.reason) == ("invalid", "no_fail_to_pass") and result.environment

    target = CommitToValidate(mirror_dir=repo, sha=fix.sha, parent_sha=parents[fix.sha],
                              committed_at=datetime(2026, 6, 1, tzinfo=timezone.utc))
    checked = task_validate_generated(target, [GOOD_TEST, PASSES_BEFORE, FAILS_AFTER, BROKEN], builder=builder,
                                      environment=result.environment, work_root=place, settings=FAST,
                                      pass_to_pass=result.oracle.pass_to_pass)
    assert (checked.result.verdict, checked.result.reason) == ("valid", "")
    assert [(f.path, f.kept, f.reason) for f in checked.files] == [
        ("test_commitgym_generated_1.py", True, ""), ("test_commitgym_generated_2.py", False, "passes_before"),
        ("test_commitgym_generated_3.py", False, "fails_after"), ("test_commitgym_generated_4.py", False, "no_tests")]
    assert checked.result.oracle.fail_to_pass == [
        "test_commitgym_generated_1.py::test_max_length_leaves_no_trailing_separator"]
    assert checked.result.oracle.pass_to_pass == result.oracle.pass_to_pass
    assert len(checked.files[0].before) == 1 + FAST.reruns

    useless = task_validate_generated(target, [PASSES_BEFORE], builder=builder, environment=result.environment,
                                      work_root=place, settings=FAST)
    assert (useless.result.verdict, useless.result.reason) == ("invalid", "no_fail_to_pass")


def test_the_flaky_test_is_found_flaky(sample, builder, place):
    _, commits, _ = sample
    flaky = _first(commits, "flaky_test")
    # 1 + 17 runs of a test failing half the time: all alike with probability 2 / 262,144.
    settings = ValidationSettings(reruns=16, per_test_timeout=20, suite_seconds=120)
    result = _validate(sample, builder, place, flaky, settings=settings)
    assert set(flaky.flaky) <= set(result.oracle.flaky)
    assert not set(flaky.flaky) & set(result.oracle.fail_to_pass + result.oracle.pass_to_pass)


def _run(outcomes, complete=True):
    from worker.engine.run.pytest_run import TestRun

    return TestRun(outcomes=outcomes, status="ok", exit_code=0, output=b"", seconds=0.0, collection_error=False,
                   complete=complete)


def test_a_rerun_of_some_files_says_nothing_of_the_tests_elsewhere():
    from worker.engine.grade.oracle import UNKNOWN, Oracle, oracle_from_runs
    from worker.engine.validate.pipeline import Reach, commit_oracle, outcomes_within_reach

    tests = ["a.py::new", "a.py::old", "b.py::other", "c.py::slow"]
    everything = Reach(but=True)
    before = [(_run({"a.py::old": "PASSED", "b.py::other": "PASSED"}), everything)]  # a.py::new did not collect
    after = [(_run({"a.py::new": "PASSED", "a.py::old": "PASSED", "b.py::other": "PASSED"}, complete=False),
              everything), (_run({"a.py::new": "PASSED", "a.py::old": "FAILED"}), Reach(("a.py",)))]
    filled = outcomes_within_reach(after, tests)
    assert filled[0]["c.py::slow"] == UNKNOWN  # the first run stopped before it
    assert filled[1]["b.py::other"] == UNKNOWN  # the rerun ran a.py only
    assert outcomes_within_reach(before, tests)[0]["a.py::new"] == "FAILED"
    assert oracle_from_runs(outcomes_within_reach(before, tests), filled) == Oracle(
        fail_to_pass=["a.py::new"], pass_to_pass=["b.py::other"], flaky=["a.py::old"], breaks=[])
    # Only the commit's own tests are F2P: one elsewhere that the fix makes pass is none.
    assert commit_oracle(before, after, tests, ["b.py"], frozenset()).fail_to_pass == []
    assert commit_oracle(before, after, tests, ["a.py"], frozenset({"a.py::new"})).fail_to_pass == []
    # A suite's run that did not reach a file (outside its paths) says nothing of it either.
    elsewhere = outcomes_within_reach([(_run({"b.py::other": "PASSED"}), Reach(("c.py",), but=True))], tests)[0]
    assert (elsewhere["c.py::slow"], elsewhere["a.py::new"]) == (UNKNOWN, "FAILED")
