"""Pages of tasks and their validations. Reads go through selectors, writes through services.

Every view checks permissions itself: a task of a repository the user may not see is a 404,
and starting a validation without the right to mine is a 403.
"""

from django.conf import settings
from django.contrib import messages
from django.core.paginator import Paginator
from django.shortcuts import get_object_or_404, redirect
from django.utils.http import urlencode
from django.views.decorators.http import require_POST

from apps.accounts.roles import user_can_mine, user_can_review
from apps.llm.models import LanguageJob
from apps.pages import diff_html, page_render, redirect_back, require_miner
from apps.repositories.selectors import repositories_visible
from apps.tasks.language_jobs import language_job_start

from .. import selectors, services
from ..backtranslation import IssueEditConflict, issue_version_edit
from ..generation import generation_source
from ..history import task_history, task_reviews
from ..models import Task, current_issue
from ..states import VALID_OR_LATER, VALIDATABLE_STATES
from .common import bulk_actions_recent, saved_views_for, task_filter_form, visible_task

TASKS_PER_PAGE = 50


def environment_validations_panel(request, environment) -> dict:
    """The validations that used an environment, on its page (registered with environments:
    ENVIRONMENT_PAGE)."""
    return {"validations": selectors.validations_of_environment(environment=environment, user=request.user)}


# --- the task list ---------------------------------------------------------------------------


def task_list(request, pk: int = None):
    """Every visible task, or one repository's, with the list's filters, sort and saved views."""
    query = request.GET.copy()
    if pk is not None:
        query["repository"] = str(get_object_or_404(repositories_visible(user=request.user), pk=pk).pk)
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
    return page_render(request, "tasks/task_list.html", context, partial="results")


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
        "can_validate": task.state in VALIDATABLE_STATES and not task.imported,
    }


def _issue_context(request, task: Task) -> dict:
    rows = selectors.task_issue_versions(task=task)
    return {
        "task": task,
        "issue": current_issue([row.version for row in rows]),
        "issue_versions": [(row.version, diff_html(row.diff) if row.diff else "") for row in rows],
        "issue_job": selectors.task_language_job(task=task, kind=LanguageJob.Kind.BACKTRANSLATE),
        "model_calls": selectors.task_model_calls(task=task),
        "can_write_issue": user_can_mine(request.user) and task.state in VALID_OR_LATER,
        "leak_threshold": settings.COMMITGYM_LEAK_THRESHOLD,
    }


def _generated_context(request, task: Task) -> dict:
    return {
        "generated_tests": selectors.task_generated_tests(task=task),
        "generation_job": selectors.task_language_job(task=task, kind=LanguageJob.Kind.GENERATE_TESTS),
        "can_generate": user_can_mine(request.user) and generation_source(task) is not None,
    }


def task_detail(request, instance_id: str):
    task = visible_task(request, instance_id)
    context = {
        **_validation_context(request, task),
        **_issue_context(request, task),
        **_generated_context(request, task),
        "repository": task.repository,
        "history": task_history(task),
        "reviews": task_reviews(task),
        "imported": selectors.task_imported_instance(task=task),
        "candidate_count": task.candidates.count(),
    }
    return page_render(request, "tasks/task_detail.html", context)


def task_issue_state(request, instance_id: str):
    """The issue section; htmx polls it while the issue writer works."""
    task = visible_task(request, instance_id)
    if not request.htmx:
        return redirect("tasks:detail", instance_id=task.instance_id)
    return page_render(request, "tasks/task_detail.html", _issue_context(request, task), partial="issue")


@require_POST
def task_generate_tests(request, instance_id: str):
    task = visible_task(request, instance_id)
    require_miner(request)
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
    task = visible_task(request, instance_id)
    require_miner(request)
    if task.state not in VALID_OR_LATER:
        messages.info(request, f"{task.instance_id} is {task.get_state_display().lower()}: issues are written "
                               f"for valid tasks.")
    else:
        language_job_start(task=task, kind=LanguageJob.Kind.BACKTRANSLATE, user=request.user,
                           regenerate=request.POST.get("regenerate") == "1")
        messages.success(request, f"The issue writer is writing the issue of {task.instance_id}.")
    return redirect("tasks:detail", instance_id=task.instance_id)


def task_validation_state(request, instance_id: str):
    """The latest validation's section; htmx polls it while the validation runs."""
    task = visible_task(request, instance_id)
    if not request.htmx:
        return redirect("tasks:detail", instance_id=task.instance_id)
    context = _validation_context(request, task)
    response = page_render(request, "tasks/task_detail.html", context, partial="validation")
    validation = context["validation"]
    if validation is None or not validation.is_active:
        # The task's state, its history and the earlier validations changed too.
        response["HX-Refresh"] = "true"
    return response


@require_POST
def task_validate(request, instance_id: str):
    task = visible_task(request, instance_id)
    require_miner(request)
    if task.imported:
        messages.info(request, f"{task.instance_id} is an imported instance: its oracle is the one imported, "
                               f"and it is not validated here.")
        return redirect("tasks:detail", instance_id=task.instance_id)
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
    task = visible_task(request, instance_id)
    require_miner(request)
    versions = [row.version for row in selectors.task_issue_versions(task=task)]
    current = current_issue(versions)
    context = {"task": task, "repository": task.repository, "current": current, "conflict": None,
               "next": request.POST.get("next") or request.GET.get("next", ""),
               "text": current.text if current else "", "based_on": max((v.number for v in versions), default=0)}
    if request.method != "POST":
        return page_render(request, "tasks/issue_edit.html", context)
    context["text"] = request.POST.get("text", "")
    try:
        based_on = int(request.POST.get("based_on", ""))
    except ValueError:
        based_on = -1
    try:
        version = issue_version_edit(task=task, text=context["text"], user=request.user, based_on=based_on)
    except IssueEditConflict as conflict:
        context.update(conflict=conflict.latest, based_on=conflict.latest.number)
        return page_render(request, "tasks/issue_edit.html", context, status=409)
    except ValueError as error:
        context["error"] = str(error)
        return page_render(request, "tasks/issue_edit.html", context, status=400)
    messages.success(request, f"Saved as version {version.number} of the issue.")
    return redirect_back(request, redirect("tasks:detail", instance_id=task.instance_id))
