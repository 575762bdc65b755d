"""What the commands that run language jobs over a repository's tasks have in common."""

from django.core.management.base import BaseCommand, CommandError

from apps.repositories.services import repository_find


class LanguageJobCommand(BaseCommand):
    def add_arguments(self, parser):
        parser.add_argument("repository", help="a registered repository's name, URL or path")
        parser.add_argument("--regenerate", action="store_true", help="ask the model again instead of reusing answers")
        parser.add_argument("--json", action="store_true", dest="as_json", help="JSON lines on standard output")
        parser.add_argument("--timeout", type=float, default=6 * 3600, help="seconds to wait for all tasks")

    @staticmethod
    def repository(location: str):
        found = repository_find(location=location)
        if found is None:
            raise CommandError(f"no registered repository named {location!r} (mine it first)")
        return found
