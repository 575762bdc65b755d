"""Writing a valid task's issue with the issue writer, and keeping its versions."""

from dataclasses import asdict
from typing import Optional

from django.db import IntegrityError, transaction
from django.db.models import Max
from django.utils import timezone

from apps.llm.calls import model_call, role_settings
from worker.engine.git.patches import commit_patches
from worker.engine.llm.issue_writer import degeneration, issue_prompt_variables, issue_text, leak_check
from worker.engine.llm.prompts import prompt_load

from .models import IssueVersion, Task, TaskChange, TestRunRecord, Validation, current_issue
from .states import VALID_OR_LATER, task_changed_back_to_review, task_review_open, task_summary_refresh

ISSUE_WRITER_TOKENS = 600


def task_current_issue(*, task: Task) -> Optional[IssueVersion]:
    return current_issue(list(IssueVersion.objects.filter(task=task)))


def valid_validation(task: Task) -> Optional[Validation]:
    """The latest validation that found the task valid: its F2P tests are what an issue must not name."""
    return (Validation.objects.filter(task=task, job__state=Validation.State.SUCCEEDED, verdict="valid")
            .order_by("-created_at", "-id").first())


def _failing_output(validation: Validation) -> str:
    """What the tests said on the parent: the run of the commit's test files where there was one of its
    own, else the suite's (which ran them)."""
    before = TestRunRecord.objects.filter(validation=validation, side="before").order_by("index")
    run = before.filter(scope="selected").first() or before.filter(scope="suite").first()
    return run.output if run else ""


def text_problems(text: str, *, cut_off: bool) -> tuple[list[dict], dict]:
    """(problems, measures) of a model's issue text: cut off at the token limit, or degenerate."""
    found = degeneration(text)
    problems = [{"code": "cut_off", "why": "The model stopped at its token limit: the text is cut off."}] \
        if cut_off else []
    if found.degenerate:
        problems.append({"code": "degenerate", "why": f"The text repeats itself: {found.why}."})
    return problems, asdict(found)


def _version_add(*, task: Task, text: str, source_patch: str, fail_to_pass: list[str], **fields) -> IssueVersion:
    leak = leak_check(text, source_patch=source_patch, fail_to_pass=fail_to_pass)
    details = {key: value for key, value in asdict(leak).items() if key != "score"}
    call = fields.get("model_call")
    if fields.get("author") == IssueVersion.Author.MODEL:
        fields["problems"], fields["measures"] = text_problems(text, cut_off=bool(call and call.finish_reason ==
                                                                                  "length"))
    for _ in range(3):  # two writers at once: the loser takes the next number
        number = (IssueVersion.objects.filter(task=task).aggregate(n=Max("number"))["n"] or 0) + 1
        try:
            with transaction.atomic():
                return IssueVersion.objects.create(task=task, number=number, text=text, leak_score=leak.score,
                                                   leak=details, **fields)
        except IntegrityError:
            continue
    raise RuntimeError("could not number a new issue version")


def _source_patch(task: Task) -> str:
    commit, repository = task.commit, task.repository
    return commit_patches(repository.mirror_dir, commit.sha, commit.parent_sha,
                          repository.test_file_rules()).source_patch


def issue_prompt(task: Task, validation: Validation, source_patch: Optional[str] = None):
    """(the prompt, its variables) the issue writer gets for this task."""
    return prompt_load("issue_writer"), issue_prompt_variables(
        commit_message=task.commit.message,
        source_patch=_source_patch(task) if source_patch is None else source_patch,
        failing_output=_failing_output(validation))


def task_backtranslate(*, task: Task, regenerate: bool = False, progress=None) -> tuple[str, str, str]:
    """Write (or find already written) the task's issue. Returns (outcome, detail, model): outcome
    is written, cached or skipped; a model that fails raises ModelError and stores nothing. `progress`
    (a job's) counts its one call, and raises JobCancelled after it when a cancel was asked: no issue
    is written then."""
    model = role_settings("issue_writer").model_name
    if task.state not in VALID_OR_LATER:
        return "skipped", f"the task is {task.state}: issues are written for valid tasks", model
    validation = valid_validation(task)
    if validation is None:
        return "skipped", "the task has no valid validation to describe", model
    source_patch = _source_patch(task)
    prompt, variables = issue_prompt(task, validation, source_patch)
    if progress is not None:
        progress.report(0, 1)
    call, cached = model_call(role="issue_writer", prompt=prompt, variables=variables, task=task,
                              regenerate=regenerate, max_tokens=ISSUE_WRITER_TOKENS)
    if progress is not None:
        progress.report(1)
    if cached and IssueVersion.objects.filter(task=task, model_call=call).exists():
        return "cached", "", call.model
    text = issue_text(call.answer)
    if not text:
        return "skipped", "the model's answer held no issue text", call.model
    version = _version_add(task=task, text=text, source_patch=source_patch, fail_to_pass=validation.fail_to_pass,
                           author=IssueVersion.Author.MODEL, model_call=call)
    _issue_changed(task, None, statement_changed=task_current_issue(task=task) == version)
    return "written", "", call.model


def issue_admit(*, task: Task, user) -> IssueVersion:
    """A curator lets the task's current issue into the review queue despite its problems."""
    issue = task_current_issue(task=task)
    if issue is None or not issue.problems:
        raise ValueError("its issue has no problem that keeps it out of the review queue")
    IssueVersion.objects.filter(id=issue.id, admitted_at__isnull=True).update(admitted_by=user,
                                                                             admitted_at=timezone.now())
    task_summary_refresh(task.id)
    return IssueVersion.objects.get(id=issue.id)


class IssueEditConflict(Exception):
    """Someone saved a version after the one this edit started from."""

    def __init__(self, latest: IssueVersion):
        super().__init__(f"version {latest.number} was saved meanwhile")
        self.latest = latest


def issue_version_edit(*, task: Task, text: str, user, based_on: int) -> IssueVersion:
    """A person's edit, as a new version that stays the problem statement. `based_on` is the number of
    the newest version when the editor started (0 for none): a save over a newer one is refused,
    never silently overwritten."""
    text = text.replace("\r\n", "\n").strip()
    if not text:
        raise ValueError("the issue text is empty")
    with transaction.atomic():
        Task.objects.select_for_update().filter(id=task.id).first()  # one save at a time per task
        latest = IssueVersion.objects.filter(task=task).order_by("-number").first()
        if latest is not None and latest.number != based_on:
            raise IssueEditConflict(latest)
        validation = valid_validation(task)
        version = _version_add(task=task, text=text, source_patch=_source_patch(task),
                               fail_to_pass=validation.fail_to_pass if validation else [],
                               author=IssueVersion.Author.PERSON, edited_by=user)
        TaskChange.objects.create(
            task=task, kind=TaskChange.Kind.ISSUE_EDITED, actor=user,
            before={"version": latest.number, "text": latest.text} if latest else {},
            after={"version": version.number, "text": version.text})
        _issue_changed(task, user, statement_changed=True)
    return version


def _issue_changed(task: Task, actor, *, statement_changed: bool) -> None:
    """An issue brings a valid task to review. When the problem statement changed (a person's edit, or
    a model's version while no person edited), reviews of the old one no longer count and an accepted
    task goes back to review."""
    if statement_changed:
        task_changed_back_to_review(task=task, actor=actor, why="issue changed")
    task_review_open(task_id=task.id, actor=actor)
    task_summary_refresh(task.id)
