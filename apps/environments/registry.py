"""What higher apps register with environments at their `ready()` (apps.extension_points): panels
of an environment's page."""

from apps.extension_points import ExtensionPoint

# `(request, environment) -> dict`: more of the environment page's context (the validations that used it).
ENVIRONMENT_PAGE = ExtensionPoint("environment page")
