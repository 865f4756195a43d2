"""``POST /otlp/v1/traces``: OTLP/HTTP trace export, so an exporter configured with
``OTEL_EXPORTER_OTLP_ENDPOINT=<console>/otlp`` and ``OTEL_EXPORTER_OTLP_HEADERS=
Authorization=Bearer <API token>`` works unchanged.

The answers are OTLP's (https://opentelemetry.io/docs/specs/otlp/#otlphttp-response), each
in the request's encoding (protobuf or JSON):

* 200 with an ``ExportTraceServiceResponse``; ``partial_success`` names how many spans were
  refused and why (a span with an invalid id, say), the others are kept;
* 400 with a ``google.rpc.Status`` for a body that does not parse, or that a limit refuses
  (its ``message`` begins with the refusal's code); an exporter does not retry a 400;
* 401 without a valid API token (``Authorization: Bearer <token>``, or ``Token <token>`` as
  the REST API takes it), 403 when its owner may not upload (the roles matrix's ``upload``);
* 413 for a body larger than ``REPLAY_OTLP_MAX_BODY_BYTES`` as sent, or than
  ``REPLAY_OTLP_MAX_DECODED_BYTES`` once gzip is undone; 415 for another content type or
  content encoding; 405 for another method;
* 503 with ``Retry-After`` when the blob store or the database cannot take the body now:
  OTLP exporters retry a 503, and nothing was recorded.

No session, no CSRF: the token is the credential, and nothing here reads a cookie.
"""

from __future__ import annotations

import json
import logging

from django.db import DatabaseError
from django.http import HttpRequest, HttpResponse
from django.views.decorators.cache import never_cache
from django.views.decorators.csrf import csrf_exempt

from console import roles
from core.formats.otel import otlp
from governance.selectors import api_token_active
from governance.services import api_token_touch
from otel import conf
from otel.services import otlp_receive

logger = logging.getLogger(__name__)

PROTOBUF = "application/x-protobuf"
JSON = "application/json"
#: google.rpc.Code values used in a Status body
_INVALID_ARGUMENT = 3
_UNAUTHENTICATED = 16
_PERMISSION_DENIED = 7
_RESOURCE_EXHAUSTED = 8
_UNAVAILABLE = 14
_UNIMPLEMENTED = 12

TOKEN_MISSING = "send an API token as 'Authorization: Bearer <token>' (create one at /tokens/)"  # noqa: S105 - a message
TOKEN_INVALID = "the API token is unknown, revoked, or its owner is deactivated"  # noqa: S105
NO_UPLOAD = (
    "the token's owner may not upload traces (the roles matrix's upload: auditor, operator, admin)"
)
BAD_TYPE = "Content-Type must be application/x-protobuf or application/json, got {got!r}"
BAD_ENCODING = "Content-Encoding must be gzip or identity, got {got!r}"
TOO_LARGE = "the body is larger than {limit} bytes{how} (REPLAY_OTLP_MAX_{which}_BYTES)"
UNAVAILABLE = "the console cannot store the body now; retry later"
RETRY_AFTER_S = 5


def encode_status(code: int, message: str) -> bytes:
    """A ``google.rpc.Status`` (``int32 code = 1; string message = 2``) in protobuf's wire
    format: two fields, written here rather than depending on googleapis' generated code."""
    text = message.encode("utf-8")
    return bytes([0x08]) + _varint(code) + bytes([0x12]) + _varint(len(text)) + text


def _varint(value: int) -> bytes:
    out = bytearray()
    while True:
        byte = value & 0x7F
        value >>= 7
        if value:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)


def _status(
    content_type: str, code: int, message: str, status: int, error_code: str
) -> HttpResponse:
    """A ``google.rpc.Status`` in the request's encoding (JSON for anything else)."""
    if content_type == PROTOBUF:
        body = encode_status(code, f"{error_code}: {message}")
    else:
        body = json.dumps(
            {"code": code, "message": f"{error_code}: {message}", "error_code": error_code}
        ).encode()
        content_type = JSON
    return HttpResponse(body, status=status, content_type=content_type)


def _token(request: HttpRequest) -> str | None:
    sent = request.META.get("HTTP_AUTHORIZATION", "")
    scheme, _, token = sent.partition(" ")
    if scheme.lower() not in ("bearer", "token") or not token.strip():
        return None
    return token.strip()


def _read(request: HttpRequest, limit: int) -> bytes | None:
    """The body as sent, or None when it is larger than ``limit`` (read no further)."""
    declared = request.META.get("CONTENT_LENGTH") or "0"
    try:
        if int(declared) > limit:
            return None
    except ValueError:
        pass
    data = request.read(limit + 1)
    return None if len(data) > limit else data


@csrf_exempt
@never_cache
def otlp_traces_view(request: HttpRequest) -> HttpResponse:
    content_type = (request.content_type or "").lower()
    if request.method != "POST":
        response = _status(
            content_type, _UNIMPLEMENTED, "only POST exports traces", 405, "METHOD_NOT_ALLOWED"
        )
        response["Allow"] = "POST"
        return response
    token = _token(request)
    if token is None:
        response = _status(content_type, _UNAUTHENTICATED, TOKEN_MISSING, 401, "NOT_AUTHENTICATED")
        response["WWW-Authenticate"] = 'Bearer realm="otlp"'
        return response
    found = api_token_active(token=token)
    if found is None:
        response = _status(content_type, _UNAUTHENTICATED, TOKEN_INVALID, 401, "NOT_AUTHENTICATED")
        response["WWW-Authenticate"] = 'Bearer realm="otlp", error="invalid_token"'
        return response
    user = found.user
    if not roles.can(user, roles.UPLOAD):
        return _status(content_type, _PERMISSION_DENIED, NO_UPLOAD, 403, "PERMISSION_DENIED")
    api_token_touch(token=found)
    if content_type not in (PROTOBUF, JSON):
        return _status(
            JSON,
            _INVALID_ARGUMENT,
            BAD_TYPE.format(got=content_type),
            415,
            "UNSUPPORTED_MEDIA_TYPE",
        )
    encoding = request.META.get("HTTP_CONTENT_ENCODING", "").strip().lower()
    if encoding not in ("", "identity", "gzip"):
        return _status(
            content_type,
            _INVALID_ARGUMENT,
            BAD_ENCODING.format(got=encoding),
            415,
            "UNSUPPORTED_MEDIA_TYPE",
        )
    sent_limit = conf.max_body_bytes()
    data = _read(request, sent_limit)
    if data is None:
        return _status(
            content_type,
            _RESOURCE_EXHAUSTED,
            TOO_LARGE.format(limit=sent_limit, how=" as sent", which="BODY"),
            413,
            otlp.BODY_TOO_LARGE,
        )
    decoded_limit = conf.max_decoded_bytes()
    try:
        if encoding == "gzip":
            data = otlp.gunzip_bounded(data, decoded_limit)
        elif len(data) > decoded_limit:
            raise otlp.OtlpError(
                otlp.BODY_TOO_LARGE,
                TOO_LARGE.format(limit=decoded_limit, how="", which="DECODED"),
            )
        received = otlp_receive(body=data, content_type=content_type, user=user)
    except otlp.OtlpError as exc:
        status = 413 if exc.code == otlp.BODY_TOO_LARGE else 400
        code = _RESOURCE_EXHAUSTED if status == 413 else _INVALID_ARGUMENT
        return _status(content_type, code, exc.message, status, exc.code)
    except (OSError, DatabaseError):
        logger.exception("an OTLP body could not be stored")
        response = _status(content_type, _UNAVAILABLE, UNAVAILABLE, 503, "UNAVAILABLE")
        response["Retry-After"] = str(RETRY_AFTER_S)
        return response
    body = otlp.encode_response(
        content_type, received.rejected, "; ".join(dict.fromkeys(received.reasons))[:1000]
    )
    return HttpResponse(body, status=200, content_type=content_type)
