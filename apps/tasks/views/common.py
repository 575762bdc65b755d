"""What the pages of tasks and of curation share: the task a person may see, the task list's
filters, and the saved views and bulk actions shown beside the list."""

from django.db.models import Q
from django.http import Http404, QueryDict

from .. import selectors
from ..bulk import bulk_action_summary
from ..forms import TaskFilterForm, reviewers_choices
from ..models import BulkAction, SavedView, Task


def visible_task(request, instance_id: str) -> Task:
    try:
        return selectors.task_for_page(user=request.user, instance_id=instance_id)
    except Task.DoesNotExist:
        raise Http404("No such task.") from None


def task_filter_form(query, *, user, state_counts: dict | None = None) -> TaskFilterForm:
    """The list's filters read from a query (the list's address, a saved view's, a bulk action's)."""
    return TaskFilterForm(query, repositories=selectors.repositories_named(user=user), state_counts=state_counts or {},
                          reasons=selectors.task_reasons_used(), reviewers=reviewers_choices())


def task_filters_described(query: str, *, user) -> list[tuple[str, str]]:
    """The filters a list query sets, as (label, value) a person reads: what a bulk action or a saved
    view will apply to. The sort is left out: it picks no task."""
    form = task_filter_form(QueryDict(query), user=user)
    described = []
    for name, value in form.filters().items():
        field = form.fields[name]
        if name == "sort":
            continue
        if name == "state":
            shown = Task.State(value).label
        elif getattr(field, "choices", None):
            shown = str(dict((str(key), label) for key, label in field.choices).get(str(value), value))
        else:
            shown = str(value)
        described.append((str(field.label or name.replace("_", " ").capitalize()), shown))
    return described


def saved_view_task_ids(*, view: SavedView, user) -> list[int]:
    """The tasks a saved view matches now, as `user` sees them."""
    filters = task_filter_form(QueryDict(view.query), user=user).filters()
    return list(selectors.tasks_filtered(user=user, **filters).values_list("id", flat=True))


def saved_views_for(user):
    return SavedView.objects.filter(Q(user=user) | Q(shared=True)).select_related("user").order_by("name", "id")


def bulk_actions_recent(user, limit: int = 5) -> list[BulkAction]:
    """This person's latest bulk actions, each with its summary (`bulk_action_summary`)."""
    recent = list(BulkAction.objects.filter(user=user).select_related("job", "undo_job").defer("task_ids")
                  .order_by("-created_at", "-id")[:limit])
    for bulk in recent:
        bulk.summary = bulk_action_summary(bulk)
    return recent
