"""Many candidates graded by the workers while a command waits: each grade started (one already
running is skipped, said on standard error), and each reported as it ends."""

from typing import Callable

from apps.jobs.on_demand import WorkerOnDemand

from ..models import Candidate, Grade
from .grades import candidate_grade_start


def grades_awaited(candidates: list[Candidate], *, backend: str, stderr, timeout: float,
                   on_graded: Callable[[Candidate, Grade, str], None]) -> int:
    """Grade each candidate and wait for every grade; `on_graded(candidate, grade, outcome)` as each
    ends ("error" for a grade whose job failed). Returns how many failed."""
    pending = {}
    for candidate in candidates:
        grade = candidate_grade_start(candidate=candidate, backend=backend)
        if grade is None:
            stderr.write(f"{candidate}: being graded already: skipped")
            continue
        pending[grade.id] = candidate
    failures = 0

    def done() -> bool:
        nonlocal failures
        for grade in Grade.objects.filter(id__in=pending).exclude(job__state__in=Grade.ACTIVE_STATES) \
                .select_related("job"):
            candidate = pending.pop(grade.id)
            failures += grade.state != Grade.State.SUCCEEDED
            on_graded(candidate, grade, grade.outcome if grade.state == Grade.State.SUCCEEDED else "error")
        return not pending

    queued = lambda: Grade.objects.filter(id__in=pending, job__state=Grade.State.QUEUED).exists()  # noqa: E731
    with WorkerOnDemand(queues="tests", stderr=stderr) as worker:
        worker.wait_until(done, queued=queued, timeout=timeout, what="the grades",
                          still=lambda: f"{len(pending)} still running")
    return failures
