"""The chore kind's service: its run, its retry and its failure hook."""

import time

from django.db import transaction
from django.db.models import F

from apps.jobs.services import JobFailed, job_start

from .models import Chore, ChoreRun


def chore_start(*, chore: Chore, user=None):
    with transaction.atomic():
        job, created = job_start(kind="chore", subject=chore, user=user)
        if created:
            ChoreRun.objects.create(job=job, chore=chore)
    return job


def chore_run(job, progress) -> None:
    run = ChoreRun.objects.select_related("chore").get(job=job)
    ChoreRun.objects.filter(id=run.id).update(started=F("started") + 1)
    chore = run.chore
    folder = progress.work_dir()
    (folder / "copy.txt").write_text("a working copy")
    ChoreRun.objects.filter(id=run.id).update(work_dir=str(folder))
    progress.report(0, chore.steps)
    for step in range(chore.steps):
        if step == chore.fail_at:
            raise JobFailed("worker_error", f"the chore failed at step {step}")
        time.sleep(chore.step_seconds)
        progress.report(step + 1)
    if progress.holding():
        ChoreRun.objects.filter(id=run.id).update(finished=F("finished") + 1)


def chore_retry(job, user):
    return chore_start(chore=ChoreRun.objects.get(job=job).chore, user=user)


def chore_failed(job) -> None:
    ChoreRun.objects.filter(job=job).update(failed_hook=F("failed_hook") + 1)
