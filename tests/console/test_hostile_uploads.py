"""Nothing hostile gets in: requests that must be refused with an exact code, never a 500."""

from __future__ import annotations

import io
import json
from wsgiref.handlers import SimpleHandler

import pytest

THREE_GIB = 3 * 1024**3


def _raw_wsgi(path: str, content_length: int) -> tuple[str, dict[str, str], bytes]:
    """One request through the real WSGI application and wsgiref's handler, which refuses
    what WSGI forbids (hop-by-hop headers) as a server would."""
    from console.wsgi import application

    environ = {
        "REQUEST_METHOD": "POST",
        "PATH_INFO": path,
        "QUERY_STRING": "filename=big.trace.json",
        "SERVER_NAME": "testserver",
        "SERVER_PORT": "80",
        "SERVER_PROTOCOL": "HTTP/1.1",
        "CONTENT_TYPE": "application/octet-stream",
        "CONTENT_LENGTH": str(content_length),
        "wsgi.url_scheme": "http",
    }
    out = io.BytesIO()
    handler = SimpleHandler(io.BytesIO(b""), out, io.StringIO(), environ, multithread=False)
    handler.run(application)
    head, _, body = out.getvalue().partition(b"\r\n\r\n")
    status, *lines = head.decode("latin-1").split("\r\n")
    headers = dict(line.split(": ", 1) for line in lines)
    return status, headers, body


@pytest.mark.django_db
def test_it_answers_413_not_500_to_a_content_length_of_3_gib_on_the_api():
    status, headers, body = _raw_wsgi("/api/traces/upload/", THREE_GIB)
    assert status.split(" ", 1)[1] == "413 Request Entity Too Large"
    assert "Connection" not in headers
    assert json.loads(body) == {
        "error_code": "UPLOAD_TOO_LARGE",
        "message": "The upload is larger than the limit of 2.0 GiB (2147483648 bytes).",
        "limit": 2147483648,
    }


@pytest.mark.django_db
def test_it_answers_413_not_500_to_a_content_length_of_3_gib_on_the_upload_page():
    status, headers, body = _raw_wsgi("/traces/upload/", THREE_GIB)
    assert status.split(" ", 1)[1] == "413 Request Entity Too Large"
    assert "Connection" not in headers
    assert b"UPLOAD_TOO_LARGE" in body
