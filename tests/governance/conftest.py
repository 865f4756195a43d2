from __future__ import annotations

import functools
import io
from datetime import UTC, datetime
from pathlib import Path

import pytest

from governance import ledger, transparency


@pytest.fixture(autouse=True)
def _fresh_key_cache():
    # server keys (and the Merkle tree's right edge) are cached per process; each test
    # database starts without them
    ledger._private_keys.clear()
    ledger._keys_by_id.clear()
    transparency._edge.clear()
    yield
    ledger._private_keys.clear()
    ledger._keys_by_id.clear()
    transparency._edge.clear()


TRACE_KEY_ID = "governance-tests"
#: a test vector, not a secret: signs the traces these tests record
TRACE_SECRET = b"governance tests trace key, a test vector"
LONG_AGO = datetime(2000, 1, 1, tzinfo=UTC)


@functools.cache
def trace_bytes(name: str) -> bytes:
    """One of core.formats.native.demo's variants (ok, diverged, tampered_snapshot, ...),
    recorded by the real recorder and signed with the tests' HMAC key."""
    from core.formats import native
    from core.formats.native.demo import variants
    from core.formats.native.recorder import signer_for
    from core.replay.signatures import HMAC_SHA256

    documents = variants(signer_for(TRACE_KEY_ID, HMAC_SHA256, TRACE_SECRET))
    return native.dumps_document(documents[name])


@pytest.fixture
def stored_traces(db, settings, tmp_path):
    """A private blob store and the trace key registered, so tests can ingest traces."""
    from replay.keys import key_add_hmac

    settings.VAR_DIR = tmp_path / "var"
    settings.VAR_DIR.mkdir()
    settings.STORAGES = {
        **settings.STORAGES,
        "blobs": {
            "BACKEND": "django.core.files.storage.FileSystemStorage",
            "OPTIONS": {"location": str(tmp_path / "blobs")},
        },
    }
    key_add_hmac(key_id=TRACE_KEY_ID, secret=TRACE_SECRET, valid_from=LONG_AGO)
    return tmp_path


def trace_file(directory: Path, name: str) -> Path:
    path = directory / f"{name}.trace.json"
    path.write_bytes(trace_bytes(name))
    return path


@functools.cache
def recorded_bytes(seed: str) -> bytes:
    """Another run of the reference runtime (its own trace id; the privacy, brainstate and
    governance snapshots are the same bodies as every other run's, so they are shared)."""
    from core.formats import default_registry, native
    from core.formats.native.recorder import record, signer_for
    from core.replay.runtime import RecordOptions
    from core.replay.signatures import HMAC_SHA256

    signer = signer_for(TRACE_KEY_ID, HMAC_SHA256, TRACE_SECRET)
    return native.dumps_document(record(RecordOptions(seed=seed), default_registry(), signer))


def tampered_copy_bytes() -> bytes:
    """The "ok" trace with one event payload and the privacy snapshot body edited, every id
    left as it was: what someone without the signing key can make of a trace."""
    import copy

    from core.formats import native
    from core.formats.native.demo import variants
    from core.formats.native.recorder import signer_for
    from core.replay.signatures import HMAC_SHA256

    document = copy.deepcopy(variants(signer_for(TRACE_KEY_ID, HMAC_SHA256, TRACE_SECRET))["ok"])
    document["events"][1]["payload"]["text"] = "question 1, edited"
    privacy = next(s for s in document["snapshots"] if s["kind"] == "privacy")
    privacy["body"]["redact"] = []
    return native.dumps_document(document)


def ingest(name: str, *, uploaded_by=None, data: bytes | None = None):
    from replay.services import trace_ingest

    return trace_ingest(
        source=io.BytesIO(data if data is not None else trace_bytes(name)),
        filename=f"{name}.trace.json",
        uploaded_by=uploaded_by,
    ).trace
