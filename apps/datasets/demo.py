"""The demo: the sample repository brought to every page a newcomer needs to see, on any database and
broker. Three of its tasks are validated and get the issues and reproduction tests bundled with the
demo (worker/demo/bundle.py), recorded as the models' answers and marked as recorded wherever they
show; four runs of candidate predictions are imported with their reports; mutants and controls are
made and graded; the judge scores every candidate and the execution verifier runs them; the figures
are kept as `verify` keeps them.

`demo_prepare` does it by calling `demo_advance` until the data is complete: each call starts what is
missing and can start now, through the same services and jobs as the commands, so it may be
stopped and run again at any point. Where the preparation stands is read from the data itself
(`demo_progress`), so any process can show it. `demo_workers_start` starts the embedded default's
workers: one process per kind of work, so that light jobs never wait behind tests or model calls.
"""

import logging
import os
import secrets
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Optional

from django.conf import settings
from django.contrib.auth.models import Group, User
from django.db import connection
from django.db.models import Exists, OuterRef

from apps.jobs.models import Job
from apps.llm.calls import model_call_cache_key, role_settings
from apps.llm.models import LanguageJob, ModelCall
from apps.repositories.models import MiningJob, Repository
from apps.repositories.services import mining_job_start, repository_register
from apps.tasks.backtranslation import ISSUE_WRITER_TOKENS, issue_prompt, valid_validation
from apps.tasks.language_jobs import language_job_start
from apps.tasks.models import IssueVersion, Task, Validation
from apps.tasks.services import task_validation_start
from worker.demo.bundle import REPOSITORY_NAME, demo_bundle, demo_sample_write
from worker.engine.llm.clients import ModelError
from worker.engine.llm.prompts import Prompt

from .verifiers.execution import (
    DONE,
    REPRODUCTION_TOKENS,
    execution_under_way,
    reproduction_request,
    task_execution_advance,
)
from .grading.grades import candidate_grade_start, task_controls_ensure
from .candidates.imports import predictions_import
from .verifiers.judging import candidates_unjudged, judge_identity, task_judge_start
from .verifiers.matrices import current_test_sets
from .verifiers.measures import DEFAULT_SOURCES, measures_compute, measures_snapshot_keep
from .models import (
    Candidate,
    Execution,
    Grade,
    Judging,
    JudgeScore,
    MeasuresSnapshot,
    ReproductionTests,
    VerifierTestSet,
)
from .candidates.mutants import task_mutants_make
from .making import repository_dataset_ensure

log = logging.getLogger(__name__)

DEMO_USER = "demo"
JUDGE_MODE = "patch"
# A recorded answer's model call: marked so on every page that shows where a text came from.
RECORDED_BACKEND = "recorded"
RECORDED_MODEL = "recorded text (bundled with the demo)"
STEPS = (
    "Mining the sample repository",
    "Importing candidate predictions with their reports, making controls and mutants",
    "Validating the tasks",
    "Writing their issues (recorded texts)",
    "Judging every candidate",
    "Running the execution verifier",
    "Grading the controls and mutants",
    "Keeping the figures",
)
MINING, CANDIDATES, VALIDATING, ISSUES, JUDGING, EXECUTING, GRADING, FIGURES = range(len(STEPS))

# The preparation running in this process (the demo command's), for the first page it also serves.
_preparing = threading.Event()


# --- where it stands --------------------------------------------------------------------------------


@dataclass
class DemoStep:
    label: str
    done: int = 0
    total: int = 1

    @property
    def complete(self) -> bool:
        return self.done >= self.total


@dataclass
class DemoProgress:
    steps: list = field(default_factory=lambda: [DemoStep(label) for label in STEPS])
    stopped: str = ""  # why the preparation cannot go on, for a person ("" while it can)
    preparing: bool = False  # a preparation runs in this process

    @property
    def complete(self) -> bool:
        return all(step.complete for step in self.steps)

    @property
    def current(self) -> Optional[int]:
        """The number (from 1) of the first step not complete; None when all are."""
        return next((number for number, step in enumerate(self.steps, 1) if not step.complete), None)

    @property
    def current_step(self) -> Optional[DemoStep]:
        return self.steps[self.current - 1] if self.current else None


class DemoStale(Exception):
    """The database holds a sample repository other than the one the demo's bundle is for."""


def demo_repository() -> Optional[Repository]:
    return Repository.objects.filter(name=REPOSITORY_NAME).first()


def demo_tasks(repository: Repository) -> list[Task]:
    """The bundle's tasks in the repository, by id; DemoStale when the repository lacks one of them."""
    ids = demo_bundle().instance_ids
    tasks = list(Task.objects.filter(repository=repository, instance_id__in=ids).select_related("commit", "repository")
                 .order_by("instance_id"))
    if len(tasks) != len(ids):
        raise DemoStale(f"{repository.name} does not have the demo's tasks ({', '.join(ids)}): its sample "
                        f"repository was written by an earlier version of the demo. Remove {settings.VAR_DIR} (make "
                        "clean) and run make demo again.")
    return tasks


def demo_progress() -> Optional[DemoProgress]:
    """Where the demo's preparation stands, read from the data; None where there is no demo repository."""
    repository = demo_repository()
    if repository is None:
        return None
    progress = DemoProgress(preparing=_preparing.is_set())
    mining = MiningJob.objects.filter(repository=repository).select_related("job").order_by("-id").first()
    if not repository.mined_head:
        if mining is not None and mining.state == Job.State.FAILED:
            progress.stopped = f"mining failed: {mining.error_sentence} {mining.error_message}".strip()
        return progress
    progress.steps[MINING].done = 1
    try:
        tasks = demo_tasks(repository)
    except DemoStale as stale:
        progress.stopped = str(stale)
        return progress
    if MeasuresSnapshot.objects.filter(dataset__repository=repository).exists():
        for step in progress.steps:  # the figures are kept last, once everything else is there
            step.done = step.total
        return progress
    for step in progress.steps[CANDIDATES:GRADING + 1]:
        step.total = len(tasks)
    try:
        judge = judge_identity()
    except ModelError as error:
        progress.stopped = f"the judge model cannot be used: {error}"
        return progress
    stops = [demo_task_progress(task, progress.steps, judge) for task in tasks]
    progress.stopped = next((f"{task.instance_id}: {why}" for task, why in zip(tasks, stops) if why), "")
    return progress


def demo_task_progress(task: Task, steps: list, judge: tuple[str, int]) -> str:
    """Count the task in each step it has done; why it cannot go on ("" when it can). `judge`: the judge
    model's identity and prompt version, whose scores count."""
    bundle = demo_bundle()
    candidates = Candidate.objects.filter(task=task).exclude(source=Candidate.Source.PROBE)
    made = (candidates.filter(run__name__in=[run.name for run in bundle.runs]).count() == len(bundle.runs)
            and candidates.filter(source__in=Candidate.CONTROLS).count() == len(Candidate.CONTROLS)
            and candidates.filter(source=Candidate.Source.MUTANT).exists())
    steps[CANDIDATES].done += made
    if task.verdict != "valid":
        validation = Validation.objects.filter(task=task).select_related("job").order_by("-id").first()
        if validation is None or validation.is_active:
            return ""
        task.refresh_from_db(fields=["verdict"])  # read before its validation ended, which stored the verdict
        if task.verdict != "valid":
            return (f"its validation {validation.state}, {validation.verdict or 'no verdict'}: "
                    f"{validation.reason or validation.error_message}")
    steps[VALIDATING].done += 1
    if not IssueVersion.objects.filter(task=task).exists():
        writing = LanguageJob.objects.filter(task=task, kind=LanguageJob.Kind.BACKTRANSLATE).select_related("job") \
            .order_by("-id").first()
        return "" if writing is None or writing.is_active else f"its issue was not written: {writing.detail}"
    steps[ISSUES].done += 1
    model, version = judge
    scored = JudgeScore.objects.filter(candidate=OuterRef("pk"), mode=JUDGE_MODE, model=model, prompt_version=version)
    judged = made and not candidates.exclude(Exists(scored)).exists()
    steps[JUDGING].done += judged
    why = ""
    if not judged:
        judging = Judging.objects.filter(task=task, mode=JUDGE_MODE).select_related("job").order_by("-id").first()
        if judging is not None and not judging.is_active and made:
            why = f"the judge left candidates unscored ({judging.state}): {judging.detail or judging.error_message}"
    executed = made and _executed(task, candidates)
    steps[EXECUTING].done += executed
    if not executed and not why:
        why = _execution_stopped(task)
    graded = made and not candidates.filter(outcome="").exists()
    steps[GRADING].done += graded
    if not graded and not why:
        failed = Grade.objects.filter(candidate__task=task, job__state=Job.State.FAILED).select_related("job").first()
        why = f"grading {failed.candidate} failed: {failed.error_message}" if failed else ""
    return why


def _executed(task: Task, candidates) -> bool:
    """Every candidate has run to its end against the task's current verifier tests."""
    set_id = current_test_sets([task.id]).get(task.id)
    if set_id is None or execution_under_way([task]):
        return False
    ended = Execution.objects.filter(candidate=OuterRef("pk"), test_set_id=set_id, job__state=Job.State.SUCCEEDED)
    return not candidates.exclude(Exists(ended)).exists()


def _execution_stopped(task: Task) -> str:
    if execution_under_way([task]):
        return ""
    for model, path in ((ReproductionTests, "task"), (VerifierTestSet, "task"), (Execution, "candidate__task")):
        failed = model.objects.filter(**{path: task, "job__state": Job.State.FAILED}).select_related("job").first()
        if failed is not None:
            return f"the execution verifier stopped ({model._meta.verbose_name}): {failed.job.error_message}"
    return ""


# --- moving it on ----------------------------------------------------------------------------------


def demo_advance(*, sample: Path, through: int = FIGURES) -> DemoProgress:
    """Start whatever the demo is missing and can start now, up to the step `through` (MINING: write
    the sample and mine it, no more); where it then stands. Safe to call any number of times."""
    repository = _repository_ensure(sample)
    if not repository.mined_head:
        if not MiningJob.objects.filter(repository=repository, job__state__in=Job.ACTIVE_STATES).exists() and \
                not MiningJob.objects.filter(repository=repository, job__state=Job.State.FAILED).exists():
            mining_job_start(repository=repository)
        return demo_progress()
    if through > MINING:
        try:
            tasks = demo_tasks(repository)
        except DemoStale:
            return demo_progress()
        _candidates_ensure(tasks)
        for task in tasks:
            _task_advance(task)
        progress = demo_progress()
        if progress.current == FIGURES + 1 and not progress.stopped:
            _figures_keep(repository)
    return demo_progress()


def _repository_ensure(sample: Path) -> Repository:
    repository = demo_repository()
    if repository is None:
        if not (sample / ".git").exists():
            demo_sample_write(sample)
        repository = repository_register(location=str(sample), name=REPOSITORY_NAME)
    return repository


def _candidates_ensure(tasks: list[Task]) -> None:
    """The bundle's runs imported with their reports; each task's controls and mutants made."""
    bundle = demo_bundle()
    for run in bundle.runs:
        if Candidate.objects.filter(run__name=run.name, task__in=tasks).count() < len(tasks):
            predictions_import(path=run.predictions, run_name=run.name, report_path=run.report)
    for task in tasks:
        task_controls_ensure(task)
        if not Candidate.objects.filter(task=task, source=Candidate.Source.MUTANT).exists():
            task_mutants_make(task)


def _task_advance(task: Task) -> None:
    """The task's next steps: validate it; then write its issue; then judge its candidates and run the
    execution verifier; once that is done, grade what has no ground truth yet (the figures need the
    verifiers, not the mutants' grades: those wait behind them)."""
    task.refresh_from_db()
    if task.state == Task.State.MINED:
        task_validation_start(task=task, from_states=(Task.State.MINED,))
        return
    if task.verdict != "valid":
        return
    if not IssueVersion.objects.filter(task=task).exists():
        if not LanguageJob.objects.filter(task=task, kind=LanguageJob.Kind.BACKTRANSLATE).exists():
            _issue_record(task)
            language_job_start(task=task, kind=LanguageJob.Kind.BACKTRANSLATE)
        return
    candidates = Candidate.objects.filter(task=task).exclude(source=Candidate.Source.PROBE)
    if not ReproductionTests.objects.filter(task=task).exists():
        _reproduction_record(task)
    where, _ = task_execution_advance(task)
    if candidates_unjudged(candidates, JUDGE_MODE).exists() and \
            not Judging.objects.filter(task=task, mode=JUDGE_MODE).exists():
        task_judge_start(task=task, mode=JUDGE_MODE)
    if where == DONE:
        for candidate in candidates.filter(outcome="").exclude(Exists(Grade.objects.filter(candidate=OuterRef("pk")))):
            candidate_grade_start(candidate=candidate)


def _issue_record(task: Task) -> None:
    prompt, variables = issue_prompt(task, valid_validation(task))
    answer_record(role="issue_writer", prompt=prompt, variables=variables, max_tokens=ISSUE_WRITER_TOKENS,
                  answer=demo_bundle().issues[task.instance_id], task=task)


def _reproduction_record(task: Task) -> None:
    prompt, variables = reproduction_request(task)
    answer_record(role="test_writer", prompt=prompt, variables=variables, max_tokens=REPRODUCTION_TOKENS,
                  answer=demo_bundle().reproduction_answers[task.instance_id], task=task)


def answer_record(*, role: str, prompt: Prompt, variables: dict, max_tokens: int, answer: str, task=None) -> ModelCall:
    """Keep `answer` as the role's answer to this prompt, marked as recorded: the job that asks the same
    is answered from it, as from any call made before (apps.llm.calls.model_call), and the pages that
    show where a text came from say it was recorded."""
    messages = prompt.messages(**variables)
    parameters = {"max_tokens": max_tokens, "temperature": 0.0, "seed": 0}  # what model_call asks with
    key = model_call_cache_key(role, role_settings(role), prompt, messages, parameters)
    found = ModelCall.objects.filter(cache_key=key, outcome=ModelCall.Outcome.OK, regenerated=False).first()
    if found is not None:
        return found
    return ModelCall.objects.create(
        role=role, backend=RECORDED_BACKEND, model=RECORDED_MODEL, prompt_name=prompt.name,
        prompt_version=prompt.version, prompt_digest=prompt.digest, cache_key=key, messages=messages,
        parameters=parameters, answer=answer, outcome=ModelCall.Outcome.OK, finish_reason="stop", task=task)


def _figures_keep(repository: Repository) -> None:
    """best@k and the rest over the repository's dataset, kept as `verify` keeps them."""
    dataset = repository_dataset_ensure(repository)
    measured = measures_compute(Task.objects.filter(repository=repository), sources=DEFAULT_SOURCES,
                                judge_mode=JUDGE_MODE)
    measures_snapshot_keep({**measured.as_json(), "sources": sorted(DEFAULT_SOURCES)}, scope=repository.name,
                           dataset=dataset)


def demo_prepare(*, sample: Path, through: int = FIGURES, every: float = 1.0, timeout: float = 3 * 3600,
                 say: Callable[[str], None] = log.info) -> DemoProgress:
    """Advance the demo until its steps through `through` are complete, or it cannot go on (the
    progress says why), saying each step as it begins."""
    _preparing.set()
    deadline = time.monotonic() + timeout
    said = None
    try:
        while True:
            try:
                progress = demo_advance(sample=sample, through=through)
            except Exception as error:  # noqa: BLE001 - the preparation stops in words, not in a dead thread
                log.exception("the demo's preparation failed")
                progress = demo_progress() or DemoProgress()
                progress.stopped = progress.stopped or f"{type(error).__name__}: {error}"
                return progress
            if progress.current != said and progress.current is not None:
                said = progress.current
                step = progress.current_step
                say(f"The demo: step {said} of {len(progress.steps)}: {step.label}")
            if all(step.complete for step in progress.steps[:through + 1]) or progress.stopped \
                    or time.monotonic() > deadline:
                return progress
            time.sleep(every)
    finally:
        _preparing.clear()
        connection.close()  # the thread's own connection


def demo_user_reset() -> str:
    """The demo's login (an admin and curator), with a new password, returned."""
    password = secrets.token_urlsafe(9)
    user, _ = User.objects.get_or_create(username=DEMO_USER)
    user.set_password(password)
    user.is_staff = user.is_superuser = True
    user.save()
    user.groups.add(*[Group.objects.get_or_create(name=name)[0] for name in ("curator", "admin")])
    return password


# --- the embedded default's workers ------------------------------------------------------------------

# One worker process per kind of work, each with concurrency 1 (two cores): mining and bulk actions are
# light and never wait behind a test run or a model call; tests and model calls run side by side.
DEMO_WORKERS = (("light", "mining,curation"), ("tests", "tests"), ("llm", "llm"))


@dataclass
class DemoWorker:
    name: str
    queues: str
    process: subprocess.Popen
    log: Path


def demo_workers_start(*, log_dir: Path, env: Optional[dict] = None, only: tuple = ()) -> list[DemoWorker]:
    """Start the demo's workers (`only` those named), their logs in `log_dir`; the light one runs the
    sweep of lost jobs."""
    workers = []
    for name, queues in DEMO_WORKERS:
        if only and name not in only:
            continue
        log_path = Path(log_dir) / f"demo-worker-{name}.log"
        command = [sys.executable, "-m", "celery", "-A", "worker.celery_app", "worker", "-Q", queues, "-n",
                   f"{name}@%h", "--concurrency", "1", "--without-gossip", "--without-mingle", "--without-heartbeat",
                   "--loglevel", "INFO"]
        if name == "light":
            command += ["-B", "--schedule", str(Path(log_dir) / "beat-schedule")]
        with open(log_path, "ab") as output:
            process = subprocess.Popen(command, stdout=output, stderr=subprocess.STDOUT, env=env,
                                       cwd=settings.BASE_DIR, start_new_session=True)
        workers.append(DemoWorker(name, queues, process, log_path))
    return workers


def demo_workers_stop(workers: list[DemoWorker], *, timeout: float = 60) -> None:
    """Stop each worker: a warm shutdown, asked of its main process alone (a running job ends first, its
    sandbox cleaned up), then, after `timeout`, a kill of everything it started."""
    for worker in workers:
        if worker.process.poll() is None:
            worker.process.send_signal(signal.SIGTERM)
    deadline = time.monotonic() + timeout
    for worker in workers:
        try:
            worker.process.wait(timeout=max(0.1, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            os.killpg(worker.process.pid, signal.SIGKILL)
            worker.process.wait(timeout=30)
