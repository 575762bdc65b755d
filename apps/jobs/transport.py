"""The embedded default's broker: kombu's filesystem transport, safe with several processes.

Kombu's own writes a message's file in place and reads any file named for the queue: a reader that
comes while a file is being written reads it empty or cut short, and its worker dies on the
JSONDecodeError ("Unrecoverable error"), the message lost. Here a message is written under a name
readers pass over and renamed into place once whole; a reader takes a file by renaming it (one
reader wins); a file that is not a message is set aside in a folder, with a log line, and the
reader goes on to the next. Names sort by priority (0 first, as kombu's Redis transport orders
them), then by the time they were sent: a job sent again with priority 0 goes ahead of the jobs
waiting. Settings name this transport for `filesystem://` (apps/settings.py)."""

import logging
import os
import shutil
import time
import uuid
from queue import Empty

from kombu.exceptions import ChannelError
from kombu.transport import filesystem
from kombu.utils.encoding import bytes_to_str, str_to_bytes
from kombu.utils.json import dumps, loads

log = logging.getLogger(__name__)

TRANSPORT = "apps.jobs.transport:Transport"
PARTIAL_SUFFIX = ".part"  # a message still being written: never read, as it does not end in ".<queue>.msg"
TAKEN_SUFFIX = ".taken"  # a message a reader has taken and is reading
SET_ASIDE_FOLDER = "set-aside"  # where a file that is not a message goes (under the queue's folder, by default)


def message_file_name(queue: str, priority: int) -> str:
    """No dot before the queue's name (readers split there), and names sort in the order to read."""
    return f"{priority}-{time.time_ns():020d}-{uuid.uuid4().hex}.{queue}.msg"


def set_aside_folder(transport_options: dict) -> str:
    return transport_options.get("set_aside_folder") or os.path.join(transport_options["data_folder_in"],
                                                                     SET_ASIDE_FOLDER)


class Channel(filesystem.Channel):
    def _put(self, queue, payload, **kwargs):
        path = os.path.join(self.data_folder_out, message_file_name(queue, self._get_message_priority(payload)))
        data = str_to_bytes(dumps(payload))
        try:
            with open(path + PARTIAL_SUFFIX, "xb") as file:
                file.write(data)
            os.rename(path + PARTIAL_SUFFIX, path)
        except OSError as error:
            _remove(path + PARTIAL_SUFFIX)
            raise ChannelError(f"Cannot add file {path!r} to the queue's folder") from error

    def _get(self, queue):
        wanted = f"{queue}.msg"
        for name in sorted(os.listdir(self.data_folder_in)):
            if name.partition(".")[2] != wanted:
                continue
            taken = os.path.join(self.data_folder_in, name + TAKEN_SUFFIX)
            try:
                os.rename(os.path.join(self.data_folder_in, name), taken)
            except OSError:
                continue  # another reader took it first
            try:
                with open(taken, "rb") as file:
                    payload = file.read()
            except OSError as error:
                raise ChannelError(f"Cannot read file {taken!r} from the queue") from error
            message = _message(payload)
            if message is None:
                self._set_aside(taken, name)
                continue
            if self.store_processed:
                shutil.move(taken, os.path.join(self.processed_folder, name))
            else:
                _remove(taken)
            return message
        raise Empty()

    def _set_aside(self, taken: str, name: str) -> None:
        folder = set_aside_folder(self.transport_options)
        os.makedirs(folder, exist_ok=True)
        kept = os.path.join(folder, name)
        shutil.move(taken, kept)
        log.error("A file of the %s queue is not a whole message (%d bytes): set aside as %s",
                  name.partition(".")[2].removesuffix(".msg"), os.path.getsize(kept), kept)


def _message(payload: bytes):
    """The message a file holds, or None if it holds none (empty, cut short, not kombu's)."""
    try:
        message = loads(bytes_to_str(payload))
    except ValueError:  # JSONDecodeError, UnicodeDecodeError
        return None
    properties = message.get("properties") if isinstance(message, dict) else None
    return message if isinstance(properties, dict) and "delivery_tag" in properties else None


def _remove(path: str) -> None:
    try:
        os.remove(path)
    except FileNotFoundError:
        pass


class Transport(filesystem.Transport):
    Channel = Channel
