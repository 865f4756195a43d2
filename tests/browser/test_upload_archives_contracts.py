"""The upload page in a browser: an AHD sidecar dropped with one archive of its inputs is
sent with it (upload.js groups them) and stored; a Paxman artifact dropped with
`x.contract.json` goes with its contract, and another contract refuses it."""

from __future__ import annotations

import io
import json
import tarfile

import pytest

from replay.models import Trace
from tests.browser.test_journeys import no_console_errors, sign_in, uploads_settled
from tests.console.personas import persona
from tests.published import PUBLISHED

pytestmark = pytest.mark.usefixtures("flushable_transactional_db")
SHARED = PUBLISHED
CHECKOUT = SHARED / "ahd" / "checkout"
MONEY = SHARED / "paxman" / "money_unresolved.json"


def inputs_tgz() -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as tar:
        for path in ("tokens/swiss-editorial.yml", "briefs/landing.yml"):
            tar.add(str(CHECKOUT / path), arcname=path)
    return buf.getvalue()


def test_an_archive_and_a_contract_go_with_their_files(new_context, shots, tmp_path, settings):
    settings.REPLAY_AHD_ROOT = ""
    persona("alice")
    sidecar = tmp_path / "2026-04-21-swiss.replay.json"
    sidecar.write_bytes((CHECKOUT / "docs" / "evals" / sidecar.name).read_bytes())
    archive = tmp_path / "2026-04-21-swiss.inputs.tar.gz"
    archive.write_bytes(inputs_tgz())
    artifact = tmp_path / "money.json"
    artifact.write_bytes(MONEY.read_bytes())
    contract = tmp_path / "money.contract.json"
    contract.write_text(json.dumps({"id": "invoice-v1", "fields": [{"name": "total"}]}))

    page = sign_in(new_context, "alice")
    page.goto("/traces/upload/")
    page.wait_for_selector("form.enhanced")
    page.set_input_files(
        "#upload-input", [str(sidecar), str(archive), str(artifact), str(contract)]
    )
    uploads_settled(page, done=1, failed=1)
    rows = page.locator(".upload-file .filename").all_inner_texts()
    assert rows == [
        f"{sidecar.name} (with {archive.name})",
        f"{artifact.name} (with {contract.name})",
    ]
    stored = page.locator(".upload-file.done").inner_text()
    assert "Stored as 2026-04-21-swiss · ahd-replay" in stored
    assert "Verified on upload: ok" in stored
    refusal = page.locator(".upload-file.failed .refusal").inner_text()
    assert refusal.startswith("Refused: INVALID_CONTRACT the supplied contract 'invoice-v1'")
    shots(page, "upload-archive-and-contract")
    no_console_errors(page)
    trace = Trace.objects.get()
    assert [r["kind"] for r in trace.required_snapshot_ids] == ["ahd-token", "ahd-brief"]
