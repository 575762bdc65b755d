from django import template

from apps.accounts.roles import user_can_review, user_roles
from worker.engine.git.repo import GitCredentials
from worker.engine.reasons import reason_sentence as _reason_sentence

register = template.Library()


@register.filter
def role_names(user) -> str:
    """The user's roles, comma-separated."""
    return ", ".join(sorted(user_roles(user)))


@register.filter
def can_review(user) -> bool:
    return user_can_review(user)


@register.filter
def redact(text) -> str:
    """Hide credentials in a URL or a message. Stored text is already clean; this is a second guard."""
    if not text:
        return ""
    return GitCredentials().redact(str(text))


@register.filter
def reason_sentence(code: str) -> str:
    return _reason_sentence(code) if code else ""
