"""The OpenAI-compatible backend against real HTTP servers on loopback: llama-cpp-python's
server running the embedded model, and small servers that fail in each way a real one does."""

import json
import socket
import subprocess
import sys
import threading
import time
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.request import urlopen

import pytest

from worker.engine.llm.clients import ModelError, ModelSettings, OpenAICompatibleClient, embedded_model_path

KEY = "sk-test-0123456789"
QUESTION = [{"role": "user", "content": "Is 2 + 2 equal to 4? Answer YES or NO."}]


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


@pytest.fixture(scope="module")
def llama_server(tmp_path_factory):
    port = _free_port()
    log = open(tmp_path_factory.mktemp("llama-server") / "log", "w+b")
    proc = subprocess.Popen(
        [sys.executable, "-m", "llama_cpp.server", "--model", str(embedded_model_path()), "--model_alias", "smollm2",
         "--host", "127.0.0.1", "--port", str(port), "--n_ctx", "2048", "--logits_all", "true", "--verbose", "false"],
        stdout=log, stderr=subprocess.STDOUT)
    deadline = time.monotonic() + 120
    while True:
        try:
            urlopen(f"http://127.0.0.1:{port}/v1/models", timeout=2).read()
            break
        except OSError:
            if proc.poll() is not None or time.monotonic() > deadline:
                proc.kill()
                log.seek(0)
                pytest.fail("llama-cpp-python's server did not start: " + log.read().decode()[-2000:])
            time.sleep(0.5)
    yield f"http://127.0.0.1:{port}/v1"
    proc.terminate()
    proc.wait(timeout=30)
    log.close()


def _client(base_url: str, **options) -> OpenAICompatibleClient:
    settings = {"backend": "openai", "model": "smollm2", "base_url": base_url, "api_key": KEY, "timeout": 30,
                "max_retries": 1, **options}
    return OpenAICompatibleClient(ModelSettings(**settings))


def test_an_openai_compatible_server_answers_and_scores(llama_server):
    completion = _client(llama_server).complete(QUESTION, max_tokens=8)
    assert completion.text.strip() and completion.tokens_in > 5 and 0 < completion.tokens_out <= 8
    scores = _client(llama_server).first_token_logprobs(QUESTION, ["YES", "NO"])
    assert set(scores) == {"YES", "NO"} and max(scores.values()) > -30


class _JsonHandler(BaseHTTPRequestHandler):
    def _send(self, status: int, body: bytes) -> None:
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


@contextmanager
def _serving(handler):
    """A threaded HTTP server on loopback with `handler`; yields its base address."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_port}"
    finally:
        server.shutdown()


class _Failing(_JsonHandler):
    """Answers every request the way the server's `mode` says."""

    mode = "429"

    def do_POST(self):  # noqa: N802 - http.server's naming
        self.rfile.read(int(self.headers.get("Content-Length", 0)))
        mode = type(self).mode
        if mode == "slow":
            time.sleep(3)
        if mode in {"429", "500", "401"}:
            body = json.dumps({"error": {"message": f"failing with {mode}", "type": "x"}}).encode()
            self._send(int(mode), body)
            return
        content = "" if mode == "empty" else "YES"
        body = json.dumps({"id": "1", "object": "chat.completion", "created": 0, "model": "smollm2",
                           "choices": [{"index": 0, "finish_reason": "stop",
                                        "message": {"role": "assistant", "content": content}}],
                           "usage": {"prompt_tokens": 3, "completion_tokens": 1, "total_tokens": 4}}).encode()
        self._send(200, body)


@pytest.fixture
def failing_server():
    handler = type("Handler", (_Failing,), {})
    with _serving(handler) as address:
        yield handler, f"{address}/v1"


@pytest.mark.parametrize("mode, code", [("429", "rate_limited"), ("500", "server_error"), ("401", "refused"),
                                        ("empty", "empty_answer")])
def test_each_failure_of_a_server_ends_with_its_reason_and_never_the_key(failing_server, mode, code):
    handler, base_url = failing_server
    handler.mode = mode
    with pytest.raises(ModelError) as error:
        _client(base_url).complete(QUESTION, max_tokens=4)
    assert error.value.code == code and KEY not in str(error.value)


def test_a_server_that_is_down_or_too_slow_fails_clearly(failing_server):
    with pytest.raises(ModelError) as down:
        _client(f"http://127.0.0.1:{_free_port()}/v1").complete(QUESTION, max_tokens=4)
    assert down.value.code == "unreachable" and KEY not in str(down.value)
    handler, base_url = failing_server
    handler.mode = "slow"
    with pytest.raises(ModelError) as slow:
        _client(base_url, timeout=1, max_retries=0).complete(QUESTION, max_tokens=4)
    assert slow.value.code == "timeout"


def test_a_server_without_log_probabilities_says_so(failing_server):
    handler, base_url = failing_server
    handler.mode = "ok"
    assert _client(base_url).complete(QUESTION, max_tokens=4).text == "YES"
    with pytest.raises(ModelError) as error:
        _client(base_url).first_token_logprobs(QUESTION, ["YES", "NO"])
    assert error.value.code == "no_logprobs"


class _AnthropicLike(_JsonHandler):
    """Speaks Anthropic's messages protocol: an answer, or the error its `mode` says."""

    mode = "ok"
    seen: list = []

    def do_POST(self):  # noqa: N802 - http.server's naming
        request = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))))
        type(self).seen.append((self.path, self.headers.get("x-api-key") or self.headers.get("Authorization"), request))
        if type(self).mode == "429":
            body, status = {"type": "error", "error": {"type": "rate_limit_error", "message": "slow down"}}, 429
        else:
            body, status = {"id": "msg_1", "type": "message", "role": "assistant", "model": request["model"],
                            "content": [{"type": "text", "text": "add(2, 3) returns -1"}], "stop_reason": "end_turn",
                            "stop_sequence": None, "usage": {"input_tokens": 21, "output_tokens": 7}}, 200
        self._send(status, json.dumps(body).encode())


def test_the_anthropic_backend_writes_and_never_scores():
    from worker.engine.llm.clients import AnthropicClient

    handler = type("Handler", (_AnthropicLike,), {"seen": []})
    with _serving(handler) as address:
        client = AnthropicClient(ModelSettings(backend="anthropic", model="claude-x", api_key=KEY, max_retries=0,
                                               base_url=address))
        messages = [{"role": "system", "content": "You write issues."}, *QUESTION]
        completion = client.complete(messages, max_tokens=64)
        assert (completion.text, completion.tokens_in, completion.tokens_out, completion.model) == (
            "add(2, 3) returns -1", 21, 7, "claude-x")
        path, key, request = handler.seen[0]
        assert path == "/v1/messages" and key in {KEY, f"Bearer {KEY}"}
        assert request["system"] == "You write issues." and request["messages"] == QUESTION
        handler.mode = "429"
        with pytest.raises(ModelError) as limited:
            client.complete(messages, max_tokens=64)
        assert limited.value.code == "rate_limited" and KEY not in str(limited.value)
        with pytest.raises(ModelError) as scoring:
            client.first_token_logprobs(messages, ["YES", "NO"])
        assert scoring.value.code == "not_supported"


class _NotUtf8(_JsonHandler):
    def do_POST(self):  # noqa: N802 - http.server's naming
        self.rfile.read(int(self.headers.get("Content-Length", 0)))
        body = (b'{"id": "1", "object": "chat.completion", "created": 0, "model": "m", "choices": [{"index": 0, '
                b'"finish_reason": "stop", "message": {"role": "assistant", "content": "caf\xe9 \xff"}}]}')
        self._send(200, body)


def test_an_answer_that_is_not_utf8_fails_with_a_reason():
    with _serving(_NotUtf8) as address, pytest.raises(ModelError) as error:
        _client(f"{address}/v1").complete(QUESTION, max_tokens=4)
    assert error.value.code == "bad_answer" and KEY not in str(error.value)
