"""Thin Celery tasks: ids in, a service call, results stored by the service."""

from worker.celery_app import app


@app.task(name="worker.tasks.mining_job_run_task")
def mining_job_run_task(job_id: int) -> None:
    from apps.repositories.services import mining_job_run

    mining_job_run(job_id=job_id)
