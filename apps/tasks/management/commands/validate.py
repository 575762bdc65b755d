import json
from collections import Counter

from django.core.management.base import BaseCommand, CommandError

from apps.jobs.on_demand import WorkerOnDemand
from apps.repositories.services import repository_find
from apps.tasks.models import Task, Validation
from apps.tasks.selectors import environment_reuse
from apps.tasks.services import task_validation_start
from apps.tasks.states import VALIDATABLE_STATES


class Command(BaseCommand):
    help = "Build environments and validate a repository's mined commits (or some), wait, print each verdict."

    def add_arguments(self, parser):
        parser.add_argument("repository", help="a registered repository's name, URL or path")
        parser.add_argument("--commit", action="append", default=[], help="a full or abbreviated sha (repeatable)")
        parser.add_argument("--backend", choices=["local", "docker"], default="",
                            help="the sandbox (default: the COMMITGYM_SANDBOX setting)")
        parser.add_argument("--json", action="store_true", dest="as_json", help="JSON lines on standard output")
        parser.add_argument("--timeout", type=float, default=6 * 3600, help="seconds to wait for all validations")

    def handle(self, *args, repository, commit, backend, as_json, timeout, **options):
        found = repository_find(location=repository)
        if found is None:
            raise CommandError(f"no registered repository named {repository!r} (mine it first)")
        tasks = self._tasks(found, commit)
        pending, skipped = {}, 0
        for task in tasks:
            validation = task_validation_start(task=task, backend=backend)
            if validation is None:
                self.stderr.write(f"{task.instance_id}: being validated already, or {task.state}: skipped")
                skipped += 1
                continue
            pending[validation.id] = task
        failures, finished = 0, []

        def done() -> bool:
            nonlocal failures
            ended = Validation.objects.filter(id__in=pending).exclude(job__state__in=Validation.ACTIVE_STATES)
            for validation in ended.select_related("job", "environment"):
                task = pending.pop(validation.id)
                finished.append(validation.id)
                failures += validation.state == Validation.State.FAILED
                self._report(task, validation, as_json)
            return not pending

        queued = lambda: Validation.objects.filter(id__in=pending, job__state=Validation.State.QUEUED).exists()  # noqa: E731
        with WorkerOnDemand(queues="tests", stderr=self.stderr) as worker:
            worker.wait_until(done, queued=queued, timeout=timeout, what="the validations",
                              still=lambda: f"{len(pending)} still running")
        self._summary(list(finished), as_json)
        if failures:
            raise CommandError(f"{failures} validations stopped on an error (see their pages)")
        if skipped and commit:
            raise CommandError(f"{skipped} of the commits asked for could not be validated now")

    def _tasks(self, repository, shas):
        tasks = Task.objects.filter(repository=repository).select_related("commit").order_by("commit__committed_at")
        if not shas:
            return list(tasks.filter(state__in=VALIDATABLE_STATES))
        chosen = []
        for sha in shas:
            matches = [task for task in tasks if task.commit.sha.startswith(sha.lower())]
            if len(matches) != 1:
                raise CommandError(f"{sha}: {'no task' if not matches else 'ambiguous'} in {repository.name}")
            chosen += matches
        return chosen

    def _summary(self, validation_ids: list[int], as_json: bool) -> None:
        """Verdict counts and environment reuse, on standard error with --json (stdout holds only the lines)."""
        validations = Validation.objects.filter(id__in=validation_ids)
        verdicts = Counter(validations.values_list("verdict", flat=True))
        reuse = environment_reuse(validations=validations)
        counts = ", ".join(f"{count} {verdict or 'error'}" for verdict, count in sorted(verdicts.items()))
        text = (f"{len(validation_ids)} validated: {counts or 'nothing'}; environment reuse: {reuse.reused} of "
                f"{reuse.validations} ({reuse.percent:.1f}%), {reuse.environments} distinct environments")
        (self.stderr if as_json else self.stdout).write(text)

    def _report(self, task: Task, validation: Validation, as_json: bool) -> None:
        line = {
            "sha": task.commit.sha, "task_id": task.instance_id,
            "verdict": validation.verdict or "error", "reason": validation.reason or validation.error[:200],
            "fail_to_pass": sorted(validation.fail_to_pass), "pass_to_pass_count": len(validation.pass_to_pass),
            "flaky": validation.flaky, "environment_id": validation.environment.key if validation.environment else None,
            "environment_reused": validation.environment_reused, "seconds": round(validation.seconds or 0, 3),
        }
        if as_json:
            self.stdout.write(json.dumps(line))
        else:
            self.stdout.write(f"{line['task_id']}: {line['verdict']} {line['reason']} "
                              f"(F2P {len(line['fail_to_pass'])}, P2P {line['pass_to_pass_count']}, "
                              f"{line['seconds']:.1f} s)")
        self.stdout.flush()
