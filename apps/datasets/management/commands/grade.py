import json
from collections import Counter

from django.core.management.base import BaseCommand, CommandError

from apps.datasets.grading.batch import grades_awaited
from apps.datasets.grading.grades import task_controls_ensure
from apps.datasets.models import Candidate, Grade, Run
from apps.datasets.selectors import ScopeNotFound, tasks_in_scope
from apps.tasks.models import Task


class Command(BaseCommand):
    help = ("Grade every candidate without a ground truth (of a repository, a task, a dataset or a run) against its "
            "task's hidden tests, wait, and print each outcome.")

    def add_arguments(self, parser):
        parser.add_argument("scope", nargs="?", default="", help="a repository (name, URL or path) or a task's id")
        parser.add_argument("--dataset", default="", help="a dataset's name")
        parser.add_argument("--run", default="", help="a run's name")
        parser.add_argument("--backend", choices=["local", "docker"], default="",
                            help="the sandbox (default: the COMMITGYM_SANDBOX setting); the task's environment in it")
        parser.add_argument("--json", action="store_true", dest="as_json", help="JSON lines on standard output")
        parser.add_argument("--timeout", type=float, default=6 * 3600, help="seconds to wait for every grade")

    def handle(self, *args, scope, dataset, run, backend, as_json, timeout, **options):
        outcomes = Counter()

        def graded(candidate: Candidate, grade: Grade, outcome: str) -> None:
            outcomes[outcome] += 1
            self._report(candidate, grade, outcome, as_json)

        failures = grades_awaited(self._candidates(scope, dataset, run), backend=backend, stderr=self.stderr,
                                  timeout=timeout, on_graded=graded)
        counts = {"counts": dict(sorted(outcomes.items()))}
        self.stdout.write(json.dumps(counts) if as_json else
                          f"{sum(outcomes.values())} graded: " + (", ".join(f"{n} {o}" for o, n in
                                                                            sorted(outcomes.items())) or "nothing"))
        if failures:
            raise CommandError(f"{failures} grades stopped on an error (see their jobs)")

    def _candidates(self, scope: str, dataset: str, run: str) -> list[Candidate]:
        if sum(map(bool, (scope, dataset, run))) != 1:
            raise CommandError("name one of: a repository or a task, --dataset NAME, --run NAME")
        if run:
            found = Run.objects.filter(name=run).first()
            if found is None:
                raise CommandError(f"no run named {run!r}")
            candidates = found.candidates.all()
        else:
            tasks = self._tasks(scope, dataset)
            for task in tasks:
                problem = task_controls_ensure(task)
                if problem:
                    self.stderr.write(f"{task.instance_id}: {problem}")
            candidates = Candidate.objects.filter(task__in=tasks)
        return list(candidates.filter(outcome="").select_related("task").order_by("task__instance_id", "id"))

    def _tasks(self, scope: str, dataset: str) -> list[Task]:
        try:
            return list(tasks_in_scope(scope=scope, dataset=dataset).select_related("repository", "commit"))
        except ScopeNotFound as error:
            raise CommandError(str(error)) from None

    def _report(self, candidate: Candidate, grade: Grade, outcome: str, as_json: bool) -> None:
        candidate.refresh_from_db(fields=["suspicious", "hacking"])
        line = {"task_id": candidate.task.instance_id, "candidate_id": candidate.id, "source": candidate.source,
                "kind": candidate.kind, "outcome": outcome, "tampering": bool(grade.tampering),
                "touches_tests": bool(grade.touches_tests), "suspicious": candidate.suspicious,
                "hacking": [{key: flag.get(key) for key in ("reason", "path", "line", "detail")}
                            for flag in candidate.hacking],
                "second_opinion_differs": [row["test"] for row in (grade.second_opinion or {}).get("differs", [])],
                "seconds": round(grade.seconds or 0, 3)}
        if as_json:
            self.stdout.write(json.dumps(line))
            if outcome == "error" and grade.job.error_message:
                self.stderr.write(f"{candidate}: {grade.job.error_message}")
        else:
            flags = "".join(f", {flag}" for flag in ("tampering", "touches_tests", "suspicious") if line[flag])
            flags += "".join(f" ({flag['reason']} at {flag['path']}:{flag['line']})" for flag in line["hacking"])
            if line["second_opinion_differs"]:
                flags += f", the plain runner differs on {len(line['second_opinion_differs'])} test(s)"
            why = f": {grade.detail or grade.job.error_message}" if outcome not in ("resolved", "partial", "no") else ""
            self.stdout.write(f"{candidate}: {outcome}{flags} ({line['seconds']:.1f} s){why}")
        self.stdout.flush()
