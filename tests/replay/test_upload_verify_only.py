"""Uploading an AHD sidecar alone, or a Paxman artifact: verified on upload and stored (these
formats were verify-only before). A sidecar that comes alone has its inputs re-hashed from
the checkout the server keeps (REPLAY_AHD_ROOT; the demo's is replay/demo_ahd), and they are
stored with it; without one it is refused, naming the inputs, and nothing is stored.
`trace_check` (``POST /api/traces/verify/``) still verifies without storing."""

from __future__ import annotations

import io
import shutil
from pathlib import Path

import pytest

from core.errors import INTEGRITY_FAILURE, MALFORMED_TRACE, MISSING_SNAPSHOT, ReplayError
from core.formats import AHD, PAXMAN, ahd
from replay.services import CheckedOnly, IngestResult, trace_check, trace_upload
from tests.published import PAXMAN as PAXMAN_DIR
from tests.published import shared_or_skip
from tests.replay.helpers import golden, stored_counts

ROOT = Path(__file__).resolve().parents[2]
DEMO_AHD = ROOT / "replay" / "demo_ahd"
SWISS = "2026-04-21-swiss.replay.json"
IMAGE = "2026-04-21-editorial-image.replay.json"
PAXMAN_FILE = PAXMAN_DIR / "money_unresolved.json"

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("var_dirs", "golden_key")]


def sidecar(name: str, root: Path = DEMO_AHD) -> bytes:
    return (root / "docs" / "evals" / name).read_bytes()


def upload(data: bytes, name: str):
    return trace_upload(source=io.BytesIO(data), filename=name)


def test_the_demo_checkout_is_the_published_fixture_unchanged():
    shared_ahd = shared_or_skip() / "ahd" / "checkout"
    shipped = sorted(p.relative_to(DEMO_AHD) for p in DEMO_AHD.rglob("*") if p.is_file())
    published = sorted(p.relative_to(shared_ahd) for p in shared_ahd.rglob("*") if p.is_file())
    assert [p for p in shipped if p.name != "NOTICE.md"] == published
    for relative in published:
        assert (DEMO_AHD / relative).read_bytes() == (shared_ahd / relative).read_bytes()


def test_the_paxman_copies_are_the_published_fixtures_unchanged():
    shared = shared_or_skip() / "paxman"
    published = sorted(p.name for p in shared.iterdir())
    assert sorted(p.name for p in PAXMAN_DIR.iterdir()) == published
    for name in published:
        assert (PAXMAN_DIR / name).read_bytes() == (shared / name).read_bytes()


@pytest.mark.parametrize("name", [SWISS, IMAGE])
def test_a_sidecar_verifies_against_the_servers_checkout_and_is_stored_with_its_inputs(
    settings, name
):
    settings.REPLAY_AHD_ROOT = str(DEMO_AHD)
    result = upload(sidecar(name), name)
    assert isinstance(result, IngestResult)
    assert (result.trace.format, result.report["status"], result.report["error_code"]) == (
        AHD,
        "ok",
        None,
    )
    assert [c["name"] for c in result.report["checks"]][:2] == ["format", "root"]
    assert all(c["ok"] for c in result.report["checks"])
    assert stored_counts() == {"traces": 1, "blobs": 1, "snapshots": 2}


def test_check_without_a_checkout_names_the_inputs_it_could_not_rehash(settings):
    settings.REPLAY_AHD_ROOT = ""
    result = trace_check(source=io.BytesIO(sidecar(SWISS)), filename=SWISS)
    assert isinstance(result, CheckedOnly)
    assert (result.report["status"], result.report["error_code"]) == ("refused", MISSING_SNAPSHOT)
    assert result.report["message"] == ahd.NO_CHECKOUT_MESSAGE.format(
        name=SWISS, inputs="the token tokens/swiss-editorial.yml and the brief briefs/landing.yml"
    )
    assert stored_counts()["blobs"] == 0


def test_upload_without_a_checkout_is_refused_naming_the_inputs_and_stores_nothing(settings):
    settings.REPLAY_AHD_ROOT = ""
    with pytest.raises(ReplayError) as caught:
        upload(sidecar(SWISS), SWISS)
    assert caught.value.code == MISSING_SNAPSHOT
    assert caught.value.message == ahd.NO_CHECKOUT_MESSAGE.format(
        name=SWISS, inputs="the token tokens/swiss-editorial.yml and the brief briefs/landing.yml"
    )
    assert stored_counts() == {"traces": 0, "blobs": 0, "snapshots": 0}


def test_an_edited_token_in_the_checkout_is_stored_as_an_integrity_failure(settings, tmp_path):
    copy = tmp_path / "checkout"
    shutil.copytree(DEMO_AHD, copy)
    token = copy / "tokens" / "swiss-editorial.yml"
    token.write_text(token.read_text() + "\nextra: 1\n")
    settings.REPLAY_AHD_ROOT = str(copy)
    result = upload(sidecar(SWISS), SWISS)
    assert (result.report["status"], result.report["error_code"]) == (
        "tamper_detected",
        INTEGRITY_FAILURE,
    )
    assert result.report["broke_at"] == "token"


def test_an_eval_report_alone_is_refused_with_what_to_upload_instead(settings):
    settings.REPLAY_AHD_ROOT = str(DEMO_AHD)
    name = "2026-04-21-swiss.md"
    with pytest.raises(ReplayError) as caught:
        upload((DEMO_AHD / "docs" / "evals" / name).read_bytes(), name)
    assert caught.value.code == MALFORMED_TRACE
    assert caught.value.message == ahd.REPORT_ALONE_MESSAGE.format(name=name, sidecar=SWISS)
    assert stored_counts()["blobs"] == 0


def test_a_broken_sidecar_is_refused_not_reported(settings):
    settings.REPLAY_AHD_ROOT = str(DEMO_AHD)
    with pytest.raises(ReplayError) as caught:
        upload(sidecar(SWISS)[:-40], SWISS)
    assert caught.value.code == MALFORMED_TRACE
    assert caught.value.message.startswith(f"{SWISS}: ")


def test_a_paxman_artifact_is_verified_and_stored_on_upload():
    result = upload(PAXMAN_FILE.read_bytes(), PAXMAN_FILE.name)
    assert isinstance(result, IngestResult)
    assert (result.trace.format, result.report["status"]) == (PAXMAN, "ok")
    assert stored_counts() == {"traces": 1, "blobs": 1, "snapshots": 0}


def test_a_native_trace_is_still_stored():
    data = golden("ok.trace.json").read_bytes()
    result = upload(data, "ok.trace.json")
    assert isinstance(result, IngestResult)
    assert result.created
    assert stored_counts()["traces"] == 1


def test_a_missing_input_is_named_relative_to_the_checkout_not_by_its_server_path(
    settings, tmp_path
):
    copy = tmp_path / "checkout"
    shutil.copytree(DEMO_AHD, copy)
    (copy / "briefs" / "landing.yml").unlink()
    settings.REPLAY_AHD_ROOT = str(copy)
    report = trace_check(source=io.BytesIO(sidecar(SWISS)), filename=SWISS).report
    assert (report["error_code"], report["broke_at"]) == (MISSING_SNAPSHOT, "brief")
    assert report["message"] == "brief: brief file not found at REPLAY_AHD_ROOT/briefs/landing.yml"
    assert str(tmp_path) not in str(report)
