"""Paxman artifacts through the console: capabilities a deployment registers
(REPLAY_PAXMAN_CAPABILITIES), a contract supplied by `--contract`, the API field `contract`
and `x.contract.json` dropped beside `x.json` on the upload page (INVALID_CONTRACT refuses
the artifact and stores nothing), and the history of one artifact id on its trace page."""

from __future__ import annotations

import copy
import io
import json

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.core.management import CommandError, call_command

from core.canonical import python_sorted
from core.errors import CAPABILITY_NOT_FOUND, INVALID_CONTRACT
from core.formats import PAXMAN
from core.formats import paxman as px
from replay.models import Trace
from replay.services import trace_ingest, trace_upload_batch
from tests.console.formats import stored_as_input, stored_as_inputs
from tests.console.test_format_traces import MONEY
from tests.replay.helpers import stored_counts

pytestmark = pytest.mark.django_db

PAXMAN_INPUT = "a Paxman artifact's contract"  # the upload page's words, its rule's
NOTHING = {"traces": 0, "blobs": 0, "snapshots": 0}
OWN = json.dumps({"id": "with-money-v1", "fields": [{"name": "total"}]}).encode()
OTHER = json.dumps({"id": "invoice-v1", "fields": [{"name": "total"}]}).encode()
OTHER_MESSAGE = (
    "the supplied contract 'invoice-v1' is not the one the artifact was produced from "
    "('with-money-v1')"
)


def artifact(**edits) -> bytes:
    """The published golden edited, its replay_hash recomputed by the format's own rule."""
    doc = copy.deepcopy(json.loads(MONEY.read_bytes()))
    doc.update(edits)
    doc["replay_hash"] = px.replay_hash_of(doc)
    return python_sorted(doc) + b"\n"


# --- capabilities a deployment registers ------------------------------------------------------


def test_a_deployment_registers_a_capability_version_by_setting(settings, tmp_path, capsys):
    path = tmp_path / "ocr.json"
    path.write_bytes(artifact(capability_versions={"ocr": "2.1", "inference": "1.0"}))
    settings.REPLAY_PAXMAN_CAPABILITIES = {"ocr": ["2.0"]}
    with pytest.raises(SystemExit):
        call_command("verify", str(path), "--json")
    report = json.loads(capsys.readouterr().out)
    assert (report["error_code"], report["message"], report["broke_at"]) == (
        CAPABILITY_NOT_FOUND,
        "no capability registered for id='ocr', version='2.1' (registered: ocr@2.0)",
        "capability_versions/ocr",
    )
    settings.REPLAY_PAXMAN_CAPABILITIES = {"ocr": ["2.0", "2.1"]}
    call_command("verify", str(path), "--json")
    assert json.loads(capsys.readouterr().out)["status"] == "ok"
    trace = trace_ingest(source=io.BytesIO(path.read_bytes()), filename=path.name).trace
    assert trace.last_status == "ok"


def test_a_malformed_setting_is_a_configuration_error(settings):
    from django.core.exceptions import ImproperlyConfigured

    settings.REPLAY_PAXMAN_CAPABILITIES = {"ocr": [""]}
    with pytest.raises(ImproperlyConfigured) as err:
        trace_ingest(source=io.BytesIO(MONEY.read_bytes()), filename=MONEY.name)
    assert str(err.value) == (
        "REPLAY_PAXMAN_CAPABILITIES: capability 'ocr': a version must be a non-empty string, got ''"
    )


# --- a contract from the CLI -------------------------------------------------------------------


def test_verify_checks_the_contract_given(tmp_path, capsys):
    contract = tmp_path / "c.json"
    contract.write_bytes(OTHER)
    with pytest.raises(SystemExit) as exited:
        call_command("verify", str(MONEY), "--contract", str(contract), "--json")
    assert exited.value.code == 1
    report = json.loads(capsys.readouterr().out)
    assert (report["error_code"], report["message"], report["broke_at"]) == (
        INVALID_CONTRACT,
        OTHER_MESSAGE,
        "contract_id",
    )
    assert (report["expected"], report["observed"]) == ("with-money-v1", "invoice-v1")
    contract.write_bytes(OWN)
    call_command("verify", str(MONEY), "--contract", str(contract), "--json")
    report = json.loads(capsys.readouterr().out)
    assert report["status"] == "ok"
    assert report["checks"][-2] == {
        "name": "contract",
        "ok": True,
        "detail": "the supplied contract is 'with-money-v1'",
    }


def test_ingest_refuses_an_artifact_with_another_contract_and_stores_nothing(tmp_path, capsys):
    contract = tmp_path / "c.json"
    contract.write_bytes(OTHER)
    with pytest.raises(CommandError, match="1 of 1 files refused"):
        call_command("ingest", str(MONEY), "--contract", str(contract))
    assert capsys.readouterr().err.splitlines()[0] == (
        f"{MONEY}: refused {INVALID_CONTRACT}: {OTHER_MESSAGE}"
    )
    assert stored_counts() == NOTHING
    contract.write_bytes(b"not json")
    with pytest.raises(CommandError):
        call_command("ingest", str(MONEY), "--contract", str(contract))
    assert (
        capsys.readouterr()
        .err.splitlines()[0]
        .startswith(
            f"{MONEY}: refused {INVALID_CONTRACT}: the supplied contract is not JSON: c.json:"
        )
    )
    contract.write_bytes(OWN)
    call_command("ingest", str(MONEY), "--contract", str(contract))
    assert capsys.readouterr().out.endswith(" paxman-artifact replayable ok\n")
    assert stored_counts() == {"traces": 1, "blobs": 1, "snapshots": 0}


def test_verify_says_when_the_contract_file_cannot_be_read(tmp_path):
    with pytest.raises(CommandError) as err:
        call_command("verify", str(MONEY), "--contract", str(tmp_path / "absent.json"))
    assert str(err.value) == f"{tmp_path / 'absent.json'}: cannot read: No such file or directory"


# --- a contract through the API ----------------------------------------------------------------


def test_the_api_takes_a_contract_field(as_persona):
    client = as_persona("alice")
    checked = client.post(
        "/api/traces/verify/",
        {
            "file": SimpleUploadedFile(MONEY.name, MONEY.read_bytes()),
            "contract": SimpleUploadedFile("c.json", OTHER),
        },
    ).json()["report"]
    assert (checked["error_code"], checked["message"]) == (INVALID_CONTRACT, OTHER_MESSAGE)
    refused = client.post(
        "/api/traces/upload/",
        {
            "file": SimpleUploadedFile(MONEY.name, MONEY.read_bytes()),
            "contract": SimpleUploadedFile("c.json", OTHER),
        },
    )
    assert refused.status_code == 400
    body = refused.json()
    assert (body["error_code"], body["message"], body["broke_at"]) == (
        INVALID_CONTRACT,
        OTHER_MESSAGE,
        "contract_id",
    )
    assert (body["expected"], body["observed"]) == ("with-money-v1", "invoice-v1")
    assert stored_counts() == NOTHING
    stored = client.post(
        "/api/traces/upload/",
        {
            "file": SimpleUploadedFile(MONEY.name, MONEY.read_bytes()),
            "contract": SimpleUploadedFile("c.json", OWN),
        },
    )
    assert stored.status_code == 201
    assert (stored.json()["format"], stored.json()["report"]["status"]) == (PAXMAN, "ok")


# --- a contract dropped beside the artifact ------------------------------------------------------


def test_a_contract_dropped_beside_its_artifact_on_the_upload_page_is_checked(as_persona):
    client = as_persona("alice")
    response = client.post(
        "/traces/upload/",
        {
            "files": [
                SimpleUploadedFile(MONEY.name, MONEY.read_bytes()),
                SimpleUploadedFile("money_unresolved.contract.json", OTHER),
            ]
        },
    )
    body = response.content.decode()
    assert response.status_code == 200
    assert INVALID_CONTRACT in body
    assert OTHER_MESSAGE.replace("'", "&#x27;") in body
    assert stored_counts() == NOTHING
    outcomes = trace_upload_batch(
        files=[
            (MONEY.name, io.BytesIO(MONEY.read_bytes())),
            ("money_unresolved.contract.json", io.BytesIO(OWN)),
        ]
    )
    assert [(o.filename, o.input_of, o.error) for o in outcomes] == [
        (MONEY.name, "", None),
        ("money_unresolved.contract.json", MONEY.name, None),
    ]
    assert outcomes[0].result.trace.ingest_report["checks"][-2]["detail"] == (
        "the supplied contract is 'with-money-v1'"
    )


def test_the_upload_page_says_a_contract_is_stored_with_its_artifact(as_persona):
    files = [
        SimpleUploadedFile(MONEY.name, MONEY.read_bytes()),
        SimpleUploadedFile("money_unresolved.contract.json", OWN),
    ]
    body = as_persona("alice").post("/traces/upload/", {"files": files}).content.decode()
    assert stored_as_inputs(body) == [stored_as_input(MONEY.name, PAXMAN_INPUT)]


def test_a_contract_dropped_without_its_artifact_is_refused():
    outcomes = trace_upload_batch(files=[("other.contract.json", io.BytesIO(OWN))])
    error = outcomes[0].error
    assert (error.code, error.message) == (
        INVALID_CONTRACT,
        "other.contract.json is a Paxman contract (named .contract.json); drop it together with "
        "the artifact it belongs to, other.json",
    )
    assert stored_counts() == NOTHING


# --- the history of one artifact id --------------------------------------------------------------


def test_the_trace_page_lists_the_other_versions_of_the_artifact_with_comparisons(as_persona):
    first = trace_ingest(
        source=io.BytesIO(artifact(id="art-7", created_at="2026-05-01T10:00:00Z")),
        filename="art-7.v1.json",
    ).trace
    golden = json.loads(MONEY.read_bytes())
    results = copy.deepcopy(golden["field_results"])
    path = sorted(results)[0]
    results[path]["status"] = "SUCCESS"
    second = trace_ingest(
        source=io.BytesIO(
            artifact(id="art-7", created_at="2026-05-02T10:00:00Z", field_results=results)
        ),
        filename="art-7.v2.json",
    ).trace
    unrelated = trace_ingest(source=io.BytesIO(artifact(id="art-8")), filename="art-8.json").trace
    assert (first.trace_id, second.trace_id, unrelated.trace_id) == ("art-7", "art-7", "art-8")
    client = as_persona("alice")
    page = client.get(f"/traces/{second.blob.sha256}/").content.decode()
    heading = (
        '<h3>Other versions of this artifact</h3>\n  <table id="artifact-history">\n'
        "    <thead><tr><th>File</th><th>Artifact created_at</th><th>paxman_version</th>"
        "<th>Stored</th><th>Verdict</th><th>Comparison</th></tr></thead>"
    )
    assert page.count(heading) == 1
    history = page[page.index('<table id="artifact-history">') :]
    history = history[: history.index("</table>")]
    assert f'<a href="/traces/{first.blob.sha256}/">art-7.v1.json</a>' in history
    assert "<td>2026-05-01 10:00:00</td><td><code>1.0.2</code></td>" in history
    assert (
        f'<a href="/traces/{second.blob.sha256}/compare/{first.blob.sha256}/">'
        "compare field by field</a>"
    ) in history
    assert unrelated.blob.sha256 not in history
    assert history.count("<tr>") == 2  # the header and one other version
    compare = client.get(f"/traces/{second.blob.sha256}/compare/{first.blob.sha256}/")
    body = compare.content.decode()
    assert compare.status_code == 200
    rows = [
        '<td class="path"><code>/created_at</code></td><td>changed</td>',
        f'<td class="path"><code>/field_results/{path}/status</code></td><td>changed</td>',
        '<td class="path"><code>/replay_hash</code></td><td>changed</td>',
    ]
    assert [r in body for r in rows] == [True, True, True]
    assert body.count('<td class="path">') == 3


def test_an_artifact_without_an_id_has_no_history(as_persona):
    trace = trace_ingest(source=io.BytesIO(MONEY.read_bytes()), filename=MONEY.name).trace
    page = as_persona("alice").get(f"/traces/{trace.blob.sha256}/").content.decode()
    assert 'id="artifact-history"' not in page
    assert Trace.objects.count() == 1


def test_the_upload_page_says_a_refused_version_is_stored_as_evidence(as_persona):
    """A Paxman artifact from a version this console cannot replay reads, so it is stored with
    its VERSION_MISMATCH verdict; the page's promise says which refusals store nothing."""
    from tests.console.formats import upload_page
    from tests.replay.test_format_paxman import load, rehashed, stable

    data = stable(rehashed({**load(), "paxman_version": "2.0.0"}))
    response = upload_page(as_persona("alice"), [SimpleUploadedFile("v2.json", data)])
    assert response.status_code == 200
    body = response.content.decode()
    trace = Trace.objects.get(filename="v2.json")
    assert (trace.last_status, trace.ingest_report["error_code"]) == ("refused", "VERSION_MISMATCH")
    assert "A refused file stores nothing." not in body
    assert (
        "A file that cannot be read as a trace is refused and stores nothing; one that reads but "
        "fails a check (tampered, diverged, a version the verifier does not support) is stored "
        "as evidence, with its verdict."
    ) in body
