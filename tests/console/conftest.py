from __future__ import annotations

import functools
import io
from datetime import UTC, datetime

import pytest
from django.test import Client

from tests.console.personas import client_for, persona

# the per-format tests' helpers assert too: say what differed when they fail
pytest.register_assert_rewrite("tests.console.formats")

TRACE_KEY_ID = "console-tests"
#: a test vector, not a secret: signs the traces these tests record
TRACE_SECRET = b"console tests trace key, a test vector"
LONG_AGO = datetime(2000, 1, 1, tzinfo=UTC)


@pytest.fixture(autouse=True)
def _fresh_server_key_cache():
    # governance caches server private keys per process; each test database starts without
    from governance import ledger

    ledger._private_keys.clear()
    yield
    ledger._private_keys.clear()


@pytest.fixture(autouse=True)
def _private_storage(settings, tmp_path):
    """Every test gets its own blob store and spool directory."""
    settings.VAR_DIR = tmp_path / "var"
    settings.VAR_DIR.mkdir()
    settings.STORAGES = {
        **settings.STORAGES,
        "blobs": {
            "BACKEND": "django.core.files.storage.FileSystemStorage",
            "OPTIONS": {"location": str(tmp_path / "blobs")},
        },
    }


@pytest.fixture
def as_persona(db):
    """`as_persona("alice")` gives a Django test client signed in as alice."""

    def make(name: str, **extra: str) -> Client:
        return client_for(name, **extra)

    return make


@functools.cache
def trace_bytes(name: str) -> bytes:
    """One of core.formats.native.demo's variants (ok, diverged, broken_chain, ...), signed
    with the tests' HMAC key, as the bytes of a native .trace.json file."""
    from core.formats import native
    from core.formats.native.demo import variants
    from core.formats.native.recorder import signer_for
    from core.replay.signatures import HMAC_SHA256

    documents = variants(signer_for(TRACE_KEY_ID, HMAC_SHA256, TRACE_SECRET))
    return native.dumps_document(documents[name])


@pytest.fixture
def trace_key(db):
    from replay.keys import key_add_hmac

    return key_add_hmac(key_id=TRACE_KEY_ID, secret=TRACE_SECRET, valid_from=LONG_AGO)


@pytest.fixture
def ingest(trace_key):
    """`ingest("diverged")` stores that variant and returns its Trace."""
    from replay.services import trace_ingest

    def make(name: str):
        return trace_ingest(
            source=io.BytesIO(trace_bytes(name)), filename=f"{name}.trace.json"
        ).trace

    return make


@pytest.fixture
def replayed(ingest):
    """`replayed("diverged", by="alice")`: a finished, governed audit replay of that variant."""
    from governance.services import replay_request, replay_run_govern

    def make(name: str, by: str = "alice", mode: str = "audit"):
        trace = ingest(name)
        run = replay_request(trace=trace, mode=mode, actor=persona(by), enqueue=False)
        return replay_run_govern(run_id=run.id)

    return make


@pytest.fixture
def signers(db):
    """adam, sam, cora and colin exist, their roles in the ledger, before the test files
    anything: an approval counts only in a role held before its request was filed."""
    return {name: persona(name) for name in ("adam", "sam", "cora", "colin")}


@pytest.fixture
def member_key(signers):
    """`member_key("cora")`: registers a fresh Ed25519 key for her, confirmed by adam, and
    returns (MemberKey, private key bytes)."""
    from core.ledger.signing import public_key_of
    from governance import keystore
    from governance.services import member_key_confirm, member_key_register

    def make(name: str, confirm: bool = True):
        private = keystore.generate_private_key()
        key = member_key_register(user=persona(name), public_key=public_key_of(private).hex())
        if confirm:
            confirmer = persona("sam" if name == "adam" else "adam")
            key = member_key_confirm(key=key, admin=confirmer)
        return key, private

    return make


@pytest.fixture
def htmx_headers():
    return {"HTTP_HX_REQUEST": "true"}
