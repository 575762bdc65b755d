import re

from django import template

from apps.accounts.roles import user_roles
from worker.engine.reasons import reason_sentence as _reason_sentence

register = template.Library()

_URL_PASSWORD = re.compile(r"(://[^/\s:@]*:)[^@\s/]+@")  # scheme://user:secret@
_HTTP_TOKEN = re.compile(r"(https?://)[^/\s:@]+@", re.IGNORECASE)  # https://secret@


@register.filter
def role_names(user) -> str:
    """The user's roles, comma-separated."""
    return ", ".join(sorted(user_roles(user)))


@register.filter
def redact(text) -> str:
    """Hide credentials in a URL or a message. Stored text is already clean; this is a second guard."""
    if not text:
        return ""
    return _HTTP_TOKEN.sub(r"\1***@", _URL_PASSWORD.sub(r"\1***@", str(text)))


@register.filter
def reason_sentence(code: str) -> str:
    return _reason_sentence(code) if code else ""
