from django.conf import settings
from django.db import models


class ApiToken(models.Model):
    """A person's key to the API. The secret is shown once, when made; only its SHA-256 is kept (a
    random 32-byte secret needs no slow hash), found by the prefix that starts every token."""

    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="api_tokens")
    name = models.CharField(max_length=100, help_text="What the person uses it for.")
    prefix = models.CharField(max_length=16, unique=True, help_text="The token's first part, shown to tell it apart.")
    digest = models.CharField(max_length=64, help_text="SHA-256 of the whole token, in hex.")
    created_at = models.DateTimeField(auto_now_add=True)
    last_used_at = models.DateTimeField(null=True, blank=True)
    revoked_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at", "-id"]

    def __str__(self):
        return f"{self.name} ({self.prefix}…)"

    @property
    def is_active(self) -> bool:
        return self.revoked_at is None
