import json

from django.core.management.base import BaseCommand, CommandError

from apps.jobs.on_demand import WorkerOnDemand
from apps.repositories.models import MiningJob
from apps.repositories.selectors import repository_mining_summary
from apps.repositories.services import RepositoryRefused, mining_job_start, repository_find, repository_register


class Command(BaseCommand):
    help = "Register a repository (URL or local path) if needed, mine it, wait, and print its funnel."

    def add_arguments(self, parser):
        parser.add_argument("location", help="URL or local path of a git repository, or a registered name")
        parser.add_argument("--name", default="", help="owner/name for a new repository")
        parser.add_argument("--json", action="store_true", dest="as_json", help="one JSON line on standard output")
        parser.add_argument("--timeout", type=float, default=3600, help="seconds to wait for the job")

    def handle(self, *args, location, name, as_json, timeout, **options):
        repository = repository_find(location=location)
        if repository is None:
            try:
                repository = repository_register(location=location, name=name)
            except RepositoryRefused as refused:
                raise CommandError(str(refused)) from None
            if repository.registration_warning:
                self.stderr.write(repository.registration_warning)
        job, created = mining_job_start(repository=repository)
        if not created:
            self.stderr.write(f"Mining job {job.id} is already running for {repository.name}; waiting for it.")
        job = self._wait(job, timeout)
        if job.state != MiningJob.State.SUCCEEDED:
            raise CommandError(f"mining {repository.name} {job.state}: {job.error_code} — "
                               f"{job.error_sentence} {job.error_message}".strip())
        funnel = repository_mining_summary(repository=repository)
        summary = {"repo": funnel["repo"], "commits_seen": funnel["commits_seen"], "new_commits": job.new_commits,
                   "kept": funnel["kept"], "dropped": funnel["dropped"], "seconds": round(job.seconds or 0, 3)}
        if as_json:
            self.stdout.write(_json_line(summary))
            self.stdout.flush()
            return
        self.stdout.write(f"{summary['repo']}: {summary['commits_seen']} commits, {summary['new_commits']} new, "
                          f"{summary['kept']} kept, mined in {summary['seconds']:.2f} s")
        for reason, n in summary["dropped"].items():
            self.stdout.write(f"  dropped {n:>6}  {reason}")

    def _wait(self, job: MiningJob, timeout: float) -> MiningJob:
        def done() -> bool:
            job.refresh_from_db()
            return not job.is_active

        with WorkerOnDemand(queues="mining", stderr=self.stderr) as worker:
            worker.wait_until(done, queued=lambda: job.state == MiningJob.State.QUEUED, timeout=timeout,
                              what=f"mining job {job.id}", every=0.2, still=lambda: f"state {job.state}")
        return job


def _json_line(data) -> str:
    return json.dumps(data, sort_keys=False, ensure_ascii=False)
