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


def _relay(listener, proxy_socket):
    """One thread for every connection (a thread each would count against the run's process limit):
    accept, connect each to the proxy, and copy bytes both ways until either side closes."""
    selector = selectors.DefaultSelector()
    selector.register(listener, selectors.EVENT_READ)
    peers = {}
    while True:
        for key, _ in selector.select():
            sock = key.fileobj
            if sock is listener:
                client, _ = listener.accept()
                proxy = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
                try:
                    proxy.connect(proxy_socket)
                except OSError:
                    client.close()
                    proxy.close()
                    continue
                peers[client], peers[proxy] = proxy, client
                selector.register(client, selectors.EVENT_READ)
                selector.register(proxy, selectors.EVENT_READ)
                continue
            peer = peers.get(sock)
            try:
                chunk = sock.recv(1 << 16)
                if chunk:
                    peer.sendall(chunk)
                    continue
            except OSError:
                pass
            for end in (sock, peer):  # one side closed: the connection is over
                selector.unregister(end)
                peers.pop(end, None)
                end.close()


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
