"""Uploading traces through the page: several at once, per-file verdicts and exact refusals."""

from __future__ import annotations

import io
import re

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile

from core.errors import ReplayError
from replay.models import Trace
from replay.services import trace_ingest
from tests.console.conftest import trace_bytes

pytestmark = pytest.mark.django_db

CORRUPT = b'{"format": "replay-trace", "schema_version": 1, "trace_id": '


def refusal_of(data: bytes, filename: str) -> ReplayError:
    with pytest.raises(ReplayError) as caught:
        trace_ingest(source=io.BytesIO(data), filename=filename)
    return caught.value


def files(*named: tuple[str, bytes]) -> list[SimpleUploadedFile]:
    return [SimpleUploadedFile(name, data) for name, data in named]


def test_alice_uploads_three_files_and_reads_two_verdicts_and_one_exact_refusal(
    as_persona, trace_key
):
    expected = refusal_of(CORRUPT, "corrupt.trace.json")
    response = as_persona("alice").post(
        "/traces/upload/",
        {
            "files": files(
                ("ok.trace.json", trace_bytes("ok")),
                ("diverged.trace.json", trace_bytes("diverged")),
                ("corrupt.trace.json", CORRUPT),
            )
        },
    )
    body = response.content.decode()
    assert response.status_code == 200
    assert body.count('class="upload-outcome accepted"') == 2
    assert body.count('class="upload-outcome refused"') == 1
    assert f'<code class="code">{expected.code}</code> {expected.message}' in body
    assert expected.code == "MALFORMED_TRACE"
    assert Trace.objects.count() == 2
    assert '<span class="badge verdict-ok">ok</span>' in body
    diverged = Trace.objects.get(filename="diverged.trace.json").ingest_report
    assert diverged["error_code"] == "REPLAY_DIVERGENCE"
    assert (
        '<span class="badge verdict-diverged">diverged</span> '
        f'<code class="code">REPLAY_DIVERGENCE</code> {diverged["message"]}'
    ) in body
    ok = Trace.objects.get(filename="ok.trace.json")
    assert f'href="/traces/{ok.blob.sha256}/"' in body


def test_the_page_has_a_drop_zone_a_picker_and_the_upload_script(as_persona):
    body = as_persona("alice").get("/traces/upload/").content.decode()
    assert 'id="dropzone"' in body
    assert '<input type="file" name="files" id="upload-input" multiple>' in body
    assert re.search(r'<script src="/static/js/upload.js" nonce="[^"]+" defer></script>', body)
    assert 'enctype="multipart/form-data"' in body


def test_the_drop_zone_names_every_registered_format_from_the_registry(as_persona):
    body = as_persona("alice").get("/traces/upload/").content.decode()
    zone = body.split('id="dropzone">', 1)[1].split("</p>", 1)[0]
    assert zone == (
        "\n    <p>Drop trace files here (an AHD replay sidecar, with its input files; "
        "a ContextOS trace, with its input files; an OpenTelemetry GenAI trace; "
        "a native replay-trace; "
        "a Paxman execution artifact, with its contract; a Verist snapshot; "
        "a MACE reflective log, with its input files: each is verified and stored with the "
        "files dropped with it), or"
    )


def test_one_file_over_htmx_gets_only_its_outcome(as_persona, trace_key, htmx_headers):
    response = as_persona("oscar").post(
        "/traces/upload/", {"files": files(("ok.trace.json", trace_bytes("ok")))}, **htmx_headers
    )
    body = response.content.decode()
    assert response.status_code == 200
    assert body.startswith('\n<section id="upload-results"')
    assert "<html" not in body
    assert "accepted" in body


def test_a_refused_file_over_htmx_is_a_422_with_its_code(as_persona, trace_key, htmx_headers):
    response = as_persona("alice").post(
        "/traces/upload/", {"files": files(("bad.trace.json", b"[]"))}, **htmx_headers
    )
    expected = refusal_of(b"[]", "bad.trace.json")
    assert response.status_code == 422
    assert f"{expected.code}</code> {expected.message}" in response.content.decode()


def test_the_same_file_twice_is_stored_once(as_persona, trace_key):
    client = as_persona("alice")
    for _ in range(2):
        client.post("/traces/upload/", {"files": files(("ok.trace.json", trace_bytes("ok")))})
    assert Trace.objects.count() == 1


def test_a_post_without_a_file_says_so(as_persona):
    response = as_persona("alice").post("/traces/upload/", {})
    assert response.status_code == 400
    assert "NO_FILE</code> Choose at least one trace file to upload." in response.content.decode()


def test_an_oversized_upload_is_413_with_the_limit_before_the_body_is_read(as_persona, settings):
    settings.REPLAY_MAX_UPLOAD_BYTES = 1000
    client = as_persona("alice")
    response = client.post(
        "/traces/upload/",
        {"files": files(("big.trace.json", b"x" * 200_000))},
    )
    assert response.status_code == 413
    assert (
        "UPLOAD_TOO_LARGE</code> The upload is larger than the limit of 1000 bytes."
        in response.content.decode()
    )
    assert Trace.objects.count() == 0


def test_a_file_over_the_limit_inside_a_small_enough_request_is_refused_alone(
    as_persona, settings, trace_key
):
    settings.REPLAY_MAX_UPLOAD_BYTES = len(trace_bytes("ok")) + 10
    response = as_persona("alice").post(
        "/traces/upload/",
        {
            "files": files(
                ("ok.trace.json", trace_bytes("ok")),
                ("big.trace.json", b" " * (len(trace_bytes("ok")) + 11)),
            )
        },
    )
    body = response.content.decode()
    assert body.count("accepted") >= 1
    assert "UPLOAD_TOO_LARGE" in body
    assert Trace.objects.count() == 1


@pytest.mark.parametrize("name", ["vera", "cora", "lena", "nora"])
def test_roles_without_upload_are_refused_and_nothing_is_stored(as_persona, trace_key, name):
    response = as_persona(name).post(
        "/traces/upload/", {"files": files(("ok.trace.json", trace_bytes("ok")))}
    )
    assert response.status_code == 403
    assert Trace.objects.count() == 0


def test_upload_without_csrf_token_is_refused(trace_key):
    from django.test import Client

    from tests.console.personas import persona, sign_in

    client = sign_in(Client(enforce_csrf_checks=True), persona("alice"))
    response = client.post(
        "/traces/upload/", {"files": files(("ok.trace.json", trace_bytes("ok")))}
    )
    assert response.status_code == 403
    assert Trace.objects.count() == 0


def test_the_journeys_three_files_a_native_trace_an_ahd_sidecar_and_a_corrupt_file(
    as_persona, trace_key, settings
):
    """journeys.md, auditor step 2: two verdicts and one refusal; the sidecar's inputs are
    taken from the server's AHD checkout (it came alone) and it is stored with them."""
    from pathlib import Path

    demo_ahd = Path(settings.BASE_DIR) / "replay" / "demo_ahd"
    settings.REPLAY_AHD_ROOT = str(demo_ahd)
    sidecar = (demo_ahd / "docs" / "evals" / "2026-04-21-swiss.replay.json").read_bytes()
    response = as_persona("alice").post(
        "/traces/upload/",
        {
            "files": files(
                ("diverged.trace.json", trace_bytes("diverged")),
                ("2026-04-21-swiss.replay.json", sidecar),
                ("corrupt.trace.json", CORRUPT),
            )
        },
    )
    body = response.content.decode()
    assert response.status_code == 200
    assert body.count('class="upload-outcome accepted"') == 2
    assert body.count('class="upload-outcome refused"') == 1
    stored = Trace.objects.get(format="ahd-replay")
    assert (
        f'Stored as <a href="/traces/{stored.blob.sha256}/"><code>2026-04-21-swiss</code></a>'
        in body
    )
    assert "· ahd-replay\n" in body  # an AHD sidecar has no events or steps to count
    assert "0 events, 0 steps" not in body
    assert str(demo_ahd) not in body  # the server's paths are not shown
    assert Trace.objects.count() == 2


def test_the_api_refuses_to_store_an_ahd_sidecar_without_its_inputs_and_says_why(
    as_persona, settings
):
    from pathlib import Path

    from core.formats import ahd

    settings.REPLAY_AHD_ROOT = ""
    name = "2026-04-21-swiss.replay.json"
    data = (Path(settings.BASE_DIR) / "replay" / "demo_ahd" / "docs" / "evals" / name).read_bytes()
    response = as_persona("alice").post(
        "/api/traces/upload/", {"file": SimpleUploadedFile(name, data)}
    )
    assert response.status_code == 400
    assert response.json()["error_code"] == "MISSING_SNAPSHOT"
    assert response.json()["message"] == ahd.NO_CHECKOUT_MESSAGE.format(
        name=name, inputs="the token tokens/swiss-editorial.yml and the brief briefs/landing.yml"
    )
    assert not Trace.objects.exists()
