"""Calls to language models, recorded and cached by their inputs; and a health check per role."""

import hashlib
import json
import math
import time
from typing import Callable, Optional

from django.conf import settings

from worker.engine.llm.clients import (
    SCORING_ROLES,
    ModelError,
    ModelSettings,
    calls_collect,
    model_client,
    settings_problem,
)
from worker.engine.llm.prompts import Prompt

from .models import ModelCall

REGENERATE_TEMPERATURE = 0.8  # a new version should differ from the cached one


def role_settings(role: str) -> ModelSettings:
    """The role's model settings; ModelError when they cannot work (the start-up check says why too)."""
    model = ModelSettings(**settings.COMMITGYM_MODELS[role])
    problem = settings_problem(role, model)
    if problem:
        raise ModelError("misconfigured", problem)
    return model


def model_call_cache_key(role: str, model: ModelSettings, prompt: Prompt, messages: list, parameters: dict) -> str:
    identity = [role, model.backend, model.identity, model.base_url, prompt.name, prompt.version, prompt.digest,
                messages, parameters]
    return hashlib.sha256(json.dumps(identity, sort_keys=True).encode()).hexdigest()


def model_call(*, role: str, prompt: Prompt, variables: dict[str, str], task=None, regenerate: bool = False,
               max_tokens: int = 600) -> tuple[ModelCall, bool]:
    """(the call, whether it came from the cache). The same inputs are answered from the record
    unless `regenerate`, which asks again with some randomness. A failed call is recorded too,
    then raised as ModelError."""
    model = role_settings(role)
    messages = prompt.messages(**variables)
    parameters = {"max_tokens": max_tokens, "temperature": 0.0, "seed": 0}
    if regenerate:
        key = model_call_cache_key(role, model, prompt, messages, parameters)
        parameters = {**parameters, "temperature": REGENERATE_TEMPERATURE,
                      "seed": ModelCall.objects.filter(cache_key=key).count()}
        return _completed(role, model, prompt, messages, parameters, task, key=key, regenerated=True), False
    return model_messages_call(role=role, prompt=prompt, messages=messages, parameters=parameters, task=task,
                               model=model)


def model_messages_call(*, role: str, prompt: Prompt, messages: list, parameters: dict, task=None,
                        model: Optional[ModelSettings] = None) -> tuple[ModelCall, bool]:
    """A completion of these messages (a conversation the caller made from `prompt`) with these
    parameters (max_tokens, temperature, seed): answered from the record when the same inputs were
    answered before, else asked and recorded; (the call, whether it came from the cache). A failed call
    is recorded too, then raised as ModelError."""
    model = model or role_settings(role)
    key = model_call_cache_key(role, model, prompt, messages, parameters)
    cached = ModelCall.objects.filter(cache_key=key, outcome=ModelCall.Outcome.OK, regenerated=False).first()
    if cached:
        return cached, True
    return _completed(role, model, prompt, messages, parameters, task, key=key), False


def _completed(role: str, model: ModelSettings, prompt: Prompt, messages: list, parameters: dict, task, *, key: str,
               regenerated: bool = False) -> ModelCall:
    record = _call_new(role, model, prompt, key, messages, parameters, task, regenerated=regenerated)
    started = time.monotonic()
    try:
        completion = model_client(model).complete(messages, **parameters)
    except ModelError as error:
        record.seconds = time.monotonic() - started
        _call_failed(record, model, error.code, str(error))
        record.save()
        raise
    record.seconds = time.monotonic() - started
    record.outcome, record.answer = ModelCall.Outcome.OK, completion.text
    record.tokens_in, record.tokens_out = completion.tokens_in, completion.tokens_out
    record.finish_reason = completion.finish_reason[:32]
    record.model = completion.model or record.model
    record.save()
    return record


def model_scores(*, role: str, prompt: Prompt, asked: dict, answers: list[str], task=None, in_flight: int = 1,
                 on_each: Optional[Callable[[object, ModelCall], bool]] = None) -> dict:
    """{key: ModelCall} for each {key: messages} in `asked`: the first answer token's log-probabilities
    for `answers`, recorded one call each and answered from the record when the inputs were asked
    before. Calls run `in_flight` at a time (threads ask the model; only this thread writes rows,
    each as soon as its call ends); a call that fails is recorded as failed, not raised. `on_each`
    hears of each call, in this thread, as it is recorded; False from it asks no more."""
    model = role_settings(role)
    parameters = {"max_tokens": 1, "temperature": 0.0, "answers": answers}
    records, to_ask = {}, {}
    for key, messages in asked.items():
        cache_key = model_call_cache_key(role, model, prompt, messages, parameters)
        cached = ModelCall.objects.filter(cache_key=cache_key, outcome=ModelCall.Outcome.OK).first()
        if cached is not None:
            records[key] = cached
            if on_each is not None and not on_each(key, cached):
                return records
            continue
        to_ask[key] = _call_new(role, model, prompt, cache_key, messages, parameters, task)
    if to_ask:
        client = model_client(model)

        def ask(key):
            record, started = to_ask[key], time.monotonic()
            try:
                logprobs = client.first_token_logprobs(record.messages, answers)
            except ModelError as error:
                _call_failed(record, model, error.code, str(error))
            else:
                record.outcome = ModelCall.Outcome.OK
                record.logprobs = {answer: value if math.isfinite(value) else None  # JSON has no -inf
                                   for answer, value in logprobs.items()}
                record.answer = max(logprobs, key=logprobs.get)
                record.tokens_out = 1
            record.seconds = time.monotonic() - started
            return record

        def recorded(key, result) -> bool:
            record = to_ask[key]
            if isinstance(result, Exception):  # not the model's error: ours, recorded all the same
                _call_failed(record, model, "worker_error", f"{type(result).__name__}: {result}")
            record.save()
            records[key] = record
            return on_each is None or on_each(key, record)

        calls_collect(ask, list(to_ask), in_flight=in_flight, on_each=recorded)
    return records


def _call_new(role: str, model: ModelSettings, prompt: Prompt, cache_key: str, messages: list, parameters: dict,
              task, *, regenerated: bool = False) -> ModelCall:
    """The record of a call about to be made (saved once it has ended)."""
    return ModelCall(role=role, backend=model.backend, model=model.model_name, prompt_name=prompt.name,
                     prompt_version=prompt.version, prompt_digest=prompt.digest, cache_key=cache_key,
                     messages=messages, parameters=parameters, task=task, regenerated=regenerated)


def _call_failed(record: ModelCall, model: ModelSettings, code: str, message: str) -> None:
    record.outcome, record.error_code = ModelCall.Outcome.FAILED, code
    record.error_message = model.redact(message)[:2000]


def model_health(role: str) -> dict:
    """Whether the role's model answers, how fast, and whether it gives log-probabilities."""
    model = ModelSettings(**settings.COMMITGYM_MODELS[role])
    line = {"role": role, "backend": model.backend, "model": model.model_name, "ok": False, "seconds": 0.0,
            "logprobs": False, "error": ""}
    problem = settings_problem(role, model)
    if problem:
        return {**line, "error": problem}
    messages = [{"role": "user", "content": "Answer with one word: is 2 + 2 equal to 4? YES or NO."}]
    started = time.monotonic()
    try:
        client = model_client(model)
        client.complete(messages, max_tokens=8)
        line.update(ok=True, seconds=round(time.monotonic() - started, 3))
        scores = client.first_token_logprobs(messages, ["YES", "NO"])
        line["logprobs"] = any(score > float("-inf") for score in scores.values())
    except ModelError as error:
        if line["ok"] and error.code == "not_supported" and role not in SCORING_ROLES:
            return line  # a writing role needs no log-probabilities
        line.update(seconds=round(time.monotonic() - started, 3), error=model.redact(f"{error.code}: {error}"))
    except Exception as error:  # noqa: BLE001 - a check reports what broke instead of failing
        line.update(seconds=round(time.monotonic() - started, 3),
                    error=model.redact(f"{type(error).__name__}: {error}")[:500])
    return line
