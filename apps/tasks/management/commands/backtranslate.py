import json

from django.core.management.base import CommandError

from apps.jobs.models import Job
from apps.jobs.on_demand import WorkerOnDemand
from apps.llm.models import LanguageJob
from apps.tasks.backtranslation import task_current_issue
from apps.tasks.language_jobs import language_job_start
from apps.tasks.models import Task
from apps.tasks.states import VALID_OR_LATER

from ._language import LanguageJobCommand


class Command(LanguageJobCommand):
    help = "Have the issue writer write the issue of each valid task of a repository; wait; print each outcome."

    def handle(self, *args, repository, regenerate, as_json, timeout, **options):
        found = self.repository(repository)
        tasks = Task.objects.filter(repository=found, state__in=VALID_OR_LATER).order_by("commit__committed_at")
        pending = {language_job_start(task=task, kind=LanguageJob.Kind.BACKTRANSLATE, regenerate=regenerate).id: task
                   for task in tasks}
        if not pending:
            self.stderr.write(f"{found.name} has no valid task yet (validate it first)")
        failed = 0

        def done() -> bool:
            nonlocal failed
            for job in LanguageJob.objects.filter(id__in=pending).select_related("job").exclude(
                    job__state__in=Job.ACTIVE_STATES):
                task = pending.pop(job.id)
                failed += job.outcome == "failed" or job.state != Job.State.SUCCEEDED
                self._report(task, job, as_json)
            return not pending

        queued = lambda: Job.objects.filter(language_job__id__in=pending, state=Job.State.QUEUED).exists()  # noqa: E731
        with WorkerOnDemand(queues="llm", stderr=self.stderr) as worker:
            worker.wait_until(done, queued=queued, timeout=timeout, what="the issue writing",
                              still=lambda: f"{len(pending)} tasks still waiting")
        if failed:
            raise CommandError(f"{failed} tasks got no issue (see the reasons above)")

    def _report(self, task: Task, job: LanguageJob, as_json: bool) -> None:
        current = task_current_issue(task=task)
        line = {"task_id": task.instance_id, "outcome": job.outcome or "failed", "model": job.model,
                "leak_score": current.leak_score if current else None, "seconds": round(job.job.seconds or 0, 3)}
        if as_json:
            self.stdout.write(json.dumps(line))
            if job.detail:
                self.stderr.write(f"{task.instance_id}: {job.detail}")
        else:
            leak = f", leak score {line['leak_score']:.2f}" if current else ""
            self.stdout.write(f"{task.instance_id}: {job.outcome} by {job.model or '?'}{leak} "
                              f"({line['seconds']:.1f} s){': ' + job.detail if job.detail else ''}")
        self.stdout.flush()
