"""The console's error pages (400, 403, 404, 500; 413 is console.uploads'), in every mode.

Each is the console's own page (its layout and stylesheet, no inline style or script, so the
strict CSP holds); under /api/ each is JSON with an exact error_code. DEBUG changes nothing
the user sees: Django's technical 404 and 500 pages carry inline styles our CSP refuses, so
`ErrorPagesMiddleware` and `ConsoleExceptionReporter` put these pages in their place (the
traceback still goes to the log). The 400 and 500 pages are rendered without the request:
no context processor and no database query can fail while the console reports a failure.
"""

from __future__ import annotations

from collections.abc import Callable

from django.conf import settings
from django.core.exceptions import BadRequest, SuspiciousOperation
from django.http import Http404, HttpRequest, HttpResponse, JsonResponse
from django.template.loader import render_to_string
from django.utils.safestring import SafeString
from django.views import debug

from console.api.errors import MALFORMED_REQUEST, NOT_FOUND, PERMISSION_DENIED, SERVER_ERROR

MESSAGE_NOT_FOUND = "There is nothing at {path}."
MESSAGE_FORBIDDEN = "Your roles do not allow this."
MESSAGE_BAD_REQUEST = "The request could not be understood (a malformed request or host)."
MESSAGE_SERVER_ERROR = "Something failed on our side. The error was logged."


def _api(request: HttpRequest) -> bool:
    return request.path.startswith("/api/")


def _json(code: str, message: str, status: int) -> JsonResponse:
    return JsonResponse({"error_code": code, "message": message}, status=status)


def bad_request(request: HttpRequest, exception: Exception | None = None) -> HttpResponse:
    if _api(request):
        return _json(MALFORMED_REQUEST, MESSAGE_BAD_REQUEST, 400)
    return HttpResponse(render_to_string("400.html", {"message": MESSAGE_BAD_REQUEST}), status=400)


def permission_denied(request: HttpRequest, exception: Exception | None = None) -> HttpResponse:
    if _api(request):
        return _json(PERMISSION_DENIED, MESSAGE_FORBIDDEN, 403)
    context = {"message": MESSAGE_FORBIDDEN, "exception": str(exception or "")}
    return HttpResponse(render_to_string("403.html", context, request=request), status=403)


def page_not_found(request: HttpRequest, exception: Exception | None = None) -> HttpResponse:
    message = MESSAGE_NOT_FOUND.format(path=request.path)
    if _api(request):
        return _json(NOT_FOUND, message, 404)
    return HttpResponse(render_to_string("404.html", {"message": message}, request), status=404)


def server_error(request: HttpRequest) -> HttpResponse:
    if _api(request):
        return _json(SERVER_ERROR, MESSAGE_SERVER_ERROR, 500)
    return HttpResponse(render_to_string("500.html", {"message": MESSAGE_SERVER_ERROR}), status=500)


class ErrorPagesMiddleware:
    """In DEBUG, the console's 404 instead of Django's technical one (whose inline styles the
    CSP refuses): for a path that matches no URL, and for Http404 raised by a view; and under
    /api/, JSON instead of the HTML report of a 400 or 500 (already logged by then). Without
    DEBUG, Django already calls these handlers itself."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        response = self.get_response(request)
        if not settings.DEBUG:
            return response
        status = response.status_code
        if status == 404 and getattr(request, "resolver_match", None) is None:
            return page_not_found(request)
        html = response.get("Content-Type", "").startswith("text/html")
        if _api(request) and html and status in (400, 500):
            return bad_request(request) if status == 400 else server_error(request)
        return response

    def process_exception(self, request: HttpRequest, exception: Exception) -> HttpResponse | None:
        if settings.DEBUG and isinstance(exception, Http404):
            return page_not_found(request, exception)
        return None


class ConsoleExceptionReporter(debug.ExceptionReporter):
    """DEBUG's 500 (and 400 for a suspicious request) as the console's page: Django's
    technical page needs inline styles. The traceback is still logged (django.request) and
    the plain-text report (`Accept: text/plain`) is unchanged."""

    def get_traceback_html(self) -> SafeString:
        if self.exc_type is not None and issubclass(
            self.exc_type, (SuspiciousOperation, BadRequest)
        ):
            return render_to_string("400.html", {"message": MESSAGE_BAD_REQUEST})
        return render_to_string("500.html", {"message": MESSAGE_SERVER_ERROR})
