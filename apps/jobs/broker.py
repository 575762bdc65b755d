"""Whether the broker still holds a job's message, queued or handed to a worker and not yet
acknowledged. Told for the two brokers the product runs on (Redis; the embedded filesystem
transport); for any other the answer is "cannot tell" and the sweep leaves the job alone."""

import json
from pathlib import Path
from typing import Optional

from django.conf import settings


def broker_has_message(message_id: str, queue: str) -> Optional[bool]:
    """True or False, or None when this broker cannot be asked."""
    if not message_id:
        return False
    url = settings.CELERY_BROKER_URL
    if url.startswith(("redis://", "rediss://")):
        return _redis_has(url, message_id, queue)
    if url.startswith("filesystem://"):
        return _folder_has(Path(settings.CELERY_BROKER_TRANSPORT_OPTIONS["data_folder_in"]), message_id, queue)
    return None


def _message_id(payload) -> str:
    try:
        message = json.loads(payload) if isinstance(payload, (str, bytes)) else payload
        return message.get("headers", {}).get("id", "") if isinstance(message, dict) else ""
    except ValueError:
        return ""


def _redis_has(url: str, message_id: str, queue: str) -> bool:
    import redis

    client = redis.Redis.from_url(url, socket_timeout=5)
    # A queue's messages of priority 0 sit in a list named after it, other priorities beside it.
    names = [queue, *(key for key in client.scan_iter(match=f"{queue}\x06\x16*", count=1000))]
    for name in names:
        if any(_message_id(payload) == message_id for payload in client.lrange(name, 0, -1)):
            return True
    # Handed to a worker and not acknowledged yet: kept until the worker acknowledges or dies.
    for entry in client.hvals("unacked"):
        try:
            payload = json.loads(entry)[0]
        except (ValueError, IndexError, TypeError):
            continue
        if _message_id(payload) == message_id:
            return True
    return False


def _folder_has(folder: Path, message_id: str, queue: str) -> bool:
    """The filesystem transport keeps each queued message as a file until a worker fetches it (then
    the file is gone, even if that worker dies before running it)."""
    for path in folder.glob(f"*.{queue}.msg"):
        try:
            if _message_id(path.read_bytes()) == message_id:
                return True
        except OSError:
            continue  # fetched meanwhile
    return False
