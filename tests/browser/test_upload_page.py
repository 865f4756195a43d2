"""The upload page as a person meets it: one file picker, each file named once, a "verifying"
state between the bytes sent and the server's answer, and refusals shown whole, on a desktop
and on a phone."""

from __future__ import annotations

import html
import re

import pytest
from django.test import Client

from tests.browser.test_journeys import EXPECTED, sign_in
from tests.console.conftest import LONG_AGO, TRACE_KEY_ID, TRACE_SECRET, trace_bytes
from tests.console.personas import persona
from tests.console.personas import sign_in as client_sign_in

pytestmark = pytest.mark.usefixtures("flushable_transactional_db", "trace_key")


@pytest.fixture
def trace_key():
    from replay.keys import key_add_hmac

    return key_add_hmac(key_id=TRACE_KEY_ID, secret=TRACE_SECRET, valid_from=LONG_AGO)


#: a refusal with a long message and a place in the file: it must be shown whole
BAD = b'{"format": "replay-trace", "schema_version": 1, "events": [' + b'{"seq": 1}, ' * 40


def server_refusal(name: str, data: bytes) -> str:
    """The refusal the page without JavaScript shows for this file: what the script must show."""
    from django.core.files.uploadedfile import SimpleUploadedFile

    client = client_sign_in(Client(), persona("oscar"))
    body = client.post("/traces/upload/", {"files": SimpleUploadedFile(name, data)})
    found = re.search(r'<p class="refusal" role="alert">(.*?)</p>', body.content.decode(), re.S)
    assert found is not None
    return " ".join(html.unescape(re.sub(r"<[^>]+>", "", found.group(1))).split())


@pytest.mark.parametrize("width", [1440, 390])
def test_one_picker_each_name_once_a_verifying_state_and_whole_refusals(
    new_context, shots, tmp_path, width, monkeypatch
):
    import threading

    from console.views import traces

    answer = threading.Event()  # the server verifies only once the test has seen the page wait
    verify = traces._ingest_all

    def verify_when_told(request, uploads):
        answer.wait(timeout=30)
        return verify(request, uploads)

    expected_refusal = server_refusal("broken.trace.json", BAD)
    good = tmp_path / "ok.trace.json"
    good.write_bytes(trace_bytes("ok"))
    bad = tmp_path / "broken.trace.json"
    bad.write_bytes(BAD)

    page = sign_in(new_context, "oscar")
    page.set_viewport_size({"width": width, "height": 900})
    page.goto("/traces/upload/")
    page.wait_for_selector("form.enhanced")
    pickers = page.locator("#upload-form input[type=file]")
    assert pickers.count() == 1
    assert page.locator("#upload-form label[for=upload-input]").count() == 1
    box = pickers.bounding_box()  # the label opens it: the native control is not shown too
    assert box is not None
    assert box["width"] <= 1
    shots(page, f"picker-{width}")

    monkeypatch.setattr(traces, "_ingest_all", verify_when_told)
    page.set_input_files("#upload-input", [str(good), str(bad)])
    page.locator(".upload-file.verifying").first.wait_for()
    # one upload at a time: the first is being verified, the second waits its turn
    assert page.locator(".upload-file .status").all_inner_texts() == ["verifying…", "queued"]
    shots(page, f"verifying-{width}")
    answer.set()
    page.locator(".upload-file.done").wait_for()
    page.locator(".upload-file.failed").wait_for()
    assert page.locator(".upload-file.verifying").count() == 0

    listed = page.inner_text("#upload-progress")
    assert listed.count("ok.trace.json") == 1
    assert listed.count("broken.trace.json") == 1
    refusal = page.locator(".upload-file.failed .refusal")
    assert " ".join(refusal.inner_text().split()) == expected_refusal
    assert refusal.evaluate("e => e.scrollWidth <= e.clientWidth")
    assert page.evaluate("() => document.documentElement.scrollWidth <= window.innerWidth")
    shots(page, f"answered-{width}")
    assert [e for e in page.errors if not e.startswith(EXPECTED)] == []
