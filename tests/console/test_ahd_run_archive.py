"""An AHD run handed over as one archive (`run.tar.gz` holding the sidecar and the token and
brief it names) is read as the run with its inputs, on the upload page, the API (upload and
verify) and `manage.py ingest` / `verify`: the sidecar is stored with its inputs as a loose
upload stores it. A hostile archive (a path out of it, a link, too many members, an
oversized member, an archive inside it, two sidecars) is refused with MALFORMED_TRACE naming
the member, and nothing is stored."""

from __future__ import annotations

import gzip
import io
import json
import tarfile
import zipfile

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.core.management import CommandError, call_command

from core.errors import MALFORMED_TRACE
from core.formats import AHD
from replay.models import Snapshot, Trace
from replay.services import trace_upload_batch
from tests.console.test_ahd_archives import tgz
from tests.console.test_format_traces import BRIEF, EVALS, SWISS, TOKEN
from tests.replay.helpers import stored_counts

pytestmark = pytest.mark.django_db
NOTHING = {"traces": 0, "blobs": 0, "snapshots": 0}
STORED = {"traces": 1, "blobs": 1, "snapshots": 2}
REFUSED = "; the archive is refused and nothing from it is used"
SIDECAR = f"docs/evals/{SWISS}"


@pytest.fixture(autouse=True)
def _no_server_checkout(settings):
    settings.REPLAY_AHD_ROOT = ""  # the inputs can only come from the archive


def run_members(**extra):
    members = [
        (SIDECAR, (EVALS / SWISS).read_bytes(), tarfile.REGTYPE),
        ("tokens/swiss-editorial.yml", TOKEN.read_bytes(), tarfile.REGTYPE),
        ("briefs/landing.yml", BRIEF.read_bytes(), tarfile.REGTYPE),
    ]
    return members + list(extra.get("more", []))


def run_tgz(**extra):
    return tgz(run_members(**extra))


def run_zip():
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as zf:
        for name, data, _kind in run_members():
            zf.writestr(f"run/{name}", data)
    return buf.getvalue()


def assert_stored_as_loose():
    """The archive's run is stored as the loose sidecar, token and brief store it: the same
    row facts, the same file, the same snapshots (checked by storing the loose files after)."""
    from tests.console.test_format_traces import swiss_files

    assert stored_counts() == STORED
    trace = Trace.objects.get()
    assert (trace.format, trace.filename, trace.last_status) == (AHD, SWISS, "ok")
    facts = (trace.trace_id, trace.required_snapshot_ids, trace.blob.sha256)
    snapshots = sorted(Snapshot.objects.values_list("snapshot_id", "kind", "body"))
    Trace.objects.all().delete()
    Snapshot.objects.all().delete()
    loose = trace_upload_batch(files=swiss_files())[0].result.trace
    assert (loose.trace_id, loose.required_snapshot_ids, loose.blob.sha256) == facts
    assert sorted(Snapshot.objects.values_list("snapshot_id", "kind", "body")) == snapshots
    return trace


# --- read as the run with its inputs ------------------------------------------------------------


@pytest.mark.parametrize(("name", "data"), [("run.tar.gz", run_tgz), ("run.zip", run_zip)])
def test_the_upload_page_stores_one_archive_as_the_run_with_its_inputs(as_persona, name, data):
    response = as_persona("alice").post(
        "/traces/upload/", {"files": [SimpleUploadedFile(name, data())]}
    )
    assert response.status_code == 200
    trace = Trace.objects.get()
    body = response.content.decode()
    assert f'<a href="/traces/{trace.blob.sha256}/"><code>2026-04-21-swiss</code></a>' in body
    page = as_persona("alice").get(f"/traces/{trace.blob.sha256}/").content.decode()
    assert page.count("<td>in the store</td>") == 2
    assert_stored_as_loose()


def test_the_api_stores_one_archive_as_the_run_and_verifies_one_without_storing(as_persona):
    client = as_persona("alice")
    checked = client.post(
        "/api/traces/verify/", {"file": SimpleUploadedFile("run.tar.gz", run_tgz())}
    )
    assert checked.status_code == 200
    report = checked.json()["report"]
    assert (checked.json()["stored"], report["format"], report["status"]) == (False, AHD, "ok")
    assert [c["name"] for c in report["checks"]] == ["format", "root", "token", "brief"]
    assert stored_counts() == NOTHING
    stored = client.post(
        "/api/traces/upload/", {"file": SimpleUploadedFile("run.tar.gz", run_tgz())}
    )
    assert stored.status_code == 201
    body = stored.json()
    assert (body["format"], body["filename"], body["report"]["status"]) == (AHD, SWISS, "ok")
    raw = client.post(
        "/api/traces/upload/?filename=run.tar.gz",
        data=run_tgz(),
        content_type="application/octet-stream",
    )
    assert (raw.status_code, raw.json()["created"]) == (200, False)
    assert_stored_as_loose()


def test_ingest_and_verify_read_one_archive_as_the_run(tmp_path, capsys):
    archive = tmp_path / "run.tar.gz"
    archive.write_bytes(run_tgz())
    call_command("verify", str(archive), "--json")
    report = json.loads(capsys.readouterr().out)
    assert (report["format"], report["status"]) == (AHD, "ok")
    assert stored_counts() == NOTHING
    call_command("ingest", str(archive))
    assert capsys.readouterr().out == "2026-04-21-swiss ahd-replay replayable ok\n"
    assert_stored_as_loose()


def test_an_archived_run_with_an_edited_token_is_stored_as_tampered_evidence():
    members = run_members()
    members[1] = (
        "tokens/swiss-editorial.yml",
        TOKEN.read_bytes() + b"\nextra: 1\n",
        tarfile.REGTYPE,
    )
    outcome = trace_upload_batch(files=[("run.tar.gz", io.BytesIO(tgz(members)))])[0]
    report = outcome.result.trace.ingest_report
    assert (report["status"], report["error_code"], report["broke_at"]) == (
        "tamper_detected",
        "INTEGRITY_FAILURE",
        "token",
    )


# --- hostile archives: refused naming the member, nothing stored ---------------------------------


def nested_tgz():
    inner = tgz([("x.yml", b"a: 1\n", tarfile.REGTYPE)])
    return run_tgz(more=[("extra/inner.tar.gz", inner, tarfile.REGTYPE)])


def disguised_tgz():
    members = run_members()
    members[2] = ("briefs/landing.yml", gzip.compress(BRIEF.read_bytes(), mtime=0), tarfile.REGTYPE)
    return tgz(members)


def many_tgz():
    return run_tgz(more=[(f"notes/{i}.txt", b"x", tarfile.REGTYPE) for i in range(3)])


def big_tgz():
    return run_tgz(more=[("notes/big.txt", b"x" * 9000, tarfile.REGTYPE)])


def two_sidecars_tgz():
    return run_tgz(more=[("other/b.replay.json", (EVALS / SWISS).read_bytes(), tarfile.REGTYPE)])


HOSTILE = {
    "dotdot": (
        lambda: run_tgz(more=[("../../etc/cron.d/x", b"* * * * * root true\n", tarfile.REGTYPE)]),
        "run.tar.gz: entry '../../etc/cron.d/x' has a '..' component",
        "../../etc/cron.d/x",
    ),
    "absolute": (
        lambda: run_tgz(more=[("/etc/passwd", b"root:x:0:0\n", tarfile.REGTYPE)]),
        "run.tar.gz: entry '/etc/passwd' has an absolute path",
        "/etc/passwd",
    ),
    "symlink": (
        lambda: run_tgz(more=[("tokens/link.yml", b"", tarfile.SYMTYPE)]),
        "run.tar.gz: entry 'tokens/link.yml' is a symbolic link (to '/etc/passwd')",
        "tokens/link.yml",
    ),
    "too many members": (
        many_tgz,
        "run.tar.gz: entry 'notes/2.txt' is one entry too many (at most 5 entries)",
        "notes/2.txt",
    ),
    "oversized member": (
        big_tgz,
        "run.tar.gz: entry 'notes/big.txt' is 9000 bytes uncompressed, over the limit of 8192 "
        "bytes per entry (decompression bomb)",
        "notes/big.txt",
    ),
    "nested archive": (
        nested_tgz,
        "run.tar.gz: entry 'extra/inner.tar.gz' is itself an archive by its name (nested "
        "archives are refused)",
        "extra/inner.tar.gz",
    ),
    "archive under another name": (
        disguised_tgz,
        "run.tar.gz: entry 'briefs/landing.yml' is itself an archive by its first bytes (nested "
        "archives are refused)",
        "briefs/landing.yml",
    ),
    "two sidecars": (
        two_sidecars_tgz,
        f"run.tar.gz holds 2 AHD sidecars ({SIDECAR}, other/b.replay.json); an archive is one "
        "run: its sidecar with the token and brief it names",
        "run.tar.gz",
    ),
}


@pytest.fixture
def small_limits(settings):
    settings.REPLAY_AHD_ARCHIVE_MAX_ENTRIES = 5
    settings.REPLAY_AHD_MAX_INPUT_BYTES = 8192  # per member
    settings.REPLAY_AHD_MAX_ARCHIVE_BYTES = 1024**2
    settings.REPLAY_AHD_ARCHIVE_MAX_TOTAL_BYTES = 1024**2


@pytest.mark.parametrize("kind", list(HOSTILE))
def test_a_hostile_run_archive_is_refused_on_the_page_the_api_and_the_cli(
    small_limits, as_persona, tmp_path, capsys, kind
):
    make, message, broke_at = HOSTILE[kind]
    data = make()
    outcome = trace_upload_batch(files=[("run.tar.gz", io.BytesIO(data))])[0]
    error = outcome.error
    assert (error.code, error.message, error.broke_at) == (
        MALFORMED_TRACE,
        message + REFUSED,
        broke_at,
    )
    assert stored_counts() == NOTHING

    page = as_persona("alice").post(
        "/traces/upload/", {"files": [SimpleUploadedFile("run.tar.gz", data)]}
    )
    assert page.status_code == 200
    assert (message + REFUSED).replace("'", "&#x27;") in page.content.decode()

    api = as_persona("alice").post(
        "/api/traces/upload/", {"file": SimpleUploadedFile("run.tar.gz", data)}
    )
    assert api.status_code == 400
    body = api.json()
    assert (body["error_code"], body["message"], body["broke_at"]) == (
        MALFORMED_TRACE,
        message + REFUSED,
        broke_at,
    )

    path = tmp_path / "run.tar.gz"
    path.write_bytes(data)
    with pytest.raises(CommandError, match="1 of 1 files refused"):
        call_command("ingest", str(path))
    assert capsys.readouterr().err.splitlines()[0] == (
        f"{path}: refused MALFORMED_TRACE: {message}{REFUSED}"
    )
    assert stored_counts() == NOTHING


def test_an_archive_without_a_sidecar_is_refused_saying_it_can_only_be_inputs(as_persona):
    data = tgz([("tokens/swiss-editorial.yml", TOKEN.read_bytes(), tarfile.REGTYPE)])
    api = as_persona("alice").post(
        "/api/traces/upload/", {"file": SimpleUploadedFile("inputs.tgz", data)}
    )
    assert api.status_code == 400
    assert (api.json()["error_code"], api.json()["message"]) == (
        MALFORMED_TRACE,
        "inputs.tgz is an archive of AHD inputs; drop it together with the sidecar "
        "(*.replay.json) that names the files it holds",
    )
    assert stored_counts() == NOTHING


def test_verifying_a_hostile_run_archive_reports_the_refusal_and_stores_nothing(
    small_limits, as_persona, tmp_path, capsys
):
    make, message, _broke_at = HOSTILE["nested archive"]
    checked = as_persona("alice").post(
        "/api/traces/verify/", {"file": SimpleUploadedFile("run.tar.gz", make())}
    )
    assert checked.status_code == 200
    report = checked.json()["report"]
    assert (report["format"], report["status"], report["error_code"], report["message"]) == (
        AHD,
        "refused",
        MALFORMED_TRACE,
        message + REFUSED,
    )
    path = tmp_path / "run.tar.gz"
    path.write_bytes(make())
    with pytest.raises(SystemExit) as exited:
        call_command("verify", str(path), "--json")
    assert exited.value.code == 1
    assert json.loads(capsys.readouterr().out)["message"] == message + REFUSED
    assert stored_counts() == NOTHING
