"""Validating tasks: queue a validation, run it through the engine in a sandbox, and store its
environment, runs and verdict; generated tests get their verdicts the same way."""

import sys
from functools import partial
from pathlib import Path

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from apps.environments.models import Environment
from apps.jobs.services import work_root
from apps.leases import Lease, LeaseLost
from worker.engine.env.builder import BuiltEnvironment, EnvironmentBuilder
from worker.engine.env.runtimes import default_images, docker_runtimes, local_runtimes
from worker.engine.sandbox.docker import DockerSandbox
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

# --- validation -----------------------------------------------------------------------------------

_OUTPUT_KEPT = 200_000  # characters of a run's output stored


def task_validation_start(*, task: Task, actor=None, backend: str = "", generated_from: Validation = None,
                          from_states=VALIDATABLE_STATES):
    """Queue a validation of the task (in the given sandbox backend, default the setting);
    None if the task is being validated already or not in one of `from_states`. With
    `generated_from`, it checks the task's pending generated tests in that validation's environment."""
    from worker.tasks import task_validate_task  # dispatch: worker.tasks imports this module

    _stale_validations_end(task)
    with transaction.atomic():
        if not task_state_move(task_id=task.id, to_state=Task.State.BUILDING, from_states=from_states,
                               actor=actor):
            return None
        extra = {}
        if generated_from is not None:
            extra = {"generated": True, "environment": generated_from.environment,
                     "pass_to_pass": generated_from.pass_to_pass}
        validation = Validation.objects.create(task=task, backend=backend or settings.COMMITGYM_SANDBOX, **extra)
    transaction.on_commit(lambda: task_validate_task.delay(validation.id))
    return validation


def _engine_settings() -> ValidationSettings:
    return ValidationSettings(runs_per_side=settings.COMMITGYM_VALIDATION_RUNS,
                              per_test_timeout=settings.COMMITGYM_TEST_TIMEOUT,
                              suite_seconds=settings.COMMITGYM_SUITE_SECONDS)


def _builder(repository, backend: str) -> EnvironmentBuilder:
    """Environments are shared between a repository's commits, never across repositories:
    building one runs the repository's own code."""
    uv = Path(sys.executable).parent / "uv"
    factory = partial(LocalSandbox, allow_unsandboxed=settings.COMMITGYM_ALLOW_UNSANDBOXED)
    runtimes = local_runtimes()
    if backend == "docker":
        factory = partial(DockerSandbox, build_network=settings.COMMITGYM_BUILD_NETWORK)
        runtimes = docker_runtimes(settings.COMMITGYM_DOCKER_IMAGES or default_images())
    return EnvironmentBuilder(
        env_root=Path(settings.COMMITGYM_ENV_DIR) / backend / f"repository-{repository.pk}", uv=uv,
        namespace=f"repository-{repository.pk}", sandbox_factory=factory, backend=backend, runtimes=runtimes,
        ca_bundle=Path(settings.COMMITGYM_CA_BUNDLE) if settings.COMMITGYM_CA_BUNDLE else None)


def _stale_validations_end(task: Task) -> None:
    """A validation whose worker stopped reporting would hold its task for ever: end it, and
    give the task back so it can be validated again."""
    ended = Lease.stale_rows(Validation, running_state=Validation.State.RUNNING, task=task).update(
        state=Validation.State.FAILED, error="The worker running this validation stopped reporting.",
        finished_at=timezone.now())
    for validation in Validation.objects.filter(task=task, state=Validation.State.FAILED, generated=True):
        generated_tests_not_run(validation)
    if ended and not Validation.objects.filter(task=task, state__in=Validation.ACTIVE_STATES).exists():
        task_state_move(task_id=task.id, to_state=Task.State.MINED,
                        from_states=VALIDATING_STATES, reason="worker_lost")


def task_validation_run(*, validation_id: int) -> bool:
    """Run a queued validation to its end. Safe to call twice: one that ended is left as it
    is. Returns False when another worker holds it and may still be running it."""
    lease = Lease.claim(Validation, validation_id, waiting_state=Validation.State.QUEUED,
                        running_state=Validation.State.RUNNING)
    if lease is None:
        return not Lease.held_elsewhere(Validation, validation_id, running_state=Validation.State.RUNNING)
    validation = Validation.objects.select_related("task__commit", "task__repository").get(id=validation_id)
    task, commit, repository = validation.task, validation.task.commit, validation.task.repository
    with lease:
        try:
            task_state_move(task_id=task.id, to_state=Task.State.VALIDATING, from_states=[Task.State.BUILDING])
            target = CommitToValidate(mirror_dir=repository.mirror_dir, sha=commit.sha,
                                      parent_sha=commit.parent_sha, committed_at=commit.committed_at,
                                      rules=repository.test_file_rules(),
                                      excluded_tests=frozenset(task.excluded_tests))
            if validation.generated:
                result = _generated_validate(lease, validation, target)
            else:
                result = task_validate(target, builder=_builder(repository, validation.backend),
                                       work_root=work_root(), settings=_engine_settings(),
                                       reusable=_reusable_environments(repository, validation.backend))
                _validation_store(lease, validation, result)
        except LeaseLost:
            return True  # another worker took it over; it finishes the task
        except Exception as error:  # noqa: BLE001 - the task must not stay in a running state
            if lease.finish(Validation.State.FAILED, error=_text(f"{type(error).__name__}: {error}")[:4000]):
                generated_tests_not_run(validation)
                task_state_move(task_id=task.id, to_state=Task.State.MINED, from_states=VALIDATING_STATES,
                                reason="validation_error")
            raise
    task_state_move(task_id=task.id, to_state=result.verdict, from_states=VALIDATING_STATES, reason=result.reason)
    task_review_open(task_id=task.id)
    task_summary_refresh(task.id)
    return True


def _generated_validate(lease: Lease, validation: Validation, target: CommitToValidate):
    """Check the generated tests queued with this validation; store each one's verdict."""
    environment = validation.environment
    if environment is None or not Path(environment.path).is_dir():
        raise RuntimeError("the environment the generated tests were to run in is gone")
    contents = list(GeneratedTest.objects.filter(validation=validation).order_by("index")
                    .values_list("content", flat=True))
    checked = task_validate_generated(
        target, contents, builder=_builder(validation.task.repository, validation.backend),
        environment=_built(environment), work_root=work_root(), settings=_engine_settings(),
        pass_to_pass=validation.pass_to_pass)
    with transaction.atomic():
        generated_tests_store(validation, checked)
        _validation_store(lease, validation, checked.result)
    return checked.result


def _built(environment: Environment) -> BuiltEnvironment:
    return BuiltEnvironment(path=Path(environment.path), key=environment.key,
                            python_version=environment.python_version, lock=environment.lock,
                            recipe_key=environment.recipe_key, image=environment.image)


def _reusable_environments(repository, backend: str) -> list[BuiltEnvironment]:
    environments = Environment.objects.filter(repository=repository, backend=backend)[:5]
    return [_built(env) for env in environments if Path(env.path).is_dir()]


def _text(value) -> str:
    """What PostgreSQL accepts of text that code in a sandbox wrote: no NUL, no lone surrogates."""
    if isinstance(value, bytes):
        value = value.decode("utf-8", "replace")
    return value.encode("utf-8", "replace").decode("utf-8").replace("\x00", "")


@transaction.atomic
def _validation_store(lease: Lease, validation: Validation, result) -> None:
    environment = None
    if result.environment:
        environment, _ = Environment.objects.get_or_create(key=result.environment.key, defaults={
            "python_version": result.environment.python_version, "lock": result.environment.lock,
            "image": result.environment.image,
            "recipe_key": result.environment.recipe_key, "path": str(result.environment.path),
            "repository": validation.task.repository, "backend": validation.backend,
            "build_network": settings.COMMITGYM_BUILD_NETWORK if validation.backend == "docker" else "host"})
    oracle = result.oracle
    EnvironmentAttempt.objects.bulk_create([
        EnvironmentAttempt(validation=validation, strategy=a.strategy, commands=[_text(c) for c in a.commands],
                           status=a.status, step=a.step, output=_text(a.output)[-_OUTPUT_KEPT:], seconds=a.seconds)
        for a in result.attempts])
    TestRunRecord.objects.bulk_create([
        TestRunRecord(validation=validation, side=r.side, scope=r.scope, index=r.index, status=r.run.status,
                      exit_code=r.run.exit_code, collection_error=r.run.collection_error, seconds=r.run.seconds,
                      output=_text(r.run.output)[-_OUTPUT_KEPT:],
                      outcomes={_text(test): status for test, status in r.run.outcomes.items()})
        for r in result.runs])
    finished = lease.finish(
        Validation.State.DONE, verdict=result.verdict, reason=result.reason, environment=environment,
        isolation_reduced=validation.backend == "local" and not LocalSandbox.available(),
        environment_reused=result.environment_reused,
        fail_to_pass=[_text(t) for t in oracle.fail_to_pass] if oracle else [],
        pass_to_pass=[_text(t) for t in oracle.pass_to_pass] if oracle else [],
        flaky=[_text(t) for t in oracle.flaky] if oracle else [],
        breaks=[_text(t) for t in oracle.breaks] if oracle else [], seconds=result.seconds)
    if not finished:
        raise LeaseLost()  # rolls back what this worker stored: the one holding it now stores its own


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
