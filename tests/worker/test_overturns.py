"""How often people overturn the hidden tests' grade, with 95% intervals: on cases worked out by hand,
and against statsmodels' intervals on many."""

import pytest
from statsmodels.stats.proportion import proportion_confint

from worker.engine.label.overturns import overturns, share_interval


def test_the_exact_interval_where_none_or_all_went_one_way_has_a_closed_form():
    # 0 of n: the high bound is where seeing none has a probability of 2.5%: (1 - p)^n = 0.025.
    none = share_interval(0, 10)
    assert (none.value, none.low, none.method) == (0.0, 0.0, "exact")
    assert none.high == pytest.approx(1 - 0.025 ** (1 / 10), abs=1e-12)
    every = share_interval(10, 10)
    assert every.low == pytest.approx(0.025 ** (1 / 10), abs=1e-12) and every.high == 1.0


def test_wilsons_interval_where_n_is_large_enough():
    half = share_interval(50, 100)
    assert half.method == "wilson"
    # The score interval for 50 of 100 at 95%, as tabulated: 0.4038 to 0.5962.
    assert (round(half.low, 4), round(half.high, 4)) == (0.4038, 0.5962)


def test_a_small_sample_or_a_lopsided_one_gets_the_exact_interval():
    assert share_interval(12, 29).method == "exact"
    assert share_interval(4, 1000).method == "exact" and share_interval(996, 1000).method == "exact"
    assert share_interval(5, 1000).method == "wilson"
    empty = share_interval(0, 0)
    assert (empty.value, empty.low, empty.high) == (None, None, None)
    with pytest.raises(ValueError):
        share_interval(3, 2)


@pytest.mark.parametrize("count, total", [(0, 1), (1, 2), (3, 10), (7, 29), (2, 10_000), (9_998, 10_000),
                                          (30, 31), (40, 100), (123, 400), (999, 2_000)])
def test_each_interval_matches_statsmodels(count, total):
    share = share_interval(count, total)
    method = "beta" if share.method == "exact" else "wilson"
    low, high = proportion_confint(count, total, alpha=0.05, method=method)
    assert (share.low, share.high) == (pytest.approx(low, abs=1e-9), pytest.approx(high, abs=1e-9))


def test_overturns_in_each_direction_count_among_what_the_tests_said():
    labelled = ([(True, True)] * 6 + [(True, False)] * 2  # tests: resolved; people overturn 2 of 8
                + [(False, False)] * 3 + [(False, True)] * 1)  # tests: not resolved; people overturn 1 of 4
    found = overturns(labelled)
    assert (found.weak_oracle.count, found.weak_oracle.total, found.weak_oracle.value) == (2, 8, 0.25)
    assert (found.rejects_valid.count, found.rejects_valid.total, found.rejects_valid.value) == (1, 4, 0.25)
    assert found.weak_oracle.method == "exact" and found.weak_oracle.low < 0.25 < found.weak_oracle.high
    assert overturns([]).weak_oracle.value is None
