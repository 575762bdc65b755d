"""Credentials at rest: encrypted with a key derived from SECRET_KEY."""

import base64
import hashlib

from cryptography.fernet import Fernet
from django.conf import settings


def _fernet() -> Fernet:
    digest = hashlib.sha256(("commitgym-secrets:" + settings.SECRET_KEY).encode()).digest()
    return Fernet(base64.urlsafe_b64encode(digest))


def secret_encrypt(value: str) -> str:
    return _fernet().encrypt(value.encode()).decode() if value else ""


def secret_decrypt(token: str) -> str:
    return _fernet().decrypt(token.encode()).decode() if token else ""
