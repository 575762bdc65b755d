import json
import time

from django.core.management.base import CommandError

from apps.jobs.models import Job
from apps.jobs.on_demand import WorkerOnDemand
from apps.llm.models import LanguageJob
from apps.tasks.generation import generation_source
from apps.tasks.language_jobs import language_job_start
from apps.tasks.models import GeneratedTest, Task, Validation

from ._language import LanguageJobCommand


class Command(LanguageJobCommand):
    help = ("Have the test writer write tests for each task that has no Fail-to-Pass test of its own, check them "
            "before and after the fix, wait, and print what was kept per task.")

    def handle(self, *args, repository, regenerate, as_json, timeout, **options):
        found = self.repository(repository)
        tasks = [task for task in Task.objects.filter(repository=found, state=Task.State.INVALID,
                                                      reason="no_fail_to_pass").order_by("commit__committed_at")
                 if generation_source(task)]
        if not tasks:
            self.stderr.write(f"{found.name} has no validated task without a Fail-to-Pass test")
        jobs = {language_job_start(task=task, kind=LanguageJob.Kind.GENERATE_TESTS, regenerate=regenerate).id: task
                for task in tasks}
        started = {job_id: time.monotonic() for job_id in jobs}
        failed = 0

        def done() -> bool:
            """The test writer's jobs, then the validations that check their files."""
            nonlocal failed
            for job in LanguageJob.objects.filter(id__in=jobs).select_related("job").exclude(
                    job__state__in=Job.ACTIVE_STATES):
                checking = self._checking(job)
                if checking is not None and checking.state in Validation.ACTIVE_STATES:
                    continue  # the files are being run: report when that ends
                task = jobs.pop(job.id)
                failed += (job.outcome == "failed" or job.state != Job.State.SUCCEEDED
                           or (checking is not None and checking.state == "failed"))
                self._report(task, job, checking, time.monotonic() - started[job.id], as_json)
            return not jobs

        def queued() -> bool:
            return (Job.objects.filter(language_job__id__in=jobs, state=Job.State.QUEUED).exists()
                    or Validation.objects.filter(task__in=jobs.values(), job__state=Validation.State.QUEUED).exists())

        with WorkerOnDemand(queues="llm,tests", stderr=self.stderr) as worker:
            worker.wait_until(done, queued=queued, timeout=timeout, what="the test writing and its checks",
                              still=lambda: f"{len(jobs)} tasks still waiting")
        if failed:
            raise CommandError(f"{failed} tasks got no tests checked (see the reasons above)")

    @staticmethod
    def _checking(job: LanguageJob):
        """The validation that checks the files this job wrote (None when it wrote none)."""
        if job.outcome not in {"written", "cached"}:
            return None
        latest = GeneratedTest.objects.filter(task=job.task, validation__isnull=False).order_by("-id").first()
        return latest.validation if latest else None

    def _report(self, task: Task, job: LanguageJob, checking, seconds: float, as_json: bool) -> None:
        rows = GeneratedTest.objects.filter(validation=checking) if checking else GeneratedTest.objects.none()
        kept = rows.filter(state=GeneratedTest.State.KEPT).count()
        dropped = rows.filter(state=GeneratedTest.State.DROPPED).count()
        line = {"task_id": task.instance_id, "outcome": job.outcome or "failed", "model": job.model, "kept": kept,
                "dropped": dropped, "seconds": round(seconds, 3)}
        detail = job.detail or (checking.error if checking is not None else "")
        if as_json:
            self.stdout.write(json.dumps(line))
            if detail:
                self.stderr.write(f"{task.instance_id}: {detail}")
        else:
            verdict = f", task now {Task.objects.get(id=task.id).state}" if checking else ""
            self.stdout.write(f"{task.instance_id}: {job.outcome} by {job.model or '?'}: {kept} kept, {dropped} "
                              f"dropped{verdict} ({seconds:.1f} s){': ' + detail if detail else ''}")
        self.stdout.flush()
