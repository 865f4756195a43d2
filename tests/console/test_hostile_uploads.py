"""Nothing hostile gets in: requests that must be refused with an exact code, never a 500."""

from __future__ import annotations

import gzip
import hashlib
import io
import json
import shutil
from pathlib import Path
from wsgiref.handlers import SimpleHandler

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile

from replay.models import Trace

THREE_GIB = 3 * 1024**3


def _raw_wsgi(path: str, content_length: int) -> tuple[str, dict[str, str], bytes]:
    """One request through the real WSGI application and wsgiref's handler, which refuses
    what WSGI forbids (hop-by-hop headers) as a server would."""
    from config.wsgi import application

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


# --- AHD input paths, through the upload page and the verify endpoint ----------------------

SWISS = "2026-04-21-swiss.replay.json"
SECRET = b"django-insecure-the-server-secret-key\n"
SECRET_HASH = hashlib.sha256(SECRET).hexdigest()


@pytest.fixture
def hostile_sidecars(settings, tmp_path):
    """The server's checkout (a copy of the demo's), a secret beside it, and sidecars whose
    token path reaches for the secret: by climbing out, and by its absolute path."""
    root = tmp_path / "srv" / "ahd"
    shutil.copytree(Path(settings.BASE_DIR) / "replay" / "demo_ahd", root)
    secret = tmp_path / "srv" / "secret_key"
    secret.write_bytes(SECRET)
    settings.REPLAY_AHD_ROOT = str(root)
    doc = json.loads((root / "docs" / "evals" / SWISS).read_bytes())
    doc["brief"] = None

    def with_token(path: str) -> bytes:
        return json.dumps({**doc, "token": {**doc["token"], "path": path}}).encode()

    return {"climb": with_token("../secret_key"), "absolute": with_token(str(secret))}


def test_the_upload_page_refuses_a_sidecar_whose_token_climbs_out_of_the_checkout(
    as_persona, hostile_sidecars
):
    response = as_persona("alice").post(
        "/traces/upload/",
        {"files": [SimpleUploadedFile(SWISS, hostile_sidecars["climb"])]},
    )
    body = response.content.decode()
    assert response.status_code == 200
    assert body.count('class="upload-outcome refused"') == 1
    assert "MALFORMED_TRACE" in body
    assert "token: the recorded path ../secret_key is outside the checkout; not read" in body
    assert SECRET_HASH not in body
    assert Trace.objects.count() == 0


def test_the_upload_page_says_nothing_of_an_absolute_path_outside_the_checkout(
    as_persona, hostile_sidecars
):
    response = as_persona("alice").post(
        "/traces/upload/",
        {"files": [SimpleUploadedFile(SWISS, hostile_sidecars["absolute"])]},
    )
    body = response.content.decode()
    assert response.status_code == 200
    assert body.count('class="upload-outcome refused"') == 1
    assert "MISSING_SNAPSHOT" in body
    assert "token: token file not found at " in body  # the path it recorded, never read
    assert SECRET_HASH not in body
    assert Trace.objects.count() == 0  # a sidecar whose inputs cannot be kept is not stored


@pytest.mark.parametrize(
    ("attack", "code", "message"),
    [
        (
            "climb",
            "MALFORMED_TRACE",
            "token: the recorded path ../secret_key is outside the checkout; not read",
        ),
        ("absolute", "MISSING_SNAPSHOT", None),
    ],
)
def test_the_verify_endpoint_never_reveals_a_file_outside_the_checkout(
    as_persona, hostile_sidecars, attack, code, message
):
    response = as_persona("alice").post(
        "/api/traces/verify/", {"file": SimpleUploadedFile(SWISS, hostile_sidecars[attack])}
    )
    assert response.status_code == 200
    report = response.json()["report"]
    assert (report["status"], report["error_code"]) == ("refused", code)
    if message is not None:
        assert report["message"] == message
    assert SECRET_HASH not in response.content.decode()


# --- a stored file's padding does not make its pages slower ---------------------------------


class _Counting(io.RawIOBase):
    def __init__(self, raw, counter: list[int]) -> None:
        self._raw = raw
        self._counter = counter

    def readable(self) -> bool:
        return True

    def readinto(self, b) -> int:
        data = self._raw.read(len(b))
        self._counter[0] += len(data)
        b[: len(data)] = data
        return len(data)

    def close(self) -> None:
        self._raw.close()
        super().close()


@pytest.fixture
def bytes_read(monkeypatch) -> list[int]:
    """How many bytes the pages read from stored files."""
    from console.selectors import detail, opened

    counter = [0]
    real = opened.blob_open

    def counted(name: str):
        return io.BufferedReader(_Counting(real(name), counter))

    for module in (detail, opened):  # every module of the pages that opens a stored file
        monkeypatch.setattr(module, "blob_open", counted)
    return counter


def _padded_jsonl(trace_key_bytes: bytes, pad: int) -> bytes:
    from core.formats import native

    lines = list(native.iter_jsonl(json.loads(trace_key_bytes)))
    # a stored file of before the limits: every record carries `pad` bytes of trailing spaces
    return lines[0] + b"".join(line.rstrip(b"\n") + b" " * pad + b"\n" for line in lines[1:])


def test_the_trace_page_reads_no_more_than_its_budget_of_a_padded_stored_file(
    as_persona, trace_key, settings, bytes_read
):
    from django.core.files.storage import storages

    from core.formats import native
    from replay.services import trace_ingest
    from tests.console.conftest import trace_bytes

    data = trace_bytes("ok")
    jsonl = b"".join(native.iter_jsonl(json.loads(data)))
    trace = trace_ingest(source=io.BytesIO(jsonl), filename="ok.trace.jsonl").trace
    with storages["blobs"].open(trace.blob.storage_name, "wb") as fh:
        fh.write(_padded_jsonl(data, pad=256 * 1024))
    settings.REPLAY_PAGE_READ_BYTES = 1024**2

    response = as_persona("vera").get(f"/traces/{trace.blob.sha256}/")

    body = response.content.decode()
    assert response.status_code == 200
    assert (
        '<p class="notice" id="outline-cut-short">The outline is partial: a page reads at '
        "most 1048576 bytes of a stored file (REPLAY_PAGE_READ_BYTES); this one is longer, "
        "so the outline stops there.</p>"
    ) in body
    assert bytes_read[0] <= 1024**2 + 2 * 1024**2  # the budget and one read buffer ahead


def test_a_padded_stored_document_is_not_parsed_for_its_page(
    as_persona, trace_key, settings, bytes_read
):
    from django.core.files.storage import storages

    from replay.services import trace_ingest
    from tests.console.conftest import trace_bytes

    data = trace_bytes("ok")
    trace = trace_ingest(source=io.BytesIO(data), filename="ok.trace.json").trace
    with storages["blobs"].open(trace.blob.storage_name, "wb") as fh:
        fh.write(data + b" " * (8 * 1024**2))
    settings.REPLAY_PAGE_READ_BYTES = 1024**2

    response = as_persona("vera").get(f"/traces/{trace.blob.sha256}/")

    assert response.status_code == 200
    assert (
        "The stored file cannot be read: a page reads at most 1048576 bytes of a stored file "
        "(REPLAY_PAGE_READ_BYTES); this one is longer, so the outline stops there"
    ) in response.content.decode()
    assert bytes_read[0] <= 1024**2 + 2 * 1024**2


# --- bombs through the API: refused with the limit in the message, nothing stored -----------


def _newline_bomb() -> bytes:
    from core.formats import native
    from tests.console.conftest import trace_bytes

    header = next(native.iter_jsonl(json.loads(trace_bytes("ok"))))
    member = gzip.compress(b"\n" * (16 * 1024**2), compresslevel=9, mtime=0)
    return gzip.compress(header, mtime=0) + member * 8  # 128 MiB of newlines from ~130 KB


def test_the_api_refuses_a_gzip_of_newlines_at_the_blank_line_limit(as_persona, trace_key):
    response = as_persona("alice").post(
        "/api/traces/upload/?filename=pad.trace.jsonl.gz",
        _newline_bomb(),
        content_type="application/octet-stream",
    )
    assert response.status_code == 400
    body = response.json()
    assert (body["error_code"], body["message"]) == (
        "MALFORMED_TRACE",
        "line 1026: more than 1024 blank lines; refused (padding, not records)",
    )
    assert not Trace.objects.exists()


def test_the_verify_endpoint_refuses_too_many_keys_with_the_limit(as_persona, trace_key, settings):
    settings.REPLAY_MAX_OBJECT_KEYS = 1000
    keys = ",".join(f'"k{i}":0' for i in range(1001))
    data = ('{"format":"replay-trace","schema_version":1,"meta":{' + keys + "}}").encode()
    response = as_persona("alice").post(
        "/api/traces/verify/?filename=keys.trace.json",
        data,
        content_type="application/octet-stream",
    )
    assert response.status_code == 200
    report = response.json()["report"]
    assert (report["status"], report["error_code"]) == ("refused", "MALFORMED_TRACE")
    assert report["message"] == (
        "trace: an object has more than 1000 keys; refused before parsing it"
    )
