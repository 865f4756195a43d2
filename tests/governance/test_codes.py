"""The event type table stays stable, in its ranges, and documented."""

from __future__ import annotations

import re

import pytest

from core.ledger import codes


def test_codes_and_names_are_unique_and_in_their_ranges():
    assert len({t.code for t in codes.EVENT_TYPES}) == len(codes.EVENT_TYPES)
    assert len({t.name for t in codes.EVENT_TYPES}) == len(codes.EVENT_TYPES)
    assert {t.code // 100 for t in codes.EVENT_TYPES} <= set(codes.RANGES)


@pytest.mark.parametrize("event_type", codes.EVENT_TYPES, ids=lambda t: t.name)
def test_every_event_type_is_in_the_documented_table(event_type):
    doc = codes.__doc__ or ""
    assert re.search(rf"\b{event_type.code}\s+{event_type.name}\b", doc)
    assert event_type.description


def test_the_codes_never_move():
    # appended events hash their code: renumbering would break every old event's hash
    assert {t.name: t.code for t in codes.EVENT_TYPES} == {
        "REPLAY_REQUEST": 100,
        "REPLAY_RESULT": 101,
        "REPLAY_DIVERGENCE": 102,
        "INTEGRITY_FAILURE": 103,
        "REPLAY_TIMEOUT": 104,
        "PRODUCTION_REPLAY_REQUEST": 105,
        "PRODUCTION_REPLAY_APPROVAL": 106,
        "PRODUCTION_REPLAY_APPROVED": 107,
        "PRODUCTION_REPLAY_REJECTED": 108,
        "TRACE_EXPIRED": 109,
        "TRACE_NOTE": 110,
        "OTLP_RECEIVED": 111,
        "OTEL_TRACE_SEALED": 112,
        "FORCE_CONTINUE_REQUEST": 200,
        "FORCE_CONTINUE_APPROVAL": 201,
        "FORCE_CONTINUE_APPROVED": 202,
        "FORCE_CONTINUE_REJECTED": 203,
        "FORCE_CONTINUE_REFUSED": 204,
        "FORCE_HALT_REPLAY": 300,
        "FORCE_HALT_CLEAR": 301,
        "HALT_CLEAR_APPROVAL": 302,
        "SECURITY_INCIDENT": 303,
        "KEY_ADDED": 400,
        "KEY_ROTATED": 401,
        "KEY_REVOKED": 402,
        "KEY_CONFIRMED": 403,
        "API_TOKEN_CREATED": 410,
        "API_TOKEN_REVOKED": 411,
        "PII_REVEALED": 500,
        "DSR_OPENED": 600,
        "DSR_EXPORTED": 601,
        "DSR_ERASED": 602,
        "DSR_CLOSED": 603,
        "DSR_IDENTITY_VERIFIED": 604,
        "DSR_APPROVAL": 605,
        "DSR_STATE_CHANGED": 606,
        "ROLES_INSTALLED": 700,
        "ROLES_CHANGED": 701,
        "ROLE_GRANT_REQUEST": 702,
        "ROLE_GRANT_APPROVAL": 703,
        "ROLE_GRANT_APPROVED": 704,
        "ROLE_GRANT_REJECTED": 705,
    }


def test_every_refusal_code_is_explained():
    for table in (codes.REFUSALS, codes.CHAIN_BREAKS, codes.CHECKPOINT_FAILURES):
        assert all(code == code.upper() and text for code, text in table.items())
