"""The built-in sampler's command before anything runs: its arguments, what a large run may cost and
that it asks first, and which samples a task is missing."""

from io import StringIO

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

from apps.datasets.candidates.sampling import sample_run_name, samples_missing, sampling_estimate, sampling_start
from apps.datasets.models import Candidate, Run, Sampling
from apps.jobs.models import Job
from apps.llm.calls import role_settings
from apps.llm.models import ModelCall
from apps.repositories.services import repository_register
from apps.tasks.models import Task
from tests.conftest import mine_now
from worker.demo.sample_repo import sample_repo_write
from worker.engine.sample.agent import AgentBudget

pytestmark = pytest.mark.django_db


@pytest.fixture
def valid_task(tmp_path):
    sample_repo_write(tmp_path / "textkit")
    repository = repository_register(location=str(tmp_path / "textkit"))
    mine_now(repository)
    task = Task.objects.filter(repository=repository).order_by("id").first()
    Task.objects.filter(id=task.id).update(verdict="valid")
    task.refresh_from_db()
    return task


def sample(*args) -> str:
    out, err = StringIO(), StringIO()
    call_command("sample_candidates", *args, stdout=out, stderr=err)
    return out.getvalue() + err.getvalue()


def test_bad_arguments_say_why_before_anything_is_queued(valid_task):
    for args, said in (((valid_task.instance_id, "-n", "0"), "must be positive"),
                       ((valid_task.instance_id, "--steps", "-1"), "must be positive"),
                       (("--dataset", "nope"), "no dataset named 'nope'"),
                       ((valid_task.instance_id, "--dataset", "nope"), "name one of")):
        with pytest.raises(CommandError, match=said):
            sample(*args)
    assert not Job.objects.filter(kind="sample").exists()


def test_a_large_run_says_what_it_may_cost_and_asks_first(valid_task):
    err = StringIO()
    with pytest.raises(CommandError, match="pass --yes"):
        call_command("sample_candidates", valid_task.instance_id, "-n", "12", "--steps", "5", "--tokens", "1000",
                     stderr=err)
    # 12 samples of at most 5 calls and 1,000 tokens each; the model has not answered here yet.
    assert "12 samples" in err.getvalue() and "60 model calls" in err.getvalue()
    assert "12,000 tokens" in err.getvalue() and "not known yet" in err.getvalue()
    assert not Job.objects.filter(kind="sample").exists()


def test_the_estimate_uses_the_agent_models_measured_speed(valid_task):
    model = role_settings("agent")
    for seconds in (2.0, 4.0):
        ModelCall.objects.create(role="agent", backend=model.backend, model=model.model_name, prompt_name="agent",
                                 prompt_version=1, prompt_digest="x", cache_key=f"k{seconds}", outcome="ok",
                                 tokens_out=50, seconds=seconds)
    estimate = sampling_estimate(4, AgentBudget(steps=10, tokens=2000))
    # 4 samples x 10 calls at the mean of 3 s a call.
    assert estimate == {"samples": 4, "tokens_at_most": 8000, "calls_at_most": 40, "seconds_estimate": 120.0,
                        "model": model.model_name}


def test_only_the_missing_samples_are_asked_each_a_job_of_its_own(valid_task):
    model = role_settings("agent").model_name
    run = Run.objects.create(name=sample_run_name(model, 1))
    Candidate.objects.create(task=valid_task, source="sampler", run=run, kind=run.name, patch="")
    assert samples_missing(valid_task, 3, model) == [0, 2]
    made = [sampling_start(task=valid_task, index=index, budget=AgentBudget(steps=3)) for index in (0, 2)]
    assert [s.index for s in made] == [0, 2] and len({s.job_id for s in made}) == 2
    assert all(s.job.kind == "sample" and s.job.subject_label == f"sample {s.index} of {valid_task.instance_id}"
               for s in made)
    assert made[0].budget["steps"] == 3
    # Under way: not asked again.
    assert samples_missing(valid_task, 3, model) == []
    assert Sampling.objects.count() == 2
