"""Request ids and the access log.

Every request gets an id: the incoming ``X-Request-ID`` when it is sane (1-128 characters of
letters, digits and ``._:-``, as a proxy or load balancer sets it), else a fresh one. It is
echoed in the response's ``X-Request-ID``, attached to every log record made while the
request runs (``request_id``; the JSON formatter prints it), carried into the background
thread pool with the task (replay/background.py), and each request ends with one
``console.access`` record: method, path, query, status, duration, user.

A query string can carry what no log should keep (an approval reason sent by GET, a token
pasted into a URL, a person's name in a search): the access record's ``query`` keeps the
values of the parameters in :data:`QUERY_KEPT` only (paging and filters) and masks every
other value as :data:`MASK`; :class:`QueryMaskFilter` does the same to the request Django
attaches to its own records (``django.request``'s 4xx/5xx, whose ``request`` field would print
the full path with its query string).
"""

from __future__ import annotations

import contextvars
import logging
import re
import time
import uuid
from collections.abc import Callable
from urllib.parse import parse_qsl, urlencode

from django.core.signals import request_finished
from django.dispatch import receiver
from django.http import HttpRequest, HttpResponse

#: query parameters whose values the logs keep (paging, filters, formats); every other value
#: is replaced by MASK, whatever its name
QUERY_KEPT = frozenset(
    {"page", "cursor", "verdict", "format", "seq", "range", "before", "after", "scope", "mode"}
)
MASK = "*"
REQUEST_ID_HEADER = "X-Request-ID"
NO_REQUEST = "-"
_SANE = re.compile(r"[A-Za-z0-9._:-]{1,128}")

request_id: contextvars.ContextVar[str] = contextvars.ContextVar("request_id", default=NO_REQUEST)
access_log = logging.getLogger("console.access")


def request_id_for(incoming: str | None) -> str:
    """The incoming id if it is sane, else a new one (32 hex digits)."""
    if incoming and _SANE.fullmatch(incoming):
        return incoming
    return uuid.uuid4().hex


def query_masked(query_string: str) -> str:
    """``query_string`` with every value outside :data:`QUERY_KEPT` masked (names kept, in
    order; a parameter repeated stays repeated)."""
    if not query_string:
        return ""
    pairs = parse_qsl(query_string, keep_blank_values=True)
    return urlencode([(k, v if k in QUERY_KEPT else MASK) for k, v in pairs], safe="*:")


def request_described(request: HttpRequest) -> str:
    """What a log may say of ``request``: its method and path, and its query masked."""
    query = query_masked(request.META.get("QUERY_STRING", ""))
    where = request.path + (f"?{query}" if query else "")
    return f"<{type(request).__name__}: {request.method} {where!r}>"


class QueryMaskFilter(logging.Filter):
    """A record carrying the request (Django's own) carries its masked description instead."""

    def filter(self, record: logging.LogRecord) -> bool:
        request = getattr(record, "request", None)
        if isinstance(request, HttpRequest):
            record.request = request_described(request)
        return True


class RequestIdFilter(logging.Filter):
    """Puts the current request id on every record (``-`` outside a request)."""

    def filter(self, record: logging.LogRecord) -> bool:
        if not hasattr(record, "request_id"):
            record.request_id = request_id.get()
        return True


class ClientErrorWithoutTraceback(logging.Filter):
    """A refused request (4xx: "Forbidden", "Not Found", a bad request) is logged as one line:
    Django attaches the exception it turned into the response, and a roles refusal's traceback
    is noise in the log, not a fault. A 5xx keeps its traceback."""

    def filter(self, record: logging.LogRecord) -> bool:
        if 400 <= getattr(record, "status_code", 0) < 500:
            record.exc_info = None
            record.exc_text = None
        return True


class RequestIdMiddleware:
    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        rid = request_id_for(request.META.get("HTTP_X_REQUEST_ID"))
        request.request_id = rid  # type: ignore[attr-defined]
        # kept until the response is closed (request_finished): Django logs a refused
        # request's "Not Found" / "Forbidden" record after the middleware has returned
        request_id.set(rid)
        started = time.monotonic()
        response = self.get_response(request)
        response[REQUEST_ID_HEADER] = rid
        user = getattr(request, "user", None)
        access_log.info(
            "%s %s %s",
            request.method,
            request.path,
            response.status_code,
            extra={
                "request_id": rid,
                "method": request.method,
                "path": request.path,
                "query": query_masked(request.META.get("QUERY_STRING", "")),
                "status": response.status_code,
                "duration_ms": round((time.monotonic() - started) * 1000, 1),
                "user": user.get_username() if user and user.is_authenticated else None,
            },
        )
        return response


@receiver(request_finished, dispatch_uid="console.requestlog.forget_request_id")
def _forget_request_id(**kwargs: object) -> None:
    request_id.set(NO_REQUEST)
