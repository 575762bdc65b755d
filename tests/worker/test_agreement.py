"""Pairwise agreement, on cases worked out by hand."""

from worker.engine.label.agreement import Judgement, pairwise_agreement


def test_pairs_of_one_item_agree_when_they_answered_alike():
    judgements = [
        Judgement("t1", "ana", "accept"), Judgement("t1", "ben", "accept"), Judgement("t1", "cy", "reject"),
        Judgement("t2", "ana", "reject"),  # alone on its item: no pair
        Judgement("t3", "ben", "accept"), Judgement("t3", "cy", "accept"),
    ]
    agreement = pairwise_agreement(judgements)
    # t1: ana-ben agree, ana-cy and ben-cy do not; t3: ben-cy agree.
    assert (agreement.agreed, agreement.pairs, agreement.share) == (2, 4, 0.5)
    assert dict(agreement.per_person) == {"ana": [1, 2], "ben": [2, 3], "cy": [1, 3]}


def test_no_pair_has_no_share():
    assert pairwise_agreement([]).share is None
    single = pairwise_agreement([Judgement(1, "ana", "yes"), Judgement(2, "ana", "no")])
    assert (single.agreed, single.pairs, single.share, dict(single.per_person)) == (0, 0, None, {})
