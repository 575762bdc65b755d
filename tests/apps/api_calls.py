"""Calls to the API by operationId, each answer checked against the schema's own description of it.

`api_call(client, "repositories_list", ...)` finds the operation's path and method in the generated
schema, sends the request, asserts the status and validates the JSON answer against the schema of
that status (JSON Schema, with OpenAPI 3.0's `nullable` read as a null alternative). The schema test
reads every test module's calls (their operationId literals) and fails for an operation none names."""

import json
from functools import cache

import jsonschema
import pytest
from referencing import Registry, Resource

METHODS = ("get", "post", "put", "patch", "delete")


@pytest.fixture(autouse=True)
def jobs_not_sent(monkeypatch):
    """Jobs the API starts are stored, not sent to a worker: the tests read what was queued."""
    monkeypatch.setattr("apps.jobs.services.job_dispatch", lambda job_id, **kwargs: None)


@cache
def api_schema() -> dict:
    from drf_spectacular.generators import SchemaGenerator

    return json.loads(json.dumps(SchemaGenerator().get_schema(request=None, public=True), default=str))


def api_operations() -> dict[str, tuple[str, str]]:
    """operationId -> (method, path template)."""
    return {operation["operationId"]: (method, path)
            for path, item in api_schema()["paths"].items()
            for method, operation in item.items() if method in METHODS}


def _json_schema(node):
    """OpenAPI 3.0's schema objects as JSON Schema: `nullable: true` becomes a null alternative."""
    if isinstance(node, list):
        return [_json_schema(item) for item in node]
    if not isinstance(node, dict):
        return node
    node = {key: _json_schema(value) for key, value in node.items()}
    if node.pop("nullable", False):
        return {"anyOf": [node, {"type": "null"}]}
    return node


@cache
def _registry() -> Registry:
    document = {"components": _json_schema(api_schema()["components"])}
    return Registry().with_resource("urn:api", Resource.opaque(document))


def _rebased(node):
    if isinstance(node, list):
        return [_rebased(item) for item in node]
    if not isinstance(node, dict):
        return node
    return {key: ("urn:api" + value if key == "$ref" else _rebased(value)) for key, value in node.items()}


def answer_check(operation_id: str, status: int, body) -> None:
    """`body` is what the schema says `operation_id` answers with `status`."""
    method, path = api_operations()[operation_id]
    responses = api_schema()["paths"][path][method]["responses"]
    assert str(status) in responses, f"{operation_id} answered {status}, which its schema does not list"
    content = responses[str(status)].get("content", {}).get("application/json")
    if content is None:
        assert body in (None, b"", ""), f"{operation_id} {status} has no body in its schema"
        return
    schema = _rebased(_json_schema(content["schema"]))
    jsonschema.validate(body, schema, registry=_registry())


def api_call(client, operation_id: str, *args, status: int, data=None, query: dict | None = None,
             multipart: dict | None = None, **headers):
    """Send the operation's request with `args` filled into its path (`data` as JSON, or `multipart` as a
    form with files); assert `status` and the shape of the answer; return the decoded JSON (None for an
    empty answer)."""
    method, path = api_operations()[operation_id]
    names = [part[1:-1] for part in path.split("/") if part.startswith("{")]
    url = path
    for name, value in zip(names, args, strict=True):
        url = url.replace("{" + name + "}", str(value))
    sender = getattr(client, method)
    if method == "get":
        response = sender(url, query or {}, **headers)
    elif multipart is not None:
        response = sender(url, multipart, **headers)
    elif isinstance(data, (bytes, str)):
        response = sender(url, data, content_type="application/json", **headers)
    else:
        response = sender(url + (("?" + "&".join(f"{k}={v}" for k, v in query.items())) if query else ""),
                          json.dumps(data or {}), content_type="application/json", **headers)
    body = None if response.streaming or not response.content else json.loads(response.content)
    assert response.status_code == status, (response.status_code, body)
    answer_check(operation_id, status, body)
    return body
