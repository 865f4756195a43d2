"""Upload size limit, enforced before anything reads the request body.

The check is a middleware's request phase, which runs before any view-phase hook such as
CSRF's (that one would parse the multipart body to find its token): an oversized request is
answered 413 with the limit in the message without a byte of its body being read. Django
then streams what is accepted to temporary files (FILE_UPLOAD_MAX_MEMORY_SIZE), so server
memory stays bounded for large traces.
"""

from __future__ import annotations

from collections.abc import Callable

from django.conf import settings
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.template.loader import render_to_string

UPLOAD_TOO_LARGE = "UPLOAD_TOO_LARGE"
# Room for multipart boundaries and headers around the file bytes themselves.
MULTIPART_OVERHEAD = 64 * 1024


def upload_limit() -> int:
    return int(settings.REPLAY_MAX_UPLOAD_BYTES)


def human_bytes(n: int) -> str:
    size = float(n)
    for unit in ("bytes", "KiB", "MiB", "GiB"):
        if size < 1024 or unit == "GiB":
            return f"{n} bytes" if unit == "bytes" else f"{size:.1f} {unit} ({n} bytes)"
        size /= 1024
    return f"{n} bytes"  # pragma: no cover (the loop always returns)


def too_large_message() -> str:
    return f"The upload is larger than the limit of {human_bytes(upload_limit())}."


class UploadLimitMiddleware:
    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        if request.method in ("POST", "PUT", "PATCH"):
            try:
                length = int(request.META.get("CONTENT_LENGTH") or 0)
            except ValueError:
                length = 0
            if length > upload_limit() + MULTIPART_OVERHEAD:
                return too_large_response(request)
        return self.get_response(request)


def too_large_response(request: HttpRequest) -> HttpResponse:
    message = too_large_message()
    if request.path.startswith("/api/"):
        body = {"error_code": UPLOAD_TOO_LARGE, "message": message, "limit": upload_limit()}
        response: HttpResponse = JsonResponse(body, status=413)
    else:
        html = render_to_string(
            "console/error_page.html",
            {"title": "Upload too large", "message": message, "code": UPLOAD_TOO_LARGE},
            request=request,
        )
        response = HttpResponse(html, status=413)
    # No "Connection: close" here: it is a hop-by-hop header, which a WSGI application must
    # not set (PEP 3333; wsgiref and Django's runserver turn it into a 500). Closing a
    # connection whose body was not read is the server's business.
    return response
