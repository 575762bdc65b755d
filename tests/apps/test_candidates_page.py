"""A task's candidates page with many tests a run: each run says what its oracle's tests did apart from
the others, shows the oracle's tests first and each failing test highlighted (one outside the oracle
marked as not counting), and folds the rest away to a page of its own, so the page is a fraction of
the size of every test of every run."""

import re

import pytest
from django.urls import reverse

from apps.datasets.models import Candidate, Grade, Run
from tests.apps.test_execution_measures import succeeded
from tests.apps.test_sampling import valid_task  # noqa: F401 - a fixture
from tests.conftest import validation_make

pytestmark = pytest.mark.django_db

F2P = ["tests/test_slug.py::test_slugify_strips_accents", "tests/test_slug.py::test_slugify_keeps_digits"]
P2P = [f"tests/test_text.py::test_normalize_space_case_{n}" for n in range(298)]
OTHERS = [f"tests/test_wrap.py::test_wrap_case_{n}" for n in range(100)]
BROKEN = "tests/test_wrap.py::test_wrap_reflows_paragraphs"  # outside the oracle; fails in every run
CANDIDATES = 20  # a page of them
PATCH = ("diff --git a/textkit/slug.py b/textkit/slug.py\n--- a/textkit/slug.py\n+++ b/textkit/slug.py\n"
         "@@ -1 +1 @@\n-import re\n+import re  # {n}\n")


def graded_with_many_tests(task) -> list[Grade]:
    """Twenty imported candidates, each resolved by a run of 401 tests in which one test outside the
    oracle failed (so pytest's own status is "failed")."""
    validation_make(task, verdict="valid", fail_to_pass=F2P, pass_to_pass=P2P)
    outcomes = {**dict.fromkeys([*F2P, *P2P, *OTHERS], "PASSED"), BROKEN: "FAILED"}
    grades = []
    for n in range(CANDIDATES):
        candidate = Candidate.objects.create(task=task, source="import", run=Run.objects.create(name=f"agent-{n}"),
                                             kind=f"agent-{n}", patch=PATCH.format(n=n), outcome="resolved",
                                             outcome_source="graded")
        grades.append(Grade.objects.create(
            job=succeeded("grade", candidate), candidate=candidate, outcome="resolved",
            runs=[{"status": "failed", "exit_code": 1, "seconds": 2.5, "untrusted": "", "complete": True,
                   "outcomes": outcomes, "output": "." * 300 + "F" + "." * 100}]))
    return grades


def test_a_run_shows_its_oracle_first_its_failing_test_highlighted_and_folds_the_rest(valid_task,  # noqa: F811
                                                                                       curator_client):
    grades = graded_with_many_tests(valid_task)
    page = curator_client.get(reverse("datasets:task_candidates", args=[valid_task.instance_id])).content.decode()
    every_test = sum(len(test) for grade in grades for test in grade.runs[0]["outcomes"])
    assert len(page) < every_test / 5, (len(page), every_test)  # 160 KB of test ids alone before
    runs = re.findall(r'<div class="grade-run" id="grade-(\d+)-run-1">(.*?)</details>', page, re.S)
    assert len(runs) == CANDIDATES
    for grade_id, run in runs:
        summary = re.sub(r"\s+", " ", re.search(r'<p class="small run-summary">(.*?)</p>', run, re.S).group(1))
        assert ("the oracle's tests: all 300 pass; outside the oracle: <strong class=\"fails-outside\">1 of 101 fails"
                "</strong> (it does not count toward the ground truth).") in summary
        rows = re.findall(r'<tr class="test-row( failing)?( outside)?"><td><code>([^<]*)</code></td>'
                          r'<td class="small">([^<]*)</td>', run)
        # The oracle's Fail-to-Pass tests first, then the one failing test, highlighted and said not to count.
        assert rows == [("", "", F2P[0], "Fail-to-Pass"), ("", "", F2P[1], "Fail-to-Pass"),
                        (" failing", " outside", BROKEN, "outside the oracle: does not count")]
        folded = reverse("datasets:grade_run", args=[int(grade_id), 1])
        assert f'hx-get="{folded}"' in run and "Every test of this run (401: 398 more)" in run
    # Folded out: every test, the oracle's first, the failing one highlighted, and the output.
    rest = curator_client.get(reverse("datasets:grade_run", args=[grades[0].id, 1]), headers={"HX-Request": "true"})
    text = rest.content.decode()
    assert "<html" not in text  # the fragment alone
    listed = re.findall(r'<tr class="test-row( failing)?( outside)?"><td><code>([^<]*)</code>', text)
    assert [test for _, _, test in listed[:300]] == [*F2P, *P2P] and len(listed) == 401
    assert [test for failing, _, test in listed if failing] == [BROKEN]
    assert "." * 100 in text
    whole = curator_client.get(reverse("datasets:grade_run", args=[grades[0].id, 1])).content.decode()
    assert "<html" in whole and "the oracle's tests: all 300 pass" in whole
    assert curator_client.get(reverse("datasets:grade_run", args=[grades[0].id, 2])).status_code == 404


def test_an_oracle_test_that_fails_is_said_and_shown_first(valid_task, curator_client):  # noqa: F811
    grade = graded_with_many_tests(valid_task)[0]
    run = grade.runs[0]
    run["outcomes"][P2P[7]] = "ERROR"
    Grade.objects.filter(id=grade.id).update(runs=[run], outcome="no")
    page = curator_client.get(reverse("datasets:task_candidates", args=[valid_task.instance_id])).content.decode()
    shown = page[page.index(f'id="grade-{grade.id}-run-1"'):]
    shown = shown[:shown.index("</details>")]
    assert '<strong class="fails">1 of 300 fails</strong>' in shown
    rows = re.findall(r'<tr class="test-row( failing)?( outside)?"><td><code>([^<]*)</code>', shown)
    assert rows == [("", "", F2P[0]), ("", "", F2P[1]), (" failing", "", P2P[7]), (" failing", " outside", BROKEN)]


def test_a_grade_of_a_task_one_may_not_see_is_not_shown(valid_task, client):  # noqa: F811
    grade = graded_with_many_tests(valid_task)[0]
    assert client.get(reverse("datasets:grade_run", args=[grade.id, 1])).status_code in (302, 404)
