"""A synthetic ledger, server key and bundle inputs for the bundle tests (pure: no database).

The ledger rows are made with the real ``core.ledger.chain`` and ``core.ledger.signing`` code,
as ``tests/governance/test_chain.py`` makes its own."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from typing import Any

from core import bundle
from core.canonical import jcs
from core.ledger import chain, signing

T0 = datetime(2026, 1, 2, 3, 4, 5, 678901, tzinfo=UTC)
PRIVATE = bytes(range(32))  # a test vector, not a secret
PUBLIC = signing.public_key_of(PRIVATE)
KEY_ID = signing.key_id_for(PUBLIC, "server")
OTHER_PRIVATE = bytes(range(1, 33))  # a test vector, not a secret
OTHER_PUBLIC = signing.public_key_of(OTHER_PRIVATE)
OTHER_KEY_ID = signing.key_id_for(OTHER_PUBLIC, "server")
MEMBER_PRIVATE = bytes(range(2, 34))  # a test vector, not a secret
MEMBER_PUBLIC = signing.public_key_of(MEMBER_PRIVATE)
MEMBER_KEY_ID = signing.key_id_for(MEMBER_PUBLIC, "member")
FILE_A = "sha256:" + "a1" * 32
FILE_B = "sha256:" + "b2" * 32
SUBJECT = "subj_ABCDEFGHIJKLMNOPQRSTUVWXYZ"
REQUEST = "dsr_0001"
CREATED = "2026-02-01T10:00:00.000000Z"

_HASH = chain.FIELDS.index("hash")


def signer(private: bytes = PRIVATE, prefix: str = "server"):
    public = signing.public_key_of(private)
    key_id = signing.key_id_for(public, prefix)

    def sign(message: bytes) -> tuple[str, str, str]:
        return key_id, public.hex(), signing.sign(private, message)

    return sign


def row(
    seq: int,
    prev: str,
    *,
    code: int = 101,
    type_: str = "REPLAY_RESULT",
    payload: dict | None = None,
    key: tuple[str, bytes] = (KEY_ID, PRIVATE),
    at: datetime | None = None,
    actor: tuple[int, str, bytes] | None = None,
) -> tuple:
    payload = payload if payload is not None else {"trace_sha256": FILE_A, "n": seq}
    actor_key_id = actor[1] if actor else None
    actor_signature = signing.sign(actor[2], jcs(payload)) if actor else None
    body = chain.event_body(
        seq=seq,
        code=code,
        type=type_,
        created_at=at or T0 + timedelta(seconds=seq),
        actor_id=actor[0] if actor else None,
        actor_label="adam" if actor else "system",
        payload=payload,
        idempotency_key=None,
        server_key_id=key[0],
        actor_key_id=actor_key_id,
        actor_signature=actor_signature,
    )
    digest = chain.event_hash(prev, body)
    values = {
        **dict.fromkeys(chain.FIELDS),
        "seq": seq,
        "code": code,
        "type": type_,
        "created_at": at or T0 + timedelta(seconds=seq),
        "actor_id": actor[0] if actor else None,
        "actor_label": body["actor"],
        "payload": payload,
        "server_key_id": key[0],
        "actor_key_id": actor_key_id,
        "actor_signature": actor_signature,
        "prev_hash": prev,
        "hash": digest,
        "server_signature": signing.sign(key[1], digest.encode()),
    }
    return tuple(values[f] for f in chain.FIELDS)


def ledger() -> list[tuple]:
    """Seq 1-4 of a ledger: the server key, a replay request, its result, an admin's event."""
    rows = [
        row(
            1,
            "",
            code=400,
            type_="KEY_ADDED",
            payload={"registry": "server", "key_id": KEY_ID, "public_key": PUBLIC.hex()},
        )
    ]
    rows.append(row(2, rows[-1][_HASH], code=100, type_="REPLAY_REQUEST"))
    rows.append(row(3, rows[-1][_HASH]))
    rows.append(
        row(
            4,
            rows[-1][_HASH],
            code=500,
            type_="PII_REVEALED",
            payload={"trace_sha256": FILE_A, "request": REQUEST, "path": "/events/0/payload/email"},
            actor=(7, MEMBER_KEY_ID, MEMBER_PRIVATE),
        )
    )
    return rows


def checkpoint(rows: list[tuple], private: bytes = PRIVATE) -> dict[str, Any]:
    public = signing.public_key_of(private)
    body = signing.checkpoint_body(
        size=rows[-1][0],
        head_hash=rows[-1][_HASH],
        genesis_hash=rows[0][_HASH],
        created_at=CREATED,
        key_id=signing.key_id_for(public, "server"),
    )
    return {"checkpoint": body, "alg": "ed25519", "signature": signing.sign(private, jcs(body))}


def report(trace_id: str, status: str = "ok") -> dict[str, Any]:
    return {
        "trace_id": trace_id,
        "format": "replay-trace",
        "mode": "audit",
        "status": status,
        "error_code": None if status == "ok" else "RESULT_MISMATCH",
        "authoritative": True,
        "checks": [{"name": "seal", "ok": True, "detail": "ed25519 by demo-key"}],
        "divergences": [],
        "broke_at": None,
        "expected": None,
        "observed": None,
    }


def inputs(*, rows: list[tuple] | None = None, with_checkpoint: bool = True, **over: Any):
    rows = ledger() if rows is None else rows
    traces = (
        bundle.TraceEvidence(
            trace_id="0" * 31 + "a",
            file_sha256=FILE_A,
            format="replay-trace",
            verdict="ok",
            values=[
                {
                    "subject_ref": SUBJECT,
                    "location": "event 0",
                    "path": "/events/0/payload/email",
                    "value": "[redacted]",
                    "released": False,
                },
                {
                    "subject_ref": SUBJECT,
                    "location": "event 2",
                    "path": "/events/2/payload/name",
                    "value": "Ada Lovelace",
                    "released": True,
                },
            ],
            report=report("0" * 31 + "a"),
        ),
        bundle.TraceEvidence(
            trace_id="run-7",
            file_sha256=FILE_B,
            format="paxman",
            verdict="diverged",
            values=[
                {
                    "subject_ref": SUBJECT,
                    "location": "step 3",
                    "path": "/steps/3/input/customer",
                    "value": "[erased]",
                    "released": False,
                }
            ],
            report=report("run-7", "diverged"),
        ),
    )
    fields: dict[str, Any] = {
        "request_ref": REQUEST,
        "subject_refs": (SUBJECT,),
        "created_at": CREATED,
        "traces": traces,
        "events": [bundle.event_record(r) for r in rows],
        "server_keys": [
            bundle.server_key_record(chain.ServerKey(KEY_ID, PUBLIC, valid_from=T0)),
        ],
        "member_keys": {MEMBER_KEY_ID: MEMBER_PUBLIC.hex()},
        "checkpoint": checkpoint(rows) if with_checkpoint else None,
    }
    fields.update(over)
    return bundle.BundleInputs(**fields)


def build(**over: Any) -> bytes:
    return bundle.build_bundle(inputs(**over), signer())


def edit(data: bytes, change, *, resign: bool = False, private: bytes = PRIVATE) -> bytes:
    """The bundle with ``change(doc)`` applied, written canonically again, its manifest
    signed again when ``resign`` (what a forger with the key, or a buggy server, would do)."""
    doc = json.loads(data)
    change(doc)
    if resign:
        doc["signature"] = signing.sign(private, jcs(doc["manifest"]))
    return jcs(doc)
