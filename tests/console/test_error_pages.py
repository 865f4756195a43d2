"""Errors look like the console: 400, 403, 404, 413 and 500 are the console's own pages (its
layout and stylesheet, no inline style or script, a strict CSP) with DEBUG on and off; under
/api/ they are JSON with an exact error_code. The 500 page needs no database."""

from __future__ import annotations

import json
import logging
import re

import pytest
from django.test import Client

from console.uploads import MULTIPART_OVERHEAD
from tests.console.personas import persona, sign_in

pytestmark = pytest.mark.django_db

STYLESHEET = re.compile(r'<link rel="stylesheet" href="/static/css/console[.\w]*\.css">')


@pytest.fixture(params=[True, False], ids=["debug", "production"])
def debug(request, settings):
    settings.DEBUG = request.param
    return request.param


def assert_console_page(response, status: int, heading: str) -> str:
    assert response.status_code == status
    assert response["Content-Type"] == "text/html; charset=utf-8"
    policy = dict(d.strip().split(" ", 1) for d in response["Content-Security-Policy"].split(";"))
    assert policy["style-src"] == "'self'"
    assert "unsafe-inline" not in response["Content-Security-Policy"]
    html = response.content.decode()
    assert STYLESHEET.search(html), html[:400]
    assert '<a class="brand" href="/traces/">Replay Audit Console</a>' in html
    assert f"<h1>{heading}</h1>" in html
    assert "<style" not in html
    assert not re.search(r"\sstyle\s*=", html)
    assert not re.search(r"<script\b(?![^>]*\ssrc=)", html), "inline script"
    for tag in re.findall(r"<script\b[^>]*>", html):
        assert 'nonce="' in tag, tag
    return html


def test_a_path_that_does_not_exist_is_the_console_404(debug, client):
    html = assert_console_page(client.get("/no/such/page/"), 404, "Not found")
    assert "There is nothing at /no/such/page/." in html


def test_an_object_that_does_not_exist_is_the_console_404_with_the_users_navigation(debug, client):
    sign_in(client, persona("alice"))
    html = assert_console_page(client.get("/traces/" + "0" * 64 + "/"), 404, "Not found")
    assert '<nav aria-label="Main">' in html
    assert '<span class="user">alice</span>' in html


def test_a_missing_api_path_is_json_not_found(debug, client):
    response = client.get("/api/no-such-endpoint/")
    assert response.status_code == 404
    assert response["Content-Type"] == "application/json"
    assert json.loads(response.content) == {
        "error_code": "NOT_FOUND",
        "message": "There is nothing at /api/no-such-endpoint/.",
    }


def test_a_forbidden_page_is_the_console_403(debug, client):
    sign_in(client, persona("alice"))
    html = assert_console_page(client.get("/governance/users/"), 403, "Not allowed")
    assert "Your roles do not allow this." in html


class _Records(logging.Handler):
    def __init__(self) -> None:
        super().__init__()
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)


def test_a_refusal_is_logged_once_and_without_a_traceback(debug, client):
    # printed twice before: once by Django's own handler on "django", once by the root's
    assert logging.getLogger("django").handlers == []
    assert logging.getLogger("django.request").handlers == []
    seen = _Records()
    logging.getLogger().addHandler(seen)
    try:
        sign_in(client, persona("alice"))
        assert client.get("/governance/users/").status_code == 403
        client.raise_request_exception = False
        assert client.get("/api/nothing-here/").status_code == 404
    finally:
        logging.getLogger().removeHandler(seen)
    refused = [(r.name, r.levelname, r.getMessage(), r.exc_info) for r in seen.records]
    assert refused == [
        ("django.request", "WARNING", "Forbidden (Permission denied): /governance/users/", None),
        ("django.request", "WARNING", "Not Found: /api/nothing-here/", None),
    ]


def test_a_bad_host_is_the_console_400(debug, client):
    response = client.get("/traces/", HTTP_HOST="evil.example")
    html = assert_console_page(response, 400, "Bad request")
    assert "The request could not be understood" in html


def test_an_upload_too_large_is_the_console_413_and_json_for_the_api(debug, client, settings):
    settings.REPLAY_MAX_UPLOAD_BYTES = 1024
    sign_in(client, persona("alice"))
    too_big = str(1024 + MULTIPART_OVERHEAD + 1)
    page = client.post("/traces/upload/", CONTENT_LENGTH=too_big, CONTENT_TYPE="text/plain")
    html = assert_console_page(page, 413, "Upload too large")
    assert "The upload is larger than the limit of 1.0 KiB (1024 bytes)." in html
    api = client.post("/api/traces/upload/", CONTENT_LENGTH=too_big, CONTENT_TYPE="text/plain")
    assert api.status_code == 413
    assert json.loads(api.content)["error_code"] == "UPLOAD_TOO_LARGE"


@pytest.mark.urls("tests.console.error_urls")
def test_a_failure_is_the_console_500_without_touching_the_database(
    debug, django_assert_num_queries
):
    client = Client(raise_request_exception=False)
    with django_assert_num_queries(0):
        response = client.get("/boom/")
    html = assert_console_page(response, 500, "Server error")
    assert "Something failed on our side. The error was logged" in html
    assert "the database went away" not in html  # never the exception itself


@pytest.mark.urls("tests.console.error_urls")
def test_a_failure_in_the_api_is_json(debug):
    response = Client(raise_request_exception=False).get("/api/boom/")
    assert response.status_code == 500
    assert json.loads(response.content) == {
        "error_code": "SERVER_ERROR",
        "message": "Something failed on our side. The error was logged.",
    }
