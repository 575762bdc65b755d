import pytest

from worker.engine.grade.oracle import Oracle, oracle_from_runs, resolves, task_verdict


def test_fail_to_pass_pass_to_pass_breaks_and_flaky():
    before = [
        {"t::fixed": "FAILED", "t::kept": "PASSED", "t::broken": "PASSED", "t::flaky": "PASSED", "t::skip": "SKIPPED"},
        {"t::fixed": "ERROR", "t::kept": "PASSED", "t::broken": "PASSED", "t::flaky": "FAILED", "t::skip": "SKIPPED"},
    ]
    after = [
        {"t::fixed": "PASSED", "t::kept": "XFAIL", "t::broken": "FAILED", "t::flaky": "PASSED", "t::skip": "SKIPPED"},
        {"t::fixed": "PASSED", "t::kept": "PASSED", "t::broken": "FAILED", "t::flaky": "PASSED", "t::skip": "SKIPPED"},
    ]
    assert oracle_from_runs(before, after) == Oracle(
        fail_to_pass=["t::fixed"], pass_to_pass=["t::kept"], flaky=["t::flaky"], breaks=["t::broken"])


def test_a_test_absent_before_fails_there():
    oracle = oracle_from_runs([{"t::old": "PASSED"}], [{"t::old": "PASSED", "t::new[a b-1]": "PASSED"}])
    assert oracle.fail_to_pass == ["t::new[a b-1]"] and oracle.pass_to_pass == ["t::old"]


def test_a_test_missing_from_one_run_only_is_flaky():
    oracle = oracle_from_runs([{"t::a": "PASSED"}, {}], [{"t::a": "PASSED"}, {"t::a": "PASSED"}])
    assert oracle.flaky == ["t::a"] and not oracle.pass_to_pass


def test_each_side_needs_a_run():
    with pytest.raises(ValueError):
        oracle_from_runs([], [{"t::a": "PASSED"}])


def test_resolves_needs_every_f2p_and_p2p_test_to_pass():
    outcomes = {"a": "PASSED", "b": "XFAIL", "c": "FAILED"}
    assert resolves(outcomes, fail_to_pass=["a"], pass_to_pass=["b"])
    assert not resolves(outcomes, fail_to_pass=["a", "c"], pass_to_pass=["b"])
    assert not resolves(outcomes, fail_to_pass=["a"], pass_to_pass=["missing"])
    assert not resolves({"a": "SKIPPED"}, fail_to_pass=["a"], pass_to_pass=[])


@pytest.mark.parametrize("oracle, gold, empty, verdict", [
    (Oracle(["f"], ["p"], [], []), True, False, ("valid", "")),
    (Oracle([], ["p"], ["f"], []), True, False, ("invalid", "no_fail_to_pass")),
    (Oracle(["f"], ["p"], [], ["b"]), True, False, ("invalid", "breaks_other_tests")),
    (Oracle(["f"], ["p"], [], []), False, False, ("invalid", "gold_patch_fails")),
    (Oracle(["f"], ["p"], [], []), True, True, ("invalid", "empty_patch_resolves")),
])
def test_task_verdict(oracle, gold, empty, verdict):
    assert task_verdict(oracle, gold_resolves=gold, empty_resolves=empty) == verdict


def test_tests_a_cut_short_run_never_reached_are_unknown_not_failing():
    from worker.engine.grade.oracle import runs_filled

    before = runs_filled([{"t::a": "FAILED", "t::b": "PASSED"}, {"t::a": "FAILED"}], [True, False])
    after = runs_filled([{"t::a": "PASSED", "t::b": "PASSED"}, {"t::a": "PASSED", "t::b": "PASSED"}], [True, True])
    oracle = oracle_from_runs(before, after)
    assert oracle.fail_to_pass == ["t::a"] and oracle.pass_to_pass == ["t::b"] and not oracle.flaky
    nowhere = oracle_from_runs(runs_filled([{"t::x": "PASSED"}, {}], [True, False]), [{}])
    assert nowhere.breaks == ["t::x"]  # complete after-run without it: it failed to collect there


def test_an_untrusted_run_never_resolves_and_an_xfail_passes_only_where_the_reference_had_one():
    from worker.engine.run.pytest_run import TestRun
    from worker.engine.grade.oracle import run_resolves

    def graded(outcomes, untrusted=""):
        return TestRun(outcomes=outcomes, status="ok", exit_code=0, output=b"", seconds=0.1, collection_error=False,
                       untrusted=untrusted)

    assert run_resolves(graded({"a": "PASSED", "b": "PASSED"}), fail_to_pass=["a"], pass_to_pass=["b"])
    assert not run_resolves(graded({"a": "PASSED", "b": "PASSED"}, "forged_result: a"), fail_to_pass=["a"],
                            pass_to_pass=["b"])
    # A candidate that calls pytest.xfail() in the code under test turns its failure into XFAIL.
    assert not run_resolves(graded({"a": "XFAIL", "b": "PASSED"}), fail_to_pass=["a"], pass_to_pass=["b"])
    assert run_resolves(graded({"a": "PASSED", "b": "XFAIL"}), fail_to_pass=["a"], pass_to_pass=["b"],
                        reference_xfail={"b"})
