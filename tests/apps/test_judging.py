"""The judge (the embedded model) scores every candidate of imported tasks: one job per task, its calls
recorded with their log-probabilities, nothing asked twice; and the measures rank by its scores."""

import json
import re
import time

import pytest
from django.urls import reverse
from django.utils import timezone

from apps.charts import Series, line_chart
from apps.datasets.candidates.imports import instances_import, predictions_import
from apps.datasets.models import Candidate, Dataset, JudgeScore
from apps.datasets.verifiers.judging import candidates_unjudged, task_judge_start
from apps.datasets.verifiers.measures import measures_compute, self_assessment_probe
from apps.jobs.models import Job
from apps.jobs.services import job_run
from apps.llm.calls import model_scores
from apps.llm.models import ModelCall
from apps.tasks.models import IssueVersion, Task
from tests.worker.test_swebench_files import GOLD, instance, jsonl
from worker.engine.llm.clients import ModelError
from worker.engine.llm.prompts import prompt_load
from worker.engine.verify.judge import judge_score

pytestmark = pytest.mark.django_db

TASKS = ["octo__calc-1", "octo__calc-2"]
STEPS = [{"step": 1, "thought": "Look.", "action": "open calc.py", "observation": "def add(a, b): ..." * 40},
         {"step": 2, "thought": "I have fixed the issue and all tests pass.", "action": "submit", "observation": ""}]


def imported(tmp_path):
    instances_import(path=jsonl(tmp_path / "judged.jsonl", [instance(task_id, base_commit=f"{n:040d}")
                                                             for n, task_id in enumerate(TASKS)]))
    for run, resolved in (("a", TASKS[:1]), ("b", [])):
        rows = [{"instance_id": i, "model_name_or_path": run,
                 "model_patch": GOLD if run == "a" else GOLD.replace("+", "+# ")} for i in TASKS]
        report = tmp_path / f"report-{run}.json"
        report.write_text(json.dumps({"schema_version": 2, "resolved_ids": resolved, "submitted_ids": TASKS,
                                      "unresolved_ids": [i for i in TASKS if i not in resolved]}))
        predictions_import(path=jsonl(tmp_path / f"{run}.jsonl", rows), report_path=report)
    Candidate.objects.filter(run__name="a").update(trajectory=STEPS)
    return Task.objects.filter(instance_id__in=TASKS).order_by("instance_id")


def judge(task, mode="patch"):
    judging = task_judge_start(task=task, mode=mode)
    job_run(job_id=judging.job_id)
    judging.refresh_from_db()
    return judging


def test_every_candidate_gets_its_p_yes_from_its_own_recorded_call(tmp_path):
    tasks = imported(tmp_path)
    for task in tasks:
        judging = judge(task)
        # Every candidate: the two runs' and the two controls (gold and empty).
        assert judging.state == Job.State.SUCCEEDED and judging.counts == {"scored": 4, "failed": 0}
    scores = JudgeScore.objects.select_related("candidate", "call")
    assert scores.count() == 8
    for score in scores:
        assert 0 < score.p_yes < 1 and not score.uncertain and score.mode == "patch"
        assert set(score.call.logprobs) == {"YES", "NO"} and score.call.role == "judge"
        assert score.p_yes == judge_score(score.call.logprobs).p_yes
        # Its own patch, and the issue of its own task, in a message of its own before the patch.
        messages = score.call.messages
        assert (score.candidate.patch[:200] or "(no patch)") in messages[2]["content"]
        assert IssueVersion.objects.get(task=score.candidate.task).text in messages[1]["content"]
        assert "<trajectory>" not in messages[2]["content"]
    calls = ModelCall.objects.count()
    again = judge(tasks[0])
    assert again.counts == {"scored": 0, "failed": 0} and ModelCall.objects.count() == calls


def test_trajectory_modes_show_the_steps_with_or_without_the_agents_claims(tmp_path):
    task = imported(tmp_path)[0]
    judge(task, mode="trajectory")
    judge(task, mode="no-self-assessment")
    with_steps = JudgeScore.objects.get(candidate__run__name="a", candidate__task=task, mode="trajectory")
    blind = JudgeScore.objects.get(candidate__run__name="a", candidate__task=task, mode="no-self-assessment")
    assert "I have fixed the issue" in with_steps.call.messages[2]["content"]
    assert "I have fixed the issue" not in blind.call.messages[2]["content"]
    assert blind.shortening["claims_removed"] == 1 and with_steps.shortening["claims_removed"] == 0


def test_the_self_assessment_probe_shows_how_far_the_agents_claims_move_the_judge(tmp_path, curator_client):
    tasks = imported(tmp_path)
    dataset = Dataset.objects.get(name="judged")
    assert self_assessment_probe(dataset.tasks.all()) is None
    for task in tasks:
        judge(task, mode="trajectory")
        judge(task, mode="no-self-assessment")
    probe = self_assessment_probe(dataset.tasks.all())
    # Run a's two candidates carry the trajectory that claims success; run b's have none, so both modes read
    # the same prompt for them and their shift is 0.
    shifts = {}
    for candidate in Candidate.objects.filter(task__in=tasks, source="import").select_related("run"):
        p = {s.mode: s.p_yes for s in candidate.judge_scores.all()}
        shifts.setdefault(candidate.run.name, []).append(p["trajectory"] - p["no-self-assessment"])
    assert shifts["b"] == [0.0, 0.0] and all(shift != 0 for shift in shifts["a"])
    assert probe.candidates == 4 and probe.mean_shift == pytest.approx(sum(shifts["a"]) / 4)
    assert set(probe.best_at_k_max) == {"trajectory", "no-self-assessment"}
    page = curator_client.get(reverse("datasets:detail", args=[dataset.pk])).content.decode()
    assert "lean on the agent" in page and f"{probe.mean_shift:.3f}" in page


def test_the_judge_ranks_candidates_in_the_measures_and_is_calibrated_against_the_ground_truth(tmp_path):
    tasks = imported(tmp_path)
    before = measures_compute(Task.objects.filter(instance_id__in=TASKS), judge_mode="patch")
    assert before.best_at_k["judge"] is None and "no candidate" in before.skipped["judge"]
    for task in tasks:
        judge(task)
    measured = measures_compute(Dataset.objects.get(name="judged").tasks.all(), judge_mode="patch")
    curve = measured.best_at_k["judge"]
    # One candidate drawn: every selector is random. All drawn: the judge's top one, per task.
    assert curve[0] == measured.best_at_k["random"][0]
    assert len(curve) == measured.k_max == 2
    chosen = []
    for task in tasks:
        best = max(JudgeScore.objects.filter(candidate__task=task, candidate__source="import"),
                   key=lambda s: s.p_yes)
        chosen.append(best.candidate.outcome == "resolved")
    assert float(curve[-1]) == pytest.approx(sum(chosen) / len(chosen))
    # Calibration over the candidates in scope: the runs' (controls are left out by default).
    p = {s.candidate_id: s.p_yes for s in JudgeScore.objects.filter(candidate__source="import")}
    truth = {c.id: c.outcome == "resolved" for c in Candidate.objects.filter(id__in=p)}
    assert measured.judge["brier"] == pytest.approx(sum((p[i] - truth[i]) ** 2 for i in p) / 4)
    assert measured.judge["unscored"] == 0 and sum(b["count"] for b in measured.judge["calibration"]) == 4


def test_a_task_without_an_issue_text_fails_its_judging_in_words(tmp_path):
    task = imported(tmp_path)[0]
    IssueVersion.objects.filter(task=task).delete()
    judging = judge(task)
    assert judging.state == Job.State.FAILED and judging.job.error_code == "no_issue"
    assert "no issue text" in judging.job.error_message


def test_the_dataset_page_draws_best_at_k_and_calibration_with_their_numbers_beside(tmp_path, curator_client):
    tasks = imported(tmp_path)
    dataset = Dataset.objects.get(name="judged")
    page = curator_client.get(reverse("datasets:detail", args=[dataset.pk])).content.decode()
    assert page.count('<svg class="chart"') == 1 and "judge: not shown" in page  # no score yet
    assert "random" in page and "oracle" in page and "execution: not shown" in page
    for task in tasks:
        judge(task)
    page = curator_client.get(reverse("datasets:detail", args=[dataset.pk])).content.decode()
    assert page.count('<svg class="chart"') == 2 and page.count('class="series"') == 3  # 3 selectors
    # The calibration's four candidates fall in bins too small to join by a line: each drawn hollow, with its count.
    assert page.count('class="marker marker-triangle faint" data-series="judge"') >= 1
    assert sum(int(n) for n in re.findall(r'<text class="note faint"[^>]*>(\d+)</text>', page)) == 4
    measured = measures_compute(dataset.tasks.all(), judge_mode="patch")
    assert f"{float(measured.best_at_k['oracle'][0]):.3f}" in page and "Brier score" in page
    # Figures are cached under a fingerprint of what they read: a new ground truth shows at once.
    Candidate.objects.filter(task=tasks[1], run__name="b").update(outcome="resolved", graded_at=timezone.now())
    again = curator_client.get(reverse("datasets:detail", args=[dataset.pk])).content.decode()
    oracle = measures_compute(dataset.tasks.all(), judge_mode="patch").best_at_k["oracle"][0]
    assert oracle != measured.best_at_k["oracle"][0] and f"{float(oracle):.3f}" in again
    candidates = curator_client.get(reverse("datasets:task_candidates", args=[TASKS[0]])).content.decode()
    best = max(JudgeScore.objects.filter(candidate__task=tasks[0], candidate__source="import"), key=lambda s: s.p_yes)
    assert f"{best.p_yes:.3f}" in candidates and 'badge-chosen">judge' in candidates
    assert candidates.count('badge-chosen">oracle') == 1  # the one resolved candidate
    # A title with markup is text in the chart.
    assert "<script" not in line_chart([Series("<script>x</script>", [(1, 0.5)])], x_label="k", y_label="y",
                                       x_range=(1, 2), title="<b>")


class OutOfOrderJudge:
    """A model server that answers the first asked last, its log-probabilities read off the patch."""

    def __init__(self, fail=False):
        self.fail = fail

    def first_token_logprobs(self, messages, answers):
        if self.fail:
            raise ModelError("server_error", "the server is down")
        patch = messages[2]["content"]
        number = len(patch) % 7
        time.sleep(0.05 * (7 - number))
        return {"YES": -number / 10, "NO": -1.0}


def test_parallel_calls_are_recorded_on_their_own_inputs_whatever_order_they_end_in(monkeypatch):
    monkeypatch.setattr("apps.llm.calls.model_client", lambda settings: OutOfOrderJudge())
    prompt = prompt_load("judge")
    asked = {n: [{"role": "system", "content": "s"}, {"role": "user", "content": "issue"},
                 {"role": "user", "content": "p" * n}] for n in range(7)}
    order = []
    records = model_scores(role="judge", prompt=prompt, asked=asked, answers=["YES", "NO"], in_flight=7,
                           on_each=lambda key, call: order.append(key) or True)
    assert order != sorted(order)  # they did end out of order
    for n, call in records.items():
        assert call.messages == asked[n] and call.logprobs == {"YES": -(n % 7) / 10, "NO": -1.0}
    # Asked again: from the record, nothing new.
    calls = ModelCall.objects.count()
    model_scores(role="judge", prompt=prompt, asked=asked, answers=["YES", "NO"], in_flight=7)
    assert ModelCall.objects.count() == calls


def test_a_candidate_scored_only_in_another_mode_or_prompt_version_is_judged_again(tmp_path):
    task = imported(tmp_path)[0]
    judge(task, mode="trajectory")
    candidates = Candidate.objects.filter(task=task)
    assert candidates_unjudged(candidates, "trajectory").count() == 0
    assert candidates_unjudged(candidates, "patch").count() == candidates.count()
    # A score in this mode under an older prompt version does not count for the one in use.
    JudgeScore.objects.filter(candidate__task=task).update(mode="patch", prompt_version=0)
    assert candidates_unjudged(candidates, "patch").count() == candidates.count()


def test_a_judging_whose_every_call_failed_fails_and_records_the_calls(tmp_path, monkeypatch):
    task = imported(tmp_path)[0]
    monkeypatch.setattr("apps.llm.calls.model_client", lambda settings: OutOfOrderJudge(fail=True))
    judging = judge(task)
    assert judging.state == Job.State.FAILED and judging.job.error_code == "model_failed"
    assert "the server is down" in judging.job.error_message and judging.counts == {"scored": 0, "failed": 4}
    assert ModelCall.objects.filter(role="judge", outcome="failed").count() == 4
