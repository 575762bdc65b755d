import json
from pathlib import Path

from django.core.management.base import BaseCommand, CommandError

from apps.datasets.candidates.imports import ImportUnreadable, predictions_import
from apps.datasets.grading.batch import grades_awaited
from apps.datasets.grading.evaluation import (
    EvaluationRefused,
    evaluation_candidates,
    evaluation_target,
    evaluation_written,
)
from apps.datasets.models import Run
from worker.engine.grade.evaluation import LOGS
from worker.engine.grade.swebench import predictions_read


class Command(BaseCommand):
    help = ("Grade anyone's predictions against a release's or a dataset's hidden tests, as SWE-bench's harness "
            "does: the predictions imported as a run, each graded in its task's environment, and SWE-bench's run "
            "report written with a report.json per instance under logs/run_evaluation/RUN/MODEL/INSTANCE/.")

    def add_arguments(self, parser):
        parser.add_argument("target", help="a release (NAME@VERSION) or a dataset's name")
        parser.add_argument("predictions", help="SWE-bench predictions: .jsonl, or .json (a list or an object keyed "
                                                "by instance id)")
        parser.add_argument("--run", default="", help="the run's name, and the report's run id (default: the "
                                                      "predictions' model_name_or_path)")
        parser.add_argument("--report", default="", help="where the run report goes (default: MODEL.RUN.json here, "
                                                         "as the harness names it); the logs folder goes beside it")
        parser.add_argument("--backend", choices=["local", "docker"], default="",
                            help="the sandbox (default: the COMMITGYM_SANDBOX setting)")
        parser.add_argument("--json", action="store_true", dest="as_json", help="the run report on standard output")
        parser.add_argument("--timeout", type=float, default=6 * 3600, help="seconds to wait for every grade")

    def handle(self, *args, target, predictions, run, report, backend, as_json, timeout, **options):
        try:
            chosen = evaluation_target(target)
        except EvaluationRefused as refused:
            raise CommandError(str(refused)) from None
        models = self._models(Path(predictions), run)
        try:
            _, runs = predictions_import(path=Path(predictions), run_name=run)
        except ImportUnreadable as unreadable:
            raise CommandError(f"nothing evaluated: {unreadable}") from None
        named = [summary.run for summary in runs if summary.run is not None]
        if len(named) != 1:
            raise CommandError(f"the predictions name {len(named)} models: evaluate one at a time, or give --run NAME "
                               "to take every row as one run's")
        run_id = named[0]
        the_run = list(Run.objects.filter(name=run_id))
        failures = grades_awaited([c for c in evaluation_candidates(chosen, the_run) if not c.outcome],
                                  backend=backend, stderr=self.stderr, timeout=timeout,
                                  on_graded=lambda candidate, grade, outcome: None)
        model = next(iter(models.values()), run_id)
        report_path = Path(report) if report else Path(f"{model.replace('/', '__')}.{run_id}.json")
        try:
            written = evaluation_written(target=chosen, run_id=run_id, candidates=evaluation_candidates(chosen, the_run),
                                         models=models, folder=report_path.resolve().parent, report_path=report_path)
        except EvaluationRefused as refused:
            raise CommandError(str(refused)) from None
        if as_json:
            self.stdout.write(json.dumps(written))
        else:
            self.stdout.write(
                f"{chosen.label}, run {run_id}: {written['resolved_instances']} of {written['total_instances']} "
                f"resolved ({written['submitted_instances']} submitted, {written['completed_instances']} completed, "
                f"{written['empty_patch_instances']} empty patches, {written['error_instances']} errors, "
                f"{len(written['incomplete_ids'])} without a prediction)")
            self.stdout.write(f"  {report_path}\n  {report_path.resolve().parent / LOGS / run_id}")
        if failures:
            self.stderr.write(f"{failures} grades stopped on an error (see their jobs): listed in error_ids")

    def _models(self, path: Path, run: str) -> dict[str, str]:
        """Each prediction's instance id -> its model_name_or_path (the run's name where a row has none)."""
        found = predictions_read(path)
        named = {prediction.instance_id: prediction.run for prediction in found.kept.values()}
        if run:
            unnamed = predictions_read(path, run=run)
            named = {**{p.instance_id: run for p in unnamed.kept.values()}, **named}
        return named
