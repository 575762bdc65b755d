"""A dataset's verifiers started as one job (the API's verify): the judge's missing scores and each
valid task's execution verifier one step on, over the tasks the person who asked sees. What it starts
runs as jobs of their own, and each execution step starts the next as it ends; asking again starts
what is still missing (a step that failed, or a task the first pass found under way)."""

from django.db.models import Q

from apps.jobs.models import Job
from worker.engine.llm.clients import ModelError

from ..dataset_jobs import (
    dataset_job_each_task,
    dataset_job_latest,
    dataset_job_of,
    dataset_job_start,
    dataset_job_tasks,
)
from ..models import Candidate, Dataset, DatasetJob
from .execution import EXECUTE, REPRODUCE, VERIFIER_TESTS, task_execution_advance
from .judging import JUDGE, candidates_unjudged, judge_identity, task_judge_start
from .measures import DEFAULT_SOURCES

DATASET_VERIFY = "dataset_verify"


class VerifyRefused(Exception):
    """Verification that cannot start, in words."""


def dataset_verify_start(*, dataset: Dataset, user, judge_mode: str, judge: bool = True,
                         tests: bool = True) -> tuple[DatasetJob, bool]:
    """Queue the dataset's verification (or return the one under way). A judge that cannot be used is
    refused here, before anything is queued."""
    if judge:
        try:
            judge_identity()
        except ModelError as error:
            raise VerifyRefused(f"The judge model cannot be used: {error}.") from None
    return dataset_job_start(kind=DATASET_VERIFY, dataset=dataset, user=user,
                             options={"judge_mode": judge_mode, "judge": judge, "tests": tests})


def dataset_verify_work(job, progress) -> None:
    """The registered `run`: per valid task, a judging where a candidate is unscored and the execution
    verifier's next step; where each stood is kept on the row. Running it twice starts nothing more."""
    verifying = dataset_job_of(job)
    options, user = verifying.options, job.requested_by
    tasks = dataset_job_tasks(verifying)
    unjudged = set()
    if options["judge"]:
        unjudged = set(candidates_unjudged(Candidate.objects.filter(task__in=tasks, source__in=DEFAULT_SOURCES),
                                           options["judge_mode"]).values_list("task_id", flat=True))
    # A second run (its worker lost) adds to what the first one started.
    started = {"judgings": list(verifying.started.get("judgings", [])),
               "execution": dict(verifying.started.get("execution", {}))}
    for task in dataset_job_each_task(verifying, tasks, progress, started):
        if task.id in unjudged:
            judging = task_judge_start(task=task, mode=options["judge_mode"], actor=user)
            if judging is not None:
                started["judgings"].append(judging.job_id)
        if options["tests"] and task.instance_id not in started["execution"]:
            started["execution"][task.instance_id] = list(task_execution_advance(task, actor=user))


def verifiers_under_way(tasks) -> int:
    """The verifiers' jobs queued or running on these tasks (a queryset) and their candidates."""
    on_tasks = Q(subject_type="tasks.task", subject_id__in=tasks.values("id"),
                 kind__in=(JUDGE, REPRODUCE, VERIFIER_TESTS))
    on_candidates = Q(subject_type="datasets.candidate", kind=EXECUTE,
                      subject_id__in=Candidate.objects.filter(task__in=tasks).values("id"))
    return Job.objects.filter(on_tasks | on_candidates, state__in=Job.ACTIVE_STATES).count()


def verification_seen(dataset: Dataset, tasks) -> dict:
    """Where the dataset's latest verification stands, as a reader who sees `tasks` (a queryset) may see
    it: its job, the judgings it started and each task's execution step, of those tasks only (another
    curator's verification may have reached tasks this reader may not see), and the verifiers' jobs
    still under way on them."""
    verifying = dataset_job_latest(dataset, DATASET_VERIFY)
    started = verifying.started if verifying else {}
    steps = started.get("execution", {})
    seen = set(tasks.filter(instance_id__in=list(steps)).values_list("instance_id", flat=True))
    return {
        "job": verifying.job if verifying else None,
        "judge_mode": verifying.options["judge_mode"] if verifying else "",
        "judgings": list(Job.objects.filter(pk__in=started.get("judgings", []), subject_type="tasks.task",
                                            subject_id__in=tasks.values("id")).order_by("id")),
        "execution": [{"task": task, "where": where, "sentence": sentence}
                      for task, (where, sentence) in sorted(steps.items()) if task in seen],
        "under_way": verifiers_under_way(tasks),
    }
