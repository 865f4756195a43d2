"""The API's one exception handler: every error is JSON with an exact `error_code`.

Replay verdict codes (core.errors) and governance refusals (core.ledger.codes) pass through
with their own strings and messages; HTTP-level problems get the codes below.
"""

from __future__ import annotations

from typing import Any

from django.core.exceptions import PermissionDenied as DjangoPermissionDenied
from django.http import Http404
from rest_framework import exceptions
from rest_framework.response import Response

from console.refusals import governance_status
from console.uploads import UPLOAD_TOO_LARGE
from core import errors as replay_errors
from core.errors import ReplayError
from core.ledger.codes import GovernanceError

NOT_AUTHENTICATED = "NOT_AUTHENTICATED"
PERMISSION_DENIED = "PERMISSION_DENIED"
CSRF_FAILED = "CSRF_FAILED"
NOT_FOUND = "NOT_FOUND"
INVALID_INPUT = "INVALID_INPUT"
MALFORMED_REQUEST = "MALFORMED_REQUEST"
METHOD_NOT_ALLOWED = "METHOD_NOT_ALLOWED"
UNSUPPORTED_MEDIA_TYPE = "UNSUPPORTED_MEDIA_TYPE"
NOT_ACCEPTABLE = "NOT_ACCEPTABLE"
THROTTLED = "THROTTLED"
REPORT_NOT_READY = "REPORT_NOT_READY"
SERVER_ERROR = "SERVER_ERROR"

#: HTTP-level codes (the verdict and governance codes live in their own modules)
HTTP_CODES: dict[str, str] = {
    NOT_AUTHENTICATED: "no valid session or token",
    PERMISSION_DENIED: "the roles matrix does not allow this for your roles",
    CSRF_FAILED: "a session-authenticated write without a valid CSRF token",
    NOT_FOUND: "no such object (or the path does not exist)",
    INVALID_INPUT: "a field of the request is missing or invalid; see `fields`",
    MALFORMED_REQUEST: "the request body cannot be parsed",
    METHOD_NOT_ALLOWED: "this path does not take this HTTP method",
    UNSUPPORTED_MEDIA_TYPE: "the request body's content type is not accepted here",
    NOT_ACCEPTABLE: "the response cannot be produced in the requested media type",
    THROTTLED: "too many requests",
    REPORT_NOT_READY: "the replay has not finished, so it has no report yet",
    SERVER_ERROR: "something failed on the server's side; the error was logged",
    UPLOAD_TOO_LARGE: "the upload is larger than REPLAY_MAX_UPLOAD_BYTES",
}

_REPLAY_STATUS = {
    replay_errors.FORCE_CONTINUE_REQUIRED: 409,
    replay_errors.FORCE_HALT_ACTIVE: 409,
}

_DRF: list[tuple[type[exceptions.APIException], str]] = [
    (exceptions.NotAuthenticated, NOT_AUTHENTICATED),
    (exceptions.AuthenticationFailed, NOT_AUTHENTICATED),
    (exceptions.NotFound, NOT_FOUND),
    (exceptions.ValidationError, INVALID_INPUT),
    (exceptions.ParseError, MALFORMED_REQUEST),
    (exceptions.MethodNotAllowed, METHOD_NOT_ALLOWED),
    (exceptions.UnsupportedMediaType, UNSUPPORTED_MEDIA_TYPE),
    (exceptions.NotAcceptable, NOT_ACCEPTABLE),
    (exceptions.Throttled, THROTTLED),
]


class ApiError(exceptions.APIException):
    """An HTTP-level refusal with one of HTTP_CODES."""

    def __init__(self, code: str, message: str, status: int, **extra: Any) -> None:
        super().__init__(detail=message)
        self.error_code = code
        self.status_code = status
        self.extra = extra


def exception_handler(exc: Exception, context: dict[str, Any]) -> Response | None:
    body: dict[str, Any]
    if isinstance(exc, ReplayError):
        body = {
            "error_code": exc.code,
            "message": exc.message,
            "broke_at": exc.broke_at,
            "expected": exc.expected,
            "observed": exc.observed,
        }
        if exc.detail:
            body["detail"] = exc.detail
        return Response(body, status=_REPLAY_STATUS.get(exc.code, 400))
    if isinstance(exc, GovernanceError):
        body = {"error_code": exc.code, "message": exc.message}
        if exc.detail:
            body["detail"] = exc.detail
        return Response(body, status=governance_status(exc.code))
    if isinstance(exc, ApiError):
        return Response(
            {"error_code": exc.error_code, "message": str(exc.detail), **exc.extra},
            status=exc.status_code,
        )
    if isinstance(exc, Http404):
        exc = exceptions.NotFound(str(exc) or "not found")
    if isinstance(exc, DjangoPermissionDenied):
        exc = exceptions.PermissionDenied(str(exc) or "permission denied")
    if isinstance(exc, exceptions.PermissionDenied):
        message = str(exc.detail)
        code = CSRF_FAILED if message.startswith("CSRF Failed") else PERMISSION_DENIED
        return Response({"error_code": code, "message": message}, status=403)
    for kind, code in _DRF:
        if isinstance(exc, kind):
            return _drf_response(exc, code)
    return None  # a bug: let it surface as a 500 (tests and Schemathesis look for these)


def _drf_response(exc: exceptions.APIException, code: str) -> Response:
    headers: dict[str, str] = {}
    if getattr(exc, "auth_header", None):
        headers["WWW-Authenticate"] = exc.auth_header  # type: ignore[attr-defined]
    if getattr(exc, "wait", None):
        headers["Retry-After"] = str(int(exc.wait))  # type: ignore[attr-defined]
    detail = exc.detail
    if isinstance(detail, dict | list):
        message = "invalid input: " + "; ".join(_flatten(detail))
        body: dict[str, Any] = {"error_code": code, "message": message, "fields": detail}
    else:
        body = {"error_code": code, "message": str(detail)}
    return Response(body, status=exc.status_code, headers=headers)


def _flatten(detail: Any, prefix: str = "") -> list[str]:
    if isinstance(detail, dict):
        out: list[str] = []
        for key, value in detail.items():
            out += _flatten(value, f"{prefix}{key}: " if key != "non_field_errors" else prefix)
        return out
    if isinstance(detail, list):
        out = []
        for item in detail:
            out += _flatten(item, prefix)
        return out
    return [f"{prefix}{detail}"]
