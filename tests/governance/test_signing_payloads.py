"""The signed payloads' exact bytes (fixed vectors): each kind a signer or the server signs is
built from fixed arguments, and its JCS bytes, its members in order and its Ed25519 signature
by a fixed key are what the code wrote when these vectors were generated. No database.

A change to any builder that moves one signed byte fails here: old signatures would no longer
verify against the payloads the server rebuilds to compare them with."""

from __future__ import annotations

import re

import pytest

from core.canonical import jcs
from core.ledger import signing

PRIVATE = bytes(range(32))  # a test vector, not a secret
_DSR_MEMBERS = [
    "type",
    "request_id",
    "purpose",
    "kind",
    "subjects",
    "legal_basis",
    "due_date",
    "requested_by",
    "identity_seq",
    "decision",
    "role",
    "reason",
]

VECTORS = {
    "force-continue": (
        lambda: signing.force_continue_payload(
            request_id="0f6a1c2e-3b4d-4e5f-8a9b-0c1d2e3f4a5b",
            replay_id="1a2b3c4d-5e6f-4a7b-8c9d-0e1f2a3b4c5d",
            trace_id="trace-7",
            step=3,
            divergence_digest="sha256:" + "ab" * 32,
            decision="approve",
            role="admin",
            expires_at="2026-01-02T03:04:05.678901Z",
            reason="ok, résumé",
        ),
        [
            "type",
            "request_id",
            "replay_id",
            "trace_id",
            "step",
            "divergence_digest",
            "decision",
            "role",
            "expires_at",
            "reason",
        ],
        b'{"decision":"approve","divergence_digest":"sha256:'
        + b"ab" * 32
        + b'","expires_at":"2026-01-02T03:04:05.678901Z","reason":"ok, r\xc3\xa9sum\xc3\xa9",'
        b'"replay_id":"1a2b3c4d-5e6f-4a7b-8c9d-0e1f2a3b4c5d",'
        b'"request_id":"0f6a1c2e-3b4d-4e5f-8a9b-0c1d2e3f4a5b","role":"admin","step":3,'
        b'"trace_id":"trace-7","type":"replay-audit-console/force-continue-approval/v1"}',
        "f5460af6a69386260c61a40f8045314dd79df18c0254cfc1e679d93c7576bbd0"
        "285f7cfbb7752618900fa50f4b373948d2906b85471c8b7ff1b6b1c67ec1320f",
    ),
    "halt-clear": (
        lambda: signing.halt_clear_payload(
            halt_seq=42,
            halt_hash="sha256:" + "cd" * 32,
            target_kind="blob",
            target_id="ef" * 32,
            reason="cleared",
        ),
        ["type", "halt_seq", "halt_hash", "target_kind", "target_id", "decision", "role", "reason"],
        b'{"decision":"approve","halt_hash":"sha256:'
        + b"cd" * 32
        + b'","halt_seq":42,"reason":"cleared","role":"council","target_id":"'
        + b"ef" * 32
        + b'","target_kind":"blob","type":"replay-audit-console/halt-clear-approval/v1"}',
        "aede467d878a5f86a304ddd9d15fa3648d4f8b19bb6f41cc5d40fd867fb81f95"
        "b544652a1d8fea7020181c584b53f96611f3eee9220278079587b76dde919b03",
    ),
    "production-replay": (
        lambda: signing.production_replay_payload(
            request_id="2b3c",
            trace_id="trace-7",
            trace_sha256="12" * 32,
            requested_by="alice",
            decision="deny",
            expires_at="2026-01-02T03:04:05.000000Z",
        ),
        [
            "type",
            "request_id",
            "trace_id",
            "trace_sha256",
            "mode",
            "requested_by",
            "decision",
            "role",
            "expires_at",
            "reason",
        ],
        b'{"decision":"deny","expires_at":"2026-01-02T03:04:05.000000Z","mode":"production",'
        b'"reason":"","request_id":"2b3c","requested_by":"alice","role":"council",'
        b'"trace_id":"trace-7","trace_sha256":"'
        + b"12" * 32
        + b'","type":"replay-audit-console/production-replay-approval/v1"}',
        "bad36fc07d79679bd304054cb0122bfccbc358b357545aa66366bd9665f56dd9"
        "62dcbe6fa229d3ec7092418840f74887005bb7c6751977fcb5a81bc9f6798f04",
    ),
    "role-grant": (
        lambda: signing.role_grant_payload(
            request_id="3c4d",
            user_id=7,
            username="bob",
            grant=["council", "admin"],
            requested_by="alice",
            decision="approve",
            expires_at="2026-01-02T03:04:05.000000Z",
            reason="new member",
        ),
        [
            "type",
            "request_id",
            "user_id",
            "username",
            "grant",
            "requested_by",
            "decision",
            "role",
            "expires_at",
            "reason",
        ],
        b'{"decision":"approve","expires_at":"2026-01-02T03:04:05.000000Z",'
        b'"grant":["admin","council"],"reason":"new member","request_id":"3c4d",'
        b'"requested_by":"alice","role":"council",'
        b'"type":"replay-audit-console/role-grant-approval/v1","user_id":7,"username":"bob"}',
        "0bdb4f1f6c0a97b6590245e5864191d0a58c517c2e980be44dd0d62dc308604f"
        "a3fc75256bc54c23686a0663aafaca73e53f55d274419f3d9191367ed8c4f40b",
    ),
    "dsr": (
        lambda: signing.dsr_approval_payload(
            request_id="4d5e",
            purpose="erasure",
            kind="erasure",
            subjects=["subj-b", "subj-a"],
            legal_basis="GDPR Art. 17",
            due_date="2026-02-01",
            requested_by="carol",
            identity_seq=12,
            role="council",
            reason="verified",
        ),
        [
            "type",
            "request_id",
            "purpose",
            "kind",
            "subjects",
            "legal_basis",
            "due_date",
            "requested_by",
            "identity_seq",
            "decision",
            "role",
            "reason",
        ],
        b'{"decision":"approve","due_date":"2026-02-01","identity_seq":12,"kind":"erasure",'
        b'"legal_basis":"GDPR Art. 17","purpose":"erasure","reason":"verified",'
        b'"request_id":"4d5e","requested_by":"carol","role":"council",'
        b'"subjects":["subj-a","subj-b"],"type":"replay-audit-console/dsr-approval/v1"}',
        "9f14815010d592fa56316bbaa9453a931a18a935412f57889ea0047a2f3f128f"
        "afbd8e7d97938b8cfe2e08e121cb98b1685b8ad619720b4409029ceb95f2020d",
    ),
    # what a legal request's approval covers (issue 19): the values a release hands over,
    # the plan an erasure carries out; the vector above (neither) still builds the same bytes
    "dsr-release-values": (
        lambda: signing.dsr_approval_payload(
            request_id="4d5e",
            purpose="release",
            kind="access",
            subjects=["subj-a"],
            legal_basis="GDPR Art. 15",
            due_date="2026-02-01",
            requested_by="carol",
            identity_seq=12,
            role="admin",
            values=[
                {
                    "subject": "subj-a",
                    "trace_id": "trace-7",
                    "file_sha256": "ab" * 32,
                    "location": "event 2",
                    "path": "/user/email",
                }
            ],
        ),
        [*_DSR_MEMBERS, "values"],
        b'{"decision":"approve","due_date":"2026-02-01","identity_seq":12,"kind":"access",'
        b'"legal_basis":"GDPR Art. 15","purpose":"release","reason":"","request_id":"4d5e",'
        b'"requested_by":"carol","role":"admin","subjects":["subj-a"],'
        b'"type":"replay-audit-console/dsr-approval/v1","values":[{"file_sha256":"'
        + b"ab"
        * 32
        + b'","location":"event 2","path":"/user/email","subject":"subj-a",'
        b'"trace_id":"trace-7"}]}',
        "fa8fa436b2bada3f20028f0310fb76a70c7ef7b21eb9c5206b79b3920871de3e"
        "d2b45db55476011153abfe17a605aa65a4e4edeed6d0b59b1678ab7289deaa06",
    ),
    "dsr-erasure-plan": (
        lambda: signing.dsr_approval_payload(
            request_id="4d5e",
            purpose="erasure",
            kind="erasure",
            subjects=["subj-a"],
            legal_basis="GDPR Art. 17",
            due_date="2026-02-01",
            requested_by="carol",
            identity_seq=12,
            role="admin",
            plan={
                "subjects": ["subj-a"],
                "unknown": [],
                "already_erased": [],
                "traces": [
                    {
                        "trace_id": "trace-7",
                        "file_sha256": "ab" * 32,
                        "format": "replay-trace",
                        "fields": ["event 2 /user/email"],
                    }
                ],
                "fields": 1,
                "keys": 1,
            },
        ),
        [*_DSR_MEMBERS, "plan"],
        b'{"decision":"approve","due_date":"2026-02-01","identity_seq":12,"kind":"erasure",'
        b'"legal_basis":"GDPR Art. 17","plan":{"already_erased":[],"fields":1,"keys":1,'
        b'"subjects":["subj-a"],"traces":[{"fields":["event 2 /user/email"],"file_sha256":"'
        + b"ab"
        * 32
        + b'","format":"replay-trace","trace_id":"trace-7"}],"unknown":[]},'
        b'"purpose":"erasure","reason":"","request_id":"4d5e","requested_by":"carol",'
        b'"role":"admin","subjects":["subj-a"],"type":"replay-audit-console/dsr-approval/v1"}',
        "decf9f773691babd930e1a0be6cd367ce17ea713e7fcd35f34a68ab024c3f3e9"
        "b413d8a1748317202220bc134606726f62c7b1b53a9dbe9191f21380eb42d10e",
    ),
    "checkpoint": (
        lambda: signing.checkpoint_body(
            size=10,
            head_hash="sha256:" + "01" * 32,
            genesis_hash="sha256:" + "02" * 32,
            created_at="2026-01-02T03:04:05.678901Z",
            key_id="server-0123456789abcdef",
        ),
        ["type", "size", "head_hash", "genesis_hash", "created_at", "key_id"],
        b'{"created_at":"2026-01-02T03:04:05.678901Z","genesis_hash":"sha256:'
        + b"02" * 32
        + b'","head_hash":"sha256:'
        + b"01" * 32
        + b'","key_id":"server-0123456789abcdef","size":10,'
        b'"type":"replay-audit-console/governance-checkpoint/v1"}',
        "dcd177a508a5e6eb7a21c917f24ec844abe9fad030b4b055b88aa1011178d321"
        "dc9f45aa2252e99cdda6123f60fe97b1b00232dc2b255bbd4193a46135f4230d",
    ),
    "verification-mark": (
        lambda: signing.verification_mark_body(
            through_seq=10,
            head_hash="sha256:" + "01" * 32,
            genesis_hash="sha256:" + "02" * 32,
            verified_at="2026-01-02T03:04:05.678901Z",
            key_id="server-0123456789abcdef",
        ),
        ["type", "through_seq", "head_hash", "genesis_hash", "verified_at", "key_id"],
        b'{"genesis_hash":"sha256:'
        + b"02" * 32
        + b'","head_hash":"sha256:'
        + b"01" * 32
        + b'","key_id":"server-0123456789abcdef","through_seq":10,'
        b'"type":"replay-audit-console/ledger-verified-through/v1",'
        b'"verified_at":"2026-01-02T03:04:05.678901Z"}',
        "952d76815612b59fb22320af2fcdc2967c7a1ff7f708117043192accd09801d0"
        "088046fd008fba24fee0efcf0846cf148de46f3a444b0becd77a64d311802902",
    ),
}


@pytest.mark.parametrize("kind", sorted(VECTORS))
def test_each_signed_payload_kind_keeps_its_exact_bytes_and_signature(kind):
    build, members, expected, signature = VECTORS[kind]
    payload = build()

    assert list(payload) == members
    assert jcs(payload) == expected
    assert signing.sign(PRIVATE, jcs(payload)) == signature
    assert signing.verify(signing.public_key_of(PRIVATE), expected, signature)


def test_a_signed_document_carries_the_payload_and_its_signature():
    payload = VECTORS["halt-clear"][0]()

    document = signing.signed_document(payload=payload, key_id="member-x", private_raw=PRIVATE)

    assert document == {
        "payload": payload,
        "key_id": "member-x",
        "alg": "ed25519",
        "signature": VECTORS["halt-clear"][3],
    }


FORCE_CONTINUE = {
    "request_id": "r",
    "replay_id": "x",
    "trace_id": "t",
    "step": 1,
    "divergence_digest": "d",
    "decision": "approve",
    "role": "admin",
    "expires_at": "e",
}
PRODUCTION = {
    "request_id": "r",
    "trace_id": "t",
    "trace_sha256": "s",
    "requested_by": "a",
    "decision": "approve",
    "expires_at": "e",
}
ROLE_GRANT = {
    "request_id": "r",
    "user_id": 1,
    "username": "u",
    "grant": [],
    "requested_by": "a",
    "decision": "approve",
    "expires_at": "e",
}
DSR = {
    "request_id": "r",
    "purpose": "release",
    "kind": "k",
    "subjects": [],
    "legal_basis": "l",
    "due_date": "d",
    "requested_by": "a",
    "identity_seq": 1,
    "role": "admin",
}


@pytest.mark.parametrize(
    ("build", "arguments", "message"),
    [
        (
            signing.force_continue_payload,
            {**FORCE_CONTINUE, "decision": "maybe"},
            "decision must be one of ('approve', 'deny'), not 'maybe'",
        ),
        (
            signing.force_continue_payload,
            {**FORCE_CONTINUE, "role": "auditor"},
            "role must be one of ('admin', 'council'), not 'auditor'",
        ),
        (
            signing.production_replay_payload,
            {**PRODUCTION, "decision": "maybe"},
            "decision must be one of ('approve', 'deny'), not 'maybe'",
        ),
        (
            signing.role_grant_payload,
            {**ROLE_GRANT, "decision": "maybe"},
            "decision must be one of ('approve', 'deny'), not 'maybe'",
        ),
        (
            signing.dsr_approval_payload,
            {**DSR, "purpose": "publish"},
            "purpose must be one of ('release', 'erasure'), not 'publish'",
        ),
        (
            signing.dsr_approval_payload,
            {**DSR, "role": "auditor"},
            "role must be one of ('admin', 'council'), not 'auditor'",
        ),
    ],
    ids=[
        "force-continue-decision",
        "force-continue-role",
        "production-decision",
        "role-grant-decision",
        "dsr-purpose",
        "dsr-role",
    ],
)
def test_it_refuses_to_build_a_payload_with_an_unknown_choice(build, arguments, message):
    with pytest.raises(ValueError, match=f"^{re.escape(message)}$"):
        build(**arguments)
