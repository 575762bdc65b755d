"""Pages of tasks and their validations. Reads go through selectors, writes through services.

Every view checks permissions itself: a task of a repository the user may not see is a 404,
and starting a validation without the right to mine is a 403.
"""

from django.conf import settings
from django.contrib import messages
from django.core.paginator import Paginator
from django.http import Http404
from django.utils.http import urlencode
from django.shortcuts import redirect
from django.views.decorators.http import require_POST

from apps.accounts.roles import user_can_mine
from apps.repositories.views import _diff_html, _redirect_back, _render, _require_miner, _visible_repository

from . import selectors, services
from .forms import TaskFilterForm, reviewers_choices
from .models import Task
from .review import user_can_review

TASKS_PER_PAGE = 50


def _visible_task(request, instance_id: str) -> Task:
    try:
        return selectors.task_for_page(user=request.user, instance_id=instance_id)
    except Task.DoesNotExist:
        raise Http404("No such task.") from None


# --- the task list ---------------------------------------------------------------------------


def task_list(request, pk: int = None):
    """Every visible task, or one repository's, with the list's filters, sort and saved views."""
    from .curation_views import bulk_actions_recent, saved_views_for

    query = request.GET.copy()
    if pk is not None:
        query["repository"] = str(_visible_repository(request, pk).pk)
    repositories = selectors.repositories_named(user=request.user)
    counts = selectors.task_state_counts(user=request.user, **task_filter_form(query, user=request.user).filters())
    form = task_filter_form(query, user=request.user, state_counts=counts)
    filters = form.filters()
    repository = next((r for r in repositories if str(r.pk) == str(filters.get("repository", ""))), None)
    paginator = Paginator(selectors.tasks_filtered(user=request.user, **filters), TASKS_PER_PAGE)
    # The state counts hold the list's length already: no second count of the same rows.
    paginator.count = counts.get(filters["state"], 0) if filters.get("state") else sum(counts.values())
    page = paginator.get_page(request.GET.get("page"))
    page.object_list = selectors.tasks_page_rows(page.object_list)
    context = {
        "form": form,
        "filters": filters,
        "query": _list_query(query),
        "repository": repository,
        "show_repository": repository is None,
        "page": page,
        "saved_views": saved_views_for(request.user),
        "bulk_actions": bulk_actions_recent(request.user),
        "can_review": user_can_review(request.user),
        "leak_threshold": settings.COMMITGYM_LEAK_THRESHOLD,
    }
    return _render(request, "tasks/task_list.html", context, partial="results")


def task_filter_form(query, *, user, state_counts: dict | None = None) -> TaskFilterForm:
    """The list's filters read from a query (the list's address, a saved view's, a bulk action's)."""
    return TaskFilterForm(query, repositories=selectors.repositories_named(user=user), state_counts=state_counts or {},
                          reasons=selectors.task_reasons_used(), reviewers=reviewers_choices())


def _list_query(query) -> str:
    """The list's filters as a query string, without the page: what saved views and bulk actions keep."""
    return urlencode([(key, value) for key, value in sorted(query.items()) if value and key != "page"])


# --- the task page ---------------------------------------------------------------------------


def _validation_context(request, task: Task) -> dict:
    validations = selectors.task_validations(task=task)
    latest = validations[0] if validations else None
    return {
        "task": task,
        "validation": latest,
        "earlier_validations": validations[1:],
        "matrix": selectors.validation_test_matrix(validation=latest) if latest else None,
        "can_mine": user_can_mine(request.user),
        "can_validate": task.state in services.VALIDATABLE_STATES,
    }


def _issue_context(request, task: Task) -> dict:
    from apps.llm.models import LanguageJob

    from .backtranslation import current_issue

    rows = selectors.task_issue_versions(task=task)
    return {
        "task": task,
        "issue": current_issue([row.version for row in rows]),
        "issue_versions": [(row.version, _diff_html(row.diff) if row.diff else "") for row in rows],
        "issue_job": selectors.task_language_job(task=task, kind=LanguageJob.Kind.BACKTRANSLATE),
        "model_calls": selectors.task_model_calls(task=task),
        "can_write_issue": user_can_mine(request.user) and task.state in selectors.VALID_OR_LATER,
        "leak_threshold": settings.COMMITGYM_LEAK_THRESHOLD,
    }


def _generated_context(request, task: Task) -> dict:
    from apps.llm.models import LanguageJob

    from .generation import generation_source

    return {
        "generated_tests": selectors.task_generated_tests(task=task),
        "generation_job": selectors.task_language_job(task=task, kind=LanguageJob.Kind.GENERATE_TESTS),
        "can_generate": user_can_mine(request.user) and generation_source(task) is not None,
    }


def task_detail(request, instance_id: str):
    task = _visible_task(request, instance_id)
    context = {
        **_validation_context(request, task),
        **_issue_context(request, task),
        **_generated_context(request, task),
        "repository": task.repository,
        "state_changes": selectors.task_state_changes(task=task),
    }
    return _render(request, "tasks/task_detail.html", context)


def task_issue_state(request, instance_id: str):
    """The issue section; htmx polls it while the issue writer works."""
    task = _visible_task(request, instance_id)
    if not request.htmx:
        return redirect("tasks:detail", instance_id=task.instance_id)
    return _render(request, "tasks/task_detail.html", _issue_context(request, task), partial="issue")


@require_POST
def task_generate_tests(request, instance_id: str):
    from apps.llm.models import LanguageJob
    from apps.llm.services import language_job_start

    from .generation import generation_source

    task = _visible_task(request, instance_id)
    _require_miner(request)
    if generation_source(task) is None:
        messages.info(request, f"{task.instance_id}: tests are generated for tasks whose validation found no "
                               f"Fail-to-Pass test of their own, broke nothing and built an environment.")
    else:
        language_job_start(task=task, kind=LanguageJob.Kind.GENERATE_TESTS, user=request.user,
                           regenerate=request.POST.get("regenerate") == "1")
        messages.success(request, f"The test writer is writing tests for {task.instance_id}; they are checked "
                                  f"before and after the fix next.")
    return redirect("tasks:detail", instance_id=task.instance_id)


@require_POST
def task_backtranslate(request, instance_id: str):
    from apps.llm.models import LanguageJob
    from apps.llm.services import language_job_start

    task = _visible_task(request, instance_id)
    _require_miner(request)
    if task.state not in selectors.VALID_OR_LATER:
        messages.info(request, f"{task.instance_id} is {task.get_state_display().lower()}: issues are written "
                               f"for valid tasks.")
    else:
        language_job_start(task=task, kind=LanguageJob.Kind.BACKTRANSLATE, user=request.user,
                           regenerate=request.POST.get("regenerate") == "1")
        messages.success(request, f"The issue writer is writing the issue of {task.instance_id}.")
    return redirect("tasks:detail", instance_id=task.instance_id)


def task_validation_state(request, instance_id: str):
    """The latest validation's section; htmx polls it while the validation runs."""
    task = _visible_task(request, instance_id)
    if not request.htmx:
        return redirect("tasks:detail", instance_id=task.instance_id)
    context = _validation_context(request, task)
    response = _render(request, "tasks/task_detail.html", context, partial="validation")
    validation = context["validation"]
    if validation is None or not validation.is_active:
        # The task's state, its history and the earlier validations changed too.
        response["HX-Refresh"] = "true"
    return response


@require_POST
def task_validate(request, instance_id: str):
    task = _visible_task(request, instance_id)
    _require_miner(request)
    validation = services.task_validation_start(task=task, actor=request.user)
    if validation is None:
        task.refresh_from_db(fields=["state"])
        messages.info(request, f"{task.instance_id} is {task.get_state_display().lower()}: "
                               f"it cannot be validated now.")
    else:
        messages.success(request, f"Validation of {task.instance_id} queued.")
    return redirect("tasks:detail", instance_id=task.instance_id)


def task_issue_edit(request, instance_id: str):
    """Edit the issue into a new version. A save over a version someone saved meanwhile is refused
    (409) with theirs shown and this text kept in the form."""
    from .backtranslation import IssueEditConflict, current_issue, issue_version_edit

    task = _visible_task(request, instance_id)
    _require_miner(request)
    versions = [row.version for row in selectors.task_issue_versions(task=task)]
    current = current_issue(versions)
    context = {"task": task, "repository": task.repository, "current": current, "conflict": None,
               "next": request.POST.get("next") or request.GET.get("next", ""),
               "text": current.text if current else "", "based_on": max((v.number for v in versions), default=0)}
    if request.method != "POST":
        return _render(request, "tasks/issue_edit.html", context)
    context["text"] = request.POST.get("text", "")
    try:
        based_on = int(request.POST.get("based_on", ""))
    except ValueError:
        based_on = -1
    try:
        version = issue_version_edit(task=task, text=context["text"], user=request.user, based_on=based_on)
    except IssueEditConflict as conflict:
        context.update(conflict=conflict.latest, based_on=conflict.latest.number)
        return _render(request, "tasks/issue_edit.html", context, status=409)
    except ValueError as error:
        context["error"] = str(error)
        return _render(request, "tasks/issue_edit.html", context, status=400)
    messages.success(request, f"Saved as version {version.number} of the issue.")
    return _redirect_back(request, redirect("tasks:detail", instance_id=task.instance_id))
