"""The Celery application. Configuration comes from Django settings (CELERY_*)."""

import os

from celery import Celery
from celery.signals import after_setup_logger, after_setup_task_logger, worker_ready
from django.conf import settings

from worker.engine.sandbox.cgroups import cgroups_sweep
from worker.engine.sandbox.disk import capped_folders_sweep
from worker.engine.sandbox.docker import DockerSandbox, docker_sandbox_cleanup
from worker.logs import handlers_redact

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "apps.settings")

app = Celery("commitgym", include=["worker.tasks"])
app.config_from_object("django.conf:settings", namespace="CELERY")


@after_setup_logger.connect
@after_setup_task_logger.connect
def _logs_redacted(logger=None, **kwargs) -> None:
    """The worker's own handlers take credentials out of every record, as Django's do."""
    handlers_redact(logger)


@worker_ready.connect
def _containers_left_behind_remove(**kwargs) -> None:
    """A worker killed mid-run leaves its sandbox container stopped or still counting down, and the
    local backend's cgroups of that run: sweep them."""
    cgroups_sweep()
    capped_folders_sweep(settings.COMMITGYM_WORK_DIR)
    if DockerSandbox.available():
        docker_sandbox_cleanup()
