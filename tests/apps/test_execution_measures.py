"""The execution verifier's stored matrices in the measures and on the pages: the execution and hybrid
selectors, distinguishing and toxic tests and complementarity, on a matrix built by hand whose answers
are worked out below; the matrix page, a cell's log, the toxic-test view and a flag."""

from fractions import Fraction

import pytest
from django.urls import reverse

from apps.datasets.models import (
    Candidate,
    Dataset,
    Execution,
    JudgeScore,
    MeasuresSnapshot,
    ReproductionTests,
    VerifierTest,
    VerifierTestSet,
)
from apps.datasets.verifiers.execution import DONE, NOT_HERE, STARTED, task_execution_advance
from apps.datasets.verifiers.judging import judge_identity
from apps.datasets.verifiers.measures import measures_compute, overlap_over_time
from apps.jobs.models import Job
from apps.jobs.services import job_start
from tests.apps.test_judging import TASKS, imported
from tests.apps.test_sampling import valid_task  # noqa: F401, F811 - a fixture
from tests.apps.test_verify_measures import verify

pytestmark = pytest.mark.django_db

# calc-1: run a is right, b wrong. calc-2: both wrong, and no verifier tests.
#   r1 reproduction:                 a pass, b fail -> distinguishing
#   r2 reproduction, passes on base: both pass      -> does not count
#   g2 regression:                   a fail, b pass -> toxic
# Execution scores: a (0 regression, 1 reproduction), b (1, 0): the tests pick b, wrong (regression first).
# The judge: a 0.9, b 0.2: right. The hybrid with k=2 keeps both and picks by tests: b, wrong.
PASSES = {"a": {"r1", "r2"}, "b": {"r2", "g2"}}
TESTS = [("r1", "reproduction", False), ("r2", "reproduction", True), ("g2", "regression", True)]
OUTPUT = ("F.                                                                       [100%]\n"
          "=================================== FAILURES ===================================\n"
          "______________________________________ g2 ______________________________________\n"
          "E       AssertionError: the wrap width\n"
          "=========================== short test summary info ============================\n")


def succeeded(kind, subject):
    job, _ = job_start(kind=kind, subject=subject)
    Job.objects.filter(id=job.id).update(state=Job.State.SUCCEEDED)
    return job


def matrix_built(task):
    reproduction = ReproductionTests.objects.create(job=succeeded("reproduce", task), task=task)
    test_set = VerifierTestSet.objects.create(job=succeeded("verifier_tests", task), task=task,
                                              reproduction=reproduction)
    for position, (test_id, kind, on_base) in enumerate(TESTS):
        VerifierTest.objects.create(test_set=test_set, test_id=test_id, kind=kind, position=position,
                                    passes_on_base=on_base)
    for candidate in Candidate.objects.filter(task=task, source="import").select_related("run"):
        Execution.objects.create(job=succeeded("execute", candidate), candidate=candidate, test_set=test_set,
                                 outcome="no", output=OUTPUT, outcomes={
                                     t: "PASSED" if t in PASSES[candidate.run.name] else "FAILED" for t, _, _ in TESTS})
    return test_set


def scored(p_yes):
    model, version = judge_identity()
    for candidate in Candidate.objects.filter(source="import").select_related("run", "task"):
        JudgeScore.objects.create(candidate=candidate, mode="patch", model=model, prompt_version=version,
                                  p_yes=p_yes[candidate.task.instance_id, candidate.run.name], logprob_yes=-1,
                                  logprob_no=-1)


def test_both_verifiers_and_the_hybrid_from_a_matrix_worked_by_hand(tmp_path):
    tasks = list(imported(tmp_path))
    matrix_built(tasks[0])
    scored({(TASKS[0], "a"): 0.9, (TASKS[0], "b"): 0.2, (TASKS[1], "a"): 0.5, (TASKS[1], "b"): 0.4})
    measured = measures_compute(Dataset.objects.get(name="judged").tasks.all(), judge_mode="patch")
    curves = measured.best_at_k
    # k=1: every selector is random: (1/2 + 0) / 2. k=2: the tests pick b (wrong), the judge a (right), the
    # hybrid keeps both and picks by the tests (wrong); calc-2 has nothing right.
    assert curves["execution"] == [Fraction(1, 4), 0]
    assert curves["judge"] == [Fraction(1, 4), Fraction(1, 2)]
    assert curves["hybrid"] == [Fraction(1, 4), 0]
    # Of calc-1's counting tests (r1, g2), r1 distinguishes; g2 is toxic. calc-2 has no tests.
    assert measured.execution["distinguishing_share"] == 0.5 and measured.execution["unrun"] == 2
    assert [VerifierTest.objects.get(id=i).test_id for i in measured.execution["toxic"]] == ["g2"]
    # Complementarity: only calc-1 has a right candidate; the tests are wrong there, the judge is not.
    assert measured.complementarity == {"tasks": 1, "execution_wrong": 1.0, "judge_wrong": 0.0, "both_wrong": 0.0,
                                        "overlap": 0.0}
    line = measured.as_json()
    assert (line["distinguishing_share"], line["toxic_tests"]) == (0.5, 1)
    without = measures_compute(Dataset.objects.get(name="judged").tasks.all(), judge_mode="patch", execution=False)
    assert without.best_at_k["execution"] is None and without.best_at_k["hybrid"] is None
    assert without.complementarity is None and "toxic_tests" in without.skipped


def test_the_matrix_page_a_cells_log_the_toxic_view_and_a_flag(tmp_path, curator_client):
    tasks = list(imported(tmp_path))
    test_set = matrix_built(tasks[0])
    scored({(TASKS[0], "a"): 0.9, (TASKS[0], "b"): 0.2, (TASKS[1], "a"): 0.5, (TASKS[1], "b"): 0.4})
    page = curator_client.get(reverse("datasets:task_matrix", args=[TASKS[0]])).content.decode()
    assert page.count('class="cell cell-passed"') == 4 and page.count('class="cell cell-failed"') == 2
    assert page.count('class="test regression toxic"') == 1
    assert page.count('class="test reproduction distinguishing"') == 1
    assert "passes on base: not counted" in page
    g2 = test_set.tests.get(test_id="g2")
    execution = Execution.objects.get(candidate__task=tasks[0], candidate__run__name="a")
    log = curator_client.get(reverse("datasets:execution_log", args=[execution.id]), {"test": g2.position})
    assert log.status_code == 200 and "AssertionError: the wrap width" in log.content.decode()
    dataset = Dataset.objects.get(name="judged")
    toxic = curator_client.get(reverse("datasets:toxic_tests", args=[dataset.pk])).content.decode()
    assert f"#verifier-test-{g2.id}" in toxic and "<code>g2</code>" in toxic
    refused = curator_client.post(reverse("datasets:verifier_test_flag", args=[g2.id]), {"flag": "wizard"},
                                  follow=True).content.decode()
    assert "is not a flag" in refused and VerifierTest.objects.get(id=g2.id).flag == ""
    curator_client.post(reverse("datasets:verifier_test_flag", args=[g2.id]), {"flag": "toxic", "note": "width"})
    assert VerifierTest.objects.get(id=g2.id).flag == "toxic"
    # Imported instances have no environment here: their execution verifier stops at once, in words.
    assert task_execution_advance(tasks[1]) == (NOT_HERE, "an imported instance has no environment here to run "
                                                          "verifier tests in")
    assert not ReproductionTests.objects.filter(task=tasks[1]).exists()


def test_a_visitor_who_may_not_see_the_task_gets_no_matrix_and_no_log(tmp_path, client, django_user_model):
    tasks = list(imported(tmp_path))
    matrix_built(tasks[0])
    execution = Execution.objects.filter(candidate__task=tasks[0]).first()
    assert client.get(reverse("datasets:execution_log", args=[execution.id])).status_code in (302, 404)
    assert client.get(reverse("datasets:task_matrix", args=[TASKS[0]])).status_code in (302, 404)


def test_each_verify_run_is_kept_and_the_overlap_is_shown_over_time(tmp_path, curator_client):
    tasks = list(imported(tmp_path))
    matrix_built(tasks[0])
    scored({(TASKS[0], "a"): 0.9, (TASKS[0], "b"): 0.2, (TASKS[1], "a"): 0.5, (TASKS[1], "b"): 0.4})
    dataset = Dataset.objects.get(name="judged")
    assert overlap_over_time(dataset) is None
    first = verify("--dataset", "judged", "--json")
    # Worked out above: only calc-1 has a right candidate; the tests are wrong there, the judge is not.
    assert first["complementarity"]["overlap"] == 0.0
    # The judge changes its mind about calc-1: now both are wrong there.
    JudgeScore.objects.filter(candidate__task=tasks[0], candidate__run__name="a").update(p_yes=0.1)
    second = verify("--dataset", "judged", "--json")
    assert second["complementarity"] == {"tasks": 1, "execution_wrong": 1.0, "judge_wrong": 1.0, "both_wrong": 1.0,
                                         "overlap": 1.0}
    assert list(MeasuresSnapshot.objects.filter(dataset=dataset).order_by("id").values_list("scope", flat=True)) == [
        "judged", "judged"]
    over_time = overlap_over_time(dataset)
    assert [c["overlap"] for _, c in over_time.rows] == [0.0, 1.0] and "<svg" in over_time.chart
    dashboard = curator_client.get(reverse("tasks:dashboard")).content.decode()
    assert 'id="verifier-overlaps"' in dashboard and "judged" in dashboard and "100%" in dashboard
    page = curator_client.get(reverse("datasets:detail", args=[dataset.pk])).content.decode()
    assert "The verifiers&#x27; overlap over time" in page or "The verifiers' overlap over time" in page
    assert page.count('class="table overlap-over-time"') == 1


def test_verifier_tests_are_chosen_again_when_the_agents_touch_other_files(valid_task):  # noqa: F811
    reproduction = ReproductionTests.objects.create(job=succeeded("reproduce", valid_task), task=valid_task)
    VerifierTestSet.objects.create(job=succeeded("verifier_tests", valid_task), task=valid_task,
                                   reproduction=reproduction, touched=["textkit/slug.py"])
    slug = "diff --git a/textkit/slug.py b/textkit/slug.py\n--- a/textkit/slug.py\n+++ b/textkit/slug.py\n" \
           "@@ -1 +1 @@\n-a\n+b\n"
    Candidate.objects.create(task=valid_task, source="import", kind="a", patch=slug)
    # The gold patch and mutants touch where the fix is: they never choose the regression tests.
    Candidate.objects.create(task=valid_task, source="mutant", kind="m", patch=slug.replace("slug", "wrap"))
    # Both run against the tests.
    assert task_execution_advance(valid_task) == (STARTED, "2 candidates queued")
    Job.objects.filter(kind="execute").update(state=Job.State.SUCCEEDED)
    assert task_execution_advance(valid_task) == (DONE, "done")
    # A sampled candidate changes another file: its regression tests are chosen again, in a set of their own.
    Candidate.objects.create(task=valid_task, source="sampler", kind="s", patch=slug.replace("slug", "wrap"))
    assert task_execution_advance(valid_task) == (STARTED, "verifier tests queued")
    assert VerifierTestSet.objects.filter(task=valid_task).count() == 2
    assert task_execution_advance(valid_task)[0] == "under_way"
