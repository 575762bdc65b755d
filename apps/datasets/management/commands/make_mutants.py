import json

from django.core.management.base import BaseCommand, CommandError

from apps.datasets.candidates.mutants import task_mutants_make
from apps.datasets.selectors import ScopeNotFound, tasks_in_scope


class Command(BaseCommand):
    help = ("Make known-wrong candidates from each valid task's gold patch (one of each kind the fix allows), "
            "for a repository, a task or a dataset; grade them with `manage.py grade`.")

    def add_arguments(self, parser):
        parser.add_argument("scope", nargs="?", default="", help="a repository (name, URL or path) or a task's id")
        parser.add_argument("--dataset", default="", help="a dataset's name")
        parser.add_argument("--json", action="store_true", dest="as_json", help="one JSON line per task")

    def handle(self, *args, scope, dataset, as_json, **options):
        for task in self._tasks(scope, dataset):
            made, why = task_mutants_make(task)
            line = {"task_id": task.instance_id, "made": made, "skipped": why}
            text = f"{task.instance_id}: {', '.join(made) or 'no new mutant'}{' (' + why + ')' if why else ''}"
            self.stdout.write(json.dumps(line) if as_json else text)
            self.stdout.flush()

    def _tasks(self, scope: str, dataset: str):
        try:
            tasks = tasks_in_scope(scope=scope, dataset=dataset)
        except ScopeNotFound as error:
            raise CommandError(str(error)) from None
        return list(tasks.filter(verdict="valid").select_related("repository", "commit").order_by("instance_id"))
