from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError

from apps.datasets.releases import ReleaseRefused, release_named, release_withdraw


class Command(BaseCommand):
    help = "Withdraw a release version: it is kept, marked withdrawn with why, and its number never given again."

    def add_arguments(self, parser):
        parser.add_argument("release", help="NAME@VERSION")
        parser.add_argument("--reason", required=True, help="why it is withdrawn, shown on its page and to its users")
        parser.add_argument("--user", default="", help="who withdraws it (a username)")

    def handle(self, *args, release, reason, user, **options):
        if "@" not in release:
            raise CommandError("name the version to withdraw: NAME@VERSION")
        person = get_user_model().objects.filter(username=user).first() if user else None
        if user and person is None:
            raise CommandError(f"no user named {user!r}")
        try:
            withdrawn = release_withdraw(release=release_named(release), user=person, reason=reason)
        except ReleaseRefused as refused:
            raise CommandError(str(refused)) from None
        self.stdout.write(f"{withdrawn} withdrawn: {withdrawn.withdrawn_reason}")
