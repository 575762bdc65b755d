"""The worker's index proxy, spoken to over its Unix socket as the forwarder in a sandbox does."""

import socket
import subprocess
import sys
import threading
import time

import pytest

from worker.engine.sandbox import index_proxy as index_proxy_module
from worker.engine.sandbox.index_proxy import FORWARDER_SOURCE, index_hosts_from, index_proxy


def _ask(proxy, request: bytes) -> bytes:
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as client:
        client.connect(str(proxy.folder / "proxy.sock"))
        client.settimeout(10)
        client.sendall(request)
        return client.recv(4096)


@pytest.fixture
def upstream():
    """A stand-in for the operator's HTTPS proxy: records CONNECT lines, then echoes the tunnel."""
    server = socket.create_server(("127.0.0.1", 0))
    seen = []

    def serve():
        while True:
            try:
                connection, _ = server.accept()
            except OSError:
                return
            with connection:
                request = connection.recv(4096)
                seen.append(request.split(b"\r\n")[0])
                connection.sendall(b"HTTP/1.1 200 Connection established\r\n\r\n")
                connection.sendall(connection.recv(4096))

    threading.Thread(target=serve, daemon=True).start()
    yield f"http://127.0.0.1:{server.getsockname()[1]}", seen
    server.close()


def test_only_connect_to_a_listed_host_on_443_is_let_through(upstream):
    address, seen = upstream
    with index_proxy(("pypi.example",), upstream=address) as proxy:
        assert _ask(proxy, b"GET http://pypi.example/ HTTP/1.1\r\n\r\n").startswith(b"HTTP/1.1 400")
        for target in (b"127.0.0.1:6379", b"pypi.example:80", b"PYPI.EXAMPLE.evil:443", b"[::1]:443"):
            answer = _ask(proxy, b"CONNECT " + target + b" HTTP/1.1\r\n\r\n")
            assert answer.startswith(b"HTTP/1.1 403 Forbidden") and b"pypi.example" in answer, (target, answer)
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as client:
            client.connect(str(proxy.folder / "proxy.sock"))
            client.settimeout(10)
            client.sendall(b"CONNECT PyPI.example:443 HTTP/1.1\r\nHost: pypi.example\r\n\r\n")
            assert client.recv(4096) == b"HTTP/1.1 200 Connection established\r\n\r\n"
            client.sendall(b"through the tunnel")
            assert client.recv(4096) == b"through the tunnel"
        assert seen == [b"CONNECT pypi.example:443 HTTP/1.1"]  # chained by name, to the operator's proxy
        assert proxy.refused == ["'127.0.0.1:6379'", "'pypi.example:80'", "'pypi.example.evil:443'", "'::1:443'"]
        assert "refused 4: '127.0.0.1:6379'" in proxy.account() and "1 connection" in proxy.account()
    assert not proxy.folder.exists()


def test_index_hosts_come_from_the_setting_or_default_to_pypi():
    assert index_hosts_from("") == ("pypi.org", "files.pythonhosted.org")
    assert index_hosts_from(" Mirror.Example , files.example ") == ("mirror.example", "files.example")


def test_a_flood_of_refused_requests_leaves_one_short_line(upstream):
    with index_proxy(("pypi.example",)) as proxy:
        for n in range(300):
            _ask(proxy, b"CONNECT %d%s\n#\tnetwork:\tFAKE\n:443 HTTP/1.1\r\n\r\n" % (n, b"a" * 6000))
        account = proxy.account()
    assert account.startswith("# network: the package index only") and account.count("\n") == 1
    assert "refused 300:" in account and len(account) < 800, account


def _closed(client: socket.socket) -> bool:
    client.settimeout(5)
    try:
        return client.recv(100) == b""
    except ConnectionResetError:
        return True


def test_connections_held_open_are_capped_and_timed_out(monkeypatch):
    monkeypatch.setattr(index_proxy_module, "_HEADER_SECONDS", 1)
    with index_proxy(("pypi.example",)) as proxy:
        held = []
        for _ in range(index_proxy_module.MAX_CONNECTIONS + 20):
            client = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            client.connect(str(proxy.folder / "proxy.sock"))
            client.sendall(b"C")  # a request begun, never finished
            held.append(client)
        time.sleep(0.3)
        assert proxy.open_connections == index_proxy_module.MAX_CONNECTIONS
        assert all(_closed(client) for client in held[index_proxy_module.MAX_CONNECTIONS:])
        time.sleep(1.5)  # past the time a request may take
        assert proxy.open_connections == 0
        for client in held:
            client.close()


FORWARDER_CLIENT = '''
import os, socket
host, port = os.environ["HTTPS_PROXY"].rpartition("/")[2].split(":")
tunnels = [socket.create_connection((host, int(port))) for _ in range(40)]
for tunnel in tunnels:
    tunnel.sendall(b"go")
total = 0
for tunnel in reversed(tunnels):  # the last opened first: a relay that blocks on one connection stalls
    while True:
        chunk = tunnel.recv(1 << 16)
        if not chunk:
            break
        total += len(chunk)
print("total", total)
'''


def test_the_forwarder_never_waits_on_one_tunnel_while_others_have_bytes(tmp_path):
    """40 tunnels of 16 MB each, read in the reverse order: uv reads its downloads in an order of its own."""
    proxy_socket = tmp_path / "proxy.sock"
    server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    server.bind(str(proxy_socket))
    server.listen(64)

    def answer(connection):
        with connection:
            connection.recv(100)
            connection.sendall(b"x" * (16 << 20))

    def serve():
        while True:
            try:
                connection, _ = server.accept()
            except OSError:
                return
            threading.Thread(target=answer, args=(connection,), daemon=True).start()

    threading.Thread(target=serve, daemon=True).start()
    started = time.monotonic()
    done = subprocess.run([sys.executable, "-I", "-S", str(FORWARDER_SOURCE), str(proxy_socket), "--",
                           sys.executable, "-c", FORWARDER_CLIENT], capture_output=True, text=True, timeout=120)
    server.close()
    assert done.returncode == 0 and done.stdout.split() == ["total", str(40 * (16 << 20))], done.stderr[-2000:]
    print(f"640 MiB through 40 tunnels in {time.monotonic() - started:.2f} s")
