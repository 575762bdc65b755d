import json
import sys

from django.core.management.base import BaseCommand, CommandError

from apps.datasets.candidates.sampling import (
    CONFIRM_ABOVE,
    SAMPLE,
    SAMPLES_PER_TASK,
    samples_missing,
    sampling_estimate_said,
    sampling_start,
)
from apps.datasets.models import Grade, Sampling
from apps.datasets.selectors import ScopeNotFound, tasks_in_scope
from apps.jobs.models import Job
from apps.jobs.on_demand import WorkerOnDemand
from apps.llm.calls import role_settings
from worker.engine.llm.clients import ModelError
from worker.engine.sample.agent import AgentBudget


class Command(BaseCommand):
    help = ("Sample candidate patches from the agent model through the built-in agent loop: N per valid task "
            "(missing ones only), each graded once made. Prints one line per sample (JSON lines with --json: "
            "task_id, index, stop_reason, steps, tokens_in, tokens_out, seconds, patch_lines, outcome).")

    def add_arguments(self, parser):
        parser.add_argument("scope", nargs="?", default="", help="a repository (name, URL or path) or a task's id")
        parser.add_argument("--dataset", default="", help="a dataset's name")
        parser.add_argument("-n", type=int, default=SAMPLES_PER_TASK, help="samples per task (26, as in the paper)")
        parser.add_argument("--steps", type=int, default=AgentBudget.steps, help="steps per sample at most")
        parser.add_argument("--tokens", type=int, default=AgentBudget.tokens, help="tokens per sample at most")
        parser.add_argument("--seconds", type=float, default=AgentBudget.wall_seconds,
                            help="wall-clock seconds per sample at most")
        parser.add_argument("--yes", action="store_true", help="start a large run without asking")
        parser.add_argument("--json", action="store_true", dest="as_json", help="JSON lines on standard output")
        parser.add_argument("--timeout", type=float, default=24 * 3600, help="seconds to wait for everything")

    def handle(self, *args, scope, dataset, n, steps, tokens, seconds, yes, as_json, timeout, **options):
        if n < 1 or steps < 1 or tokens < 1 or seconds <= 0:
            raise CommandError("-n, --steps, --tokens and --seconds must be positive")
        try:
            tasks = list(tasks_in_scope(scope=scope, dataset=dataset).filter(verdict="valid")
                         .select_related("repository", "commit"))
            model = role_settings("agent").model_name
        except ScopeNotFound as error:
            raise CommandError(str(error)) from None
        except ModelError as error:
            raise CommandError(f"the agent model cannot be used: {error}") from None
        budget = AgentBudget(steps=steps, tokens=tokens, wall_seconds=seconds)
        wanted = {task: samples_missing(task, n, model) for task in tasks if not task.imported}
        wanted = {task: indexes for task, indexes in wanted.items() if indexes}
        for task in tasks:
            if task.imported:
                self.stderr.write(f"{task.instance_id}: an imported instance has no environment here: not sampled")
        self._confirm(sum(map(len, wanted.values())), budget, yes)
        job_ids = [sampling_start(task=task, index=index, budget=budget).job_id
                   for task, indexes in wanted.items() for index in indexes]
        self._wait(job_ids, timeout)
        self._report(job_ids, as_json)

    def _confirm(self, samples: int, budget: AgentBudget, yes: bool) -> None:
        """Say what a large run may cost, and ask (or refuse, with nobody to ask)."""
        if samples <= CONFIRM_ABOVE:
            return
        self.stderr.write(sampling_estimate_said(samples, budget))
        if yes:
            return
        if not sys.stdin.isatty():
            raise CommandError("a run this large asks first: pass --yes to start it without asking")
        if input("Start? [y/N] ").strip().lower() not in ("y", "yes"):
            raise CommandError("not started")

    def _wait(self, job_ids: list[int], timeout: float) -> None:
        """Until every sampling job and every grade of what they made has ended."""
        def done() -> bool:
            if Job.objects.filter(id__in=job_ids, state__in=Job.ACTIVE_STATES).exists():
                return False
            made = Sampling.objects.filter(job_id__in=job_ids, candidate__isnull=False).values("candidate_id")
            return not Grade.objects.filter(candidate_id__in=made, job__state__in=Grade.ACTIVE_STATES).exists()

        queued = Job.objects.filter(state=Job.State.QUEUED, kind__in=(SAMPLE, "grade"))
        with WorkerOnDemand(queues="llm,tests", stderr=self.stderr) as worker:
            worker.wait_until(done, queued=queued.exists, timeout=timeout, what="the sampling")

    def _report(self, job_ids: list[int], as_json: bool) -> None:
        failed = 0
        for sampling in Sampling.objects.filter(job_id__in=job_ids).select_related("job", "task", "candidate") \
                .order_by("task__instance_id", "index"):
            candidate = sampling.candidate
            line = {"task_id": sampling.task.instance_id, "index": sampling.index,
                    "stop_reason": sampling.stop_reason or sampling.job.state, "steps": sampling.steps,
                    "tokens_in": sampling.tokens_in, "tokens_out": sampling.tokens_out,
                    "seconds": round(sampling.seconds or 0, 1),
                    "patch_lines": len(candidate.patch.splitlines()) if candidate else 0,
                    "outcome": candidate.outcome if candidate else ""}
            failed += not sampling.stop_reason
            self.stdout.write(json.dumps(line) if as_json else
                              f"{line['task_id']} #{line['index']}: {line['stop_reason']} after {line['steps']} "
                              f"steps, {line['patch_lines']} patch lines, {line['outcome'] or 'not graded'}")
        for job in Job.objects.filter(id__in=job_ids, state=Job.State.FAILED):
            self.stderr.write(f"{job.subject_label}: sampling failed: {job.error_message}")
        if failed:
            raise CommandError(f"{failed} samples were not made (see their jobs)")
