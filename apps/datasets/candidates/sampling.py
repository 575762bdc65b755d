"""The built-in sampler: candidates made by the `agent` model through a small agent loop
(worker/engine/sample/agent.py), one job per sample on the `llm` queue. The loop's model calls run in
that job (recorded, and cached by their inputs: the sample's seed is one of them, so 26 samples are 26
different conversations, and a sample asked again replays its own); its commands run in the task's
environment in the sandbox, from the same job. The patch becomes a candidate (source `sampler`) of the
run `sampler/<model>/<n>` (sample n of every task is that run's), and its grading is queued on the
`tests` queue at once."""

from dataclasses import asdict

from django.conf import settings
from django.db import transaction

from apps.bulk_insert import text_storable
from apps.jobs.services import JobFailed, JobRefused, job_start
from apps.llm.calls import model_messages_call, role_settings
from apps.llm.models import ModelCall
from apps.tasks.backtranslation import task_current_issue
from apps.tasks.models import Task
from apps.tasks.selectors import task_base_sha
from apps.tasks.services import built_environment, environment_builder
from worker.engine.git.repo import GitError
from worker.engine.git.working_copy import working_copy_write
from worker.engine.llm.clients import Completion
from worker.engine.llm.prompts import prompt_load
from worker.engine.sample.agent import TEMPERATURE, AgentBudget, agent_run, command_limits
from worker.engine.sample.tools import sandbox_command_runner

from ..grading.grades import candidate_grade_start, grading_validation
from ..dataset_jobs import dataset_job_each_task, dataset_job_of, dataset_job_start, dataset_job_tasks
from ..models import Candidate, Dataset, DatasetJob, Run, Sampling

SAMPLE = "sample"  # the job kind (registered in apps.datasets.apps)
DATASET_SAMPLE = "dataset_sample"  # starts the samplings of a dataset's tasks (registered there too)
AGENT_PROMPT = "agent"
SAMPLES_PER_TASK = 26  # as in the paper
CONFIRM_ABOVE = 10  # samples: a larger run is started only when confirmed
RECENT_CALLS = 200  # of the agent model's, whose mean time estimates a run's


def sample_run_name(model: str, index: int) -> str:
    return f"sampler/{model}/{index}"[:200]


def samples_missing(task: Task, n: int, model: str) -> list[int]:
    """The sample numbers below n the task has no sampler candidate of, nor a sampling under way."""
    made = set(Candidate.objects.filter(task=task, source=Candidate.Source.SAMPLER,
                                        run__name__in=[sample_run_name(model, i) for i in range(n)])
               .values_list("run__name", flat=True))
    running = set(Sampling.objects.filter(task=task, job__state__in=Sampling.ACTIVE_STATES, model=model)
                  .values_list("index", flat=True))
    return [i for i in range(n) if sample_run_name(model, i) not in made and i not in running]


def sampling_start(*, task: Task, index: int, budget: AgentBudget, actor=None) -> Sampling:
    """Queue sample `index` of the task: a job of its own (26 samples of 10 minutes would outlast any
    one job's time limit)."""
    model = role_settings("agent").model_name
    with transaction.atomic():
        sampling = Sampling.objects.create(task=task, index=index, model=model, budget=asdict(budget))
        sampling.job, _ = job_start(kind=SAMPLE, subject=sampling, user=actor)
        sampling.save(update_fields=["job"])
    return sampling


def dataset_sample_start(*, dataset: Dataset, user, n: int, budget: AgentBudget) -> tuple[DatasetJob, bool]:
    """Queue the missing samples below n of each of the dataset's valid tasks (or return the job under
    way); an agent model that cannot be used is refused here (ModelError), before anything is queued."""
    role_settings("agent")
    return dataset_job_start(kind=DATASET_SAMPLE, dataset=dataset, user=user,
                             options={"n": n, "budget": asdict(budget)})


def dataset_sample_work(job, progress) -> None:
    """The registered `run`: a sampling job per missing sample (each graded once made); the jobs it
    started kept on the row. Imported instances have no environment here: left out, and said."""
    row = dataset_job_of(job)
    model, budget = role_settings("agent").model_name, AgentBudget(**row.options["budget"])
    tasks = dataset_job_tasks(row)
    started = {"samplings": list(row.started.get("samplings", [])), "skipped": {}}  # a second run adds
    for task in dataset_job_each_task(row, tasks, progress, started):
        if task.imported:
            started["skipped"][task.instance_id] = "an imported instance has no environment here"
        for index in [] if task.imported else samples_missing(task, row.options["n"], model):
            started["samplings"].append(sampling_start(task=task, index=index, budget=budget,
                                                       actor=job.requested_by).job_id)


def sampling_estimate(samples: int, budget: AgentBudget) -> dict:
    """What a run of `samples` samples may cost at most (every sample using all its steps and tokens),
    and how long its model calls take, from the agent model's last answers here (None before any)."""
    model = role_settings("agent").model_name
    seconds = list(ModelCall.objects.filter(role="agent", model=model, outcome=ModelCall.Outcome.OK)
                   .order_by("-id").values_list("seconds", flat=True)[:RECENT_CALLS])
    calls = samples * budget.steps
    return {"samples": samples, "tokens_at_most": samples * budget.tokens, "calls_at_most": calls,
            "seconds_estimate": calls * sum(seconds) / len(seconds) if seconds else None, "model": model}


def sampling_estimate_said(samples: int, budget: AgentBudget) -> str:
    """What a run of `samples` samples may cost, in a sentence."""
    estimate = sampling_estimate(samples, budget)
    time_said = (f"about {estimate['seconds_estimate'] / 3600:.1f} hours of model time"
                 if estimate["seconds_estimate"] is not None else "a time not known yet (the agent model has not "
                                                                  "answered here before)")
    return (f"{samples} samples from {estimate['model']}: at most {estimate['calls_at_most']:,} model calls and "
            f"{estimate['tokens_at_most']:,} tokens, {time_said}.")


def sample_job_work(job, progress) -> None:
    """The registered `run`: the agent loop on the task at its base commit in its environment; the
    sample's candidate stored and its grading queued. Its progress counts the loop's model calls, of
    its step budget; cancelled, it stops after the call under way and stores no candidate."""
    sampling = Sampling.objects.select_related("task__repository", "task__commit").get(job=job)
    task = sampling.task
    issue = task_current_issue(task=task)
    if issue is None or not issue.text.strip():
        raise JobFailed("no_issue", "The task has no issue text yet: write or import one before sampling.")
    validation = grading_validation(task, settings.COMMITGYM_SANDBOX)
    result = _sample(task, issue.text, validation, sampling, progress)
    stored = []
    progress.complete(lambda: stored.append(_sample_store(task, sampling, result)))
    candidate_grade_start(candidate=stored[0])


def sample_job_retry(job, user):
    sampling = Sampling.objects.select_related("task").get(job=job)
    if sampling.index not in samples_missing(sampling.task, sampling.index + 1, sampling.model):
        raise JobRefused("This sample is made, or being made, already.")
    return sampling_start(task=sampling.task, index=sampling.index, budget=AgentBudget(**sampling.budget),
                          actor=user).job


def _sample(task: Task, issue: str, validation, sampling: Sampling, progress):
    budget = AgentBudget(**sampling.budget)
    work = progress.work_dir() / "sample"
    try:
        repo = working_copy_write(task.repository.mirror_dir, task_base_sha(task), work)
    except (GitError, OSError) as error:
        raise JobFailed("no_environment", f"the base commit cannot be checked out: {error}") from None
    runner = sandbox_command_runner(environment_builder(task.repository, validation.backend),
                                    built_environment(validation.environment), repo, command_limits(budget))
    progress.report(0, budget.steps)  # a call a step, at most
    return agent_run(complete=_recorded_completion(task, progress), issue=issue, repo=repo, run_command=runner,
                     budget=budget, seed=sampling.index, prompt=prompt_load(AGENT_PROMPT), scratch=work.parent)


def _sample_store(task: Task, sampling: Sampling, result) -> Candidate:
    """The sample's candidate, made once: one that exists already (the sample made twice) is kept as it
    was, with its grade and scores, and the second result only noted."""
    run, _ = Run.objects.get_or_create(name=sample_run_name(sampling.model, sampling.index))
    candidate, made = Candidate.objects.get_or_create(
        run=run, task=task, defaults={"source": Candidate.Source.SAMPLER, "kind": run.name,
                                      "patch": text_storable(result.patch), "no_patch": not result.patch,
                                      "trajectory": _storable_steps(result.steps)})
    detail = text_storable(result.error) if made else "This sample's candidate existed already: it was kept as it was."
    Sampling.objects.filter(id=sampling.id).update(
        candidate=candidate, stop_reason=result.stop_reason, steps=len(result.steps), tokens_in=result.tokens_in,
        tokens_out=result.tokens_out, seconds=result.seconds,
        left_out=[text_storable(line) for line in result.left_out], detail=detail)
    return candidate


def _recorded_completion(task: Task, progress):
    """`complete` for the loop: each call recorded as a ModelCall of the `agent` role, cached by its
    conversation and the sample's seed, and counted on the job's progress (JobCancelled after a call
    when a cancel was asked)."""
    prompt = prompt_load(AGENT_PROMPT)
    calls = 0

    def complete(messages: list[dict], max_tokens: int, seed: int) -> Completion:
        nonlocal calls
        parameters = {"max_tokens": max_tokens, "temperature": TEMPERATURE, "seed": seed}
        call, _ = model_messages_call(role="agent", prompt=prompt, messages=messages, parameters=parameters,
                                      task=task)
        calls += 1
        progress.report(calls)
        return Completion(text=call.answer, tokens_in=call.tokens_in, tokens_out=call.tokens_out,
                          finish_reason=call.finish_reason, model=call.model)

    return complete


def _storable_steps(steps: list[dict]) -> list[dict]:
    return [{key: text_storable(value) if isinstance(value, str) else value for key, value in step.items()}
            for step in steps]
