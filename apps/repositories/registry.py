"""What higher apps register with repositories at their `ready()` (apps.extension_points): what a
repository's creation brings, what becomes of commits mining keeps or drops, what a repository's
deletion takes with it, and panels of the repository's page."""

from apps.extension_points import ExtensionPoint

# `(repository)`: after mining (or a change of filters) kept commits, each kept commit without a
# task gets one.
COMMITS_KEPT = ExtensionPoint("commits kept")
# `(commit_ids)`: commits now dropped lose what was made of them and not started yet.
COMMITS_DROPPED = ExtensionPoint("commits dropped")
# `(repository)`: a repository was created, whichever way (registration, an import, the admin).
REPOSITORY_CREATED = ExtensionPoint("repository created")
# `(repository)`: called in the deletion's transaction, before the repository's rows go.
REPOSITORY_DELETING = ExtensionPoint("repository deleting")
# `(request, repository) -> dict`: more of the repository page's context.
REPOSITORY_PAGE = ExtensionPoint("repository page")
