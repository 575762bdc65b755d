"""Runs inside the sandbox: `python3 -I -S index_forwarder.py SOCKET -- COMMAND...`.

Listens on the sandbox's own loopback, passes every connection made to it on to the worker's
index proxy through SOCKET (a Unix socket mounted into the sandbox), and runs COMMAND with
HTTPS_PROXY pointing at itself. Exits with COMMAND's status. Standard library only, Python 3.7
and later: it runs with whatever Python the sandbox has (index_proxy.py says why it exists).
"""

import os
import selectors
import socket
import subprocess
import sys
import threading

_BUFFERED = 1 << 20  # bytes held for a slow reader before its peer is no longer read


class _End:
    """One socket of a connection: what waits to be written to it, its peer, whether it is registered."""

    def __init__(self, sock):
        self.sock, self.peer, self.pending, self.ended, self.registered = sock, None, bytearray(), False, False


def _relay(listener, proxy_socket):
    """One thread for every connection (a thread each would count against the run's process limit):
    accept, connect each to the proxy, and copy bytes both ways without ever blocking on one
    connection (a reader that waits for another connection first would then wait for ever)."""
    selector = selectors.DefaultSelector()
    selector.register(listener, selectors.EVENT_READ, None)
    while True:
        for key, events in selector.select():
            if key.data is None:
                _accept(listener, proxy_socket, selector)
            else:
                _move(key.data, events, selector)


def _accept(listener, proxy_socket, selector):
    client, _ = listener.accept()
    proxy = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        proxy.connect(proxy_socket)
    except OSError:
        client.close()
        proxy.close()
        return
    ends = _End(client), _End(proxy)
    ends[0].peer, ends[1].peer = ends[1], ends[0]
    for end in ends:
        end.sock.setblocking(False)
        _watch(end, selector)


def _move(end, events, selector):
    """Write what waits for this end, read what it has for its peer; close both once done."""
    if end.sock.fileno() < 0:
        return  # closed with its peer earlier in this round
    try:
        if events & selectors.EVENT_WRITE and end.pending:
            del end.pending[:end.sock.send(end.pending)]
        if events & selectors.EVENT_READ:
            chunk = end.sock.recv(1 << 16)
            end.peer.pending += chunk
            end.ended = not chunk
    except (BlockingIOError, InterruptedError):
        pass
    except OSError:
        end.ended = end.peer.ended = True
        end.pending.clear()
        end.peer.pending.clear()
    if (end.ended and not end.peer.pending) or (end.peer.ended and not end.pending):
        for one in (end, end.peer):  # one side is over and all it sent is delivered
            if one.registered:
                selector.unregister(one.sock)
                one.registered = False
            one.sock.close()
        return
    _watch(end, selector)
    _watch(end.peer, selector)


def _watch(end, selector):
    """Read from an end while its peer's backlog is small; write to it while it has some."""
    events = (0 if end.ended or len(end.peer.pending) >= _BUFFERED else selectors.EVENT_READ) \
        | (selectors.EVENT_WRITE if end.pending else 0)
    if events and end.registered:
        selector.modify(end.sock, events, end)
    elif events:
        selector.register(end.sock, events, end)
        end.registered = True
    elif end.registered:
        selector.unregister(end.sock)
        end.registered = False


def main(argv):
    proxy_socket, separator, command = argv[0], argv[1], argv[2:]
    if separator != "--" or not command:
        sys.exit("usage: index_forwarder.py SOCKET -- COMMAND...")
    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    listener.bind(("127.0.0.1", 0))
    listener.listen(64)
    address = "http://127.0.0.1:%d" % listener.getsockname()[1]
    threading.Thread(target=_relay, args=(listener, proxy_socket), daemon=True).start()
    env = dict(os.environ)
    for name in ("HTTPS_PROXY", "https_proxy", "HTTP_PROXY", "http_proxy", "ALL_PROXY", "all_proxy"):
        env[name] = address
    env["NO_PROXY"] = env["no_proxy"] = ""
    try:
        status = subprocess.call(command, env=env)
    except OSError as error:
        sys.stderr.write("cannot run %s: %s\n" % (command[0], error))
        status = 127
    sys.exit(128 - status if status < 0 else status)


if __name__ == "__main__":
    main(sys.argv[1:])
