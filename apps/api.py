"""What every app's API shares: token authentication, who may write, the one shape of errors, cursor
pages, the write throttle, and the answer to a request that started a job (202 and the job's URL).
Each app's resources live in its own `api.py`; apps/urls.py mounts them under /api/v1/."""

import logging

from django.core.cache import caches
from django.db import connection
from django.http import JsonResponse
from django.urls import reverse
from django.views import defaults
from drf_spectacular.extensions import OpenApiAuthenticationExtension
from rest_framework import exceptions, pagination, permissions, serializers, status, throttling
from rest_framework.authentication import BaseAuthentication, get_authorization_header
from rest_framework.response import Response

from apps.accounts.roles import BLINDED, user_can_mine, user_can_review
from apps.accounts.tokens import api_token_user

logger = logging.getLogger(__name__)

TOKEN_KEYWORD = b"bearer"


class BearerTokenAuthentication(BaseAuthentication):
    """`Authorization: Bearer cg_…`, a token the person made on their account page."""

    def authenticate(self, request):
        parts = get_authorization_header(request).split()
        if not parts or parts[0].lower() != TOKEN_KEYWORD:
            return None
        if len(parts) != 2:
            raise exceptions.AuthenticationFailed("Send one token: Authorization: Bearer cg_…")
        found = api_token_user(parts[1].decode("latin-1"))
        if found is None:
            raise exceptions.AuthenticationFailed("This token is unknown or revoked; make a new one on your "
                                                  "account page.")
        return found

    def authenticate_header(self, request):
        return 'Bearer realm="api"'


class ReadOrMine(permissions.IsAuthenticated):
    """Anyone signed in reads; curators and admins register, mine and start jobs."""

    message = "Only curators and admins can change repositories or start jobs."

    def has_permission(self, request, view):
        return super().has_permission(request, view) and (
            request.method in permissions.SAFE_METHODS or user_can_mine(request.user))


class ReadOrReview(permissions.IsAuthenticated):
    """Anyone signed in reads; curators and admins accept, reject and change tasks."""

    message = "Only curators and admins can accept, reject or change tasks."

    def has_permission(self, request, view):
        return super().has_permission(request, view) and (
            request.method in permissions.SAFE_METHODS or user_can_review(request.user))


class Unblinded(permissions.IsAuthenticated):
    """Grades, verifiers' scores and who made a candidate: curators and admins (annotators label blind)."""

    message = BLINDED

    def has_permission(self, request, view):
        return super().has_permission(request, view) and user_can_review(request.user)


class WriteThrottle(throttling.UserRateThrottle):
    """Writes per person (all their tokens and their session together: more tokens are not more writes),
    at COMMITGYM_API_WRITE_RATE, counted in the cache every server process shares; reads are not counted.
    With that cache out of reach, writes go through unthrottled (said in the log), not refused."""

    scope = "write"
    cache = caches["throttle"]

    def get_cache_key(self, request, view):
        # Per database too: one Redis may serve several deployments (and the tests' parallel databases).
        ident = f"{connection.settings_dict['NAME']}_{request.user.pk}"
        return self.cache_format % {"scope": self.scope, "ident": ident}

    def allow_request(self, request, view):
        if request.method in permissions.SAFE_METHODS:
            return True
        try:
            return super().allow_request(request, view)
        except Exception as error:  # noqa: BLE001 - Redis down or unreachable: availability first
            logger.warning("write throttle not counted (%s): the request goes through", error)
            return True


class NewestFirst(pagination.CursorPagination):
    """Pages that stay put while rows are added: a cursor, not an offset."""

    ordering = "-id"
    page_size = 50
    page_size_query_param = "page_size"
    max_page_size = 500

    def paginate_queryset(self, queryset, request, view=None):
        from django.core.exceptions import ValidationError as DjangoValidationError

        try:
            return super().paginate_queryset(queryset, request, view)
        except (ValueError, TypeError, DjangoValidationError):  # a position of another sort, or made up
            raise ApiRefused("This cursor is not one this list gave in this order: start again without it.",
                             code="invalid_cursor", field="cursor") from None


def api_error(code: str, detail: str, status_code: int, fields: dict | None = None) -> Response:
    return Response({"error": code, "detail": detail, "fields": fields or {}}, status=status_code)


class ApiRefused(exceptions.APIException):
    """A refusal a service gave in words, with its code (a reason of worker.engine.reasons where one
    applies) and the field it is about."""

    status_code = status.HTTP_400_BAD_REQUEST

    def __init__(self, detail: str, *, code: str = "refused", field: str = "", status_code: int = 400):
        super().__init__(detail, code)
        self.code, self.field, self.status_code = code, field, status_code


def _first_sentence(detail) -> str:
    if isinstance(detail, list):
        return " ".join(str(item) for item in detail)
    if isinstance(detail, dict):
        return "; ".join(f"{name}: {_first_sentence(value)}" for name, value in detail.items())
    return str(detail)


def _field_errors(detail: dict, prefix: str = "") -> dict[str, list[str]]:
    """A serializer's errors by field, nested fields named with dots (`filters.state`)."""
    fields = {}
    for name, value in detail.items():
        if isinstance(value, dict):
            fields.update(_field_errors(value, f"{prefix}{name}."))
        else:
            fields[f"{prefix}{name}"] = [str(item) for item in (value if isinstance(value, list) else [value])]
    return fields


def api_exception_handler(exc, context):
    """Every error in one shape: {"error": code, "detail": sentence, "fields": {field: [sentences]}}."""
    from rest_framework.views import exception_handler  # here: DRF's views import this module's authentication

    from django.core.exceptions import PermissionDenied
    from django.http import Http404

    if isinstance(exc, Http404):
        exc = exceptions.NotFound()
    elif isinstance(exc, PermissionDenied):
        exc = exceptions.PermissionDenied(str(exc) or None)
    response = exception_handler(exc, context)
    if response is None:
        return None
    if isinstance(exc, ApiRefused):
        fields = {exc.field: [str(exc.detail)]} if exc.field else {}
        response.data = {"error": exc.code, "detail": str(exc.detail), "fields": fields}
    elif isinstance(exc, exceptions.ValidationError):
        fields = _field_errors(exc.detail if isinstance(exc.detail, dict) else {"non_field_errors": exc.detail})
        response.data = {"error": "invalid", "detail": "The request has errors: " + _first_sentence(fields) + ".",
                         "fields": fields}
    else:
        code = exc.get_codes() if isinstance(exc, exceptions.APIException) else "error"
        code = code if isinstance(code, str) else "error"
        response.data = {"error": code, "detail": _first_sentence(response.data.get("detail", exc)), "fields": {}}
    return response


def api_urlpatterns(patterns: list) -> list:
    """An app's API routes, out of the site's login redirect: the API answers 401 in its own shape."""
    for pattern in patterns:
        pattern.callback.login_required = False
    return patterns


def job_ref(request, job, page_url: str = "") -> dict:
    """A job as a request that started it sees it: where to follow it."""
    url = request.build_absolute_uri(reverse("api:job", args=[job.pk]))
    return {"id": job.pk, "kind": job.kind, "state": job.state, "url": url, "page": page_url}


def job_accepted(request, job, *, created: bool, page_url: str = "") -> Response:
    """202 for work started, or already under way (the job that runs it, not a second one)."""
    body = {"job": job_ref(request, job, page_url), "created": created}
    return Response(body, status=status.HTTP_202_ACCEPTED, headers={"Location": body["job"]["url"]})


class BearerTokenScheme(OpenApiAuthenticationExtension):
    """How the schema names the token: HTTP bearer."""

    target_class = "apps.api.BearerTokenAuthentication"
    name = "bearerToken"

    def get_security_definition(self, auto_schema):
        return {"type": "http", "scheme": "bearer", "description": "A token from your account page."}


class ErrorSerializer(serializers.Serializer):
    error = serializers.CharField(help_text="A code: a reason of commitgym's reason list where one applies.")
    detail = serializers.CharField(help_text="What went wrong, in a sentence.")
    fields = serializers.DictField(child=serializers.ListField(child=serializers.CharField()),
                                   help_text="Per field, what is wrong with it.")


class JobRefSerializer(serializers.Serializer):
    id = serializers.IntegerField()
    kind = serializers.CharField()
    state = serializers.CharField()
    url = serializers.URLField(help_text="The job in the API: poll it for progress.")
    page = serializers.CharField(help_text="Where the pages show what it makes, if anywhere.", allow_blank=True)


class JobStartedSerializer(serializers.Serializer):
    job = JobRefSerializer()
    created = serializers.BooleanField(help_text="False when the same work was already queued or running: "
                                                 "that job, not a second one.")


CONFLICT = {409: ErrorSerializer}  # for operations that can find the work in a state that refuses it

ERROR_SCHEMA = {"type": "object", "required": ["error", "detail", "fields"], "properties": {
    "error": {"type": "string", "description": "A code: a reason of commitgym's reason list where one applies."},
    "detail": {"type": "string", "description": "What went wrong, in a sentence."},
    "fields": {"type": "object", "additionalProperties": {"type": "array", "items": {"type": "string"}},
               "description": "Per field, what is wrong with it."}}}
ERRORS_OF_EVERY_OPERATION = {
    "400": "The request has errors (malformed JSON, wrong types, unknown fields); `fields` says which.",
    "401": "No credentials, or a token unknown or revoked.",
    "403": "Your role may not do this, or a session's write came without its CSRF token.",
    "404": "No such object, or one you may not see.",
    "429": "Too many writes: wait, then try again.",
}


def errors_documented(result, generator, request, public):
    """Every operation answers its errors in one shape: the schema says so once, here."""
    result.setdefault("components", {}).setdefault("schemas", {}).setdefault("Error", ERROR_SCHEMA)
    content = {"application/json": {"schema": {"$ref": "#/components/schemas/Error"}}}
    for item in result.get("paths", {}).values():
        for operation in item.values():
            for code, description in ERRORS_OF_EVERY_OPERATION.items():
                operation["responses"].setdefault(code, {"content": content, "description": description})
    return result


class StrictSerializer(serializers.Serializer):
    """Refuses fields it does not know, by name: a misspelt field must not be silently ignored."""

    def to_internal_value(self, data):
        if hasattr(data, "keys"):
            unknown = sorted(set(data.keys()) - set(self.fields))
            if unknown:
                raise serializers.ValidationError({name: ["Unknown field."] for name in unknown})
        return super().to_internal_value(data)


def form_checked(form) -> dict:
    """A page's form run on the API's input, so both refuse the same things in the same words; its
    cleaned data, or a ValidationError that names each field."""
    if not form.is_valid():
        raise serializers.ValidationError({name: [str(e) for e in errors] for name, errors in form.errors.items()})
    return form.cleaned_data


def server_error(request):
    """The site's 500: under /api/, in the API's own shape (a script reads JSON even when the server
    fails); elsewhere, Django's page."""
    if request.path_info.startswith("/api/"):
        return JsonResponse({"error": "server_error", "detail": "The server failed on this request; the error is "
                             "logged for its administrators.", "fields": {}}, status=500)
    return defaults.server_error(request)


def api_not_found(request, rest: str = ""):
    """Any other address under /api/: a 404 in the API's own shape, not the site's page."""
    return JsonResponse({"error": "not_found", "detail": f"No such address in the API: /{request.path.lstrip('/')}",
                         "fields": {}}, status=404)
