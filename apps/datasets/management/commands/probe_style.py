import json

from django.core.management.base import BaseCommand, CommandError
from django.db.models import QuerySet

from apps.datasets.candidates.probes import (
    JUDGE_MODE,
    style_probe_candidates,
    style_probe_compute,
    task_style_probes_make,
)
from apps.datasets.grading.grades import candidate_grade_start
from apps.datasets.models import Grade, Judging
from apps.datasets.selectors import NAMEABLE_SOURCES, ScopeNotFound, sources_chosen, tasks_in_scope
from apps.datasets.verifiers.judging import candidates_unjudged, judge_identity, task_judge_start
from apps.datasets.verifiers.measures import DEFAULT_SOURCES
from apps.jobs.models import Job
from apps.jobs.on_demand import WorkerOnDemand
from apps.tasks.models import Task
from worker.engine.llm.clients import ModelError


class Command(BaseCommand):
    help = ("Probe whether the judge judges style: rewrite each candidate of the valid tasks in scope so it reads "
            "differently and does the same (comments removed, reformatted, local names renamed), grade the rewrites "
            "and their candidates that have no ground truth, judge them (patch mode), wait, and print how far P(YES) "
            "moves across a candidate and its rewrites, per judge model. A rewrite that grades unlike its candidate "
            "is left out and counted. With --json, one line: {tasks, probes_made, skipped: {task id: why none could "
            "be made}, rewrites_kept, graded_differently, ungraded, judges: [{model, prompt_version, originals, "
            "rewrites, mean_spread, max_spread, mean_shift_by_kind: {kind: mean |P(rewrite) - P(candidate)|}, "
            "flip_share}]}. Exits non-zero when a grade or a judging failed (after the line).")

    def add_arguments(self, parser):
        parser.add_argument("scope", nargs="?", default="", help="a repository (name, URL or path) or a task's id")
        parser.add_argument("--dataset", default="", help="a dataset's name")
        parser.add_argument("--sources", default=",".join(DEFAULT_SOURCES),
                            help=f"the sources of the candidates to rewrite, of: {', '.join(NAMEABLE_SOURCES)}")
        parser.add_argument("--json", action="store_true", dest="as_json", help="one JSON line")
        parser.add_argument("--timeout", type=float, default=6 * 3600, help="seconds to wait for each of the "
                                                                             "grades and the judgings")

    def handle(self, *args, scope, dataset, sources, as_json, timeout, **options):
        chosen = self._sources(sources)
        tasks = self._tasks(scope, dataset)
        try:
            judge_identity()
        except ModelError as error:
            raise CommandError(f"the judge model cannot be used: {error}") from None
        made, skipped = 0, {}
        for task in tasks:
            count, why = task_style_probes_make(task, sources=chosen)
            made += count
            if why:
                skipped[task.instance_id] = why
        candidates = style_probe_candidates(tasks, sources=chosen)
        with WorkerOnDemand(queues="llm,tests", stderr=self.stderr) as worker:
            grades = self._wait(worker, self._grades_start(candidates), timeout, "the grades")
            judgings = self._wait(worker, self._judgings_start(candidates), timeout, "the judgings")
        figures = style_probe_compute(Task.objects.filter(id__in=[task.id for task in tasks]), sources=chosen)
        line = {"tasks": len(tasks), "probes_made": made, "skipped": skipped, **figures.as_json()}
        self.stdout.write(json.dumps(line) if as_json else self._table(line))
        failed = self._failures_report(grades, judgings)
        if failed:
            raise CommandError(f"{failed} of the grades and judgings stopped on an error (said above): "
                               "the figures leave out what they were for")

    def _sources(self, sources: str) -> tuple:
        try:
            return sources_chosen(sources)
        except ScopeNotFound as error:
            raise CommandError(str(error)) from None

    def _tasks(self, scope: str, dataset: str) -> list[Task]:
        try:
            tasks = tasks_in_scope(scope=scope, dataset=dataset)
        except ScopeNotFound as error:
            raise CommandError(str(error)) from None
        return list(tasks.filter(verdict="valid").select_related("repository", "commit").order_by("instance_id"))

    def _grades_start(self, candidates: QuerySet) -> QuerySet:
        started = []
        for candidate in candidates.filter(outcome="").select_related("task").order_by("id"):
            grade = candidate_grade_start(candidate=candidate)
            if grade is None:
                self.stderr.write(f"{candidate}: being graded already: skipped")
            else:
                started.append(grade.id)
        return Grade.objects.filter(id__in=started)

    def _judgings_start(self, candidates: QuerySet) -> QuerySet:
        started = []
        unjudged = candidates_unjudged(candidates, JUDGE_MODE).values("task_id")
        for task in Task.objects.filter(id__in=unjudged).order_by("instance_id"):
            judging = task_judge_start(task=task, mode=JUDGE_MODE)
            if judging is None:
                self.stderr.write(f"{task.instance_id}: being judged already: its scores may be missing")
            else:
                started.append(judging.id)
        return Judging.objects.filter(id__in=started)

    def _wait(self, worker: WorkerOnDemand, jobs: QuerySet, timeout: float, what: str) -> QuerySet:
        worker.wait_until(lambda: not jobs.filter(job__state__in=Job.ACTIVE_STATES).exists(),
                          queued=jobs.filter(job__state=Job.State.QUEUED).exists, timeout=timeout, what=what)
        return jobs

    def _failures_report(self, grades: QuerySet, judgings: QuerySet) -> int:
        failed = 0
        for grade in grades.exclude(job__state=Job.State.SUCCEEDED).select_related("job", "candidate__task"):
            self.stderr.write(f"{grade.candidate}: its grading {grade.state}: {grade.job.error_message}")
            failed += 1
        for judging in judgings.select_related("job", "task"):
            if judging.state != Job.State.SUCCEEDED:
                failed += 1
            if judging.state != Job.State.SUCCEEDED or judging.counts.get("failed"):
                self.stderr.write(f"{judging.task.instance_id}: judging {judging.state}: "
                                  f"{judging.job.error_message or judging.detail}")
        return failed

    def _table(self, line: dict) -> str:
        rows = [f"{line['tasks']} tasks: {line['probes_made']} rewrites made"]
        rows += [f"  {task_id}: none made ({why})" for task_id, why in line["skipped"].items()]
        rows.append(f"{line['rewrites_kept']} rewrites grade as their candidate does; {line['graded_differently']} "
                    f"grade differently (left out); {line['ungraded']} have no ground truth yet")
        for judge in line["judges"]:
            shifts = ", ".join(f"{kind} {shift:.3f}" for kind, shift in judge["mean_shift_by_kind"].items())
            rows.append(f"{judge['model']} (prompt v{judge['prompt_version']}): {judge['originals']} candidates, "
                        f"{judge['rewrites']} rewrites; P(YES) spread mean {judge['mean_spread']:.3f}, largest "
                        f"{judge['max_spread']:.3f}; verdict flips on {judge['flip_share'] * 100:.0f}% of the "
                        f"candidates; mean shift per rewrite: {shifts}")
        if not line["judges"]:
            rows.append("no judge has scored a candidate and a rewrite that grades the same yet")
        return "\n".join(rows)
