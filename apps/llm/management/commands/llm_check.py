import json

from django.core.management.base import BaseCommand, CommandError

from apps.llm.calls import model_health
from worker.engine.llm.clients import ROLES


class Command(BaseCommand):
    help = "Say for each role which model answers, how fast, and whether it gives log-probabilities."

    def add_arguments(self, parser):
        parser.add_argument("--role", action="append", choices=ROLES, help="only this role (repeatable)")
        parser.add_argument("--json", action="store_true", dest="as_json", help="JSON lines on standard output")

    def handle(self, *args, role=None, as_json=False, **options):
        failed = 0
        for each in role or ROLES:
            line = model_health(each)
            failed += not line["ok"]
            if as_json:
                self.stdout.write(json.dumps({key: line[key] for key in
                                              ("role", "backend", "model", "ok", "seconds", "logprobs")}))
                if line["error"]:
                    self.stderr.write(f"{each}: {line['error']}")
            else:
                state = f"answers in {line['seconds']:.2f} s" if line["ok"] else "does not answer"
                logprobs = "gives log-probabilities" if line["logprobs"] else "no log-probabilities"
                self.stdout.write(f"{each}: {line['backend']} {line['model'] or '(no model)'} {state}, {logprobs}"
                                  + (f" ({line['error']})" if line["error"] else ""))
            self.stdout.flush()
        if failed:
            raise CommandError(f"{failed} roles have no model answering")
