import secrets
import subprocess
import sys

from django.conf import settings
from django.contrib.auth.models import Group, User
from django.core.management import call_command
from django.core.management.base import BaseCommand

from worker.demo.sample_repo import sample_repo_write

DEMO_USER = "demo"


class Command(BaseCommand):
    help = "Write the sample repository, start a worker, mine it, and serve the UI (embedded defaults)."

    def add_arguments(self, parser):
        parser.add_argument("--addrport", default="127.0.0.1:8000")
        parser.add_argument("--no-serve", action="store_true", help="stop after mining")

    def handle(self, *args, addrport, no_serve, **options):
        sample = settings.VAR_DIR / "sample-repo"
        if not (sample / ".git").exists():
            commits = sample_repo_write(sample)
            self.stderr.write(f"Wrote the sample repository ({len(commits)} commits) to {sample}")
        password = self._demo_user()
        worker_log = settings.VAR_DIR / "demo-worker.log"
        self.stderr.write(f"Starting a background worker (log: {worker_log})")
        with open(worker_log, "ab") as log:
            worker = subprocess.Popen(
                # -B: the periodic sweep of lost jobs runs inside this worker (deployments run beat apart).
                [sys.executable, "-m", "celery", "-A", "worker.celery_app", "worker", "-Q", settings.COMMITGYM_WORKER_QUEUES,
                 "--concurrency", "1", "--loglevel", "INFO", "-B", "--schedule", str(settings.VAR_DIR / "beat-schedule")],
                stdout=log, stderr=subprocess.STDOUT,
            )
        try:
            call_command("mine", str(sample), name="demo/textkit")
            if no_serve:
                return
            self.stdout.write(f"\ncommitgym is at http://{addrport}/  —  log in as {DEMO_USER} / {password}\n")
            call_command("runserver", addrport, use_reloader=False)
        finally:
            worker.terminate()
            worker.wait(timeout=30)

    def _demo_user(self) -> str:
        password = secrets.token_urlsafe(9)
        user, _ = User.objects.get_or_create(username=DEMO_USER)
        user.set_password(password)
        user.is_staff = user.is_superuser = True
        user.save()
        user.groups.add(*Group.objects.filter(name__in=["curator", "admin"]))
        return password
