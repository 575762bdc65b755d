import json

from django.core.management.base import BaseCommand, CommandError
from django.utils import timezone

from apps.datasets.models import Candidate, Execution, Judging
from apps.datasets.selectors import NAMEABLE_SOURCES, ScopeNotFound, dataset_of_scope, sources_chosen, tasks_in_scope
from apps.datasets.verifiers.execution import (
    DONE,
    EXECUTE,
    NOT_HERE,
    REPRODUCE,
    STOPPED,
    VERIFIER_TESTS,
    execution_under_way,
    executions_advance,
)
from apps.datasets.verifiers.judging import JUDGE, candidates_unjudged, task_judge_start
from apps.datasets.verifiers.matrices import current_test_sets
from apps.datasets.verifiers.measures import DEFAULT_SOURCES, SELECTORS, measures_compute, measures_snapshot_keep
from apps.jobs.models import Job
from apps.jobs.on_demand import WorkerOnDemand
from apps.tasks.models import Task
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
                            help=f"candidate sources that count, of: {', '.join(NAMEABLE_SOURCES)}")
        parser.add_argument("--json", action="store_true", dest="as_json", help="one JSON line")

    def handle(self, *args, scope, dataset, judge_mode, no_judge, no_tests, sources, as_json, **options):
        try:
            chosen = sources_chosen(sources)
            tasks = tasks_in_scope(scope=scope, dataset=dataset)
        except ScopeNotFound as error:
            raise CommandError(str(error)) from None
        tasks = list(tasks.filter(verdict="valid"))
        began = timezone.now()  # a step that failed before this failed in an earlier run: said so
        stands = {} if no_tests else executions_advance(tasks, since=began)
        judgings = [] if no_judge else self._judge_start(tasks, chosen, judge_mode)

        def done() -> bool:
            """Every judging ended, and every task's execution verifier at its end: each step starts the next
            as it ends; when nothing runs, asking each task once more starts what is still missing."""
            if Judging.objects.filter(id__in=judgings, job__state__in=Judging.ACTIVE_STATES).exists():
                return False
            if no_tests or execution_under_way(tasks):
                return no_tests
            stands.update(executions_advance(tasks, since=began))
            return all(where in (DONE, STOPPED, NOT_HERE) for where, _ in stands.values())

        self._wait(done)
        failed = self._judging_report(judgings) + self._execution_report(tasks, stands, began)
        measured = measures_compute(Task.objects.filter(id__in=[t.id for t in tasks]), sources=chosen,
                                    judge_mode=None if no_judge else judge_mode, execution=not no_tests)
        left_out = {"judge": "--no-judge" if no_judge else "", "execution": "--no-tests" if no_tests else ""}
        for name, why in {**left_out, "hybrid": left_out["judge"] or left_out["execution"],
                          "complementarity": left_out["judge"] or left_out["execution"]}.items():
            if why:
                measured.skipped[name] = why
        line = {**measured.as_json(), "sources": sorted(chosen)}
        measures_snapshot_keep(line, scope=scope or dataset, dataset=dataset_of_scope(scope=scope, dataset=dataset))
        if as_json:
            self.stdout.write(json.dumps(line))
        else:
            self._table(line)
        if failed:
            raise CommandError(f"{failed} verifier steps failed (said above): the figures leave out what they were for")

    def _judge_start(self, tasks: list, sources: tuple, mode: str):
        """Judge every task with a candidate in scope the judge has not scored; the judgings' ids."""
        try:
            unjudged = candidates_unjudged(Candidate.objects.filter(task__in=tasks, source__in=sources), mode)
        except ModelError as error:
            raise CommandError(f"the judge model cannot be used: {error} (or pass --no-judge)") from None
        pending = []
        for task_id in sorted(set(unjudged.values_list("task_id", flat=True))):
            task = next(t for t in tasks if t.id == task_id)
            judging = task_judge_start(task=task, mode=mode)
            if judging is None:
                self.stderr.write(f"{task.instance_id}: being judged already: its scores may be missing")
            else:
                pending.append(judging.id)
        return pending

    def _wait(self, done, timeout: float = 6 * 3600) -> None:
        queued = Job.objects.filter(state=Job.State.QUEUED, kind__in=(JUDGE, REPRODUCE, VERIFIER_TESTS, EXECUTE))
        with WorkerOnDemand(queues="llm,tests", stderr=self.stderr) as worker:
            worker.wait_until(done, queued=queued.exists, timeout=timeout, what="the verifiers")

    def _judging_report(self, judgings: list) -> int:
        failed = 0
        for judging in Judging.objects.filter(id__in=judgings).select_related("job", "task"):
            if judging.state != Judging.State.SUCCEEDED or judging.counts.get("failed"):
                failed += 1
                self.stderr.write(f"{judging.task.instance_id}: judging {judging.state}: "
                                  f"{judging.job.error_message or judging.detail}")
        return failed

    def _execution_report(self, tasks: list, stands: dict, began) -> int:
        failed = 0
        for task in tasks:
            where, said = stands.get(task.id, (DONE, ""))
            if where != DONE:
                failed += where == STOPPED
                self.stderr.write(f"{task.instance_id}: execution verifier: {said}")
        # Each candidate's latest run against its task's current verifier tests: one that failed and was run
        # again since is not a failure any more.
        current = current_test_sets([task.id for task in tasks]).values()
        latest = {}
        for execution in Execution.objects.filter(test_set_id__in=current).select_related(
                "job", "candidate__task").order_by("candidate_id", "-created_at", "-id"):
            latest.setdefault(execution.candidate_id, execution)
        for execution in latest.values():
            if execution.state != Execution.State.FAILED:
                continue
            failed += 1
            ended = execution.job.finished_at
            earlier = (f" (from an earlier run, ended {timezone.localtime(ended):%Y-%m-%d %H:%M})"
                       if ended and ended < began else "")
            self.stderr.write(f"{execution.candidate}: its run against the verifier tests failed{earlier}: "
                              f"{execution.job.error_message}")
        return failed

    def _table(self, line: dict) -> None:
        self.stdout.write(f"{line['tasks']} tasks, {line['candidates']} candidates "
                          f"({line['resolved_candidates']} resolved, {line['ungraded']} ungraded and left out, "
                          f"{line['no_patch']} without a patch counted beside them)")
        shown = [name for name in SELECTORS if line["best_at_k"][name] is not None]
        self.stdout.write("k".rjust(4) + "".join(name.rjust(10) for name in shown))
        for k in range(1, line["k_max"] + 1):
            self.stdout.write(f"{k:4d}" + "".join(f"{line['best_at_k'][name][k - 1] * 100:9.1f}%" for name in shown))
        if line["tasks_with_candidates"]:
            self.stdout.write("scored, of the {} tasks with candidates: {}".format(
                line["tasks_with_candidates"], ", ".join(f"{name} {line['scored_tasks'][name]}"
                                                         for name in ("execution", "judge", "hybrid"))))
        judge = line["judge"]
        if judge.get("brier") is not None:
            self.stdout.write(f"judge ({judge['mode']}): Brier {judge['brier']:.3f}, ECE {judge['ece']:.3f}, "
                              f"{judge['uncertain']} uncertain, {judge['unscored']} unscored")
        for name, why in line["skipped"].items():
            self.stdout.write(f"{name}: not computed ({why})")
