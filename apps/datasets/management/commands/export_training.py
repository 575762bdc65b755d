import json
from pathlib import Path

from django.core.management.base import BaseCommand, CommandError

from apps.datasets.models import Release
from apps.datasets.releases import ReleaseRefused, export_start, release_named, release_waited


class Command(BaseCommand):
    help = ("Export training data from a release's tasks: successful trajectories as chat messages, or judge "
            "training rows (issue, patch, trajectory, label and its source); wait, and print the files' paths.")

    def add_arguments(self, parser):
        parser.add_argument("release", help="NAME@VERSION, or NAME for its latest version")
        parser.add_argument("kind", choices=[Release.Kind.TRAJECTORIES, Release.Kind.JUDGE])
        parser.add_argument("--json", action="store_true", dest="as_json", help="one JSON line on standard output")
        parser.add_argument("--timeout", type=float, default=3600, help="seconds to wait for the export's job")

    def handle(self, *args, release, kind, as_json, timeout, **options):
        try:
            export = export_start(release=release_named(release), kind=kind)
        except ReleaseRefused as refused:
            raise CommandError(str(refused)) from None
        export = release_waited(export, stderr=self.stderr, timeout=timeout)
        paths = [str(Path(export.folder) / file["name"]) for file in export.files]
        line = {"export": kind, "release": str(export.of), "rows": export.files[0]["rows"], "files": paths[:-1],
                "manifest": paths[-1], "counts": export.manifest.get("counts", {})}
        self.stdout.write(json.dumps(line) if as_json else
                          f"{export}: {line['rows']} rows\n" + "\n".join(f"  {path}" for path in paths))
