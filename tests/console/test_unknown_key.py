"""The unknown-key rule in the console, for every format signed under a registry key: an upload
whose key is not registered is refused with UNKNOWN_KEY and stores nothing (the API answers
400), and a governed replay of a stored file whose key the registry no longer has is refused
with UNKNOWN_KEY and halts nothing, so registering the key is all it takes (no council).

A registered key whose signature does not verify stays INTEGRITY_FAILURE, which halts the file
(tests/console/test_format_contextos.py, tests/replay/test_golden.py); a revoked key still
verifies what it signed inside its window.
"""

from __future__ import annotations

import io
from pathlib import Path

import pytest

from core.errors import UNKNOWN_KEY
from governance.selectors import halts_active_map
from replay.keys import key_add_hmac, key_revoke
from replay.models import Trace, VerificationKey
from replay.services import trace_ingest, trace_upload_batch
from tests.console.conftest import LONG_AGO, TRACE_KEY_ID, TRACE_SECRET, trace_bytes
from tests.console.formats import (
    event_types,
    first_stored,
    governed,
    upload_api,
    upload_of,
    uploads,
)
from tests.replay.helpers import GOLDEN_KEY_ID, register_golden_key, stored_counts

pytestmark = pytest.mark.django_db

CONTEXTOS = Path(__file__).resolve().parents[1] / "replay" / "fixtures" / "contextos"
PACK = CONTEXTOS / "refund-triage@1.4.0.pack.json"
KG = CONTEXTOS / "kg-snapshot.kg.json"


def unknown(key_id: str) -> str:
    return (
        f"no key {key_id!r} in the verification-key registry, so nothing was verified: "
        f"register it with `manage.py keys add-hmac {key_id} --secret-file F`"
    )


def forget(key_id: str) -> None:
    """The registry no longer has the key (a file stored before the key rule, a registry
    restored without it): what a replay of a file signed by it then meets."""
    VerificationKey.objects.filter(key_id=key_id).delete()


def assert_refused_unhalted(trace: Trace, message: str):
    """A governed replay of `trace` is refused with UNKNOWN_KEY and halts nothing."""
    run = governed(trace)
    assert (run.status, run.error_code, run.report["message"]) == (
        "refused",
        UNKNOWN_KEY,
        message,
    )
    assert "INTEGRITY_FAILURE" not in event_types()
    assert halts_active_map() == {}
    return run


# --- native traces --------------------------------------------------------------------------


def store_native() -> Trace:
    return trace_ingest(source=io.BytesIO(trace_bytes("ok")), filename="ok.trace.json").trace


def test_a_native_upload_whose_key_is_unknown_is_refused_by_the_api_and_stores_nothing(
    as_persona,
):
    client = as_persona("alice")
    refused = upload_api(client, *uploads([("ok.trace.json", trace_bytes("ok"))]))

    assert refused.status_code == 400
    assert (refused.json()["error_code"], refused.json()["message"]) == (
        UNKNOWN_KEY,
        f"snapshot selfrep: {unknown(TRACE_KEY_ID)}",
    )
    assert stored_counts() == {"traces": 0, "blobs": 0, "snapshots": 0}
    key_add_hmac(key_id=TRACE_KEY_ID, secret=TRACE_SECRET, valid_from=LONG_AGO)
    stored = upload_api(client, *uploads([("ok.trace.json", trace_bytes("ok"))]))
    assert stored.status_code == 201
    assert stored.json()["report"]["status"] == "ok"


def test_a_stored_native_trace_whose_key_is_gone_is_refused_unhalted_until_registered(
    trace_key,
):
    trace = store_native()
    forget(TRACE_KEY_ID)

    assert_refused_unhalted(trace, f"snapshot selfrep: {unknown(TRACE_KEY_ID)}")

    key_add_hmac(key_id=TRACE_KEY_ID, secret=TRACE_SECRET, valid_from=LONG_AGO)
    assert governed(trace).status == "ok"  # no council, no halt to clear


def test_a_revoked_native_key_still_verifies_what_it_signed_inside_its_window(trace_key):
    trace = store_native()
    key_revoke(key_id=TRACE_KEY_ID)

    assert governed(trace).status == "ok"


# --- ContextOS traces: the pinned pack and KG snapshot --------------------------------------


def contextos_batch():
    files = [
        (p.name, io.BytesIO(p.read_bytes())) for p in (CONTEXTOS / "pass.trace.json", PACK, KG)
    ]
    return trace_upload_batch(files=files)


def test_a_contextos_upload_whose_pack_key_is_unknown_is_refused_and_stores_nothing():
    outcome = contextos_batch()[0]

    assert outcome.result is None
    assert (outcome.error.code, outcome.error.message) == (
        UNKNOWN_KEY,
        "the pack refund-triage@1.4.0 is signed by a key the console does not know: "
        + unknown(GOLDEN_KEY_ID),
    )
    assert stored_counts() == {"traces": 0, "blobs": 0, "snapshots": 0}
    assert halts_active_map() == {}


def test_a_contextos_upload_is_refused_by_the_api_until_the_key_is_registered(as_persona):
    client = as_persona("alice")

    def upload():
        return upload_api(
            client,
            upload_of(CONTEXTOS / "pass.trace.json"),
            uploads([(p.name, p.read_bytes()) for p in (PACK, KG)]),
        )

    refused = upload()
    assert refused.status_code == 400
    assert refused.json()["error_code"] == UNKNOWN_KEY
    assert stored_counts() == {"traces": 0, "blobs": 0, "snapshots": 0}
    register_golden_key()
    stored = upload()
    assert stored.status_code == 201
    assert stored.json()["report"]["status"] == "ok"


def test_a_stored_contextos_trace_whose_pack_key_is_gone_is_refused_unhalted_until_registered():
    register_golden_key()
    trace = first_stored(contextos_batch())
    forget(GOLDEN_KEY_ID)

    assert_refused_unhalted(
        trace,
        "refusing to replay: the pack refund-triage@1.4.0 is signed by a key the console does "
        f"not know: {unknown(GOLDEN_KEY_ID)}",
    )

    register_golden_key()
    run = governed(trace)  # no council, no halt to clear
    assert (run.status, run.report["contextos"]["status"]) == ("ok", "byte_equal")


def test_a_revoked_contextos_key_still_verifies_what_it_signed_inside_its_window():
    register_golden_key()
    trace = first_stored(contextos_batch())
    key_revoke(key_id=GOLDEN_KEY_ID)

    assert governed(trace).status == "ok"
