import json
from datetime import date
from pathlib import Path

from django.core.management.base import BaseCommand, CommandError

from apps.datasets.models import Dataset, Release
from apps.datasets.releases import (
    ReleaseRefused,
    release_start,
    release_waited,
    scope_of_dataset,
    scope_of_repository,
    scope_of_view,
    states_chosen,
)
from apps.repositories.services import repository_find
from apps.tasks.models import SavedView
from apps.tasks.views.common import saved_view_task_ids


class Command(BaseCommand):
    help = ("Release the accepted tasks of a dataset, a repository or a saved task-list view as the next version of "
            "NAME (SWE-bench's instance JSONL, Parquet and a manifest), wait, and print the files' paths.")

    def add_arguments(self, parser):
        parser.add_argument("name", help="the release's name: NAME@1, NAME@2... are its versions")
        parser.add_argument("--dataset", default="", help="a dataset's name")
        parser.add_argument("--repository", default="", help="a repository (name, URL or path)")
        parser.add_argument("--view", default="", help="a saved task-list view's name (OWNER/NAME where names clash)")
        parser.add_argument("--states", default="accepted",
                            help="comma-separated task states (default accepted); any other makes a preview release")
        parser.add_argument("--since", default="", help="only tasks whose commit is newer than this date (YYYY-MM-DD)")
        parser.add_argument("--out", default="", help="the folder to write NAME@N/ in (default: COMMITGYM_RELEASE_DIR)")
        parser.add_argument("--json", action="store_true", dest="as_json", help="one JSON line on standard output")
        parser.add_argument("--timeout", type=float, default=3600, help="seconds to wait for the release's job")

    def handle(self, *args, name, dataset, repository, view, states, since, out, as_json, timeout, **options):
        try:
            release = release_start(name=name, scope=self._scope(dataset, repository, view),
                                    states=states_chosen(states), since=self._since(since),
                                    out=Path(out) if out else None)
        except ReleaseRefused as refused:
            raise CommandError(str(refused)) from None
        self._report(release_waited(release, stderr=self.stderr, timeout=timeout), as_json)

    def _scope(self, dataset: str, repository: str, view: str):
        if sum(map(bool, (dataset, repository, view))) != 1:
            raise CommandError("name one of: --dataset NAME, --repository NAME, --view NAME")
        if dataset:
            found = Dataset.objects.filter(name=dataset).first()
            if found is None:
                raise CommandError(f"no dataset named {dataset!r}")
            return scope_of_dataset(found)
        if repository:
            found = repository_find(location=repository)
            if found is None:
                raise CommandError(f"no repository {repository!r} is registered")
            return scope_of_repository(found)
        saved = self._view(view)
        return scope_of_view(saved, saved_view_task_ids(view=saved, user=saved.user))

    def _view(self, text: str) -> SavedView:
        owner, _, name = text.rpartition("/")
        views = SavedView.objects.filter(name=name).select_related("user")
        if owner:
            views = views.filter(user__username=owner)
        found = list(views)
        if not found:
            raise CommandError(f"no saved view named {text!r}")
        if len(found) > 1:
            raise CommandError(f"{len(found)} saved views are named {name!r}: name one as OWNER/NAME ("
                               + ", ".join(f"{one.user.username}/{one.name}" for one in found) + ")")
        return found[0]

    def _since(self, text: str):
        if not text:
            return None
        try:
            return date.fromisoformat(text)
        except ValueError:
            raise CommandError(f"--since {text!r} is not a date (YYYY-MM-DD)") from None

    def _report(self, release: Release, as_json: bool) -> None:
        shown = release.same_as or release
        paths = [str(Path(shown.folder) / file["name"]) for file in shown.files]
        # Beside the rows: the source archives, licence files, environments' files and the README.
        folders = {"sources": [], "licences": [], "environments": [], "README.md": []}
        for path, file in zip(paths, shown.files):
            folders.get(file["name"].partition("/")[0], []).append(path)
        beside = {path for listed in folders.values() for path in listed}
        rows = [path for path in paths[:-1] if path not in beside]
        line = {"release": shown.name, "version": shown.version, "tasks": shown.task_count, "files": rows,
                "manifest": paths[-1], "source_archives": folders["sources"], "licence_files": folders["licences"],
                "dockerfiles": [path for path in folders["environments"] if path.endswith("/Dockerfile")],
                "readme": (folders["README.md"] or [None])[0],
                "preview": shown.preview, "unchanged": release.same_as is not None}
        if as_json:
            self.stdout.write(json.dumps(line))
            return
        if release.same_as:
            self.stdout.write(f"Nothing changed since {shown}: no version made.")
        self.stdout.write(f"{shown}: {shown.task_count} tasks{' (a preview)' if shown.preview else ''}")
        for path in paths:
            self.stdout.write(f"  {path}")
