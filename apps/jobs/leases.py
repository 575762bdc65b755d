"""A worker's hold on a running job of the jobs table.

The row carries `state`, `started_at`, `heartbeat_at` and `lease_token`. Claiming
moves it from its waiting state to running with a fresh token, or takes over a
running row whose heartbeat went stale (its worker died). A heartbeat thread keeps
the row fresh while the job works, even inside one long step. Every write goes
through the token: if another worker took the row over, or it was deleted, the
write raises LeaseLost and this worker stops.
"""

import threading
import uuid
from datetime import timedelta
from typing import Optional

from django.conf import settings
from django.db import DatabaseError, connection
from django.db.models import Q
from django.utils import timezone


class LeaseLost(Exception):
    """The row was taken over by another worker, finished, or deleted."""


class Lease:
    def __init__(self, model, pk: int, token: str, running_state: str):
        self.model, self.pk, self.token, self.running_state = model, pk, token, running_state
        self._stopped = threading.Event()
        self._thread = threading.Thread(target=self._beat, name=f"{model.__name__}-{pk}-heartbeat", daemon=True)

    @classmethod
    def claim(cls, model, pk: int, *, waiting_state: str, running_state: str, **fields) -> Optional["Lease"]:
        """The lease, or None if the row is neither waiting nor running with a stale heartbeat;
        `fields` are written with the claim."""
        now = timezone.now()
        stale = cls.stale_cutoff()
        token = uuid.uuid4().hex
        claimed = (
            model.objects.filter(pk=pk)
            .filter(Q(state=waiting_state) | Q(state=running_state, heartbeat_at__lt=stale))
            .update(state=running_state, started_at=now, heartbeat_at=now, lease_token=token, **fields)
        )
        return cls(model, pk, token, running_state) if claimed else None

    @staticmethod
    def stale_cutoff():
        """Running rows whose heartbeat is older than this have lost their worker."""
        return timezone.now() - timedelta(seconds=settings.COMMITGYM_JOB_STALE_SECONDS)

    @classmethod
    def stale_rows(cls, model, *, running_state: str, **filters):
        """The running rows (among `filters`) whose worker stopped reporting."""
        return model.objects.filter(state=running_state, heartbeat_at__lt=cls.stale_cutoff(), **filters)

    @staticmethod
    def held_elsewhere(model, pk: int, *, running_state: str) -> bool:
        return model.objects.filter(pk=pk, state=running_state).exists()

    def rows(self):
        return self.model.objects.filter(pk=self.pk, state=self.running_state, lease_token=self.token)

    def _beat(self) -> None:
        try:
            while not self._stopped.wait(settings.COMMITGYM_JOB_HEARTBEAT_SECONDS):
                try:
                    self.rows().update(heartbeat_at=timezone.now())
                except DatabaseError:
                    connection.close()  # a dropped connection: the next beat opens a new one
        finally:
            connection.close()

    def __enter__(self):
        self._thread.start()
        return self

    def __exit__(self, *exc):
        self._stopped.set()
        self._thread.join()

    def update(self, **fields) -> None:
        if not self.rows().update(heartbeat_at=timezone.now(), **fields):
            raise LeaseLost()

    def finish(self, state: str, **fields) -> bool:
        """End the row; False if it was no longer ours (taken over, or deleted)."""
        return bool(self.rows().update(state=state, finished_at=timezone.now(), heartbeat_at=timezone.now(),
                                       **fields))
