"""API tokens: made (the secret shown once), checked, revoked. A token reads `cg_<prefix>_<secret>`;
the prefix finds its row, the SHA-256 of the whole token must match the one kept."""

import hashlib
import hmac
import secrets
from typing import Optional

from django.db import transaction
from django.utils import timezone

from .models import ApiToken

TOKEN_START = "cg_"
NAME_CHARS = 100
LAST_USED_EVERY_SECONDS = 60  # `last_used_at` is written at most this often per token


class TokenRefused(Exception):
    """What was asked cannot be done; the message says why."""


def _digest(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


def api_token_create(*, user, name: str) -> tuple[ApiToken, str]:
    """A new token for `user`; the secret, returned here, is never kept nor shown again."""
    name = name.strip()
    if not name:
        raise TokenRefused("Name the token after what uses it (a script, a notebook).")
    if len(name) > NAME_CHARS:
        raise TokenRefused(f"A token's name is at most {NAME_CHARS} characters.")
    prefix = secrets.token_hex(6)
    plain = f"{TOKEN_START}{prefix}_{secrets.token_urlsafe(32)}"
    return ApiToken.objects.create(user=user, name=name, prefix=prefix, digest=_digest(plain)), plain


def api_token_revoke(*, token: ApiToken) -> None:
    """Refused from now on; kept, so the account page shows when it was revoked."""
    with transaction.atomic():
        ApiToken.objects.filter(pk=token.pk, revoked_at__isnull=True).update(revoked_at=timezone.now())
    token.refresh_from_db()


def api_token_user(plain: str) -> Optional[tuple[object, ApiToken]]:
    """The user and token a presented token stands for; None if it is unknown, wrong or revoked."""
    if not plain.startswith(TOKEN_START):
        return None
    prefix, _, secret = plain[len(TOKEN_START):].partition("_")
    if not secret:
        return None
    token = ApiToken.objects.select_related("user").filter(prefix=prefix).first()
    if token is None or not hmac.compare_digest(token.digest, _digest(plain)):
        return None
    if token.revoked_at is not None or not token.user.is_active:
        return None
    now = timezone.now()
    if token.last_used_at is None or (now - token.last_used_at).total_seconds() > LAST_USED_EVERY_SECONDS:
        ApiToken.objects.filter(pk=token.pk).update(last_used_at=now)
    return token.user, token
