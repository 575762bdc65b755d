"""The execution verifier's matrix says what it shows: each column headed with its test's name, each
cell titled with its test and its candidate, each test with the reason it was chosen; and a run's log
says what passed in the verifier's terms, never the ground truth's word."""

import html
import re

import pytest
from django.urls import reverse

from apps.datasets.models import Candidate, Execution, VerifierTest
from tests.apps.test_execution_measures import matrix_built, succeeded
from tests.apps.test_judging import TASKS, imported
from tests.conftest import validation_make

pytestmark = pytest.mark.django_db

REASONS = {"r1": "written from the issue alone by recorded", "r2": "written from the issue alone by recorded",
           "g2": "imports textkit.wrap, which the candidates change"}


def matrix_with_reasons(tmp_path):
    tasks = list(imported(tmp_path))
    test_set = matrix_built(tasks[0])
    for test in test_set.tests.all():
        VerifierTest.objects.filter(id=test.id).update(reason=REASONS[test.test_id])
    return tasks[0], test_set


def test_columns_are_headed_with_names_and_cells_name_their_test_and_candidate(tmp_path, curator_client):
    task, test_set = matrix_with_reasons(tmp_path)
    page = curator_client.get(reverse("datasets:task_matrix", args=[TASKS[0]])).content.decode()
    heads = re.findall(r'<th scope="col" class="test [^"]*" title="([^"]*)"><a class="test-name" href="#verifier-test-'
                       r'(\d+)">([^<]*)</a>', page)
    assert [(number, name) for _, number, name in heads] == [("1", "r1"), ("2", "r2"), ("3", "g2")]
    assert html.unescape(heads[2][0]).endswith(": imports textkit.wrap, which the candidates change")
    # Every cell of a run names the test and the candidate it is for, and what the run said.
    a = Candidate.objects.get(task=task, run__name="a")
    titles = [html.unescape(t) for t in re.findall(r'<td class="cell cell-[\w-]+" title="([^"]*)">', page)]
    assert f"g2 · Import · a (candidate {a.pk}): FAILED" in titles
    assert f"r1 · Import · a (candidate {a.pk}): PASSED" in titles
    assert len(titles) == 3 * Candidate.objects.filter(task=task).count()  # the controls' too: not run
    gold = Candidate.objects.get(task=task, source="gold")
    assert f"g2 · Gold (candidate {gold.pk}): not run against the verifier tests" in titles
    # Below, each test with why it is there.
    listed = page[page.index('<ol class="small matrix-tests">'):]
    assert "Why: imports textkit.wrap, which the candidates change." in html.unescape(listed)
    assert listed.count("Why: written from the issue alone by recorded.") == 2
    # The review page lists the same tests, to flag (beside the validation's).
    validation_make(task, verdict="valid", fail_to_pass=["tests/test_calc.py::test_add"])
    review = curator_client.get(reverse("tasks:review", args=[TASKS[0]]))
    g2 = test_set.tests.get(test_id="g2")
    assert review.status_code == 200 and f'id="verifier-test-{g2.id}"' in review.content.decode()


def test_a_runs_log_says_what_passed_in_the_verifiers_terms(tmp_path, curator_client):
    task, test_set = matrix_with_reasons(tmp_path)
    # The empty patch: the regression test passes, the reproduction test that counts fails; graded through the
    # same path as a grade, its outcome word would be "resolved" (every test it was asked to pass... passed).
    empty = Candidate.objects.get(task=task, source="empty")
    execution = Execution.objects.create(job=succeeded("execute", empty), candidate=empty, test_set=test_set,
                                         outcome="resolved", output="..", outcomes={
                                             "r1": "FAILED", "r2": "PASSED", "g2": "PASSED"})
    g2 = test_set.tests.get(test_id="g2")
    log = html.unescape(curator_client.get(reverse("datasets:execution_log", args=[execution.id]),
                                           {"test": g2.position}).content.decode())
    assert "the run: resolved" not in log
    assert ("the run: 1 of 1 regression test passed, 0 of 1 reproduction test that count passed (1 more "
            "reproduction test passes on the base commit and does not count)") in log
    assert "why it is one: imports textkit.wrap, which the candidates change" in log
    Execution.objects.filter(id=execution.id).update(outcome="does_not_apply", outcomes={})
    log = curator_client.get(reverse("datasets:execution_log", args=[execution.id])).content.decode()
    assert "the run: the patch did not apply: no verifier test ran" in log
