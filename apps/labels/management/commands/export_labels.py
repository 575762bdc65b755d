import json
import shutil

from django.core.management.base import BaseCommand, CommandError

from apps.datasets.models import Dataset
from apps.labels.exports import label_export_start, label_export_waited


class Command(BaseCommand):
    help = ("Write every label of a dataset (rationale, confidence, seconds, annotator, the final label and who "
            "settled it) to a file, by a job; wait for it and say where it is.")

    def add_arguments(self, parser):
        parser.add_argument("dataset", help="the dataset's name")
        parser.add_argument("--format", choices=["jsonl", "csv"], default="jsonl")
        parser.add_argument("--out", help="copy the file here (else its place under the release folder is printed)")
        parser.add_argument("--pseudonymize", action="store_true",
                            help="name people by a pseudonym (stable on this site) instead of their id")
        parser.add_argument("--json", action="store_true", dest="as_json", help="one JSON line on standard output")
        parser.add_argument("--timeout", type=float, default=3600, help="seconds to wait for the export's job")

    def handle(self, *args, dataset, format, out, pseudonymize, as_json, timeout, **options):
        found = Dataset.objects.filter(name=dataset).first()
        if found is None:
            raise CommandError(f"no dataset named {dataset!r}")
        export = label_export_waited(label_export_start(dataset=found, format=format, pseudonymize=pseudonymize),
                                     stderr=self.stderr, timeout=timeout)
        path = export.path
        if out:
            try:
                shutil.copyfile(export.path, out)
            except OSError as error:
                raise CommandError(f"the labels were written to {export.path} but could not be copied to {out}: "
                                   f"{error.strerror}") from None
            path = out
        line = {"dataset": found.name, "rows": export.rows, "format": format, "path": path,
                "pseudonymized": pseudonymize}
        self.stdout.write(json.dumps(line) if as_json else f"{export.rows} labels of {found.name} written to {path}")
