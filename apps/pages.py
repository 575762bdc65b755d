"""What every app's pages share: a page or its htmx partial, role checks, going back where the
person came from, and a diff rendered for reading."""

from django.core.exceptions import PermissionDenied
from django.shortcuts import redirect, render
from django.utils.cache import patch_vary_headers
from django.utils.http import url_has_allowed_host_and_scheme
from django.utils.safestring import mark_safe

from apps.accounts.roles import BLINDED, user_can_mine, user_can_review


def page_render(request, template: str, context: dict, *, partial: str = "", status: int = 200):
    """The whole page, or only the named partial for an htmx request."""
    is_partial = partial and request.htmx and not request.htmx.history_restore_request
    response = render(request, f"{template}#{partial}" if is_partial else template, context, status=status)
    patch_vary_headers(response, ["HX-Request"])
    return response


def require_miner(request) -> None:
    """403 unless the person may register and mine repositories (and start jobs on their tasks)."""
    if not user_can_mine(request.user):
        raise PermissionDenied("Only curators and admins can change repositories.")


def require_reviewer(request, refusal: str = "Only curators and admins can accept, reject or change tasks.") -> None:
    """403 unless the person may decide tasks; the page says `refusal`."""
    if not user_can_review(request.user):
        raise PermissionDenied(refusal)


def require_unblinded(request) -> None:
    """403 for annotators on a page that shows a candidate's grade, a verifier's score or who made it:
    they label patches blind, and one click must not undo that."""
    require_reviewer(request, BLINDED)


def redirect_back(request, default):
    """To the page named by the form's `next`, if it is one of ours; else `default`."""
    target = request.POST.get("next", "")
    if url_has_allowed_host_and_scheme(target, allowed_hosts={request.get_host()}, require_https=request.is_secure()):
        return redirect(target)
    return default


def diff_html(text: str) -> str:
    """A unified diff highlighted for reading; Pygments escapes its text, so the result is safe to insert."""
    from pygments import highlight  # at call, as in tasks/diffs.py: a command's start does not pay for it
    from pygments.formatters import HtmlFormatter
    from pygments.lexers import DiffLexer

    return mark_safe(highlight(text, DiffLexer(), HtmlFormatter(cssclass="highlight", nowrap=False)))
