import json
from pathlib import Path
from typing import Optional

from django.core.management.base import BaseCommand, CommandError

from apps.datasets.candidates.imports import ImportUnreadable, predictions_import
from apps.datasets.grading.batch import grades_awaited
from apps.datasets.grading.evaluation import (
    EvaluationRefused,
    evaluation_candidates,
    evaluation_run_checked,
    evaluation_target,
    evaluation_written,
    to_grade,
)
from apps.datasets.models import Run
from worker.engine.grade.evaluation import LOGS
from worker.engine.grade.swebench import predictions_read


class Command(BaseCommand):
    help = ("Grade anyone's predictions against a release's or a dataset's hidden tests, as SWE-bench's harness "
            "does: the predictions imported as a run, each graded in its task's environment, and SWE-bench's run "
            "report written with a report.json per instance under logs/run_evaluation/RUN/MODEL/INSTANCE/.")

    def add_arguments(self, parser):
        parser.add_argument("target", help="a release (NAME@VERSION), a dataset's name, or a release's folder")
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
            chosen = evaluation_target(target, backend=backend, stderr=self.stderr, timeout=timeout)
            models = self._models(Path(predictions), run)
            run_ids = {name: evaluation_run_checked(name) for name in models}
        except EvaluationRefused as refused:
            raise CommandError(str(refused)) from None
        if report and len(models) != 1:
            raise CommandError(f"the predictions name {len(models)} models: --report names one run's report (leave it "
                               "out for MODEL.RUN.json each, or give --run NAME to take every row as one run's)")
        try:
            imported, _ = predictions_import(path=Path(predictions), run_name=run)
        except ImportUnreadable as unreadable:
            raise CommandError(f"nothing evaluated: {unreadable}") from None
        for row in imported.refused:
            self.stderr.write(f"row {row['row']}{' (' + row['instance_id'] + ')' if row['instance_id'] else ''} "
                              f"refused: {row['reason']}")
        runs = list(Run.objects.filter(name__in=models))
        if not runs:
            raise CommandError("nothing evaluated: every prediction was refused (above)")
        # Every run's candidates graded together, as far as the workers go in parallel; a ground truth an
        # earlier import took from a report is not this evaluation's: graded again.
        pending = [candidate for one in runs for candidate in to_grade(
            evaluation_candidates(chosen, one, models[one.name]))]
        failures = grades_awaited(pending, backend=backend, stderr=self.stderr, timeout=timeout,
                                  on_graded=lambda candidate, grade, outcome: None)
        for one in sorted(runs, key=lambda one: one.name):
            self._written(chosen, one, run_ids[one.name], models[one.name], Path(report) if report else None, as_json)
        if failures:
            self.stderr.write(f"{failures} grades stopped on an error (see their jobs): listed in error_ids")

    def _written(self, chosen, run: Run, run_id: str, models: dict[str, str], report: Optional[Path],
                 as_json: bool) -> None:
        model = next(iter(models.values()), run.name)
        report_path = report or Path(f"{model.replace('/', '__')}.{run_id}.json")
        try:
            written = evaluation_written(target=chosen, run_id=run_id,
                                         candidates=evaluation_candidates(chosen, run, models), models=models,
                                         folder=report_path.resolve().parent, report_path=report_path)
        except EvaluationRefused as refused:
            raise CommandError(str(refused)) from None
        if as_json:
            self.stdout.write(json.dumps(written))
            return
        self.stdout.write(
            f"{chosen.label}, run {run.name}: {written['resolved_instances']} of {written['total_instances']} "
            f"resolved ({written['submitted_instances']} submitted, {written['completed_instances']} completed, "
            f"{written['empty_patch_instances']} empty patches, {written['error_instances']} errors, "
            f"{len(written['incomplete_ids'])} without a prediction)")
        self.stdout.write(f"  {report_path}\n  {report_path.resolve().parent / LOGS / run_id}")

    def _models(self, path: Path, run: str) -> dict[str, dict[str, str]]:
        """Each run's predictions: instance id -> the row's model_name_or_path (the harness's log folder)."""
        by_run: dict[str, dict[str, str]] = {}
        for prediction in predictions_read(path).kept.values():
            by_run.setdefault(run or prediction.run, {})[prediction.instance_id] = prediction.run
        if run:  # rows with no model_name_or_path count too when the run is named
            for prediction in predictions_read(path, run=run).kept.values():
                by_run.setdefault(run, {}).setdefault(prediction.instance_id, run)
        return by_run
