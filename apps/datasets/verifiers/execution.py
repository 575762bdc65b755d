"""The execution verifier, in three kinds of job:

1. `reproduce` (llm queue, per task): the test writer writes reproduction tests from the issue alone;
2. `verifier_tests` (tests queue, per task): the regression tests near what the candidates touch are
   chosen, and they and the reproduction tests run once on the base commit (worker/engine/verify/
   reproduction.py says what is kept);
3. `execute` (tests queue, per candidate): the candidate runs against the kept tests, through the
   same trusted runs as grading (grade/candidate.py), giving its row of the matrix.

`task_execution_advance` starts whichever step a task is missing; each step calls it as it ends, so
one call runs a task's execution verifier to the end. Each step keeps what it read as it started (its
`inputs`: the issue and the model, the validation, the files the candidates touch). A step that failed
is started again once those change (an issue written since, a new validation): its cause may be gone.
While they stay the same it is not: retrying it then is a person's choice.
"""

import hashlib
from dataclasses import replace
from datetime import datetime
from typing import Optional

from django.conf import settings
from django.db import transaction
from django.db.models import Exists, OuterRef, QuerySet
from django.utils import timezone

from apps.bulk_insert import text_storable
from apps.jobs.models import Job
from apps.jobs.services import JobFailed, JobRefused, job_start
from apps.llm.calls import model_call
from apps.tasks.backtranslation import task_current_issue
from apps.tasks.models import Task
from apps.tasks.selectors import task_base_sha
from worker.engine.git.repo import BlobReader, GitError, tree_paths
from worker.engine.grade.candidate import GradeResult, patched_paths
from worker.engine.grade.source_edits import parses
from worker.engine.llm.clients import ModelError
from worker.engine.llm.prompts import Prompt, prompt_load
from worker.engine.sandbox.base import Limits
from worker.engine.validate.generated_tests import generated_files_from_answer
from worker.engine.verify.regression import ChosenFile, module_name, regression_tests_chosen
from worker.engine.verify.reproduction import (
    files_added_patch,
    reproduction_files,
    reproduction_prompt_variables,
    verifier_tests_from_base_run,
)

from ..grading.grades import (
    graded_in_environment,
    grading_validation,
    grading_validation_id,
    run_output_kept,
    task_to_grade,
)
from .matrices import current_test_sets
from ..models import Candidate, Execution, ReproductionTests, VerifierTest, VerifierTestSet

REPRODUCE, VERIFIER_TESTS, EXECUTE = "reproduce", "verifier_tests", "execute"  # job kinds (apps.datasets.apps)
REPRODUCTION_PROMPT = "reproduction_writer"
REPRODUCTION_TOKENS = 800
TEST_FILE_BYTES = 200_000  # of a test file read to see what it imports


# --- the steps, in order ----------------------------------------------------------------------------


# Where a task's steps stand: NOT_HERE is an imported instance, which has no environment here.
STARTED, UNDER_WAY, DONE, STOPPED, NOT_HERE = "started", "under_way", "done", "stopped", "not_here"


def task_execution_advance(task: Task, *, actor=None, since: Optional[datetime] = None) -> tuple[str, str]:
    """Start the task's next missing step, or one that failed and whose inputs changed since. (where it
    stands, a sentence): STARTED, UNDER_WAY, DONE, STOPPED on a step that failed, or NOT_HERE. Verifier
    tests chosen before the candidates touched other files are chosen again for them. A failure that
    ended before `since` (when the caller began) is said to be from an earlier run."""
    if task.imported:
        return NOT_HERE, "an imported instance has no environment here to run verifier tests in"
    if execution_under_way([task]):
        return UNDER_WAY, "under way"
    reproduction = ReproductionTests.objects.filter(task=task).select_related("job").first()
    if reproduction is None or _failed_with_other_inputs(reproduction, reproduction_inputs(task)):
        reproduction_start(task=task, actor=actor)
        return STARTED, "reproduction tests queued" + (_AGAIN if reproduction else "")
    if reproduction.is_active:  # started by another process (a worker chaining on) since the check above
        return UNDER_WAY, "under way"
    if reproduction.state != ReproductionTests.State.SUCCEEDED:
        return STOPPED, step_stopped("writing reproduction tests", reproduction, since)
    touched = agents_touched(task)
    test_set = VerifierTestSet.objects.filter(task=task, reproduction=reproduction).select_related("job").first()
    touches_more = test_set is not None and test_set.state == VerifierTestSet.State.SUCCEEDED and not (
        touched <= set(test_set.touched))
    if test_set is None or touches_more or _failed_with_other_inputs(test_set, verifier_tests_inputs(task, touched)):
        verifier_tests_start(task=task, reproduction=reproduction, actor=actor)
        again = test_set is not None and test_set.state == VerifierTestSet.State.FAILED
        return STARTED, "verifier tests queued" + (_AGAIN if again else "")
    if test_set.is_active:
        return UNDER_WAY, "under way"
    if test_set.state != VerifierTestSet.State.SUCCEEDED:
        return STOPPED, step_stopped("running the verifier tests on the base commit", test_set, since)
    # A style probe's rewrite does what its candidate does: the tests would say the same of it.
    candidates = Candidate.objects.filter(task=task).exclude(source=Candidate.Source.PROBE)
    inputs = execution_inputs(task)
    unexecuted = [*candidates_unexecuted(candidates, test_set), *candidates_failed_with_other_inputs(
        candidates, test_set, inputs)]
    started = sum(execution_start(candidate=c, test_set=test_set, actor=actor, inputs=inputs) is not None
                  for c in unexecuted)
    return (STARTED, f"{started} candidates queued") if started else (DONE, "done")


_AGAIN = " again (what the failed one read has changed since)"


def reproduction_inputs(task: Task) -> dict:
    """What writing the task's reproduction tests reads: its current issue, the test writer's model and
    the prompt."""
    issue = task_current_issue(task=task)
    model = settings.COMMITGYM_MODELS["test_writer"]
    text = issue.text.strip() if issue else ""
    return {"issue": [issue.id, hashlib.sha256(text.encode()).hexdigest()[:16]] if text else None,
            "model": [model["backend"], model["model"], model["base_url"]],
            "prompt": prompt_load(REPRODUCTION_PROMPT).version}


def verifier_tests_inputs(task: Task, touched: set[str]) -> dict:
    """What choosing and running the verifier tests reads: the validation whose environment they run in,
    and the files the candidates touch."""
    return {"validation": grading_validation_id(task, settings.COMMITGYM_SANDBOX), "touched": sorted(touched)}


def execution_inputs(task: Task) -> dict:
    """What running a candidate against the verifier tests reads besides them: the validation."""
    return {"validation": grading_validation_id(task, settings.COMMITGYM_SANDBOX)}


def _failed_with_other_inputs(step, inputs: dict) -> bool:
    return step.state == Job.State.FAILED and step.inputs != inputs


def step_stopped(what: str, step, since: Optional[datetime]) -> str:
    """Why a step stopped, saying when the failure is from before `since` (an earlier run)."""
    said = f"{what} {step.state}: {step.error_message}"
    ended = step.job.finished_at
    if since is not None and ended is not None and ended < since:
        said += (f" (from an earlier run, ended {timezone.localtime(ended):%Y-%m-%d %H:%M}; nothing it reads has "
                 "changed since, so it is not started again: retry it on the jobs page)")
    return said


def current_test_set(task: Task):
    """The verifier tests the task's candidates are run against now (matrices.current_test_sets)."""
    set_id = current_test_sets([task.id]).get(task.id)
    return VerifierTestSet.objects.get(id=set_id) if set_id else None


def candidates_unexecuted(candidates: QuerySet, test_set: VerifierTestSet) -> QuerySet:
    """Those never run against the test set."""
    return candidates.exclude(Exists(Execution.objects.filter(candidate=OuterRef("pk"), test_set=test_set)))


def candidates_failed_with_other_inputs(candidates: QuerySet, test_set: VerifierTestSet, inputs: dict) -> list:
    """Those whose latest run against the test set failed having read other inputs than `inputs` (one that
    failed with the same is retried by a person, not here)."""
    latest: dict[int, Execution] = {}
    for execution in Execution.objects.filter(candidate__in=candidates, test_set=test_set).select_related(
            "job", "candidate").order_by("candidate_id", "-created_at", "-id"):
        latest.setdefault(execution.candidate_id, execution)
    return [execution.candidate for execution in latest.values() if _failed_with_other_inputs(execution, inputs)]


def execution_under_way(tasks: list) -> bool:
    """Whether a step of these tasks' execution verifier is queued or running."""
    return any(model.objects.filter(**{path: tasks, "job__state__in": Job.ACTIVE_STATES}).exists()
               for model, path in ((ReproductionTests, "task__in"), (VerifierTestSet, "task__in"),
                                   (Execution, "candidate__task__in")))


def executions_advance(tasks: list, *, since: Optional[datetime] = None) -> dict[int, tuple[str, str]]:
    """Each task's execution verifier one step on (or where it stands): {task id: (where, sentence)}."""
    return {task.id: task_execution_advance(task, since=since) for task in tasks}


def reproduction_start(*, task: Task, actor=None):
    with transaction.atomic():
        job, created = job_start(kind=REPRODUCE, subject=task, user=actor)
        return ReproductionTests.objects.create(job=job, task=task, inputs=reproduction_inputs(task)) \
            if created else None


def verifier_tests_start(*, task: Task, reproduction: ReproductionTests, actor=None):
    with transaction.atomic():
        job, created = job_start(kind=VERIFIER_TESTS, subject=task, user=actor)
        if not created:
            return None
        return VerifierTestSet.objects.create(job=job, task=task, reproduction=reproduction,
                                              backend=settings.COMMITGYM_SANDBOX,
                                              inputs=verifier_tests_inputs(task, agents_touched(task)))


def execution_start(*, candidate: Candidate, test_set: VerifierTestSet, actor=None, inputs: Optional[dict] = None):
    with transaction.atomic():
        job, created = job_start(kind=EXECUTE, subject=candidate, user=actor)
        if not created:
            return None
        return Execution.objects.create(job=job, candidate=candidate, test_set=test_set,
                                        inputs=execution_inputs(candidate.task) if inputs is None else inputs)


# --- 1. reproduction tests ---------------------------------------------------------------------------


def reproduction_request(task: Task) -> tuple[Prompt, dict[str, str]]:
    """What the test writer is asked for the task's reproduction tests: its current issue and the base
    commit's Python modules; JobFailed when there is no issue or the files cannot be listed."""
    issue = task_current_issue(task=task)
    if issue is None or not issue.text.strip():
        raise JobFailed("no_issue", "The task has no issue text yet: write or import one first.")
    rules = task.repository.test_file_rules()
    try:
        sources = [p for p in tree_paths(task.repository.mirror_dir, task_base_sha(task))
                   if p.endswith(".py") and rules.kind(p) == "source"]
    except GitError as error:
        raise JobFailed("no_environment", f"the base commit's files cannot be listed: {error}") from None
    return prompt_load(REPRODUCTION_PROMPT), reproduction_prompt_variables(issue=issue.text, paths=sources)


def reproduce_job_work(job, progress) -> None:
    """The registered `run`: ask the test writer for reproduction tests from the task's issue (one call;
    cancelled during it, nothing is stored)."""
    reproduction = ReproductionTests.objects.select_related("task__repository", "task__commit").get(job=job)
    task = reproduction.task
    prompt, variables = reproduction_request(task)
    progress.report(0, 1)
    try:
        call, _ = model_call(role="test_writer", prompt=prompt, variables=variables, task=task,
                             max_tokens=REPRODUCTION_TOKENS)
    except ModelError as error:
        raise JobFailed("model_failed", f"{error.code}: {error}") from None
    progress.report(1)
    files = reproduction_files([text for text in generated_files_from_answer(call.answer) if parses(text)])
    detail = "" if files else "The answer held no Python test file that parses: only regression tests will run."
    progress.complete(lambda: ReproductionTests.objects.filter(id=reproduction.id).update(
        model=call.model, prompt_version=prompt.version, files=files, detail=detail, call=call))
    task_execution_advance(task)


def reproduce_job_retry(job, user):
    reproduction = ReproductionTests.objects.select_related("task").get(job=job)
    again = reproduction_start(task=reproduction.task, actor=user)
    if again is None:
        raise JobRefused("Reproduction tests are being written for this task already.")
    return again.job


# --- 2. the verifier tests on the base commit -----------------------------------------------------------


def verifier_tests_job_work(job, progress) -> None:
    """The registered `run`: choose the regression tests and run every verifier test on the base commit."""
    test_set = VerifierTestSet.objects.select_related("task__repository", "task__commit", "reproduction").get(job=job)
    task = test_set.task
    validation = grading_validation(task, test_set.backend)
    grading = task_to_grade(task, validation)
    touched = sorted(agents_touched(task))
    chosen = _regression_files(task, grading, touched)
    regression_files = [c.path for c in chosen]
    files = test_set.reproduction.files
    selection = (*sorted(files), *regression_files)
    result = GradeResult("no", runs=[])
    if selection:
        base = replace(grading, test_patch=files_added_patch(files), fail_to_pass=(), pass_to_pass=(),
                       reference_xfail=frozenset(), runs=1, selection=selection)
        budget = Limits(wall_seconds=settings.COMMITGYM_REGRESSION_SECONDS, cpu_seconds=1800)
        result = graded_in_environment(task, validation, base, "", progress, limits=budget)
    run = result.runs[0] if result.runs else None
    if result.outcome in ("error", "does_not_apply", "untrusted") and run is None:
        raise JobFailed("base_run_failed", f"the verifier tests could not run on the base commit: {result.detail}")
    if run is not None and run.untrusted:
        raise JobFailed("untrusted_run", f"the base commit's run cannot be believed: {run.untrusted}")
    tests = verifier_tests_from_base_run(run.outcomes if run else {}, sorted(files))
    reasons = {c.path: c.reason for c in chosen}
    written = (f"written from the issue alone by {test_set.reproduction.model}" if test_set.reproduction.model
               else "written from the issue alone")

    def reason(test) -> str:
        if test.kind == VerifierTest.Kind.REPRODUCTION:
            return written
        return text_storable(reasons.get(test.test_id.split("::", 1)[0], ""))[:1000]

    def store():
        VerifierTestSet.objects.filter(id=test_set.id).update(
            touched=touched, regression_files=regression_files, detail=text_storable(result.detail),
            base_run=_run_record(run) if run else {})
        VerifierTest.objects.bulk_create(
            [VerifierTest(test_set=test_set, test_id=text_storable(t.test_id), kind=t.kind, position=index,
                          passes_on_base=t.passes_on_base, reason=reason(t)) for index, t in enumerate(tests)])

    progress.complete(store)
    task_execution_advance(task)


def verifier_tests_job_retry(job, user):
    test_set = VerifierTestSet.objects.select_related("task", "reproduction").get(job=job)
    again = verifier_tests_start(task=test_set.task, reproduction=test_set.reproduction, actor=user)
    if again is None:
        raise JobRefused("This task's verifier tests are being run already.")
    return again.job


def agents_touched(task: Task) -> set[str]:
    """The files the task's agents' candidates change (imported and sampled: the gold patch, the
    mutants made from it and the probes would tell the verifier where the fix is); a patch that cannot
    be read adds nothing."""
    touched = set()
    for patch in Candidate.objects.filter(task=task, source__in=Candidate.AGENTS).values_list("patch", flat=True):
        try:
            touched |= patched_paths(patch)
        except ValueError:
            continue
    return touched


def _regression_files(task: Task, grading, touched: list[str]) -> list[ChosenFile]:
    """The test files at the base commit that exercise the touched files, most related first, each with
    why (worker/engine/verify/regression.py); never the task's hidden test files. The source files of
    the touched files' top packages are read too: a test may reach a touched module through them."""
    rules = grading.rules
    tops = {module_name(path).split(".", 1)[0] for path in touched}
    try:
        paths = [p for p in tree_paths(grading.mirror_dir, grading.base_sha) if p.endswith(".py") and (
            rules.is_test(p) or "/" not in p or module_name(p).split(".", 1)[0] in tops)]
        with BlobReader(grading.mirror_dir) as blobs:
            found = blobs.read_objects([f"{grading.base_sha}:{path}" for path in paths])
        hidden = patched_paths(grading.test_patch) if grading.test_patch else frozenset()
    except (GitError, ValueError) as error:
        raise JobFailed("no_environment", f"the base commit's test files cannot be read: {error}") from None
    texts = {path: data[:TEST_FILE_BYTES].decode("utf-8", "replace") for path, data in zip(paths, found)
             if data is not None}
    return regression_tests_chosen(texts, touched, hidden=hidden, rules=rules)


# --- 3. each candidate against them ---------------------------------------------------------------------


def execute_job_work(job, progress) -> None:
    """The registered `run`: the candidate against the verifier tests, one trusted run."""
    execution = Execution.objects.select_related("candidate__task__repository", "candidate__task__commit",
                                                 "test_set__reproduction").get(job=job)
    candidate, test_set = execution.candidate, execution.test_set
    task = candidate.task
    tests = list(test_set.tests.values_list("test_id", "kind"))
    if not tests:
        progress.complete(lambda: Execution.objects.filter(id=execution.id).update(
            outcome="no", detail="the task has no verifier test: nothing to run"))
        return
    validation = grading_validation(task, test_set.backend)
    files = test_set.reproduction.files
    # Whole files, as grading runs them: a node id pytest cannot find (a candidate renamed a parametrized
    # case, say) would stop the run; the kept tests' outcomes are read from it.
    verifier = replace(task_to_grade(task, validation), test_patch=files_added_patch(files),
                       fail_to_pass=tuple(t for t, kind in tests if kind == VerifierTest.Kind.REPRODUCTION),
                       pass_to_pass=tuple(t for t, kind in tests if kind == VerifierTest.Kind.REGRESSION),
                       reference_xfail=frozenset(), runs=1, selection=None)  # the files of these tests
    result = graded_in_environment(task, validation, verifier, None if candidate.no_patch else candidate.patch,
                                   progress)
    run = result.runs[0] if result.runs else None
    kept = {t for t, _ in tests}
    outcomes = {} if run is None or run.untrusted else {
        text_storable(t): status for t, status in run.outcomes.items() if t in kept}
    progress.complete(lambda: Execution.objects.filter(id=execution.id).update(
        outcome=result.outcome, outcomes=outcomes, detail=text_storable(result.detail),
        output=run_output_kept(run) if run else "", tampering=[text_storable(p) for p in result.tampering],
        seconds=result.seconds))


def execute_job_retry(job, user):
    execution = Execution.objects.select_related("candidate", "test_set").get(job=job)
    again = execution_start(candidate=execution.candidate, test_set=execution.test_set, actor=user)
    if again is None:
        raise JobRefused("This candidate is being run against the verifier tests already.")
    return again.job


def _run_record(run) -> dict:
    return {"status": run.status, "seconds": round(run.seconds, 3), "complete": run.complete,
            "untrusted": text_storable(run.untrusted), "output": run_output_kept(run)}


def verifier_test_flag_set(*, test: VerifierTest, flag: str, note: str, user) -> None:
    """A person's flag on a verifier test ("" clears it); ValueError for a flag that is not one."""
    if flag not in VerifierTest.Flag.values:
        raise ValueError(f"{flag!r} is not a flag: choose toxic or never_distinguishing")
    test.flag, test.flag_note = flag, note.strip()[:2000]
    test.flagged_by, test.flagged_at = (user, timezone.now()) if flag else (None, None)
    test.save(update_fields=["flag", "flag_note", "flagged_by", "flagged_at"])
