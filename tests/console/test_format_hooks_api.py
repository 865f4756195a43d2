"""A multipart upload's companions are read before their format is known: up to the largest
limit any format allows; AHD then refuses beyond its own settings with the same codes and
messages as when every companion was read with AHD's limits (issue 31)."""

from __future__ import annotations

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile

from core.errors import INTEGRITY_FAILURE, MALFORMED_TRACE
from tests.console.test_ahd_archives import inputs_zip, sidecar_bytes
from tests.console.test_format_traces import BRIEF, SWISS, TOKEN

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def _no_server_checkout(settings):
    settings.REPLAY_AHD_ROOT = ""


def verified(client, *inputs):
    response = client.post(
        "/api/traces/verify/",
        {"file": SimpleUploadedFile(SWISS, sidecar_bytes()), "inputs": list(inputs)},
    )
    assert response.status_code == 200
    return response.json()["report"]


def test_it_refuses_an_ahd_token_over_ahds_input_limit_as_before(as_persona, settings):
    settings.REPLAY_AHD_MAX_INPUT_BYTES = 100

    report = verified(
        as_persona("alice"),
        SimpleUploadedFile("swiss-editorial.yml", TOKEN.read_bytes()),
        SimpleUploadedFile("landing.yml", BRIEF.read_bytes()),
    )

    assert (report["status"], report["error_code"]) == ("tamper_detected", INTEGRITY_FAILURE)
    assert report["message"] == (
        "token: token file at <uploaded inputs>/tokens/swiss-editorial.yml is over 100 bytes; "
        "not read"
    )


def test_it_refuses_an_archive_over_ahds_archive_limit_as_before(as_persona, settings):
    settings.REPLAY_AHD_MAX_ARCHIVE_BYTES = 10

    report = verified(as_persona("alice"), SimpleUploadedFile("inputs.zip", inputs_zip()))

    assert (report["status"], report["error_code"]) == ("refused", MALFORMED_TRACE)
    assert report["message"] == (
        "inputs.zip is larger than 10 bytes compressed; the archive is refused and nothing "
        "from it is used"
    )
