"""How often people who judge the same item agree, for reviewers and annotators alike. Plain data in
(`Judgement`s), figures out:

- raw agreement: every pair of judgements of one item is a pair, and it agrees when both gave the
  same answer (each answer, "can't tell" included, is a category of its own);
- Cohen's kappa for two people, over the items both judged; Fleiss' kappa over the items judged by
  a given number of people; Krippendorff's alpha (nominal) over everyone, with answers that say
  nothing (`missing`, such as "can't tell") left out and items judged once ignored.

Each chance-corrected figure is 1 - (1 - observed) / (1 - expected) in its own terms. Where chance
alone gives total agreement (everyone gave the one answer), nothing beyond chance can be told: the
figure is None, and the raw agreement beside it (1.0) says what happened."""

from collections import Counter, defaultdict
from dataclasses import dataclass, field
from itertools import combinations
from typing import Hashable, Iterable, Optional


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


@dataclass(frozen=True)
class ChanceCorrected:
    """An agreement figure corrected for chance, with what it stands on."""

    value: Optional[float]  # None: no item, or chance alone agrees totally
    items: int  # the items it is computed over
    observed: Optional[float]  # the raw agreement over those items (its own definition, as the figure's)


def _by_item(judgements: Iterable[Judgement]) -> dict[Hashable, list[Judgement]]:
    by_item: dict[Hashable, list[Judgement]] = defaultdict(list)
    for judgement in judgements:
        by_item[judgement.item].append(judgement)
    return by_item


def _corrected(observed: float, expected: float, items: int) -> ChanceCorrected:
    value = None if expected >= 1 else (observed - expected) / (1 - expected)
    return ChanceCorrected(value=value, items=items, observed=observed)


def _ordered(people) -> list:
    """People in sorted order (ids as numbers, names as text); by their repr where they do not sort."""
    try:
        return sorted(people)
    except TypeError:
        return sorted(people, key=repr)


def cohens_kappas(judgements: Iterable[Judgement]) -> dict[tuple[Hashable, Hashable], ChanceCorrected]:
    """Cohen's kappa of each pair of people who judged an item in common, over the items both judged
    (keyed by the pair, in sorted order): observed agreement against the agreement their own shares
    of each answer give by chance."""
    shared: dict[tuple, list[tuple[Hashable, Hashable]]] = defaultdict(list)
    for item_judgements in _by_item(judgements).values():
        answer_of = {judgement.person: judgement.answer for judgement in item_judgements}
        for first, second in combinations(_ordered(answer_of), 2):
            shared[(first, second)].append((answer_of[first], answer_of[second]))
    kappas = {}
    for pair, answers in shared.items():
        items = len(answers)
        observed = sum(first == second for first, second in answers) / items
        firsts, seconds = Counter(first for first, _ in answers), Counter(second for _, second in answers)
        expected = sum(count * seconds[answer] for answer, count in firsts.items()) / items ** 2
        kappas[pair] = _corrected(observed, expected, items)
    return kappas


def fleiss_kappa(judgements: Iterable[Judgement], raters: int) -> ChanceCorrected:
    """Fleiss' kappa over the items judged by exactly `raters` people (at least two): the mean share of
    agreeing pairs within an item against the agreement the answers' overall shares give by chance."""
    if raters < 2:
        raise ValueError("Fleiss' kappa needs at least two judgements of each item")
    counts = [Counter(judgement.answer for judgement in item_judgements)
              for item_judgements in _by_item(judgements).values() if len(item_judgements) == raters]
    if not counts:
        return ChanceCorrected(value=None, items=0, observed=None)
    pairs = raters * (raters - 1)
    observed = sum(sum(n * (n - 1) for n in count.values()) / pairs for count in counts) / len(counts)
    totals: Counter = Counter()
    for count in counts:
        totals.update(count)
    expected = sum((n / (len(counts) * raters)) ** 2 for n in totals.values())
    return _corrected(observed, expected, len(counts))


def krippendorff_alpha(judgements: Iterable[Judgement], missing: Iterable[Hashable] = ()) -> ChanceCorrected:
    """Krippendorff's alpha for nominal answers: answers in `missing` are left out, and an item with
    fewer than two answers left says nothing. From the coincidences of answers within items (each
    item's pairs weighted 1 / (answers - 1)): 1 - (n - 1) * disagreeing coincidences / the
    disagreeing pairs all answers give. `observed` is the share of coincidences that agree."""
    left_out = set(missing)
    coincide: Counter = Counter()
    items = 0
    for item_judgements in _by_item(judgements).values():
        answers = [judgement.answer for judgement in item_judgements if judgement.answer not in left_out]
        if len(answers) < 2:
            continue
        items += 1
        weight = 1 / (len(answers) - 1)
        count = Counter(answers)
        for first, n_first in count.items():
            for second, n_second in count.items():
                coincide[(first, second)] += weight * n_first * (n_second - (first == second))
    if not items:
        return ChanceCorrected(value=None, items=0, observed=None)
    marginal: Counter = Counter()
    for (first, _), n in coincide.items():
        marginal[first] += n
    n = sum(marginal.values())
    agreeing = sum(value for (first, second), value in coincide.items() if first == second)
    # Expected agreement by chance: pairs drawn without replacement from all answers pooled.
    expected = sum(n_c * (n_c - 1) for n_c in marginal.values()) / (n * (n - 1))
    return _corrected(agreeing / n, expected, items)


def krippendorff_alpha_over_time(dated: Iterable[tuple[Hashable, Judgement]],
                                 missing: Iterable[Hashable] = ()) -> list[tuple[Hashable, ChanceCorrected]]:
    """Krippendorff's alpha of everything judged up to the end of each period, from (period,
    judgement) pairs in the order of their periods: one figure per period, as `krippendorff_alpha`
    gives for the judgements up to it. Each judgement updates only its own item's part of the
    coincidences (an item with m answers puts each of them in the marginals once, and n_c(n_c - 1)
    / (m - 1) in the agreeing coincidences), so the whole series costs one pass."""
    left_out = set(missing)
    counts: dict[Hashable, Counter] = defaultdict(Counter)
    marginal: Counter = Counter()
    agreeing, items = 0.0, 0
    series: list[tuple[Hashable, ChanceCorrected]] = []

    def part(count: Counter) -> tuple[int, float]:
        answers = sum(count.values())
        if answers < 2:
            return answers, 0.0
        return answers, sum(n * (n - 1) for n in count.values()) / (answers - 1)

    def figure() -> ChanceCorrected:
        n = sum(marginal.values())
        if not items or n < 2:
            return ChanceCorrected(value=None, items=0, observed=None)
        expected = sum(n_c * (n_c - 1) for n_c in marginal.values()) / (n * (n - 1))
        return _corrected(agreeing / n, expected, items)

    period_now, started = None, False
    for period, judgement in dated:
        if started and period != period_now:
            series.append((period_now, figure()))
        period_now, started = period, True
        if judgement.answer in left_out:
            continue
        count = counts[judgement.item]
        before, agreeing_before = part(count)
        if before >= 2:
            marginal.subtract(count)
            agreeing -= agreeing_before
        count[judgement.answer] += 1
        after, agreeing_after = part(count)
        if after >= 2:
            marginal.update(count)
            agreeing += agreeing_after
            items += before < 2
    if started:
        series.append((period_now, figure()))
    return series
