import json

from django.core.management.base import BaseCommand, CommandError

from apps.datasets.models import Dataset
from apps.datasets.mutants import task_mutants_make
from apps.datasets.selectors import dataset_tasks
from apps.repositories.services import repository_find
from apps.tasks.models import Task


class Command(BaseCommand):
    help = ("Make known-wrong candidates from each valid task's gold patch (one of each kind the fix allows), "
            "for a repository, a task or a dataset; grade them with `manage.py grade`.")

    def add_arguments(self, parser):
        parser.add_argument("scope", nargs="?", default="", help="a repository (name, URL or path) or a task's id")
        parser.add_argument("--dataset", default="", help="a dataset's name")
        parser.add_argument("--json", action="store_true", dest="as_json", help="one JSON line per task")

    def handle(self, *args, scope, dataset, as_json, **options):
        if bool(scope) == bool(dataset):
            raise CommandError("name one of: a repository or a task, --dataset NAME")
        for task in self._tasks(scope, dataset):
            made, why = task_mutants_make(task)
            line = {"task_id": task.instance_id, "made": made, "skipped": why}
            text = f"{task.instance_id}: {', '.join(made) or 'no new mutant'}{' (' + why + ')' if why else ''}"
            self.stdout.write(json.dumps(line) if as_json else text)
            self.stdout.flush()

    def _tasks(self, scope: str, dataset: str):
        if dataset:
            found = Dataset.objects.filter(name=dataset).first()
            if found is None:
                raise CommandError(f"no dataset named {dataset!r}")
            tasks = dataset_tasks(found)
        else:
            tasks = Task.objects.filter(instance_id=scope)
            if not tasks.exists():
                repository = repository_find(location=scope)
                if repository is None:
                    raise CommandError(f"{scope!r} is neither a task's id nor a registered repository")
                tasks = Task.objects.filter(repository=repository)
        return list(tasks.filter(verdict="valid").select_related("repository", "commit").order_by("instance_id"))
