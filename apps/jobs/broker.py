"""Which messages the broker still holds for a queue, queued or handed to a worker and not yet
acknowledged. Told for the two brokers the product runs on (Redis; the embedded filesystem
transport); for any other the answer is "cannot tell" (None) and the sweep leaves its jobs alone.
Read once per queue per sweep: the cost grows with the queue, not with the queue times the jobs."""

import json
from pathlib import Path
from typing import Optional

from django.conf import settings

REDIS_PRIORITY_SEPARATOR = "\x06\x16"  # kombu's, between a queue's name and a priority step
# A job's message priority, in kombu's Redis order (0 is taken first; the filesystem transport of
# apps/jobs/transport.py orders them so too): a job sent again after a loss has waited already, so
# it goes ahead of the jobs sent once.
SENT_PRIORITY = 3
RESENT_PRIORITY = 0


def broker_message_ids(queue: str) -> Optional[set[str]]:
    """The ids of the messages the broker holds for `queue`, or None when it cannot be asked."""
    url = settings.CELERY_BROKER_URL
    options = getattr(settings, "CELERY_BROKER_TRANSPORT_OPTIONS", {}) or {}
    if url.startswith(("redis://", "rediss://")):
        return _redis_ids(url, queue, options)
    if url.startswith("filesystem://"):
        return _folder_ids(Path(options["data_folder_in"]), queue)
    return None


def _message_id(payload) -> str:
    try:
        message = json.loads(payload) if isinstance(payload, (str, bytes)) else payload
        return message.get("headers", {}).get("id", "") if isinstance(message, dict) else ""
    except ValueError:
        return ""


def _redis_ids(url: str, queue: str, options: dict) -> set[str]:
    import redis

    prefix = options.get("global_keyprefix", "")
    client = redis.Redis.from_url(url, socket_timeout=5)
    # A queue's messages of priority 0 sit in a list named after it, those of other priorities in
    # lists beside it, named with kombu's separator and the priority step.
    steps = [step for step in options.get("priority_steps", (0, 3, 6, 9)) if step]
    names = [f"{prefix}{queue}", *(f"{prefix}{queue}{REDIS_PRIORITY_SEPARATOR}{step}" for step in steps)]
    ids = {_message_id(payload) for name in names for payload in client.lrange(name, 0, -1)}
    # Handed to a worker and not acknowledged yet: kept until that worker acknowledges, or its
    # message comes back after the visibility timeout.
    for entry in client.hvals(f"{prefix}{options.get('unacked_key', 'unacked')}"):
        try:
            payload, _exchange, routing_key = json.loads(entry)
        except (ValueError, TypeError):
            continue
        if routing_key == queue:
            ids.add(_message_id(payload))
    ids.discard("")
    return ids


def _folder_ids(folder: Path, queue: str) -> set[str]:
    """The filesystem transport keeps each queued message as a file until a worker fetches it (then
    the file is gone, even if that worker dies before running it). A file being written, or set
    aside as no message, holds none."""
    ids = set()
    for path in folder.glob(f"*.{queue}.msg"):
        try:
            ids.add(_message_id(path.read_bytes()))
        except OSError:
            continue  # fetched meanwhile
    ids.discard("")
    return ids
