"""The three roles are Django groups."""

CURATOR = "curator"
ANNOTATOR = "annotator"
ADMIN = "admin"
ROLES = (CURATOR, ANNOTATOR, ADMIN)

BLINDED = ("Candidates' grades and the verifiers' scores are for curators and admins: annotators label patches "
           "without them.")


def user_roles(user) -> set[str]:
    """The user's roles, read once per request (the user object keeps them)."""
    if not user.is_authenticated:
        return set()
    if not hasattr(user, "_commitgym_roles"):
        names = {group.name for group in user.groups.all()}
        if user.is_superuser:
            names.add(ADMIN)
        user._commitgym_roles = names & set(ROLES)
    return user._commitgym_roles


def user_can_mine(user) -> bool:
    """Curators and admins register, mine and configure repositories; annotators read."""
    return bool(user_roles(user) & {CURATOR, ADMIN})


def user_can_review(user) -> bool:
    """Curators and admins accept, reject and change tasks; annotators read them."""
    return bool(user_roles(user) & {CURATOR, ADMIN})


def admin_group_permissions_grant(**kwargs) -> None:
    """Admins manage everything in the Django admin: their group holds every permission."""
    from django.contrib.auth.models import Group, Permission

    group, _ = Group.objects.get_or_create(name=ADMIN)
    group.permissions.set(Permission.objects.all())


def user_staff_sync(sender, instance, action, **kwargs) -> None:
    """Members of the admin group may open the Django admin; leaving the group takes that away."""
    from django.contrib.auth.models import User

    if action not in {"post_add", "post_remove", "post_clear"} or not isinstance(instance, User):
        return
    for cached in ("_commitgym_roles", "_commitgym_visible_repositories"):  # read them again
        instance.__dict__.pop(cached, None)
    is_admin = instance.groups.filter(name=ADMIN).exists()
    if instance.is_staff != is_admin and not instance.is_superuser:
        User.objects.filter(pk=instance.pk).update(is_staff=is_admin)
        instance.is_staff = is_admin
