import signal
import sys
import threading

from django.conf import settings
from django.core.management import call_command
from django.core.management.base import BaseCommand, CommandError

from apps.datasets.demo import DEMO_USER, MINING, demo_prepare, demo_user_reset, demo_workers_start, demo_workers_stop


class Command(BaseCommand):
    help = ("Serve the UI at once on the embedded defaults, and bring the bundled sample repository to every page in "
            "the background: its workers, then mining, a few validated tasks, their issues, candidates, mutants, the "
            "verifiers' scores and best@k (the first page says where it stands).")

    def add_arguments(self, parser):
        parser.add_argument("--addrport", default="127.0.0.1:8000")
        parser.add_argument("--no-serve", action="store_true", help="write and mine the sample, then stop")

    def handle(self, *args, addrport, no_serve, **options):
        sample = settings.VAR_DIR / "sample-repo"
        password = demo_user_reset()
        # A SIGTERM ends the demo as Ctrl-C does: through the `finally` that stops its workers.
        signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
        workers = demo_workers_start(log_dir=settings.VAR_DIR, only=("light",) if no_serve else ())  # mining's alone
        self.stderr.write(f"Started the demo's workers: {', '.join(f'{w.name} ({w.queues})' for w in workers)} "
                          f"(logs: {settings.VAR_DIR}/demo-worker-*.log)")
        try:
            if no_serve:
                progress = demo_prepare(sample=sample, through=MINING, say=self.stderr.write)
                if not progress.steps[MINING].complete:
                    raise CommandError(f"the sample repository was not mined: {progress.stopped or 'timed out'}")
                return
            threading.Thread(target=self._prepare, args=(sample,), name="demo-prepare", daemon=True).start()
            self.stdout.write(f"\ncommitgym is at http://{addrport}/  —  log in as {DEMO_USER} / {password}\n")
            self.stdout.flush()
            call_command("runserver", addrport, use_reloader=False)
        finally:
            demo_workers_stop(workers)

    def _prepare(self, sample) -> None:
        progress = demo_prepare(sample=sample, say=self.stderr.write)
        if progress.stopped:
            self.stderr.write(f"The demo's preparation stopped: {progress.stopped}")
        elif progress.complete:
            self.stderr.write("The demo is ready: every page has its data.")
