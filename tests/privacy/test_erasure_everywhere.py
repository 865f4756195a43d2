"""A subject in several traces of several formats is found in all of them; after erasure no
page, API response, log line, database column or stored blob yields the values, while the
ledger and every check that does not need them still verify."""

from __future__ import annotations

import gzip
import io
import json
import logging
from io import StringIO
from pathlib import Path

import pytest
from django.apps import apps
from django.core.management import call_command
from django.db import connection, models

from privacy import erasure, index, subjects, values
from replay.services import replay_run_create, replay_run_execute, trace_ingest
from tests.console.conftest import TRACE_KEY_ID, TRACE_SECRET
from tests.published import PUBLISHED

pytestmark = pytest.mark.django_db

ADA = "ada.lovelace@example.org"
ADA_NAME = "Ada Lovelace"
GRACE = "grace.hopper@example.org"
PAXMAN = PUBLISHED / "paxman" / "money_unresolved.json"
RULES = {
    "paxman-artifact": {
        "subject": ["/metadata/customer/email"],
        "personal": ["/metadata/customer/name", "/metadata/notes/*"],
    }
}


@pytest.fixture
def rules(settings):
    settings.PRIVACY_PATH_RULES = RULES


def _native_jsonl_gz() -> bytes:
    """Another recorded run (seed s9) as gzipped JSON Lines: Ada again, in event 0 and 4."""
    from core.formats import default_registry, native
    from core.formats.native.recorder import record, signer_for
    from core.replay.runtime import RecordOptions
    from core.replay.signatures import HMAC_SHA256

    signer = signer_for(TRACE_KEY_ID, HMAC_SHA256, TRACE_SECRET)
    doc = record(RecordOptions(seed="s9", iterations=5), default_registry(), signer)
    return gzip.compress(b"".join(native.iter_jsonl(doc)), mtime=0)


def _paxman() -> bytes:
    doc = json.loads(PAXMAN.read_bytes())
    doc["metadata"] = {
        "customer": {"email": "Ada.Lovelace@Example.org", "name": ADA_NAME},
        "notes": ["called about invoice 7", "prefers e-mail"],
    }
    return json.dumps(doc).encode()


@pytest.fixture
def three(ingest, rules):
    native_json = ingest("ok")
    jsonl = trace_ingest(source=io.BytesIO(_native_jsonl_gz()), filename="s9.trace.jsonl.gz").trace
    pax = trace_ingest(source=io.BytesIO(_paxman()), filename="money.json").trace
    return native_json, jsonl, pax


def test_a_subject_in_three_traces_of_two_formats_is_found_in_all(three):
    native_json, jsonl, pax = three
    assert (jsonl.format, jsonl.encoding, pax.format) == (
        "replay-trace",
        "jsonl.gz",
        "paxman-artifact",
    )
    ref = subjects.lookup(ADA)
    hits = index.find([ref])
    assert sorted({(h.trace_pk, h.format) for h in hits}) == sorted(
        [(native_json.pk, "replay-trace"), (jsonl.pk, "replay-trace"), (pax.pk, "paxman-artifact")]
    )
    assert [(h.location, h.path) for h in hits if h.trace_pk == jsonl.pk] == [
        ("event 0", "/user/name"),
        ("event 0", "/user/email"),
        ("event 4", "/user/name"),
        ("event 4", "/user/email"),
    ]
    assert [(h.location, h.path) for h in hits if h.trace_pk == pax.pk] == [
        ("document", "/metadata/customer/email"),
        ("document", "/metadata/customer/name"),
        ("document", "/metadata/notes/0"),
        ("document", "/metadata/notes/1"),
    ]
    revealed = [v for h, v in values.subject_values([ref], reveal=True) if h.trace_pk == pax.pk]
    assert revealed == [
        "Ada.Lovelace@Example.org",
        ADA_NAME,
        "called about invoice 7",
        "prefers e-mail",
    ]


def test_stored_files_of_every_format_read_back_and_verify_as_uploaded(three):
    for trace in three:
        run = replay_run_execute(run_id=replay_run_create(trace=trace, mode="audit").id)
        assert run.report["status"] == "ok", run.report["message"]
        assert run.report["authoritative"] is True


def _text_everywhere() -> str:
    """Every text, JSON and binary column of every table, and every stored blob."""
    chunks: list[str] = []
    with connection.cursor() as cur:
        for model in apps.get_models():
            columns = [
                f.column
                for f in model._meta.local_concrete_fields
                if isinstance(
                    f, (models.CharField, models.TextField, models.JSONField, models.BinaryField)
                )
            ]
            if not columns:
                continue
            cur.execute(
                f"SELECT {', '.join(connection.ops.quote_name(c) for c in columns)} "  # noqa: S608
                f"FROM {connection.ops.quote_name(model._meta.db_table)}"
            )
            for row in cur.fetchall():
                for cell in row:
                    if isinstance(cell, (bytes, memoryview)):
                        chunks.append(bytes(cell).decode("latin-1"))
                    elif cell is not None:
                        chunks.append(str(cell))
    return "\n".join(chunks)


def _blobs(settings) -> bytes:
    root = Path(settings.STORAGES["blobs"]["OPTIONS"]["location"])
    return b"".join(p.read_bytes() for p in root.rglob("*") if p.is_file())


def _governance_verify() -> tuple[int, dict]:
    out = StringIO()
    try:
        call_command("governance", "verify", "--json", stdout=out)
    except SystemExit as exited:
        return int(exited.code), json.loads(out.getvalue())
    return 0, json.loads(out.getvalue())


def test_after_erasure_nothing_yields_the_values_and_the_rest_still_verifies(
    three, as_persona, settings, caplog, replayed
):
    caplog.set_level(logging.DEBUG)
    native_json, jsonl, _pax = three
    governed = replayed("ok", by="alice")  # a ledger with replay events on the trace
    adam = as_persona("adam")
    adam.post(f"/traces/{native_json.blob.sha256}/events/0/", {"reason": "DSR 17"})
    ref = subjects.lookup(ADA)

    outcome = erasure.shred([ref])
    assert outcome.keys_destroyed == 1
    assert outcome.fields == 10

    # pages and API responses, for an admin (who would see unredacted values) and legal
    pages = []

    def seen(response) -> None:
        assert response.status_code == 200, response.request["PATH_INFO"]
        pages.append(response.content)

    for who in ("adam", "lena"):
        client = as_persona(who)
        for trace in three:
            seen(client.get(f"/traces/{trace.blob.sha256}/"))
            seen(client.get(f"/api/traces/{trace.blob.sha256}/"))
        for seq in (0, 4):
            seen(client.get(f"/traces/{jsonl.blob.sha256}/events/{seq}/"))
        seen(client.get(f"/traces/{native_json.blob.sha256}/events/0/"))
    seen(adam.post(f"/traces/{native_json.blob.sha256}/events/0/", {"reason": "x"}))
    runs = [replay_run_execute(run_id=replay_run_create(trace=t, mode="audit").id) for t in three]
    for run in runs:
        pages.append(json.dumps(run.report).encode())
        seen(adam.get(f"/api/replays/{run.id}/"))
        seen(adam.get(f"/runs/{run.id}/"))
        seen(adam.get(f"/runs/{run.id}/report.json"))
    everything = b"\n".join(pages)
    for value in (ADA, ADA_NAME, "Ada.Lovelace@Example.org", "called about invoice 7"):
        assert value.encode() not in everything, value
        assert value not in _text_everywhere(), value
        assert value.encode() not in _blobs(settings), value
        assert value not in caplog.text, value
        assert value.encode("unicode_escape") not in everything
    assert b"[erased]" in everything
    # another subject's values are untouched
    assert (
        GRACE.encode()
        in as_persona("adam")
        .post(f"/traces/{native_json.blob.sha256}/events/1/", {"reason": "DSR 18"})
        .content
    )

    # every check that does not need the erased values still passes
    for run in runs:
        assert run.report["status"] == "ok", run.report["message"]
        assert run.report["authoritative"] is False
        assert all(c["ok"] for c in run.report["checks"])
    pax_checks = {c["name"]: c["detail"] for c in runs[2].report["checks"]}
    assert "hash" in pax_checks
    assert pax_checks["erasure"].startswith("4 personal values are erased (document ")
    code, verified = _governance_verify()
    assert code == 0, verified
    assert governed.status == "ok"
