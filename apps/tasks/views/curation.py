"""Pages of curation: the review page, the queue, bulk actions, saved views and the dashboard.

Every view checks permissions itself: reading needs only a login and a visible repository;
deciding (accept, reject, reopen, drop a test, bulk actions) needs a curator or an admin.
"""

from django.conf import settings
from django.contrib import messages
from django.core.cache import cache
from django.db import IntegrityError
from django.http import Http404, QueryDict
from django.shortcuts import get_object_or_404, redirect
from django.urls import reverse
from django.views.decorators.http import require_POST

from apps.accounts.roles import user_can_review
from apps.pages import page_render, require_reviewer
from apps.repositories.selectors import repositories_visible
from worker.engine.git.patches import commit_patches
from worker.engine.git.repo import GitError

from .. import review, selectors
from ..backtranslation import issue_admit
from ..bulk import (
    FROM_STATES,
    STARTS_JOBS,
    UNDO_FROM,
    UNDOABLE,
    bulk_action_mine,
    bulk_action_start,
    bulk_action_state,
    bulk_action_targets,
    bulk_action_undo,
    bulk_started_jobs,
    bulk_targets_digest,
    repository_action_start,
    repository_actions,
)
from ..dashboard import dashboard_figures
from ..diffs import patch_files
from ..forms import ReviewScoresForm
from ..history import task_history
from ..registry import TASK_REVIEW_PAGE
from ..models import (
    BulkAction,
    CurationSettings,
    Review,
    SavedView,
    Task,
    Validation,
    current_issue,
)
from ..review import active_reject_reasons
from ..states import reviews_merged
from .common import task_filter_form, task_filters_described, visible_task

CONTEXT_LINES = {"3": 3, "25": 25, "all": 1_000_000}


def _posted(request, name: str, limit: int = 10_000) -> str:
    """A text field of the POST as PostgreSQL stores it (no NUL), at most `limit` characters."""
    return request.POST.get(name, "").replace("\x00", "")[:limit]


# --- the review page --------------------------------------------------------------------------


def _gold_patch(task: Task, context: str, split: bool) -> dict:
    """The commit's patch for reading, rendered once an hour at most: a commit never changes."""
    key = f"gold:{task.repository_id}:{task.instance_id if task.imported else task.commit.sha}:{context}:{int(split)}"
    rendered = cache.get(key)
    if rendered is None:
        rendered = _gold_patch_render(task, context, split)
        if "problem" not in rendered:
            cache.set(key, rendered, 3600)
    return rendered


def _gold_patch_render(task: Task, context: str, split: bool) -> dict:
    repository, commit = task.repository, task.commit
    if task.imported:  # the instance file's patches, with the context they came with
        instance = task.imported_instance
        source, tests = patch_files(instance.patch, split=split), patch_files(instance.test_patch, split=split)
        return {"source": source, "tests": tests} if source is not None and tests is not None else {
            "problem": "The imported patch could not be parsed."}
    if not repository.mirror_dir.is_dir():
        return {"problem": "The repository's mirror is not on disk (the next mining job makes it)."}
    try:
        patches = commit_patches(repository.mirror_dir, commit.sha, commit.parent_sha, repository.test_file_rules(),
                                 context_lines=CONTEXT_LINES[context])
    except (GitError, OSError):
        return {"problem": "git could not read this commit from the mirror."}
    source, tests = patch_files(patches.source_patch, split=split), patch_files(patches.test_patch, split=split)
    if source is None or tests is None:
        return {"problem": "The patch could not be parsed."}
    return {"source": source, "tests": tests}


def _oracle_validation(task: Task):
    """The validation whose tests the reviewer judges: the latest finished one, with its runs."""
    return (Validation.objects.filter(task=task, job__state=Validation.State.SUCCEEDED).order_by("-created_at", "-id")
            .select_related("environment").defer("environment__lock").prefetch_related("runs").first())


def _review_context(request, task: Task, form=None, curation: CurationSettings | None = None) -> dict:
    curation = curation or CurationSettings.current()
    validation = _oracle_validation(task)
    versions = list(task.issue_versions.select_related("edited_by").order_by("number"))
    reviews = list(Review.objects.filter(task=task, current=True).select_related("reviewer").order_by("created_at"))
    mine = next((r for r in reviews if r.reviewer_id == request.user.id), None)
    diff_mode = "split" if request.GET.get("diff") == "split" else "unified"
    context_lines = request.GET.get("lines") if request.GET.get("lines") in CONTEXT_LINES else "3"
    in_queue = request.GET.get("queue") == "1"
    return {
        "task": task, "repository": task.repository, "commit": task.commit,
        "issue": current_issue(versions), "based_on": max((v.number for v in versions), default=0),
        "validation": validation,
        "matrix": selectors.validation_test_matrix(validation=validation) if validation else None,
        "generated_tests": (task.generated_tests.filter(validation=validation, state="kept").order_by("index")
                            if validation and validation.generated else []),
        "gold": _gold_patch(task, context_lines, diff_mode == "split"),
        "diff_mode": diff_mode, "context_lines": context_lines,
        "context_choices": [("3", "3 lines"), ("25", "25 lines"), ("all", "whole files")],
        "reviews": reviews, "my_review": mine, "merged": reviews_merged(reviews),
        "curation": curation,
        "form": form or ReviewScoresForm(initial=_form_initial(mine)),
        "history": task_history(task),
        "can_review": user_can_review(request.user),
        "leak_threshold": settings.COMMITGYM_LEAK_THRESHOLD,
        "in_queue": in_queue,
        "previous": _previous_reviewed(request.user, task),
        **TASK_REVIEW_PAGE.context(task),
    }


def _form_initial(mine: Review | None) -> dict:
    if mine is None:
        return {}
    return {"underspecified": mine.underspecified, "false_negative": mine.false_negative,
            "difficulty": mine.difficulty, "other_problems": mine.other_problems,
            "reject_reason": mine.reject_reason, "note": mine.note}


def _previous_reviewed(user, task: Task):
    """The task this person reviewed last before this one (k in the queue)."""
    return (selectors.tasks_visible(user=user).filter(reviews__reviewer=user).exclude(id=task.id)
            .order_by("-reviews__created_at").only("instance_id").first())


def review_page(request, instance_id: str):
    task = visible_task(request, instance_id)
    curation = CurationSettings.current()
    # Only the queue holds tasks: reading one from the list, or going back with k, takes nothing.
    held_by_other = review.task_hold_take(task=task, user=request.user, curation=curation) \
        if request.GET.get("queue") == "1" else review.task_hold_other(task=task, user=request.user)
    context = _review_context(request, task, curation=curation)
    context["held_by_other"] = held_by_other
    response = page_render(request, "tasks/review.html", context, partial="review")
    if request.htmx:
        response["HX-Push-Url"] = request.get_full_path()
    return response


def _back_to_review(request, task: Task):
    query = "?queue=1" if request.POST.get("queue") == "1" else ""
    return redirect(reverse("tasks:review", args=[task.instance_id]) + query)


@require_POST
def review_submit(request, instance_id: str):
    """Accept or reject with the rubric (settling a disagreement when asked)."""
    task = visible_task(request, instance_id)
    require_reviewer(request)
    form = ReviewScoresForm(request.POST)
    if not form.is_valid():
        return _review_refused(request, task, form, "Some answers are not among the choices: pick them again.")
    data = form.cleaned_data
    try:
        outcome = review.task_review_submit(task=task, user=request.user, form=review.ReviewForm(**data))
    except review.ReviewRefused as refused:
        return _review_refused(request, task, form, str(refused))
    _outcome_message(request, task, outcome)
    if request.POST.get("queue") == "1":
        return redirect(reverse("tasks:queue") + f"?skip={task.id}")
    return redirect("tasks:review", instance_id=task.instance_id)


def _review_refused(request, task: Task, form, message: str):
    """The page again with what the person entered kept, and why it was refused."""
    context = _review_context(request, task, form=form)
    context["refusal"] = message
    context["in_queue"] = request.POST.get("queue") == "1"
    return page_render(request, "tasks/review.html", context, partial="review", status=400)


def _outcome_message(request, task: Task, outcome: str) -> None:
    curation = CurationSettings.current()
    text = {
        "accepted": f"{task.instance_id} accepted.",
        "rejected": f"{task.instance_id} rejected.",
        "pending": f"Your review of {task.instance_id} is saved; it needs {curation.required_reviews} reviews "
                   f"before it is accepted.",
        "failing": f"Your review of {task.instance_id} is saved, but the merged scores keep it out: a curator "
                   f"settles it.",
    }[outcome]
    messages.success(request, text)


@require_POST
def task_reopen(request, instance_id: str):
    task = visible_task(request, instance_id)
    require_reviewer(request)
    try:
        review.task_reopen(task=task, user=request.user)
        messages.success(request, f"{task.instance_id} is back in review; its reviews no longer count.")
    except review.ReviewRefused as refused:
        messages.error(request, str(refused))
    return _back_to_review(request, task)


@require_POST
def test_drop(request, instance_id: str):
    """Fix the oracle: take a wrong test out, or put a dropped one back, and re-validate."""
    task = visible_task(request, instance_id)
    require_reviewer(request)
    test = _posted(request, "test")
    try:
        if request.POST.get("restore") == "1":
            review.task_test_restore(task=task, user=request.user, test=test)
            messages.success(request, f"{test} is back; {task.instance_id} is being validated again.")
        else:
            review.task_test_drop(task=task, user=request.user, test=test, note=_posted(request, "note"))
            messages.success(request, f"{test} dropped; {task.instance_id} is being validated again without it.")
    except review.ReviewRefused as refused:
        messages.error(request, str(refused))
    return _back_to_review(request, task)


# --- the queue --------------------------------------------------------------------------------


def _queue_tasks(request):
    tasks = selectors.tasks_visible(user=request.user)
    if request.GET.get("repository", "").isdecimal():
        tasks = tasks.filter(repository_id=int(request.GET["repository"]))
    return tasks


def queue_next(request):
    """The reviewer's next task, held for them; `skip` leaves the current one (its hold released)."""
    require_reviewer(request, "The review queue hands curators and admins the next task to accept or reject. "
                              "Every task and its review page can still be read from the task list.")
    skip = int(request.GET["skip"]) if request.GET.get("skip", "").isdecimal() else None
    if skip:
        review.task_hold_release(task_id=skip, user=request.user)
    task = review.review_queue_next(user=request.user, tasks=_queue_tasks(request), skip=skip)
    if task is None:
        waiting = _queue_tasks(request).filter(state=Task.State.NEEDS_REVIEW)
        context = {"waiting": waiting.count(),
                   "held": waiting.filter(hold__isnull=False).exclude(hold__user=request.user).count(),
                   "reviewed": waiting.filter(reviews__reviewer=request.user, reviews__current=True).count(),
                   "held_back": waiting.filter(issue_held_back=True).count()}
        return page_render(request, "tasks/queue_empty.html", context)
    return redirect(reverse("tasks:review", args=[task.instance_id]) + "?queue=1")


# --- saved views ------------------------------------------------------------------------------


@require_POST
def saved_view_create(request):
    name = _posted(request, "name", 100).strip()
    query = _posted(request, "query", 2000)
    if not name:
        messages.error(request, "Give the view a name.")
    else:
        try:
            SavedView.objects.update_or_create(user=request.user, name=name,
                                               defaults={"query": query, "shared": request.POST.get("shared") == "1"})
            described = " · ".join(f"{label} {value}" for label, value in task_filters_described(query, user=request.user))
            messages.success(request, f"View “{name}” saved: {described or 'every task, no filter'}.")
        except IntegrityError:
            messages.error(request, f"A view named “{name}” exists already.")
    return redirect(reverse("tasks:all") + (f"?{query}" if query else ""))


@require_POST
def saved_view_delete(request, pk: int):
    view = get_object_or_404(SavedView, pk=pk, user=request.user)
    view.delete()
    messages.success(request, f"View “{view.name}” deleted.")
    return redirect("tasks:all")


# --- bulk actions -----------------------------------------------------------------------------


def _filters_of(query: str, user) -> dict:
    filters = task_filter_form(QueryDict(query), user=user).filters()
    filters.pop("sort", None)
    return filters


def repository_actions_panel(request, repository) -> dict:
    """The repository page's actions on its tasks (registered with repositories: REPOSITORY_PAGE)."""
    return {"task_actions": repository_actions(user=request.user, repository=repository)
            if user_can_review(request.user) else []}


@require_POST
def repository_act(request, pk: int):
    """One of the repository page's actions on its tasks, as a bulk action (its page follows its jobs)."""
    repository = get_object_or_404(repositories_visible(user=request.user), pk=pk)
    require_reviewer(request)
    try:
        bulk = repository_action_start(user=request.user, repository=repository, action=request.POST.get("action", ""),
                                       expected=int(request.POST.get("expected") or -1))
    except (review.ReviewRefused, ValueError) as refused:
        messages.error(request, f"Nothing started: {refused}")
        return redirect("repositories:detail", pk=repository.pk)
    return redirect("tasks:bulk", pk=bulk.pk)


@require_POST
def bulk_confirm(request):
    """Say how many tasks the action will touch, and which filters pick them; a second POST with
    that count and those tasks' fingerprint runs it."""
    require_reviewer(request)
    action = request.POST.get("action", "")
    query = _posted(request, "query", 2000)
    if action not in BulkAction.Action.values:
        messages.error(request, "Pick an action.")
        return redirect(reverse("tasks:all") + "?" + query)
    filters = _filters_of(query, request.user)
    if request.POST.get("expected"):
        try:
            bulk = bulk_action_start(user=request.user, action=action, filters=filters, query=query,
                                     expected=int(request.POST["expected"]),
                                     targets_digest=_posted(request, "targets", 64),
                                     reject_reason=_posted(request, "reject_reason", 64),
                                     note=_posted(request, "note"))
        except review.ReviewRefused as refused:
            messages.error(request, str(refused))
        except ValueError:
            messages.error(request, "The confirmation lost its count of tasks: check the list and confirm again.")
        else:
            messages.success(request, f"Bulk {action} of {bulk.task_count:,} tasks queued.")
            return redirect("tasks:bulk", pk=bulk.pk)
    targets = bulk_action_targets(user=request.user, action=action, filters=filters)
    matching = selectors.tasks_filtered(user=request.user, **filters).count()
    shown = request.POST.get("shown", "")
    context = {"action": action, "query": query, "count": len(targets), "matching": matching,
               "left": matching - len(targets), "targets": bulk_targets_digest(targets),
               "filters_described": task_filters_described(query, user=request.user),
               "shown": int(shown) if shown.isdecimal() and int(shown) != matching else None,
               "from_states": FROM_STATES[action], "reasons": active_reject_reasons(),
               "reject_reason": _posted(request, "reject_reason", 64), "note": _posted(request, "note"),
               "undoable": action in UNDOABLE}
    return page_render(request, "tasks/bulk_confirm.html", context)


def bulk_detail(request, pk: int):
    bulk = get_object_or_404(BulkAction.objects.select_related("user", "job", "undo_job"), pk=pk)
    if not bulk_action_mine(bulk=bulk, user=request.user):
        raise Http404("No such bulk action.")
    started = bulk_started_jobs(bulk)
    state = bulk_action_state(bulk, started)
    context = {"bulk": bulk, "active": bulk.is_active or state == "running its jobs", "started": started, "state": state,
               "job_kind": STARTS_JOBS.get(bulk.action, ""),
               "undoable": bulk.action in UNDOABLE and bulk.state in UNDO_FROM,
               "can_review": user_can_review(request.user)}
    return page_render(request, "tasks/bulk_detail.html", context, partial="status")


@require_POST
def bulk_undo(request, pk: int):
    bulk = get_object_or_404(BulkAction, pk=pk)
    if not bulk_action_mine(bulk=bulk, user=request.user):
        raise Http404("No such bulk action.")
    require_reviewer(request)
    try:
        bulk_action_undo(bulk=bulk, user=request.user)
        messages.success(request, f"Undoing bulk action {bulk.pk}.")
    except review.ReviewRefused as refused:
        messages.error(request, str(refused))
    return redirect("tasks:bulk", pk=bulk.pk)


# --- the dashboard ----------------------------------------------------------------------------


def dashboard(request):
    return page_render(request, "tasks/dashboard.html", dashboard_figures(user=request.user))


@require_POST
def issue_admit_view(request, instance_id: str):
    """Let a task whose issue was cut off or is degenerate into the review queue."""
    require_reviewer(request)
    task = visible_task(request, instance_id)
    try:
        issue = issue_admit(task=task, user=request.user)
    except ValueError as refused:
        messages.error(request, f"Nothing to let in: {refused}.")
    else:
        messages.success(request, f"Version {issue.number} of the issue is in the review queue now, as it is.")
    return redirect("tasks:review", instance_id=task.instance_id)
