# The Celery application is loaded with Django so that `.delay()` from views
# and services publishes through the configured broker.
from worker.celery_app import app as celery_app

__all__ = ["celery_app"]
