"""How often people who judge the same item agree: every pair of judgements of one item is a
pair, and it agrees when both gave the same answer. Plain data in, counts out."""

from collections import defaultdict
from dataclasses import dataclass, field
from itertools import combinations
from typing import Hashable, Iterable


@dataclass(frozen=True)
class Judgement:
    item: Hashable  # what was judged (a task, a candidate patch)
    person: Hashable
    answer: Hashable  # a decision, a label


@dataclass
class Agreement:
    agreed: int = 0  # pairs that gave the same answer
    pairs: int = 0
    per_person: dict = field(default_factory=dict)  # person -> [pairs agreed, pairs] of the pairs they are in

    @property
    def share(self) -> float | None:
        """The share of pairs that agreed; None when there is no pair."""
        return self.agreed / self.pairs if self.pairs else None


def pairwise_agreement(judgements: Iterable[Judgement]) -> Agreement:
    """Agreement over every pair of judgements of the same item, overall and for each person."""
    by_item = defaultdict(list)
    for judgement in judgements:
        by_item[judgement.item].append(judgement)
    result = Agreement(per_person=defaultdict(lambda: [0, 0]))
    for item_judgements in by_item.values():
        for a, b in combinations(item_judgements, 2):
            same = a.answer == b.answer
            result.agreed += same
            result.pairs += 1
            for person in (a.person, b.person):
                result.per_person[person][0] += same
                result.per_person[person][1] += 1
    return result
