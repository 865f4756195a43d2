"""An AHD run's token and brief dropped as one archive (.tar.gz, .tgz, .zip) instead of loose
files: stored with the run as its snapshots exactly as loose inputs are, through the upload
page, the API and `manage.py ingest` / `verify`; a hostile archive (`..`, an absolute path, a
link, a bomb) is refused naming the entry, and nothing is stored."""

from __future__ import annotations

import io
import json
import shutil
import tarfile
import zipfile

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.core.management import CommandError, call_command

from core.errors import MALFORMED_TRACE
from core.formats import AHD
from replay.models import Snapshot, Trace
from replay.services import trace_upload_batch
from tests.console.formats import stored_as_input, stored_as_inputs
from tests.console.test_format_traces import (
    AHD_INPUT,
    BRIEF,
    EVALS,
    SWISS,
    TOKEN,
    governed,
    swiss_files,
)
from tests.replay.helpers import stored_counts

pytestmark = pytest.mark.django_db
NOTHING = {"traces": 0, "blobs": 0, "snapshots": 0}
REFUSED = "; the archive is refused and nothing from it is used"


@pytest.fixture(autouse=True)
def _no_server_checkout(settings):
    settings.REPLAY_AHD_ROOT = ""


def tgz(entries):
    """(name, data, tar type) -> the bytes of a .tar.gz."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as tar:
        for name, data, kind in entries:
            info = tarfile.TarInfo(name)
            info.type = kind
            if kind == tarfile.SYMTYPE:
                info.linkname = "/etc/passwd"
                tar.addfile(info)
            else:
                info.size = len(data)
                tar.addfile(info, io.BytesIO(data))
    return buf.getvalue()


def inputs_tgz():
    return tgz(
        [
            ("tokens/swiss-editorial.yml", TOKEN.read_bytes(), tarfile.REGTYPE),
            ("briefs/landing.yml", BRIEF.read_bytes(), tarfile.REGTYPE),
        ]
    )


def inputs_zip():
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as zf:
        zf.writestr("ahd/tokens/swiss-editorial.yml", TOKEN.read_bytes())
        zf.writestr("ahd/briefs/landing.yml", BRIEF.read_bytes())
    return buf.getvalue()


def sidecar_bytes():
    return (EVALS / SWISS).read_bytes()


BOMB = tgz([("tokens/swiss-editorial.yml", b"\0" * (4 * 1024**2), tarfile.REGTYPE)])
HOSTILE = {
    "dotdot": (
        tgz([("../tokens/swiss-editorial.yml", TOKEN.read_bytes(), tarfile.REGTYPE)]),
        "inputs.tar.gz: entry '../tokens/swiss-editorial.yml' has a '..' component",
        "../tokens/swiss-editorial.yml",
    ),
    "absolute": (
        tgz([("/tokens/swiss-editorial.yml", TOKEN.read_bytes(), tarfile.REGTYPE)]),
        "inputs.tar.gz: entry '/tokens/swiss-editorial.yml' has an absolute path",
        "/tokens/swiss-editorial.yml",
    ),
    "link": (
        tgz([("tokens/swiss-editorial.yml", b"", tarfile.SYMTYPE)]),
        "inputs.tar.gz: entry 'tokens/swiss-editorial.yml' is a symbolic link (to '/etc/passwd')",
        "tokens/swiss-editorial.yml",
    ),
    "bomb": (
        BOMB,
        # 4 MiB of zeros in a tar (a header, the end blocks, a 20-block record) gzipped
        f"inputs.tar.gz expands to 4198400 bytes from {len(BOMB)} compressed, more than 200 "
        "times (decompression bomb)",
        "inputs.tar.gz",
    ),
}


def snapshot_refs():
    return Trace.objects.get().required_snapshot_ids


# --- stored as loose inputs are ---------------------------------------------------------------


def test_an_archive_dropped_with_the_sidecar_is_stored_as_its_loose_inputs_would_be():
    loose = trace_upload_batch(files=swiss_files())[0].result.trace
    loose_refs = loose.required_snapshot_ids
    loose_snapshots = sorted(Snapshot.objects.values_list("snapshot_id", "kind", "body"))
    Trace.objects.all().delete()
    Snapshot.objects.all().delete()

    outcomes = trace_upload_batch(
        files=[
            (SWISS, io.BytesIO(sidecar_bytes())),
            ("inputs.tar.gz", io.BytesIO(inputs_tgz())),
        ]
    )

    assert [(o.filename, o.input_of, o.error) for o in outcomes] == [
        (SWISS, "", None),
        ("inputs.tar.gz", SWISS, None),
    ]
    trace = outcomes[0].result.trace
    assert (trace.format, trace.last_status) == (AHD, "ok")
    assert trace.required_snapshot_ids == loose_refs
    assert sorted(Snapshot.objects.values_list("snapshot_id", "kind", "body")) == loose_snapshots
    assert stored_counts() == {"traces": 1, "blobs": 1, "snapshots": 2}
    # re-verifying reads the stored snapshots: no checkout, no archive
    run = governed(trace)
    assert (run.status, run.error_code) == ("ok", "")


def test_a_zip_whose_entries_sit_under_a_folder_is_matched_by_file_name():
    outcomes = trace_upload_batch(
        files=[(SWISS, io.BytesIO(sidecar_bytes())), ("inputs.zip", io.BytesIO(inputs_zip()))]
    )
    trace = outcomes[0].result.trace
    assert trace.last_status == "ok"
    assert [r["kind"] for r in trace.required_snapshot_ids] == ["ahd-token", "ahd-brief"]
    assert stored_counts() == {"traces": 1, "blobs": 1, "snapshots": 2}


def test_an_archive_with_an_edited_token_is_stored_as_tampered_evidence():
    edited = tgz(
        [
            ("tokens/swiss-editorial.yml", TOKEN.read_bytes() + b"\nextra: 1\n", tarfile.REGTYPE),
            ("briefs/landing.yml", BRIEF.read_bytes(), tarfile.REGTYPE),
        ]
    )
    outcomes = trace_upload_batch(
        files=[(SWISS, io.BytesIO(sidecar_bytes())), ("inputs.tgz", io.BytesIO(edited))]
    )
    report = outcomes[0].result.trace.ingest_report
    assert (report["status"], report["error_code"], report["broke_at"]) == (
        "tamper_detected",
        "INTEGRITY_FAILURE",
        "token",
    )
    assert report["expected"] == (
        "sha256:380a3d833d9463dbc681df7465993ab6413d8e77188f55f97359f60dc4b746b1"
    )
    # AHD's canonicalizeJson + sha256 run under Node over the edited token's parsed value
    assert report["observed"] == (
        "sha256:c6edb6cb8dad205786cdaf9bb2f73fea465320e5f8d653096051d1890c2dd1a8"
    )


# --- hostile archives: refused, nothing stored ------------------------------------------------


@pytest.mark.parametrize("kind", list(HOSTILE))
def test_a_hostile_archive_is_refused_on_the_upload_page_and_nothing_is_stored(as_persona, kind):
    data, message, broke_at = HOSTILE[kind]
    assert stored_counts() == NOTHING
    outcomes = trace_upload_batch(
        files=[(SWISS, io.BytesIO(sidecar_bytes())), ("inputs.tar.gz", io.BytesIO(data))]
    )
    error = outcomes[0].error
    assert (error.code, error.message, error.broke_at) == (
        MALFORMED_TRACE,
        message + REFUSED,
        broke_at,
    )
    assert stored_counts() == NOTHING
    response = as_persona("alice").post(
        "/traces/upload/",
        {
            "files": [
                SimpleUploadedFile(SWISS, sidecar_bytes()),
                SimpleUploadedFile("inputs.tar.gz", data),
            ]
        },
    )
    assert response.status_code == 200
    assert message.replace("'", "&#x27;") in response.content.decode()
    assert stored_counts() == NOTHING


@pytest.mark.parametrize("kind", list(HOSTILE))
def test_a_hostile_archive_is_refused_by_the_api_and_nothing_is_stored(as_persona, kind):
    data, message, broke_at = HOSTILE[kind]
    response = as_persona("alice").post(
        "/api/traces/upload/",
        {
            "file": SimpleUploadedFile(SWISS, sidecar_bytes()),
            "inputs": [SimpleUploadedFile("inputs.tar.gz", data)],
        },
    )
    assert response.status_code == 400
    body = response.json()
    assert (body["error_code"], body["message"], body["broke_at"]) == (
        MALFORMED_TRACE,
        message + REFUSED,
        broke_at,
    )
    assert stored_counts() == NOTHING


def test_an_archive_dropped_without_a_sidecar_is_refused_and_says_why():
    outcomes = trace_upload_batch(files=[("inputs.tar.gz", io.BytesIO(inputs_tgz()))])
    error = outcomes[0].error
    assert (error.code, error.message) == (
        MALFORMED_TRACE,
        "inputs.tar.gz is an archive of AHD inputs; drop it together with the sidecar "
        "(*.replay.json) that names the files it holds",
    )
    assert stored_counts() == NOTHING


# --- pages, API, CLI --------------------------------------------------------------------------


def test_the_upload_page_stores_a_sidecar_dropped_with_an_archive(as_persona):
    response = as_persona("alice").post(
        "/traces/upload/",
        {
            "files": [
                SimpleUploadedFile(SWISS, sidecar_bytes()),
                SimpleUploadedFile("inputs.tgz", inputs_tgz()),
            ]
        },
    )
    body = response.content.decode()
    trace = Trace.objects.get()
    assert f'<a href="/traces/{trace.blob.sha256}/"><code>2026-04-21-swiss</code></a>' in body
    assert body.count(f"Stored as an input of <code>{SWISS}</code>") == 1
    assert stored_as_inputs(body) == [stored_as_input(SWISS, AHD_INPUT)]
    page = as_persona("alice").get(f"/traces/{trace.blob.sha256}/").content.decode()
    assert page.count("<td>in the store</td>") == 2


def test_the_api_stores_a_sidecar_with_an_archive_and_verifies_one_without_storing(as_persona):
    client = as_persona("alice")
    checked = client.post(
        "/api/traces/verify/",
        {
            "file": SimpleUploadedFile(SWISS, sidecar_bytes()),
            "inputs": [SimpleUploadedFile("inputs.zip", inputs_zip())],
        },
    )
    assert checked.status_code == 200
    assert (checked.json()["stored"], checked.json()["report"]["status"]) == (False, "ok")
    refused = client.post(
        "/api/traces/verify/",
        {
            "file": SimpleUploadedFile(SWISS, sidecar_bytes()),
            "inputs": [SimpleUploadedFile("inputs.tar.gz", HOSTILE["dotdot"][0])],
        },
    ).json()["report"]
    assert (refused["status"], refused["error_code"], refused["message"]) == (
        "refused",
        MALFORMED_TRACE,
        HOSTILE["dotdot"][1] + REFUSED,
    )
    assert stored_counts() == NOTHING
    stored = client.post(
        "/api/traces/upload/",
        {
            "file": SimpleUploadedFile(SWISS, sidecar_bytes()),
            "inputs": [SimpleUploadedFile("inputs.zip", inputs_zip())],
        },
    )
    assert stored.status_code == 201
    assert (stored.json()["format"], stored.json()["report"]["status"]) == (AHD, "ok")
    assert stored_counts() == {"traces": 1, "blobs": 1, "snapshots": 2}


def test_ingest_takes_the_inputs_from_an_archive_given_or_lying_beside_the_sidecar(
    tmp_path, capsys
):
    sidecar = tmp_path / SWISS  # no checkout above it
    sidecar.write_bytes(sidecar_bytes())
    archive = tmp_path / "elsewhere.tar.gz"
    archive.write_bytes(inputs_tgz())
    call_command("ingest", str(sidecar), "--inputs", str(archive))
    assert capsys.readouterr().out == "2026-04-21-swiss ahd-replay replayable ok\n"
    assert stored_counts() == {"traces": 1, "blobs": 1, "snapshots": 2}

    Trace.objects.all().delete()
    Snapshot.objects.all().delete()
    (tmp_path / "2026-04-21-swiss.inputs.zip").write_bytes(inputs_zip())
    call_command("ingest", str(sidecar))
    assert capsys.readouterr().out == "2026-04-21-swiss ahd-replay replayable ok\n"
    assert stored_counts() == {"traces": 1, "blobs": 1, "snapshots": 2}


def test_ingest_refuses_a_hostile_archive_and_stores_nothing(tmp_path, capsys):
    sidecar = tmp_path / SWISS
    sidecar.write_bytes(sidecar_bytes())
    archive = tmp_path / "inputs.tar.gz"
    archive.write_bytes(HOSTILE["link"][0])
    with pytest.raises(CommandError, match="1 of 1 files refused"):
        call_command("ingest", str(sidecar), "--inputs", str(archive))
    assert capsys.readouterr().err.splitlines()[0] == (
        f"{sidecar}: refused MALFORMED_TRACE: {HOSTILE['link'][1]}{REFUSED}"
    )
    assert stored_counts() == NOTHING


def test_verify_checks_a_sidecar_against_an_archive_and_stores_nothing(tmp_path, capsys):
    sidecar = tmp_path / SWISS
    sidecar.write_bytes(sidecar_bytes())
    archive = tmp_path / "inputs.tgz"
    archive.write_bytes(inputs_tgz())
    call_command("verify", str(sidecar), "--inputs", str(archive), "--json")
    report = json.loads(capsys.readouterr().out)
    assert (report["format"], report["status"]) == (AHD, "ok")
    assert [c["name"] for c in report["checks"]] == ["format", "root", "token", "brief"]
    archive.write_bytes(HOSTILE["bomb"][0])
    with pytest.raises(SystemExit) as exited:
        call_command("verify", str(sidecar), "--inputs", str(archive), "--json")
    assert exited.value.code == 1
    report = json.loads(capsys.readouterr().out)
    assert (report["error_code"], report["message"]) == (
        MALFORMED_TRACE,
        HOSTILE["bomb"][1].replace("inputs.tar.gz", "inputs.tgz") + REFUSED,
    )
    assert stored_counts() == NOTHING


def test_verify_still_uses_the_checkout_when_no_archive_is_given(tmp_path, capsys):
    checkout = tmp_path / "checkout"
    shutil.copytree(EVALS.parents[1], checkout)
    call_command("verify", str(checkout / "docs" / "evals" / SWISS), "--json")
    assert json.loads(capsys.readouterr().out)["status"] == "ok"


@pytest.mark.parametrize("who", ["vera", "lena", "nora"])
def test_who_may_not_upload_cannot_send_an_archive(as_persona, who):
    client = as_persona(who)
    api = client.post(
        "/api/traces/upload/",
        {
            "file": SimpleUploadedFile(SWISS, sidecar_bytes()),
            "inputs": [SimpleUploadedFile("inputs.tgz", inputs_tgz())],
        },
    )
    page = client.post(
        "/traces/upload/",
        {
            "files": [
                SimpleUploadedFile(SWISS, sidecar_bytes()),
                SimpleUploadedFile("inputs.tgz", inputs_tgz()),
            ]
        },
    )
    assert (api.status_code, page.status_code) == (403, 403)
    assert stored_counts() == NOTHING


def test_two_runs_of_one_brief_from_archives_compare_at_the_token_hash(as_persona):
    first = trace_upload_batch(
        files=[(SWISS, io.BytesIO(sidecar_bytes())), ("a.tgz", io.BytesIO(inputs_tgz()))]
    )[0].result.trace
    doc = json.loads(sidecar_bytes())
    edited = TOKEN.read_bytes() + b"\nextra: 1\n"
    # the edited token's hash, as AHD's canonicalizeJson + sha256 make it under Node
    doc["token"]["hash"] = "sha256:c6edb6cb8dad205786cdaf9bb2f73fea465320e5f8d653096051d1890c2dd1a8"
    second_files = [
        ("2026-04-22-swiss.replay.json", io.BytesIO(json.dumps(doc).encode())),
        (
            "b.tgz",
            io.BytesIO(
                tgz(
                    [
                        ("tokens/swiss-editorial.yml", edited, tarfile.REGTYPE),
                        ("briefs/landing.yml", BRIEF.read_bytes(), tarfile.REGTYPE),
                    ]
                )
            ),
        ),
    ]
    second = trace_upload_batch(files=second_files)[0].result.trace
    assert (first.last_status, second.last_status) == ("ok", "ok")
    assert first.job_id == second.job_id == "briefs/landing.yml"
    client = as_persona("alice")
    page = client.get(f"/traces/{first.blob.sha256}/").content.decode()
    assert f'href="/traces/{first.blob.sha256}/compare/{second.blob.sha256}/"' in page
    body = client.get(f"/traces/{first.blob.sha256}/compare/{second.blob.sha256}/").content
    rows = body.decode()
    assert (
        '<tr><td class="path"><code>/token/hash</code></td><td>changed</td>'
        "<td><code>sha256:380a3d833d9463dbc681df7465993ab6413d8e77188f55f97359f60dc4b746b1</code>"
        "</td><td><code>sha256:c6edb6cb8dad205786cdaf9bb2f73fea465320e5f8d653096051d1890c2dd1a8"
        "</code></td></tr>"
    ) in rows
    assert rows.count('<td class="path">') == 1
