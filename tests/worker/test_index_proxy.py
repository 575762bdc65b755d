"""The worker's index proxy, spoken to over its Unix socket as the forwarder in a sandbox does."""

import socket
import threading

import pytest

from worker.engine.sandbox.index_proxy import index_hosts_from, index_proxy


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
        assert proxy.refused == ["127.0.0.1:6379", "pypi.example:80", "pypi.example.evil:443", "::1:443"]
        assert "refused: 127.0.0.1:6379" in proxy.account() and "1 connection" in proxy.account()
    assert not proxy.folder.exists()


def test_index_hosts_come_from_the_setting_or_default_to_pypi():
    assert index_hosts_from("") == ("pypi.org", "files.pythonhosted.org")
    assert index_hosts_from(" Mirror.Example , files.example ") == ("mirror.example", "files.example")
