"""The models page: which model each role uses, and a check that it answers. Keys are never shown."""

from urllib.parse import urlsplit

from django.conf import settings
from django.http import Http404
from django.views.decorators.http import require_POST

from apps.accounts.roles import user_can_mine
from apps.pages import page_render, require_miner
from worker.engine.llm.clients import ROLES, ModelSettings, settings_problem

from .calls import model_health


def _server(base_url: str) -> str:
    """The address without anything a user name or token could hide in."""
    try:
        parts = urlsplit(base_url)
        port = f":{parts.port}" if parts.port else ""
    except ValueError:
        return "(not a valid URL)"
    return f"{parts.scheme}://{parts.hostname}{port}{parts.path}" if parts.hostname else ""


def _role_rows() -> list[dict]:
    rows = []
    for role in ROLES:
        model = ModelSettings(**settings.COMMITGYM_MODELS[role])
        rows.append({"role": role, "backend": model.backend, "model": model.model_name,
                     "server": _server(model.base_url),
                     "has_key": bool(model.api_key), "problem": settings_problem(role, model)})
    return rows


def model_list(request):
    return page_render(request, "llm/model_list.html", {"roles": _role_rows(), "can_check": user_can_mine(request.user)})


@require_POST
def model_check(request, role: str):
    """Ask the role's model a one-word question; the row says whether and how fast it answered."""
    require_miner(request)
    rows = _role_rows()
    checked = next((row for row in rows if row["role"] == role), None)
    if checked is None:
        raise Http404("No such role.")
    checked["health"] = model_health(role)
    # htmx swaps the one row; without JavaScript the whole page comes back with it.
    context = {"roles": rows, "row": checked, "can_check": True}
    return page_render(request, "llm/model_list.html", context, partial="role_row")
