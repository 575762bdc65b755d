"""What higher apps register with tasks at their `ready()` (apps.extension_points): panels of the
task's review page and of the curation dashboard."""

from apps.extension_points import ExtensionPoint

# `(task) -> dict`: more of the review page's context (a task's mutants, its verifier tests).
TASK_REVIEW_PAGE = ExtensionPoint("task review page")
# `(user=) -> dict`: more of the curation dashboard's figures (how often both verifiers are wrong).
DASHBOARD_FIGURES = ExtensionPoint("dashboard figures")
