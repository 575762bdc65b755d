import json

from django.core.management.base import BaseCommand, CommandError

from apps.datasets.candidates.imports import ImportUnreadable, predictions_import


class Command(BaseCommand):
    help = ("Import SWE-bench predictions (.jsonl, or .json: a list or an object keyed by instance id) as candidate "
            "patches of the tasks with those instance ids, optionally with the ground truth of an evaluation report.")

    def add_arguments(self, parser):
        parser.add_argument("file")
        parser.add_argument("--run", default="", help="The run's name (default: each row's model_name_or_path).")
        parser.add_argument("--report", default=None, help="An evaluation report: a run report, the older report "
                                                           "of lists, or a folder of per-instance report.json files.")
        parser.add_argument("--trajectories", default=None, help="The agent's trajectories: a .jsonl file of steps, "
                                                                 "SWE-agent .traj files, or a folder of them.")
        parser.add_argument("--json", action="store_true", dest="as_json", help="One JSON line per run.")

    def handle(self, *args, file, run, report, trajectories, as_json, **options):
        try:
            imported, runs = predictions_import(path=file, run_name=run, report_path=report,
                                                trajectories_path=trajectories)
        except ImportUnreadable as unreadable:
            raise CommandError(f"nothing imported: {unreadable}") from None
        for row in imported.refused:
            where = f"row {row['row']}" if row["row"] else "trajectories"
            self.stderr.write(f"{where}{' (' + row['instance_id'] + ')' if row['instance_id'] else ''} "
                              f"refused: {row['reason']}")
        for summary in runs:
            line = summary.printed()
            if summary.ungraded:
                self.stderr.write(f"run {summary.run}: {summary.ungraded} candidate{'s' if summary.ungraded != 1 else ''} "
                                  f"left without a ground truth: the report does not name "
                                  f"{'them' if summary.ungraded != 1 else 'it'} (`grade` gives one)")
            if as_json:
                self.stdout.write(json.dumps(line))
                continue
            resolved = "" if summary.resolved is None else f", {summary.resolved} resolved by the report"
            self.stdout.write(
                f"run {summary.run if summary.run is not None else '(rows naming no run)'}: {summary.rows} rows, "
                f"{summary.candidates} candidates ({summary.replaced} replacing the run's earlier patch), "
                f"{summary.no_patch} without a patch, {summary.unknown_instance} for no known task, "
                f"{summary.duplicates} duplicates, {summary.rejected} refused{resolved}")
