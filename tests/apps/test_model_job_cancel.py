"""Model jobs stop between their calls when someone cancels them, keep what they stored, and count their
calls (done of planned). Each job runs in a thread as a worker runs it, against a model backend that
holds one call until the test lets it go; the test cancels through the jobs page meanwhile."""

import threading
from types import SimpleNamespace

import pytest
from django.db import connection
from django.urls import reverse

from apps.datasets.candidates.sampling import sampling_start
from apps.datasets.models import Candidate, JudgeScore, ReproductionTests, Sampling, VerifierTestSet
from apps.datasets.verifiers.execution import reproduction_start
from apps.datasets.verifiers.judging import judge_job_retry, task_judge_start
from apps.environments.models import Environment
from apps.jobs import services
from apps.jobs.models import Job
from apps.jobs.services import job_retry, job_run
from apps.llm.models import LanguageJob, ModelCall
from apps.tasks.backtranslation import task_current_issue
from apps.tasks.language_jobs import language_job_start
from apps.tasks.models import GeneratedTest, IssueVersion, Task, TestRunRecord, Validation
from tests.apps.test_judging import imported
from tests.conftest import validation_make
from worker.engine.llm.clients import Completion
from worker.engine.sample.agent import AgentBudget

F2P = "tests/test_calc.py::test_add"
ISSUE = "Adding two numbers returns their difference: add(2, 3) gives -1 instead of 5."
REPRODUCTION = "```python\nfrom lib.calc import add\n\n\ndef test_add_adds():\n    assert add(2, 3) == 5\n```\n"


class HeldModel:
    """A model backend whose call number `hold_at` waits until the test lets it go (`release`); `held` is
    set while it waits. Every call answers `answer` (a judge's: YES is likely)."""

    def __init__(self, *, hold_at: int, answer: str = "ok"):
        self.hold_at, self.answer, self.calls = hold_at, answer, 0
        self.held, self.release = threading.Event(), threading.Event()

    def _call(self) -> None:
        self.calls += 1
        if self.calls == self.hold_at:
            self.held.set()
            assert self.release.wait(60), "the test never let the held call go"

    def complete(self, messages, *, max_tokens, temperature=0.0, seed=None) -> Completion:
        self._call()
        return Completion(text=self.answer, tokens_in=100, tokens_out=20, finish_reason="stop", model="held")

    def first_token_logprobs(self, messages, candidates) -> dict:
        self._call()
        return {"YES": -0.1, "NO": -2.4}


@pytest.fixture(autouse=True)
def _work_dir(settings, tmp_path):
    settings.COMMITGYM_WORK_DIR = tmp_path / "work"


@pytest.fixture
def no_dispatch(monkeypatch):
    """Jobs stay queued for the test to run (no worker of the suite's takes them)."""
    monkeypatch.setattr(services, "job_dispatch", lambda job_id, front=False: None)


def model_answering(monkeypatch, model: HeldModel) -> HeldModel:
    monkeypatch.setattr("apps.llm.calls.model_client", lambda settings: model)
    return model


def run_cancelled_while_held(job_id: int, model: HeldModel, client) -> Job:
    """Run the job as a worker would, in a thread of its own; while its model holds a call, cancel it
    through the jobs page (as a person does); then let the call end and wait for the job's end."""

    def work():
        try:
            job_run(job_id=job_id, worker="test-worker")
        finally:
            connection.close()

    thread = threading.Thread(target=work)
    thread.start()
    try:
        assert model.held.wait(60), "the job never reached the call the model holds"
        assert Job.objects.get(id=job_id).state == "running"
        client.post(reverse("jobs:cancel", args=[job_id]))
    finally:
        model.release.set()
        thread.join(60)
    assert not thread.is_alive()
    return Job.objects.get(id=job_id)


def test_a_judging_cancelled_between_calls_keeps_the_scores_it_made_and_its_retry_asks_only_the_rest(
        transactional_db, tmp_path, monkeypatch, no_dispatch, curator_client):
    task = imported(tmp_path)[0]  # four candidates: two runs', the gold patch, the empty one
    model = model_answering(monkeypatch, HeldModel(hold_at=2))
    judging = task_judge_start(task=task, mode="patch")
    job = run_cancelled_while_held(judging.job_id, model, curator_client)
    judging.refresh_from_db()
    # The call under way when the cancel came ended and was stored; no call was made after it.
    assert (job.state, job.progress_done, job.progress_total) == ("cancelled", 2, 4)
    assert model.calls == 2 and ModelCall.objects.filter(role="judge").count() == 2
    assert JudgeScore.objects.filter(candidate__task=task).count() == 2
    assert judging.counts == {"scored": 2, "failed": 0}
    page = curator_client.get(reverse("jobs:list")).content.decode()
    assert "2 of 4 model calls" in page and ">Cancelled<" in page

    # Its retry asks about the two candidates left, and only those: one of them is run a's, whose patch is
    # the gold patch, scored already, so its answer comes from the record.
    again = judge_job_retry(job, None)
    job_run(job_id=again.id)
    again.refresh_from_db()
    assert (again.state, again.progress_done, again.progress_total) == ("succeeded", 2, 2)
    assert JudgeScore.objects.filter(candidate__task=task).count() == 4
    assert model.calls == ModelCall.objects.filter(role="judge").count() == 3


@pytest.fixture
def fixed_task(small_repository) -> Task:
    """The repository's fix, validated as valid (its failing run recorded) and with an issue."""
    task = Task.objects.get(repository=small_repository, commit__message__startswith="Fix add")
    validation = validation_make(task, verdict="valid", fail_to_pass=[F2P])
    TestRunRecord.objects.create(validation=validation, side="before", scope="selected", index=0, status="failed",
                                 outcomes={F2P: "FAILED"}, output="E   assert -1 == 5\nFAILED " + F2P)
    Task.objects.filter(id=task.id).update(state="valid")
    task.refresh_from_db()
    return task


def test_an_issue_writer_cancelled_during_its_call_writes_no_issue_and_its_call_answers_the_retry(
        transactional_db, fixed_task, monkeypatch, no_dispatch, curator_client):
    model = model_answering(monkeypatch, HeldModel(hold_at=1, answer=ISSUE))
    language_job = language_job_start(task=fixed_task, kind=LanguageJob.Kind.BACKTRANSLATE)
    job = run_cancelled_while_held(language_job.job_id, model, curator_client)
    language_job.refresh_from_db()
    assert (job.state, job.progress_done, job.progress_total) == ("cancelled", 1, 1)
    assert not IssueVersion.objects.filter(task=fixed_task).exists() and language_job.outcome == ""
    assert language_job.detail == "cancelled before its results were stored"
    assert ModelCall.objects.filter(role="issue_writer", outcome="ok").count() == 1  # recorded all the same

    again = job_retry(job=job)
    job_run(job_id=again.id)
    assert Job.objects.get(id=again.id).state == "succeeded"
    assert task_current_issue(task=fixed_task).text == ISSUE and model.calls == 1  # answered from the record


def test_a_test_writer_cancelled_during_its_call_queues_no_check_of_its_tests(
        transactional_db, small_repository, monkeypatch, no_dispatch, curator_client):
    task = Task.objects.get(repository=small_repository, commit__message__startswith="Fix add")
    environment = Environment.objects.create(key="env-cancel", python_version="3.11", lock="", path="/envs/x")
    validation_make(task, verdict="invalid", reason="no_fail_to_pass", environment=environment)
    Task.objects.filter(id=task.id).update(state="invalid", reason="no_fail_to_pass")
    model = model_answering(monkeypatch, HeldModel(hold_at=1, answer=REPRODUCTION))
    language_job = language_job_start(task=task, kind=LanguageJob.Kind.GENERATE_TESTS)
    job = run_cancelled_while_held(language_job.job_id, model, curator_client)
    assert (job.state, job.progress_done, job.progress_total) == ("cancelled", 1, 1)
    assert not GeneratedTest.objects.filter(task=task).exists()
    assert not Validation.objects.filter(task=task, generated=True).exists()


def test_a_reproduction_writer_cancelled_during_its_call_stores_no_tests_and_starts_no_next_step(
        transactional_db, fixed_task, monkeypatch, no_dispatch, curator_client):
    IssueVersion.objects.create(task=fixed_task, number=1, author="model", text=ISSUE, leak_score=0.1)
    model = model_answering(monkeypatch, HeldModel(hold_at=1, answer=REPRODUCTION))
    reproduction = reproduction_start(task=fixed_task)
    job = run_cancelled_while_held(reproduction.job_id, model, curator_client)
    reproduction = ReproductionTests.objects.get(id=reproduction.id)
    assert (job.state, job.progress_done, job.progress_total) == ("cancelled", 1, 1)
    assert reproduction.files == {} and reproduction.call is None
    assert not VerifierTestSet.objects.filter(task=fixed_task).exists()


def test_a_sample_cancelled_mid_loop_stops_after_the_call_under_way_and_makes_no_candidate(
        transactional_db, fixed_task, monkeypatch, no_dispatch, curator, curator_client):
    IssueVersion.objects.create(task=fixed_task, number=1, author="model", text=ISSUE, leak_score=0.1)
    # The loop's commands would run in the task's environment: here no command is asked for (the model
    # only lists files), and the environment is left out.
    monkeypatch.setattr("apps.datasets.candidates.sampling.grading_validation",
                        lambda task, backend: SimpleNamespace(backend=backend, environment=None))
    monkeypatch.setattr("apps.datasets.candidates.sampling.environment_builder", lambda repository, backend: None)
    monkeypatch.setattr("apps.datasets.candidates.sampling.built_environment", lambda environment: None)
    monkeypatch.setattr("apps.datasets.candidates.sampling.sandbox_command_runner",
                        lambda builder, environment, repo, limits: lambda command: (0, ""))
    model = model_answering(monkeypatch, HeldModel(hold_at=3, answer="THOUGHT: look around.\nACTION: list_files ."))
    sampling = sampling_start(task=fixed_task, index=0, budget=AgentBudget(steps=8), actor=curator)
    job = run_cancelled_while_held(sampling.job_id, model, curator_client)
    sampling = Sampling.objects.get(id=sampling.id)
    assert (job.state, job.progress_done, job.progress_total) == ("cancelled", 3, 8)
    assert model.calls == 3 and ModelCall.objects.filter(role="agent").count() == 3
    assert sampling.candidate is None and not Candidate.objects.filter(task=fixed_task, source="sampler").exists()
