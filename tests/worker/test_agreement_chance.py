"""Cohen's and Fleiss' kappa and Krippendorff's alpha: on cases worked out by hand here, and against
published implementations (scikit-learn, statsmodels, krippendorff) on random ones."""

import random

import krippendorff
import numpy as np
import pytest
from sklearn.metrics import cohen_kappa_score
from statsmodels.stats.inter_rater import fleiss_kappa as statsmodels_fleiss

from worker.engine.label.agreement import Judgement, cohens_kappas, fleiss_kappa, krippendorff_alpha


def _two(first: str, second: str) -> list[Judgement]:
    """Two people's answers, item by item (one letter an answer)."""
    return [Judgement(item, person, answer) for person, answers in (("ana", first), ("ben", second))
            for item, answer in enumerate(answers)]


@pytest.mark.parametrize("first, second, kappa, observed", [
    ("yyny", "yyny", 1.0, 1.0),  # perfect agreement
    ("yynn", "ynyn", 0.0, 0.5),  # chance level: each says yes half the time, and they agree half the time
    ("ynyn", "nyny", -1.0, 0.0),  # systematic disagreement
    # ana says y 3 times in 4, ben 2 in 4: chance agreement 3/4 * 2/4 + 1/4 * 2/4 = 1/2; observed 3/4.
    ("yyyn", "yynn", 0.5, 0.75),
])
def test_cohens_kappa_on_cases_worked_out_by_hand(first, second, kappa, observed):
    [(pair, figure)] = cohens_kappas(_two(first, second)).items()
    assert pair == ("ana", "ben") and figure.items == len(first)
    assert figure.value == pytest.approx(kappa) and figure.observed == pytest.approx(observed)


def test_cohens_kappa_stands_on_the_items_both_judged_only():
    judgements = _two("yyyn", "yynn") + [Judgement(9, "ana", "n"), Judgement(9, "cy", "n")]
    kappas = cohens_kappas(judgements)
    assert kappas[("ana", "ben")].items == 4 and kappas[("ana", "ben")].value == pytest.approx(0.5)
    assert kappas[("ana", "cy")].items == 1 and ("ben", "cy") not in kappas


def test_where_chance_alone_agrees_totally_no_figure_is_given_and_raw_agreement_says_what_happened():
    figure = cohens_kappas(_two("yyy", "yyy"))[("ana", "ben")]
    assert (figure.value, figure.observed, figure.items) == (None, 1.0, 3)
    everyone_yes = [Judgement(item, person, "y") for item in range(4) for person in ("ana", "ben", "cy")]
    assert (fleiss_kappa(everyone_yes, 3).value, fleiss_kappa(everyone_yes, 3).observed) == (None, 1.0)
    assert (krippendorff_alpha(everyone_yes).value, krippendorff_alpha(everyone_yes).observed) == (None, 1.0)


def test_fleiss_kappa_on_a_case_worked_out_by_hand():
    rows = ["yyy", "yyn", "nnn", "ynn"]
    judgements = [Judgement(item, person, answer) for item, row in enumerate(rows)
                  for person, answer in zip(("ana", "ben", "cy"), row)]
    judgements += [Judgement("short", "ana", "y"), Judgement("short", "ben", "n")]  # two of three: left out
    figure = fleiss_kappa(judgements, raters=3)
    # Agreeing pairs within items: 1, 1/3, 1, 1/3 (mean 2/3); y and n are half the answers each (chance 1/2).
    assert figure.items == 4 and figure.observed == pytest.approx(2 / 3)
    assert figure.value == pytest.approx((2 / 3 - 1 / 2) / (1 - 1 / 2))
    assert fleiss_kappa(judgements[:2], raters=3) == fleiss_kappa([], raters=3)
    assert fleiss_kappa([], raters=3).value is None
    with pytest.raises(ValueError):
        fleiss_kappa(judgements, raters=1)


def test_krippendorffs_alpha_with_missing_answers_on_a_case_worked_out_by_hand():
    judgements = [
        Judgement("u1", "ana", "a"), Judgement("u1", "ben", "a"),
        Judgement("u2", "ana", "a"), Judgement("u2", "cy", "b"),
        Judgement("u3", "ana", "b"), Judgement("u3", "ben", "b"), Judgement("u3", "cy", "b"),
        Judgement("u4", "ana", "a"), Judgement("u4", "ben", "can't tell"),  # one answer left: says nothing
    ]
    figure = krippendorff_alpha(judgements, missing={"can't tell"})
    # Coincidences: a-a 2 (u1), a-b and b-a 1 each (u2), b-b 3 (u3: 3 x 2 pairs / 2); n_a 3, n_b 4, n 7.
    # Observed agreement 5/7; expected (3 x 2 + 4 x 3) / (7 x 6) = 3/7; alpha (5/7 - 3/7) / (4/7) = 1/2.
    assert figure.items == 3 and figure.observed == pytest.approx(5 / 7)
    assert figure.value == pytest.approx(0.5)
    # "Can't tell" counted as an answer instead, u4 is a disagreement.
    assert krippendorff_alpha(judgements).items == 4 and krippendorff_alpha(judgements).value < 0.5
    assert krippendorff_alpha(judgements[:1]).value is None


def _random_judgements(seed: int, *, items: int = 40, people: int = 5, answers: int = 3, missing: float = 0.0):
    rng = random.Random(seed)
    truth = [rng.randrange(answers) for _ in range(items)]
    judgements = []
    for item in range(items):
        for person in range(people):
            if rng.random() < missing:
                continue
            # Mostly the item's answer, sometimes another: agreement well above chance, not total.
            judgements.append(Judgement(item, person, truth[item] if rng.random() < 0.7 else rng.randrange(answers)))
    return judgements


@pytest.mark.parametrize("seed", range(10))
def test_each_figure_matches_a_published_implementation_on_random_judgements(seed):
    full = _random_judgements(seed)
    by_person = {}
    for judgement in full:
        by_person.setdefault(judgement.person, {})[judgement.item] = judgement.answer
    kappas = cohens_kappas(full)
    for (first, second), figure in kappas.items():
        items = sorted(by_person[first])
        assert figure.value == pytest.approx(cohen_kappa_score([by_person[first][i] for i in items],
                                                               [by_person[second][i] for i in items]))
    table = np.zeros((40, 3))
    for judgement in full:
        table[judgement.item, judgement.answer] += 1
    assert fleiss_kappa(full, raters=5).value == pytest.approx(statsmodels_fleiss(table, method="fleiss"))

    sparse = _random_judgements(seed, missing=0.3)
    matrix = np.full((5, 40), np.nan)
    for judgement in sparse:
        matrix[judgement.person, judgement.item] = judgement.answer
    expected = krippendorff.alpha(reliability_data=matrix, level_of_measurement="nominal")
    assert krippendorff_alpha(sparse).value == pytest.approx(expected)


def test_a_pair_of_people_named_by_numbers_is_keyed_in_numeric_order():
    judgements = [Judgement(item, person, "y") for item in range(2) for person in (10, 9)]
    assert list(cohens_kappas(judgements)) == [(9, 10)]


def test_alpha_over_time_is_alpha_of_everything_up_to_each_period():
    from worker.engine.label.agreement import krippendorff_alpha_over_time

    chooser = random.Random(7)
    dated = []
    for day in range(12):
        for _ in range(chooser.randint(0, 40)):
            dated.append((day, Judgement(chooser.randint(0, 30), chooser.randint(0, 5),
                                         chooser.choice(["correct", "incorrect", "cant_tell"]))))
    series = krippendorff_alpha_over_time(dated, missing=["cant_tell"])
    assert [day for day, _ in series] == sorted({day for day, _ in dated})
    for day, figure in series:
        upto = [judgement for when, judgement in dated if when <= day]
        expected = krippendorff_alpha(upto, missing=["cant_tell"])
        assert figure.items == expected.items
        assert figure.value == pytest.approx(expected.value) if expected.value is not None else figure.value is None
        if expected.observed is not None:
            assert figure.observed == pytest.approx(expected.observed)
    assert krippendorff_alpha_over_time([]) == []
