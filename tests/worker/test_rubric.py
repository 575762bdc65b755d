"""The rubric's merge, outcome and disagreement rules, on plain data."""

from worker.engine.curate.rubric import Scores, Thresholds, review_outcome, scores_merge

THRESHOLDS = Thresholds(underspecified_below=2, false_negative_below=2)


def _scores(decision="accept", underspecified=0, false_negative=0, difficulty="<15 min fix"):
    return Scores(decision, underspecified, false_negative, difficulty)


def test_merging_keeps_the_most_severe_score_and_the_longest_difficulty():
    merged = scores_merge([_scores(underspecified=1, difficulty="1-4 hours"),
                           _scores(false_negative=1, difficulty="15 min - 1 hour")])
    assert (merged.reviews, merged.underspecified, merged.false_negative) == (2, 1, 1)
    assert merged.difficulty == "1-4 hours" and not merged.rejected and not merged.disagree


def test_no_review_merges_to_nothing():
    merged = scores_merge([])
    assert merged.reviews == 0 and merged.underspecified is None and review_outcome(
        merged, required=1, thresholds=THRESHOLDS) == "pending"


def test_reviewers_disagree_on_decisions_or_on_scores_two_apart():
    assert scores_merge([_scores(), _scores("reject")]).disagree
    assert scores_merge([_scores(false_negative=0), _scores(false_negative=2, decision="accept")]).disagree
    assert not scores_merge([_scores(false_negative=0), _scores(false_negative=1)]).disagree


def test_the_outcome_waits_for_the_required_reviews_and_any_reject_rejects():
    one = scores_merge([_scores()])
    assert review_outcome(one, required=2, thresholds=THRESHOLDS) == "pending"
    assert review_outcome(one, required=1, thresholds=THRESHOLDS) == "accepted"
    assert review_outcome(scores_merge([_scores("reject")]), required=2, thresholds=THRESHOLDS) == "rejected"
    assert review_outcome(scores_merge([_scores(underspecified=2)]), required=1, thresholds=THRESHOLDS) == "failing"


def test_thresholds_say_why_scores_keep_a_task_out_at_the_boundary():
    assert THRESHOLDS.problems(1, 1) == []
    assert len(THRESHOLDS.problems(2, 1)) == 1 and "underspecified" in THRESHOLDS.problems(2, 1)[0]
    assert len(THRESHOLDS.problems(1, 2)) == 1 and "valid solutions" in THRESHOLDS.problems(1, 2)[0]


def test_a_rejection_without_scores_merges_with_scored_reviews():
    merged = scores_merge([Scores("reject", None, None, ""), Scores("accept", 1, 0, "1-4 hours")])
    assert (merged.reviews, merged.underspecified, merged.false_negative, merged.difficulty) == (2, 1, 0, "1-4 hours")
    assert merged.rejected and merged.disagree  # the decisions differ
    alone = scores_merge([Scores("reject", None, None, "")])
    assert (alone.underspecified, alone.false_negative, alone.disagree) == (None, None, False)
    assert review_outcome(alone, required=1, thresholds=Thresholds()) == "rejected"
