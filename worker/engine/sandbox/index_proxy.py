"""The only way out of a sandbox: HTTPS to the package index, through a proxy the worker runs.

A build step asked to reach the network gets none of its own. The worker listens on a Unix
socket in a folder of its own, which is mounted into the sandbox; a forwarder of ours
(index_forwarder.py) listens on the sandbox's own loopback, passes each connection to that
socket, and runs the step with HTTPS_PROXY pointing at itself. The proxy here allows only
`CONNECT <host>:443` to the configured index hosts, by the name asked for, never by the
address it resolves to (an index behind a proxy of the operator's may resolve to an address
`ipaddress` calls private; 127.0.0.1 is refused because it is not a listed name). Where the
worker itself reaches the internet through HTTPS_PROXY, the proxy chains to it.
"""

import os
import shutil
import socket
import tempfile
import threading
import time
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterator, Optional, Sequence
from urllib.parse import urlsplit

DEFAULT_INDEX_HOSTS = ("pypi.org", "files.pythonhosted.org")
INDEX_PROXY = "index_proxy"  # how a build reached the network, as environments record it
FORWARDER_SOURCE = Path(__file__).with_name("index_forwarder.py")
INSIDE = "/run/commitgym-index"  # where the sandbox sees the proxy's folder (its socket, the forwarder)
_HEADER_BYTES = 8 << 10
_CONNECT_SECONDS = 30
_HEADER_SECONDS = 10  # to send a whole CONNECT request
_IDLE_SECONDS = 300  # a tunnel with nothing through it either way for this long is closed
MAX_CONNECTIONS = 64  # open at once, per run: more are closed at once (each holds a thread and two descriptors)
_REFUSALS_LISTED = 5


@dataclass
class IndexProxy:
    """A running proxy: `mount` is (its folder on the host, where the sandbox sees it)."""

    hosts: tuple[str, ...]
    folder: Path
    refused: list[str] = field(default_factory=list)  # the first few "host:port" refused, as asked for
    refusals: int = 0  # requests refused, in all
    tunnels: int = 0  # connections allowed
    open_connections: int = 0
    lock: threading.Lock = field(default_factory=threading.Lock)

    def refuse(self, target: str) -> None:
        with self.lock:
            self.refusals += 1
            shown = repr(target[:80])  # as asked for, escaped: it is the run's text
            if len(self.refused) < _REFUSALS_LISTED and shown not in self.refused:
                self.refused.append(shown)

    @property
    def mount(self) -> tuple[Path, str]:
        return self.folder, INSIDE

    def wrap(self, argv: Sequence[str], seen_at: str = INSIDE) -> list[str]:
        """`argv` run by the forwarder, which gives it HTTPS_PROXY on the sandbox's loopback;
        `seen_at` is where the sandbox sees the proxy's folder."""
        return ["python3", "-I", "-S", f"{seen_at}/index_forwarder.py", f"{seen_at}/proxy.sock", "--", *argv]

    @staticmethod
    def environment() -> dict:
        """What every step that reaches the index runs with: no configuration of the repository's own."""
        return {"UV_NO_CONFIG": "1", "PIP_CONFIG_FILE": os.devnull, "PIP_NO_INPUT": "1"}

    def account(self) -> str:
        """A line for the step's output: how it reached the network."""
        line = (f"# network: the package index only ({', '.join(self.hosts)}, port 443), through "
                f"commitgym's proxy; {self.tunnels} connection(s)")
        if self.refusals:
            line += f"; refused {self.refusals}: {', '.join(self.refused)}"
            if self.refusals > len(self.refused):
                line += ", ..."
        return line + "\n"


@contextmanager
def index_reach(network: bool, hosts: Sequence[str]) -> Iterator[Optional[IndexProxy]]:
    """A proxy for a run that may reach the index (`network`), None for one that reaches nothing."""
    if not network:
        yield None
        return
    with index_proxy(hosts) as proxy:
        yield proxy


def index_hosts_from(setting: str) -> tuple[str, ...]:
    """`COMMITGYM_INDEX_HOSTS` ("host,host,..."); the default is PyPI's two hosts."""
    hosts = tuple(host.strip().lower() for host in setting.split(",") if host.strip())
    return hosts or DEFAULT_INDEX_HOSTS


@contextmanager
def index_proxy(hosts: Sequence[str] = DEFAULT_INDEX_HOSTS, upstream: Optional[str] = None) -> Iterator[IndexProxy]:
    """A proxy for one sandbox run, stopped and removed when the block ends. `upstream`: the
    worker's own HTTPS_PROXY (default: from its environment)."""
    folder = Path(tempfile.mkdtemp(prefix="commitgym-index-"))
    folder.chmod(0o755)
    shutil.copyfile(FORWARDER_SOURCE, folder / "index_forwarder.py")
    (folder / "index_forwarder.py").chmod(0o644)
    proxy = IndexProxy(tuple(host.lower() for host in hosts), folder)
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(str(folder / "proxy.sock"))
    os.chmod(folder / "proxy.sock", 0o777)  # the sandbox's own user connects to it
    listener.listen(64)
    upstream = upstream if upstream is not None else (os.environ.get("HTTPS_PROXY") or os.environ.get("https_proxy"))
    stop = threading.Event()
    accepting = threading.Thread(target=_accept, args=(listener, proxy, upstream or "", stop), daemon=True)
    accepting.start()
    try:
        yield proxy
    finally:
        stop.set()
        listener.shutdown(socket.SHUT_RDWR)
        listener.close()
        accepting.join(timeout=5)
        shutil.rmtree(folder, ignore_errors=True)


def _accept(listener: socket.socket, proxy: IndexProxy, upstream: str, stop: threading.Event) -> None:
    while not stop.is_set():
        try:
            client, _ = listener.accept()
        except OSError:
            return
        with proxy.lock:
            full = proxy.open_connections >= MAX_CONNECTIONS
            proxy.open_connections += not full
        if full:
            client.close()  # the run holds as many as it may
            continue
        try:
            threading.Thread(target=_serve, args=(client, proxy, upstream), daemon=True).start()
        except RuntimeError:  # no thread to be had: this one is dropped, the proxy goes on
            client.close()
            with proxy.lock:
                proxy.open_connections -= 1


def _serve(client: socket.socket, proxy: IndexProxy, upstream: str) -> None:
    try:
        with client:
            _serve_one(client, proxy, upstream)
    finally:
        with proxy.lock:
            proxy.open_connections -= 1


def _serve_one(client: socket.socket, proxy: IndexProxy, upstream: str) -> None:
    try:
        host, port = _connect_request(client)
    except (OSError, ValueError, UnicodeDecodeError):
        _answer(client, 400, "only CONNECT host:443 requests are served here")
        return
    if host not in proxy.hosts or port != 443:
        proxy.refuse(f"{host}:{port}")
        _answer(client, 403, f"only the package index is reachable ({', '.join(proxy.hosts)}, port 443)")
        return
    try:
        remote = _open(host, port, upstream)
    except OSError as error:
        _answer(client, 502, f"{host} could not be reached: {error}")
        return
    with proxy.lock:
        proxy.tunnels += 1
    with remote:
        client.sendall(b"HTTP/1.1 200 Connection established\r\n\r\n")
        _relay(client, remote)


def _connect_request(client: socket.socket) -> tuple[str, int]:
    """The host and port of a `CONNECT host:port HTTP/1.x` request, its headers read and dropped;
    the whole request within _HEADER_SECONDS."""
    data, deadline = b"", time.monotonic() + _HEADER_SECONDS
    while b"\r\n\r\n" not in data:
        left = deadline - time.monotonic()
        if left <= 0 or len(data) > _HEADER_BYTES:
            raise ValueError("incomplete request")
        client.settimeout(left)
        chunk = client.recv(1024)
        if not chunk:
            raise ValueError("incomplete request")
        data += chunk
    method, target, _ = data.split(b"\r\n", 1)[0].decode("ascii").split(" ", 2)
    if method.upper() != "CONNECT":
        raise ValueError("not CONNECT")
    host, _, port = target.rpartition(":")
    return host.strip("[]").lower(), int(port)


def _open(host: str, port: int, upstream: str) -> socket.socket:
    if not upstream:
        return socket.create_connection((host, port), timeout=_CONNECT_SECONDS)
    parts = urlsplit(upstream if "://" in upstream else f"http://{upstream}")
    remote = socket.create_connection((parts.hostname, parts.port or 3128), timeout=_CONNECT_SECONDS)
    remote.sendall(f"CONNECT {host}:{port} HTTP/1.1\r\nHost: {host}:{port}\r\n\r\n".encode())
    answer = b""
    while b"\r\n\r\n" not in answer:
        chunk = remote.recv(1024)
        if not chunk or len(answer) > _HEADER_BYTES:
            remote.close()
            raise OSError("the upstream proxy closed the connection")
        answer += chunk
    if answer.split(b" ", 2)[1:2] != [b"200"]:
        remote.close()
        status_line = answer.split(b"\r\n", 1)[0].decode("latin-1")
        raise OSError(f"the upstream proxy answered {status_line}")
    return remote


def _answer(client: socket.socket, status: int, reason: str) -> None:
    phrase = {400: "Bad Request", 403: "Forbidden", 502: "Bad Gateway"}[status]
    body = f"commitgym: {reason}\n".encode()
    try:
        client.sendall(f"HTTP/1.1 {status} {phrase}\r\nContent-Length: {len(body)}\r\nConnection: close\r\n\r\n"
                       .encode() + body)
    except OSError:
        pass


def _relay(one: socket.socket, other: socket.socket) -> None:
    one.settimeout(_IDLE_SECONDS)
    other.settimeout(_IDLE_SECONDS)

    def pump(source: socket.socket, target: socket.socket) -> None:
        try:
            while chunk := source.recv(1 << 16):
                target.sendall(chunk)
        except OSError:
            pass
        finally:
            try:
                target.shutdown(socket.SHUT_WR)
            except OSError:
                pass

    back = threading.Thread(target=pump, args=(other, one), daemon=True)
    back.start()
    pump(one, other)
    back.join()
