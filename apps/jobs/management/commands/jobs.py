"""Background jobs from the command line: list them, retry or cancel some, run the sweep."""

import json

from django.core.management.base import BaseCommand, CommandError

from apps.jobs.models import Job
from apps.jobs.services import JobRefused, job_cancel, job_retry, jobs_sweep


class Command(BaseCommand):
    help = "List background jobs, retry failed ones, cancel running ones, or sweep for lost ones."

    def add_arguments(self, parser):
        actions = parser.add_subparsers(dest="action", required=True)
        listing = actions.add_parser("list", help="jobs, newest first")
        listing.add_argument("--kind", default="")
        listing.add_argument("--state", default="", choices=["", *Job.State.values])
        listing.add_argument("--limit", type=int, default=50)
        listing.add_argument("--json", action="store_true", dest="as_json", help="one JSON line per job")
        for name, what in (("retry", "start failed or cancelled jobs again, as new jobs"),
                           ("cancel", "stop queued or running jobs")):
            action = actions.add_parser(name, help=what)
            action.add_argument("ids", nargs="+", type=int, metavar="JOB")
        sweep = actions.add_parser("sweep", help="re-send lost jobs, hand on dead workers' jobs, remove stray copies")
        sweep.add_argument("--json", action="store_true", dest="as_json")

    def handle(self, *args, action, **options):
        getattr(self, f"_{action}")(**options)

    def _list(self, *, kind, state, limit, as_json, **options):
        jobs = Job.objects.select_related("requested_by").order_by("-created_at", "-id")
        jobs = jobs.filter(kind=kind) if kind else jobs
        for job in (jobs.filter(state=state) if state else jobs)[:limit]:
            line = {"id": job.id, "kind": job.kind, "subject": job.subject_label, "state": job.state,
                    "progress": [job.progress_done, job.progress_total], "worker": job.worker,
                    "error_code": job.error_code, "error": job.error_message,
                    "created_at": job.created_at.isoformat()}
            if as_json:
                self.stdout.write(json.dumps(line, ensure_ascii=False))
            else:
                error = f" — {job.error_sentence} {job.error_message}".rstrip() if job.error_code else ""
                self.stdout.write(f"{job.id:>7}  {job.kind:<16} {job.state:<10} {job.subject_label}{error}")

    def _each(self, ids: list[int], act) -> None:
        refused = 0
        for job_id in ids:
            job = Job.objects.filter(id=job_id).first()
            if job is None:
                self.stderr.write(f"job {job_id}: no such job")
                refused += 1
                continue
            try:
                self.stdout.write(act(job))
            except JobRefused as refusal:
                self.stderr.write(f"job {job_id}: {refusal}")
                refused += 1
        if refused:
            raise CommandError(f"{refused} of {len(ids)} jobs refused (see above)")

    def _retry(self, *, ids, **options):
        self._each(ids, lambda job: f"job {job.id}: queued again as job {job_retry(job=job).id}")

    def _cancel(self, *, ids, **options):
        def cancel(job):
            job_cancel(job=job)
            return f"job {job.id}: cancelled" if Job.objects.get(id=job.id).state == "cancelled" else \
                f"job {job.id}: stops at its next progress report"
        self._each(ids, cancel)

    def _sweep(self, *, as_json, **options):
        counts = jobs_sweep()
        self.stdout.write(json.dumps(counts) if as_json else ", ".join(f"{n} {what.replace('_', ' ')}"
                                                                       for what, n in counts.items()))
