import json

from django.core.management.base import BaseCommand, CommandError

from apps.datasets.candidates.imports import ImportUnreadable, instances_import


class Command(BaseCommand):
    help = ("Import SWE-bench instances (.jsonl, .json or .parquet) as tasks of a dataset, each with its gold and "
            "test patches, its problem statement and its oracle as given; print what the file gave.")

    def add_arguments(self, parser):
        parser.add_argument("file")
        parser.add_argument("--dataset", default="", help="The dataset's name (default: the file's name without "
                                                          "its extension).")
        parser.add_argument("--json", action="store_true", dest="as_json", help="One JSON line of counts.")

    def handle(self, *args, file, dataset, as_json, **options):
        try:
            imported = instances_import(path=file, dataset_name=dataset)
        except ImportUnreadable as unreadable:
            raise CommandError(f"nothing imported: {unreadable}") from None
        for row in imported.refused:
            self.stderr.write(f"row {row['row']}{' (' + row['instance_id'] + ')' if row['instance_id'] else ''} "
                              f"refused: {row['reason']}")
        counts = imported.counts
        if as_json:
            self.stdout.write(json.dumps({"dataset": imported.dataset.name, "import": imported.pk, **counts}))
        else:
            self.stdout.write(f"{imported.file_name} → dataset {imported.dataset.name}: {counts['rows']} rows, "
                              f"{counts['created']} tasks made, {counts['unchanged']} already there unchanged, "
                              f"{counts['refused']} refused, {counts['duplicates']} duplicate ids (the later row "
                              "kept)")
