import json
import time

from django.core.management.base import BaseCommand, CommandError

from apps.llm.models import LanguageJob
from apps.llm.services import language_job_start
from apps.repositories.services import repository_find
from apps.tasks.backtranslation import task_current_issue
from apps.tasks.models import Task
from apps.tasks.selectors import VALID_OR_LATER


class Command(BaseCommand):
    help = "Have the issue writer write the issue of each valid task of a repository; wait; print each outcome."

    def add_arguments(self, parser):
        parser.add_argument("repository", help="a registered repository's name, URL or path")
        parser.add_argument("--regenerate", action="store_true", help="ask again, adding a new version")
        parser.add_argument("--json", action="store_true", dest="as_json", help="JSON lines on standard output")
        parser.add_argument("--timeout", type=float, default=6 * 3600, help="seconds to wait for all tasks")

    def handle(self, *args, repository, regenerate, as_json, timeout, **options):
        found = repository_find(location=repository)
        if found is None:
            raise CommandError(f"no registered repository named {repository!r} (mine it first)")
        tasks = Task.objects.filter(repository=found, state__in=VALID_OR_LATER).order_by("commit__committed_at")
        pending = {language_job_start(task=task, kind=LanguageJob.Kind.BACKTRANSLATE, regenerate=regenerate).id: task
                   for task in tasks}
        if not pending:
            self.stderr.write(f"{found.name} has no valid task yet (validate it first)")
        failed, deadline = 0, time.monotonic() + timeout
        while pending:
            for job in LanguageJob.objects.filter(id__in=pending).exclude(state__in=LanguageJob.ACTIVE_STATES):
                task = pending.pop(job.id)
                failed += job.outcome == "failed"
                self._report(task, job, as_json)
            if pending and time.monotonic() > deadline:
                raise CommandError(f"{len(pending)} tasks did not finish within {timeout:.0f} s")
            time.sleep(0.5)
        if failed:
            raise CommandError(f"{failed} tasks got no issue (see the reasons above)")

    def _report(self, task: Task, job: LanguageJob, as_json: bool) -> None:
        current = task_current_issue(task=task)
        line = {"task_id": task.instance_id, "outcome": job.outcome, "model": job.model,
                "leak_score": current.leak_score if current else None, "seconds": round(job.seconds or 0, 3)}
        if as_json:
            self.stdout.write(json.dumps(line))
            if job.detail:
                self.stderr.write(f"{task.instance_id}: {job.detail}")
        else:
            leak = f", leak score {line['leak_score']:.2f}" if current else ""
            self.stdout.write(f"{task.instance_id}: {job.outcome} by {job.model or '?'}{leak} "
                              f"({line['seconds']:.1f} s){': ' + job.detail if job.detail else ''}")
        self.stdout.flush()
