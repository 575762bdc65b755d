"""Generated tests: the test writer writes test files for a commit that brought no Fail-to-Pass
test (a language job); a validation then runs them in the task's environment and keeps those
that fail before the fix and pass after it."""

from apps.llm.calls import model_call, role_settings
from worker.engine.git.patches import commit_patches
from worker.engine.git.repo import BlobReader
from worker.engine.llm.prompts import prompt_load
from worker.engine.validate.generated_tests import generated_files_from_answer, generation_prompt_variables

from .models import GeneratedTest, Task, Validation
from .services import generated_tests_check_start

FILE_BYTES = 200_000  # of one changed file shown to the test writer
TEST_WRITER_TOKENS = 800


def generation_source(task: Task) -> Validation | None:
    """The validation generated tests build on: the latest of the commit's own, if it found no F2P
    test, broke nothing and left an environment, while the task is still invalid (a root commit has
    no before side to run them on)."""
    if task.state != Task.State.INVALID or not task.commit.parent_sha:
        return None
    latest = (Validation.objects.filter(task=task, generated=False).exclude(job__state__in=Validation.ACTIVE_STATES)
              .select_related("job").order_by("-created_at", "-id").first())
    if latest and latest.state == Validation.State.SUCCEEDED and latest.reason == "no_fail_to_pass" \
            and latest.environment_id and not latest.breaks:
        return latest
    return None


def _files_before(task: Task, source_patch_paths: list[str]) -> dict[str, str]:
    commit = task.commit
    if not commit.parent_sha:
        return {}
    with BlobReader(task.repository.mirror_dir) as blobs:
        found = blobs.read_objects([f"{commit.parent_sha}:{path}" for path in source_patch_paths])
    return {path: data[:FILE_BYTES].decode("utf-8", "replace")
            for path, data in zip(source_patch_paths, found) if data is not None}


def generation_prompt(task: Task):
    """(the prompt, its variables) the test writer gets for this task."""
    commit, repository = task.commit, task.repository
    patches = commit_patches(repository.mirror_dir, commit.sha, commit.parent_sha, repository.test_file_rules())
    source_paths = [path for path in commit.source_files if path.endswith(".py")]
    return prompt_load("test_writer"), generation_prompt_variables(
        commit_message=commit.message, source_patch=patches.source_patch,
        files_before=_files_before(task, source_paths))


def task_generate_tests(*, task: Task, regenerate: bool = False, progress=None) -> tuple[str, str, str]:
    """Ask the test writer for test files and queue their check. Returns (outcome, detail, model):
    written (files queued), cached (this answer was checked before), skipped, or failed (no test in
    the answer). A model that fails raises ModelError and stores nothing. `progress` (a job's) counts
    its one call, and raises JobCancelled after it when a cancel was asked: nothing is queued then."""
    model = role_settings("test_writer").model_name
    source = generation_source(task)
    if source is None:
        return "skipped", ("tests are generated for tasks whose validation found no Fail-to-Pass test of "
                           "their own, broke nothing and built an environment"), model
    prompt, variables = generation_prompt(task)
    if progress is not None:
        progress.report(0, 1)
    call, cached = model_call(role="test_writer", prompt=prompt, variables=variables, task=task,
                              regenerate=regenerate, max_tokens=TEST_WRITER_TOKENS)
    if progress is not None:
        progress.report(1)
    if cached and GeneratedTest.objects.filter(task=task, model_call=call).exists():
        return "cached", "", call.model
    files = generated_files_from_answer(call.answer)
    if not files:
        return "failed", "the answer held no Python code block with a test function", call.model
    validation = generated_tests_check_start(task=task, source=source, tests=[(file, call.id) for file in files])
    if validation is None:
        return "skipped", f"the task is {Task.objects.get(id=task.id).state}: it cannot be checked now", call.model
    return "written", f"{len(files)} test files queued for checking", call.model
