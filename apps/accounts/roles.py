"""The three roles are Django groups."""

CURATOR = "curator"
ANNOTATOR = "annotator"
ADMIN = "admin"
ROLES = (CURATOR, ANNOTATOR, ADMIN)


def user_roles(user) -> set[str]:
    if not user.is_authenticated:
        return set()
    names = {group.name for group in user.groups.all()}
    if user.is_superuser:
        names.add(ADMIN)
    return names & set(ROLES)


def user_can_mine(user) -> bool:
    """Curators and admins register, mine and configure repositories; annotators read."""
    return bool(user_roles(user) & {CURATOR, ADMIN})
