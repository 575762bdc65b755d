"""Validating tasks: queue a validation, run it through the engine in a sandbox, and store its
environment, runs and verdict; generated tests get their verdicts the same way."""

import logging
import sys
from dataclasses import replace
from functools import partial
from pathlib import Path
from typing import Optional

from celery.exceptions import SoftTimeLimitExceeded
from django.conf import settings
from django.db import transaction

from apps.bulk_insert import text_storable
from apps.environments.models import Environment
from apps.environments.selectors import environment_present
from apps.jobs.leases import LeaseLost
from apps.jobs.services import JobFailed, JobRefused, job_start, jobs_lost_end
from worker.engine.env.builder import BuiltEnvironment, EnvironmentBuilder
from worker.engine.env.runtimes import default_images, docker_runtimes, local_runtimes
from worker.engine.sandbox.base import Limits
from worker.engine.sandbox.docker import DockerSandbox
from worker.engine.sandbox.index_proxy import INDEX_PROXY
from worker.engine.sandbox.local import LocalSandbox
from worker.engine.validate.pipeline import (
    CommitToValidate,
    GeneratedValidationResult,
    ValidationSettings,
    task_validate,
    task_validate_generated,
)

from .models import EnvironmentAttempt, GeneratedTest, Task, TestRunRecord, Validation
from .states import VALIDATABLE_STATES, VALIDATING_STATES, task_review_open, task_state_move, task_summary_refresh

log = logging.getLogger(__name__)

# --- validation -----------------------------------------------------------------------------------

VALIDATION = "validation"  # the job kind (registered in apps.tasks.apps)
_OUTPUT_KEPT = 200_000  # characters of a run's output stored


def task_validation_start(*, task: Task, actor=None, backend: str = "", generated_from: Validation = None,
                          from_states=VALIDATABLE_STATES):
    """Queue a validation of the task (in the given sandbox backend, default the setting);
    None if the task is being validated already or not in one of `from_states`. With
    `generated_from`, it checks the task's pending generated tests in that validation's environment."""
    jobs_lost_end(kind=VALIDATION, subject=task)  # a dead worker's validation gives its task back
    with transaction.atomic():
        if not task_state_move(task_id=task.id, to_state=Task.State.BUILDING, from_states=from_states,
                               actor=actor):
            return None
        job, created = job_start(kind=VALIDATION, subject=task, user=actor)
        if not created:  # the task's state said otherwise: trust the job
            transaction.set_rollback(True)
            return None
        extra = {}
        if generated_from is not None:
            extra = {"generated": True, "environment": generated_from.environment,
                     "pass_to_pass": generated_from.pass_to_pass}
        return Validation.objects.create(job=job, task=task, backend=backend or settings.COMMITGYM_SANDBOX, **extra)


def generated_tests_check_start(*, task: Task, source: Validation, tests: list[tuple[str, Optional[int]]],
                                actor=None, backend: str = "", from_states=VALIDATABLE_STATES):
    """Queue a check of test files, given as (content, the model call that wrote it), in the
    environment of `source`; None as task_validation_start says."""
    with transaction.atomic():
        validation = task_validation_start(task=task, actor=actor, backend=backend or source.backend,
                                           generated_from=source, from_states=from_states)
        if validation is not None:
            GeneratedTest.objects.bulk_create([
                GeneratedTest(task=task, model_call_id=call_id, validation=validation, index=i, content=content)
                for i, (content, call_id) in enumerate(tests, 1)])
    return validation


def validation_job_work(job, progress) -> None:
    """The registered `run`: build (or reuse) the environment, run the tests before and after, and
    store the runs, the oracle and the verdict, moving the task on, all at once."""
    validation = Validation.objects.select_related("task__commit", "task__repository").get(job=job)
    task, commit, repository = validation.task, validation.task.commit, validation.task.repository
    task_state_move(task_id=task.id, to_state=Task.State.VALIDATING, from_states=[Task.State.BUILDING])
    target = CommitToValidate(mirror_dir=repository.mirror_dir, sha=commit.sha, parent_sha=commit.parent_sha,
                              committed_at=commit.committed_at, rules=repository.test_file_rules(),
                              excluded_tests=frozenset(task.excluded_tests))
    builder = environment_builder(repository, validation.backend)
    try:
        if validation.generated:
            checked = _generated_check(validation, target, builder, progress.work_dir())
            result = checked.result
        else:
            checked = None
            result = task_validate(target, builder=builder, work_root=progress.work_dir(), settings=_engine_settings(),
                                   reusable=_reusable_environments(repository, validation.backend))
    except SoftTimeLimitExceeded:
        raise JobFailed("time_limit", "The validation ran past its time limit (CELERY_TASK_SOFT_TIME_LIMIT).") from None
    except (LeaseLost, JobFailed):
        raise
    except Exception as error:
        log.exception("validation job %s failed", job.id)
        raise JobFailed("validation_error", text_storable(f"{type(error).__name__}: {error}")) from None

    def store():
        if checked is not None:
            generated_tests_store(validation, checked)
        _validation_store(validation, result)
        task_state_move(task_id=task.id, to_state=result.verdict, from_states=VALIDATING_STATES,
                        reason=result.reason)
        task_review_open(task_id=task.id)
        task_summary_refresh(task.id)

    progress.complete(store)


def validation_job_ended(job) -> None:
    """The registered clean-up of a validation that failed (or whose worker was lost): its
    generated tests were not run, and the task can be validated again."""
    validation = Validation.objects.get(job=job)
    generated_tests_not_run(validation)
    reason = "worker_lost" if job.error_code == "worker_lost" else "validation_error"
    task_state_move(task_id=validation.task_id, to_state=Task.State.MINED, from_states=VALIDATING_STATES,
                    reason=reason)


def validation_job_retry(job, user):
    """The registered `retry`: validate the task again the same way (its generated tests, in the
    same environment, when it checked those)."""
    validation = Validation.objects.select_related("task").get(job=job)
    task = validation.task
    if validation.generated:
        tests = list(GeneratedTest.objects.filter(validation=validation).order_by("index")
                     .values_list("content", "model_call_id"))
        again = generated_tests_check_start(task=task, source=validation, tests=tests, actor=user)
    else:
        again = task_validation_start(task=task, actor=user, backend=validation.backend)
    if again is None:
        state = Task.objects.get(id=task.id).get_state_display().lower()
        raise JobRefused(f"{task.instance_id} is {state}: it cannot be validated now.")
    return again.job


def sandbox_limits(limits: Limits) -> Limits:
    """An engine's limits for a run of tests with the operator's memory limit."""
    return replace(limits, memory_bytes=settings.COMMITGYM_SANDBOX_MEMORY_MB << 20)


def _engine_settings() -> ValidationSettings:
    return ValidationSettings(reruns=settings.COMMITGYM_VALIDATION_RERUNS,
                              per_test_timeout=settings.COMMITGYM_TEST_TIMEOUT,
                              suite_seconds=settings.COMMITGYM_SUITE_SECONDS,
                              limits=sandbox_limits(ValidationSettings.limits))


def environment_builder(repository, backend: str) -> EnvironmentBuilder:
    """Environments are shared between a repository's commits, never across repositories:
    building one runs the repository's own code."""
    uv = Path(sys.executable).parent / "uv"
    factory = partial(LocalSandbox, allow_unsandboxed=settings.COMMITGYM_ALLOW_UNSANDBOXED,
                      index_hosts=settings.COMMITGYM_INDEX_HOSTS)
    runtimes = local_runtimes()
    if backend == "docker":
        factory = partial(DockerSandbox, index_hosts=settings.COMMITGYM_INDEX_HOSTS)
        runtimes = docker_runtimes(settings.COMMITGYM_DOCKER_IMAGES or default_images())
    return EnvironmentBuilder(
        env_root=Path(settings.COMMITGYM_ENV_DIR) / backend / f"repository-{repository.pk}", uv=uv,
        namespace=f"repository-{repository.pk}", sandbox_factory=factory, backend=backend, runtimes=runtimes,
        ca_bundle=Path(settings.COMMITGYM_CA_BUNDLE) if settings.COMMITGYM_CA_BUNDLE else None,
        round_days=settings.COMMITGYM_RESOLVE_ROUND_DAYS)


def _generated_check(validation: Validation, target: CommitToValidate, builder: EnvironmentBuilder,
                     work: Path) -> GeneratedValidationResult:
    """Run the generated tests queued with this validation, in the environment they were written for."""
    environment = validation.environment
    if environment is None or not environment_present(environment):
        raise JobFailed("environment_gone", "The environment the generated tests were to run in is gone: "
                                            "validate the task again first.")
    contents = list(GeneratedTest.objects.filter(validation=validation).order_by("index")
                    .values_list("content", flat=True))
    return task_validate_generated(target, contents, builder=builder, environment=built_environment(environment),
                                   work_root=work, settings=_engine_settings(), pass_to_pass=validation.pass_to_pass)


def built_environment(environment: Environment) -> BuiltEnvironment:
    return BuiltEnvironment(path=Path(environment.path), key=environment.key,
                            python_version=environment.python_version, lock=environment.lock,
                            recipe_key=environment.recipe_key, image=environment.image,
                            sealed_image=environment.sealed_image, generated=list(environment.generated_files),
                            suite_args=tuple(environment.suite_args))


def _reusable_environments(repository, backend: str) -> list[BuiltEnvironment]:
    environments = Environment.objects.filter(repository=repository, backend=backend)[:5]
    return [built_environment(env) for env in environments if environment_present(env)]


def _how_built(environment: BuiltEnvironment) -> dict:
    """What the attempt that built an environment did (nothing when it was built before)."""
    built = [attempt for attempt in environment.attempts if attempt.status == "ok" and attempt.strategy != "reuse"]
    if not built:
        return {}
    return {"strategy": built[-1].strategy[:255], "pytest": built[-1].pytest[:128], "lifted": built[-1].lifted, "as_of": built[-1].as_of,
            "optional_added": [{key: text_storable(value) for key, value in added.items()} for added in built[-1].added],
            "generated_files": [text_storable(path) for path in environment.generated],
            "suite_args": [text_storable(arg) for arg in environment.suite_args]}


def _validation_store(validation: Validation, result) -> None:
    environment = None
    if result.environment:
        environment, _ = Environment.objects.get_or_create(key=result.environment.key, defaults={
            "python_version": result.environment.python_version, "lock": result.environment.lock,
            "image": result.environment.image,
            "recipe_key": result.environment.recipe_key, "path": str(result.environment.path),
            "repository": validation.task.repository, "backend": validation.backend,
            "build_network": INDEX_PROXY, **_how_built(result.environment)})
    oracle = result.oracle
    EnvironmentAttempt.objects.bulk_create([
        EnvironmentAttempt(validation=validation, strategy=a.strategy[:64], status=a.status, step=a.step,
                           commands=[text_storable(c) for c in a.commands], seconds=a.seconds,
                           output=text_storable(a.output)[-_OUTPUT_KEPT:], reason=a.reason, lifted=a.lifted,
                           pytest=a.pytest[:128])
        for a in result.attempts])
    TestRunRecord.objects.bulk_create([
        TestRunRecord(validation=validation, side=r.side, scope=r.scope, index=r.index, status=r.run.status,
                      exit_code=r.run.exit_code, collection_error=r.run.collection_error, seconds=r.run.seconds,
                      output=text_storable(r.run.output)[-_OUTPUT_KEPT:], untrusted=text_storable(r.run.untrusted),
                      outcomes={text_storable(test): status for test, status in r.run.outcomes.items()})
        for r in result.runs])
    Validation.objects.filter(id=validation.id).update(
        verdict=result.verdict, reason=result.reason, environment=environment,
        isolation_reduced=validation.backend == "local" and not LocalSandbox.available(),
        environment_reused=result.environment_reused,
        fail_to_pass=[text_storable(t) for t in oracle.fail_to_pass] if oracle else [],
        pass_to_pass=[text_storable(t) for t in oracle.pass_to_pass] if oracle else [],
        flaky=[text_storable(t) for t in oracle.flaky] if oracle else [],
        breaks=[text_storable(t) for t in oracle.breaks] if oracle else [], seconds=result.seconds,
        **_controls_stored(result))


def _controls_stored(result) -> dict:
    """The gold and empty patches' grades the validation's own runs made (their runs are its suite
    runs, after and before), and the selection they ran, which the task's grades then run."""
    controls = {source: {"tampering": [text_storable(path) for path in grade.tampering],
                         "touches_tests": [text_storable(path) for path in grade.touches_tests],
                         "seconds": grade.seconds}
                for source, grade in (("gold", result.gold), ("empty", result.empty))
                if grade is not None}
    if not controls:
        return {}
    return {"controls": controls, "grade_selection": [text_storable(arg) for arg in result.environment.suite_args]}


# --- generated tests ---------------------------------------------------------------------------


def generated_tests_not_run(validation: Validation) -> None:
    """The validation that was to check these files ended without running them."""
    GeneratedTest.objects.filter(validation=validation, state=GeneratedTest.State.PENDING).update(
        state=GeneratedTest.State.DROPPED, reason="not_run")


def generated_tests_store(validation: Validation, checked: GeneratedValidationResult) -> None:
    """Each file's verdict, in the order the files were given."""
    rows = list(GeneratedTest.objects.filter(validation=validation).order_by("index"))
    for row, verdict in zip(rows, checked.files):
        row.path, row.fail_to_pass, row.before, row.after = verdict.path, verdict.fail_to_pass, verdict.before, \
            verdict.after
        row.state = GeneratedTest.State.KEPT if verdict.kept else GeneratedTest.State.DROPPED
        row.reason = verdict.reason
    GeneratedTest.objects.bulk_update(rows, ["path", "fail_to_pass", "before", "after", "state", "reason"])
