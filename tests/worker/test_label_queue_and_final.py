"""The engine's parts of labelling: a candidate's final label, the queue's orders and hidden controls,
and a patch shown with more context."""

import pytest

from worker.engine.git.context import patch_with_context
from worker.engine.label.final import AGREED, DISAGREE, PENDING, SETTLED, FinalLabel, final_label
from worker.engine.label.queue import (
    DISAGREEMENT,
    RANDOM,
    UNCERTAIN,
    Scored,
    controls_chosen,
    priorities,
    uniform_share,
)


def test_a_final_label_is_agreed_by_everyone_asked_or_settled_never_voted():
    assert final_label(["correct", "correct"], settled=None, required=2) == FinalLabel("correct", AGREED)
    assert final_label(["correct"], settled=None, required=2).status == PENDING
    assert final_label([], settled=None, required=1).status == PENDING
    # Two to one is no majority verdict: a curator settles it.
    assert final_label(["correct", "correct", "incorrect"], settled=None, required=2) == FinalLabel(None, DISAGREE)
    assert final_label(["correct", "incorrect"], settled="incorrect", required=2) == FinalLabel("incorrect", SETTLED)
    assert final_label(["cant_tell", "cant_tell"], settled=None, required=2) == FinalLabel("cant_tell", AGREED)


def test_uniform_shares_spread_evenly_and_depend_only_on_the_seed_and_the_candidate():
    shares = [uniform_share("dataset-1", i) for i in range(10_000)]
    assert all(0 <= share < 1 for share in shares)
    assert sum(share < 0.5 for share in shares) == pytest.approx(5_000, abs=200)
    assert uniform_share("dataset-1", 7) == uniform_share("dataset-1", 7) != uniform_share("dataset-2", 7)


def test_the_disagreement_order_puts_first_where_both_verifiers_contradict_the_tests():
    items = [Scored(1, resolved=True, p_yes=0.9, execution_passes=True),  # everyone agrees
             Scored(2, resolved=True, p_yes=0.1, execution_passes=False),  # both verifiers say no
             Scored(3, resolved=False, p_yes=0.8, execution_passes=False),  # the judge says yes
             Scored(4)]  # ungraded
    placed = priorities(items, DISAGREEMENT, seed="s")
    assert sorted(placed, key=placed.get)[:2] == [2, 3]
    assert placed[1] >= 2 and placed[4] >= 2


def test_the_uncertain_order_puts_first_what_the_judge_is_least_sure_of():
    items = [Scored(1, p_yes=0.97), Scored(2, p_yes=0.52), Scored(3, p_yes=0.3), Scored(4)]
    placed = priorities(items, UNCERTAIN, seed="s")
    assert sorted(placed, key=placed.get) == [2, 3, 1, 4]


def test_the_random_order_is_the_seeded_hash_alone():
    items = [Scored(i, resolved=bool(i % 2), p_yes=i / 10) for i in range(10)]
    assert priorities(items, RANDOM, seed="s") == {i: uniform_share("s", i) for i in range(10)}
    with pytest.raises(ValueError):
        priorities(items, "alphabetical", seed="s")


def test_controls_are_the_share_of_the_queue_asked_for_as_far_as_there_are_any():
    controls = list(range(100, 140))
    assert controls_chosen(controls, share=0.0, agents=30, seed="s") == []
    assert len(controls_chosen(controls, share=0.25, agents=30, seed="s")) == 10  # 10 of 40 items
    assert len(controls_chosen(controls, share=0.5, agents=60, seed="s")) == 40  # all there are
    assert controls_chosen(controls, share=0.25, agents=30, seed="s") == controls_chosen(
        list(reversed(controls)), share=0.25, agents=30, seed="s")
    with pytest.raises(ValueError):
        controls_chosen(controls, share=1.0, agents=3, seed="s")


OLD = "".join(f"line {n}\n" for n in range(1, 41))
PATCH = ("diff --git a/m.py b/m.py\n--- a/m.py\n+++ b/m.py\n@@ -19,5 +19,5 @@\n line 19\n line 20\n-line 21\n"
         "+line twenty-one\n line 22\n line 23\n")


def test_a_patch_shown_with_more_context_carries_the_file_around_each_change():
    wide = patch_with_context(PATCH, {"m.py": OLD}, 10)
    assert "@@ -11,21 +11,21 @@" in wide
    assert " line 11\n" in wide and " line 31\n" in wide and " line 32\n" not in wide
    assert "-line 21\n+line twenty-one\n" in wide
    whole = patch_with_context(PATCH, {"m.py": OLD}, 1_000_000)
    assert " line 1\n" in whole and " line 40\n" in whole


def test_a_file_that_cannot_be_read_or_does_not_fit_keeps_the_context_it_came_with():
    assert patch_with_context(PATCH, {}, 10) == PATCH
    assert patch_with_context(PATCH, {"m.py": OLD.replace("line 21\n", "line 21 changed\n")}, 10) == PATCH
    assert patch_with_context("not a patch", {}, 10) == "not a patch"
