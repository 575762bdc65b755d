import json
import time

from django.core.management.base import BaseCommand, CommandError

from apps.datasets.judging import candidates_unjudged, task_judge_start
from apps.datasets.measures import DEFAULT_SOURCES, NOT_YET, SELECTORS, measures_compute
from apps.datasets.models import Candidate, Judging
from apps.datasets.selectors import ScopeNotFound, tasks_in_scope
from apps.jobs.on_demand import WorkerOnDemand
from worker.engine.llm.clients import ModelError
from worker.engine.verify.judge import JUDGE_MODES


class Command(BaseCommand):
    help = ("Run the verifiers' missing results for a repository, a task or a dataset, then print best@k per "
            "selector (random, execution, judge, hybrid, oracle) over the tasks with an oracle.")

    def add_arguments(self, parser):
        parser.add_argument("scope", nargs="?", default="", help="a repository (name, URL or path) or a task's id")
        parser.add_argument("--dataset", default="", help="a dataset's name")
        parser.add_argument("--judge-mode", choices=JUDGE_MODES, default="patch")
        parser.add_argument("--no-judge", action="store_true", help="do not run the judge; use no judge scores")
        parser.add_argument("--no-tests", action="store_true", help="do not run the execution verifier")
        parser.add_argument("--sources", default=",".join(DEFAULT_SOURCES),
                            help=f"candidate sources that count, of: {', '.join(Candidate.Source.values)}")
        parser.add_argument("--json", action="store_true", dest="as_json", help="one JSON line")

    def handle(self, *args, scope, dataset, judge_mode, no_judge, no_tests, sources, as_json, **options):
        chosen = tuple(part.strip() for part in sources.split(",") if part.strip())
        unknown = sorted(set(chosen) - set(Candidate.Source.values))
        if unknown or not chosen:
            raise CommandError(f"unknown candidate source {', '.join(unknown) or '(none given)'}: "
                               f"choose from {', '.join(Candidate.Source.values)}")
        try:
            tasks = tasks_in_scope(scope=scope, dataset=dataset)
        except ScopeNotFound as error:
            raise CommandError(str(error)) from None
        tasks = tasks.filter(verdict="valid")
        if not no_judge:
            self._judge(list(tasks), chosen, judge_mode)
        measured = measures_compute(tasks, sources=chosen, judge_mode=None if no_judge else judge_mode)
        if no_judge:
            measured.skipped["judge"] = "--no-judge"
        if no_tests:
            measured.skipped["execution"] = measured.skipped["hybrid"] = "--no-tests"
        line = {**measured.as_json(), "distinguishing_share": None, "toxic_tests": None, "complementarity": None}
        line["skipped"].update({"distinguishing_share": NOT_YET, "toxic_tests": NOT_YET, "complementarity": NOT_YET})
        if as_json:
            self.stdout.write(json.dumps(line))
            return
        self._table(line)

    def _judge(self, tasks: list, sources: tuple, mode: str, timeout: float = 6 * 3600) -> None:
        """Judge every task with a candidate in scope the judge has not scored, through the workers; wait."""
        try:
            unjudged = candidates_unjudged(Candidate.objects.filter(task__in=tasks, source__in=sources), mode)
        except ModelError as error:
            raise CommandError(f"the judge model cannot be used: {error} (or pass --no-judge)") from None
        pending = []
        for task_id in sorted(set(unjudged.values_list("task_id", flat=True))):
            judging = task_judge_start(task=next(t for t in tasks if t.id == task_id), mode=mode)
            if judging is None:
                self.stderr.write(f"task {task_id}: being judged already: its scores may be missing")
            else:
                pending.append(judging.id)
        deadline = time.monotonic() + timeout
        with WorkerOnDemand(queues="llm", stderr=self.stderr) as worker:
            while Judging.objects.filter(id__in=pending, job__state__in=Judging.ACTIVE_STATES).exists():
                if time.monotonic() > deadline:
                    raise CommandError(f"the judge did not finish within {timeout:.0f} s")
                worker.waiting(queued=Judging.objects.filter(id__in=pending, job__state=Judging.State.QUEUED)
                               .exists())
                time.sleep(0.5)
        for judging in Judging.objects.filter(id__in=pending).select_related("job", "task"):
            if judging.state != Judging.State.SUCCEEDED or judging.counts.get("failed"):
                self.stderr.write(f"{judging.task.instance_id}: judging {judging.state}: "
                                  f"{judging.job.error_message or judging.detail}")

    def _table(self, line: dict) -> None:
        self.stdout.write(f"{line['tasks']} tasks, {line['candidates']} candidates "
                          f"({line['resolved_candidates']} resolved, {line['ungraded']} ungraded and left out)")
        shown = [name for name in SELECTORS if line["best_at_k"][name] is not None]
        self.stdout.write("k".rjust(4) + "".join(name.rjust(10) for name in shown))
        for k in range(1, line["k_max"] + 1):
            self.stdout.write(f"{k:4d}" + "".join(f"{line['best_at_k'][name][k - 1] * 100:9.1f}%" for name in shown))
        judge = line["judge"]
        if judge.get("brier") is not None:
            self.stdout.write(f"judge ({judge['mode']}): Brier {judge['brier']:.3f}, ECE {judge['ece']:.3f}, "
                              f"{judge['uncertain']} uncertain, {judge['unscored']} unscored")
        for name, why in line["skipped"].items():
            self.stdout.write(f"{name}: not computed ({why})")
