"""The evidence bundle (``core.bundle``): built reproducibly, verified offline, and every way it
can fail named by its exact code. Pure: no database, no Django."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from core import bundle
from core.canonical import jcs
from core.ledger import chain, codes, signing
from tests.dsr import bundles as b

BUNDLE = b.build()


def test_a_bundle_verifies_offline():
    check = bundle.verify_bundle(BUNDLE)

    assert check.ok, check
    assert check.as_dict() == {
        "ok": True,
        "code": None,
        "where": None,
        "message": "the bundle verifies",
        "key_id": b.KEY_ID,
        "public_key": b.PUBLIC.hex(),
        "trusted": False,
        "trust": None,
        "manifest_sha256": "sha256:"
        + hashlib.sha256(jcs(json.loads(BUNDLE)["manifest"])).hexdigest(),
        "request_ref": b.REQUEST,
        "subject_refs": [b.SUBJECT],
        "nothing_held": False,
        "members": 8,
        "traces": 2,
        "events": 4,
        "tlog_size": None,
        "tlog_root": None,
        "tlog_trust": None,
        "proven": 0,
        "extends": None,
        "quorum": None,
        "witnesses_signed": [],
        "witnesses_missing": [],
    }


def test_it_lists_every_member_in_a_fixed_order_with_its_hash_and_size():
    doc = json.loads(BUNDLE)
    names = [m["name"] for m in doc["manifest"]["members"]]

    assert names == [
        "summary.json",
        f"traces/{'a1' * 32}/data.json",
        f"traces/{'a1' * 32}/report.json",
        f"traces/{'b2' * 32}/data.json",
        f"traces/{'b2' * 32}/report.json",
        "ledger/keys.json",
        "ledger/events.json",
        "ledger/checkpoint.json",
    ]
    for entry in doc["manifest"]["members"]:
        raw = jcs(doc["members"][entry["name"]])
        assert entry["sha256"] == hashlib.sha256(raw).hexdigest()
        assert entry["size"] == len(raw)
    assert signing.verify(b.PUBLIC, jcs(doc["manifest"]), doc["signature"])


def test_the_file_is_the_canonical_json_of_its_value():
    assert jcs(json.loads(BUNDLE)) == BUNDLE
    assert BUNDLE.startswith(b'{"format":"replay-audit-console/evidence-bundle/v1","manifest":')


def test_the_same_inputs_give_the_same_bytes():
    assert b.build() == BUNDLE


def test_it_names_subjects_by_ref_and_carries_the_values_as_given():
    doc = json.loads(BUNDLE)
    data = doc["members"][f"traces/{'a1' * 32}/data.json"]

    assert doc["manifest"]["subject_refs"] == [b.SUBJECT]
    assert [v["value"] for v in data["subject_values"]] == ["[redacted]", "Ada Lovelace"]
    assert doc["members"]["summary.json"]["traces"][1] == {
        "trace_id": "run-7",
        "file_sha256": b.FILE_B,
        "format": "paxman",
        "verdict": "diverged",
        "replay_mode": "audit",
        "replay_status": "diverged",
        "replay_error_code": "RESULT_MISMATCH",
        "fields": 1,
        "released": 0,
        "data": f"traces/{'b2' * 32}/data.json",
        "report": f"traces/{'b2' * 32}/report.json",
    }


# --- trust ---------------------------------------------------------------------------------


def test_it_says_the_key_was_checked_against_a_trusted_key():
    check = bundle.verify_bundle(BUNDLE, trusted_keys=[b.PUBLIC.hex()])

    assert (check.ok, check.trusted, check.trust) == (True, True, "trusted key")


def test_it_accepts_the_trusted_key_as_pem_or_raw_bytes():
    pem = signing.public_key_to_pem(b.PUBLIC)

    assert bundle.verify_bundle(BUNDLE, trusted_keys=[pem]).trusted
    assert bundle.verify_bundle(BUNDLE, trusted_keys=[b.PUBLIC]).trusted


def test_it_refuses_a_bundle_signed_by_a_key_that_is_not_trusted():
    check = bundle.verify_bundle(BUNDLE, trusted_keys=[b.OTHER_PUBLIC.hex()])

    assert (check.ok, check.code, check.where) == (
        False,
        codes.BUNDLE_UNTRUSTED_KEY,
        "manifest.server_key",
    )
    assert check.message == (f"signed by {b.KEY_ID} ({b.PUBLIC.hex()}), which is not a trusted key")


def test_it_trusts_the_key_of_a_checkpoint_it_signed():
    check = bundle.verify_bundle(BUNDLE, checkpoint=b.checkpoint(b.ledger()))

    assert (check.ok, check.trusted, check.trust) == (True, True, "checkpoint")


def test_it_refuses_a_checkpoint_signed_by_another_key():
    check = bundle.verify_bundle(BUNDLE, checkpoint=b.checkpoint(b.ledger(), b.OTHER_PRIVATE))

    assert (check.ok, check.code) == (False, codes.BUNDLE_UNTRUSTED_KEY)


def test_a_bad_trust_anchor_is_the_callers_error():
    with pytest.raises(ValueError, match="not an Ed25519 public key"):
        bundle.verify_bundle(BUNDLE, trusted_keys=["not a key"])
    with pytest.raises(ValueError, match="governance-checkpoint"):
        bundle.verify_bundle(BUNDLE, checkpoint={"checkpoint": {}})


# --- nothing held ---------------------------------------------------------------------------


def test_an_unknown_subject_gets_a_signed_nothing_held_bundle():
    data = b.build(traces=(), rows=[], with_checkpoint=False)
    check = bundle.verify_bundle(data, trusted_keys=[b.PUBLIC.hex()])
    doc = json.loads(data)

    assert (check.ok, check.nothing_held, check.traces, check.events) == (True, True, 0, 0)
    assert check.trusted
    assert doc["members"]["summary.json"]["nothing_held"] is True
    assert [m["name"] for m in doc["manifest"]["members"]] == [
        "summary.json",
        "ledger/keys.json",
        "ledger/events.json",
    ]


# --- every byte counts ----------------------------------------------------------------------


def _flipped(data: bytes, position: int, mask: int) -> bytes:
    out = bytearray(data)
    out[position] ^= mask
    return bytes(out)


SMALL = b.build(traces=b.inputs().traces[:1], rows=b.ledger()[:2], with_checkpoint=False)


@pytest.mark.slow
def test_flipping_any_single_bit_anywhere_fails_with_a_named_code():
    for position in range(len(SMALL)):
        for mask in (0x01, 0x20):
            check = bundle.verify_bundle(_flipped(SMALL, position, mask))
            assert not check.ok, (position, mask)
            assert check.code in codes.BUNDLE_FAILURES, (position, mask, check)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data())
def test_changing_any_byte_to_any_other_fails_with_a_named_code(data):
    position = data.draw(st.integers(0, len(BUNDLE) - 1))
    mask = data.draw(st.integers(1, 255))
    check = bundle.verify_bundle(_flipped(BUNDLE, position, mask))

    assert not check.ok
    assert check.code in codes.BUNDLE_FAILURES
    assert check.where


def test_a_changed_value_fails_its_member_hash():
    changed = BUNDLE.replace(b'"value":"Ada Lovelace"', b'"value":"Ada Lovelacf"')
    check = bundle.verify_bundle(changed)

    assert (check.code, check.where) == (
        codes.BUNDLE_MEMBER_HASH,
        f"traces/{'a1' * 32}/data.json",
    )


# --- each code ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("data", "where", "message"),
    [
        (b"", "file", "bundle: truncated JSON at line 1 column 1: Expecting value"),
        (b"PK\x03\x04", "file", "bundle: malformed JSON at line 1 column 1: Expecting value"),
        (b"[]", "file", "a bundle is a JSON object"),
        (
            b'{"a":1,"a":2}',
            "file",
            "bundle: duplicate key 'a': a hash over duplicate keys is ambiguous",
        ),
        (b"[" * 300 + b"]" * 300, "file", "bundle: nesting deeper than 200 levels"),
        (
            b'{"b":1, "a":2}',
            "byte 2",
            "not in RFC 8785 canonical form (a bundle is exactly jcs of its value)",
        ),
    ],
)
def test_it_refuses_what_is_not_a_bundle(data, where, message):
    check = bundle.verify_bundle(data)

    assert (check.code, check.where, check.message) == (codes.BUNDLE_MALFORMED, where, message)


def test_it_refuses_a_file_larger_than_the_limit_before_reading_it():
    check = bundle.verify_bundle(BUNDLE, max_bytes=1000)

    assert (check.code, check.where) == (codes.BUNDLE_MALFORMED, "file")
    assert check.message == f"{len(BUNDLE)} bytes, more than the limit of 1000"


def test_it_refuses_another_format():
    data = b.edit(BUNDLE, lambda d: d.update(format="replay-audit-console/evidence-bundle/v2"))
    check = bundle.verify_bundle(data)

    assert (check.code, check.where) == (codes.BUNDLE_MALFORMED, "format")


def test_it_refuses_a_member_name_that_is_a_path_out():
    def change(doc):
        doc["manifest"]["members"][1]["name"] = "../../etc/passwd"

    check = bundle.verify_bundle(b.edit(BUNDLE, change, resign=True))

    assert (check.code, check.where) == (codes.BUNDLE_MALFORMED, "manifest.members[1]")
    assert check.message == "the member name '../../etc/passwd' is not one a bundle uses"


def test_a_changed_manifest_fails_the_signature():
    data = b.edit(BUNDLE, lambda d: d["manifest"].update(request_ref="dsr_0002"))
    check = bundle.verify_bundle(data)

    assert (check.code, check.where, check.message) == (
        codes.BUNDLE_SIGNATURE,
        "signature",
        f"the signature over the manifest does not verify with key {b.KEY_ID}",
    )


def test_a_key_id_that_is_not_the_public_keys_fails_the_signature():
    def change(doc):
        doc["manifest"]["server_key"]["key_id"] = b.OTHER_KEY_ID

    check = bundle.verify_bundle(b.edit(BUNDLE, change, resign=True))

    assert (check.code, check.where) == (codes.BUNDLE_SIGNATURE, "manifest.server_key.key_id")


def test_a_bundle_re_signed_by_another_key_verifies_only_untrusted():
    def change(doc):
        doc["manifest"]["server_key"] = {
            "alg": "ed25519",
            "key_id": b.OTHER_KEY_ID,
            "public_key": b.OTHER_PUBLIC.hex(),
        }

    forged = b.edit(BUNDLE, change, resign=True, private=b.OTHER_PRIVATE)

    assert bundle.verify_bundle(forged).ok
    assert not bundle.verify_bundle(forged).trusted
    assert bundle.verify_bundle(forged, [b.PUBLIC.hex()]).code == codes.BUNDLE_UNTRUSTED_KEY


def test_it_names_a_missing_member():
    name = f"traces/{'b2' * 32}/report.json"
    check = bundle.verify_bundle(b.edit(BUNDLE, lambda d: d["members"].pop(name)))

    assert (check.code, check.where, check.message) == (
        codes.BUNDLE_MEMBER_MISSING,
        name,
        f"manifest.members[4] lists {name}; absent",
    )


def test_it_names_an_extra_member():
    name = f"traces/{'c3' * 32}/data.json"
    check = bundle.verify_bundle(b.edit(BUNDLE, lambda d: d["members"].update({name: {}})))

    assert (check.code, check.where, check.message) == (
        codes.BUNDLE_MEMBER_EXTRA,
        name,
        "not listed in the manifest",
    )


def test_it_names_an_extra_member_whose_name_is_not_ascii():
    check = bundle.verify_bundle(b.edit(BUNDLE, lambda d: d["members"].update({"é.json": 1})))

    assert (check.code, check.where) == (codes.BUNDLE_MEMBER_EXTRA, "é.json")


def _tampered_event(rows):
    record = bundle.event_record(rows[2])
    record["payload"] = {**record["payload"], "n": 99}
    events = [bundle.event_record(r) for r in rows]
    events[2] = record
    return events


def test_it_names_a_ledger_event_whose_hash_does_not_recompute():
    rows = b.ledger()
    data = b.build(events=_tampered_event(rows))
    check = bundle.verify_bundle(data)

    assert (check.code, check.where) == (codes.BUNDLE_EVENT_HASH, "ledger/events.json: event seq 3")
    assert check.message.startswith("CHAIN_HASH: event 3's hash does not recompute")


def test_it_names_a_ledger_event_signed_by_a_key_the_bundle_does_not_hold():
    rows = b.ledger()
    rows[2] = b.row(3, rows[1][chain.FIELDS.index("hash")], key=(b.OTHER_KEY_ID, b.OTHER_PRIVATE))
    rows[3] = b.ledger()[3]
    check = bundle.verify_bundle(b.build(rows=rows, with_checkpoint=False))

    assert (check.code, check.where) == (
        codes.BUNDLE_EVENT_SIGNATURE,
        "ledger/events.json: event seq 3",
    )
    assert (
        check.message == f"CHAIN_KEY_UNKNOWN: event 3 is signed by unknown key {b.OTHER_KEY_ID!r}"
    )


def test_it_names_a_ledger_event_with_a_bad_server_signature():
    events = [bundle.event_record(r) for r in b.ledger()]
    events[1]["server_signature"] = events[2]["server_signature"]
    check = bundle.verify_bundle(b.build(events=events))

    assert (check.code, check.where) == (
        codes.BUNDLE_EVENT_SIGNATURE,
        "ledger/events.json: event seq 2",
    )
    assert check.message.startswith("CHAIN_SIGNATURE: event 2's server signature does not verify")


def test_it_checks_an_actor_signature_with_the_member_key_in_the_bundle():
    check = bundle.verify_bundle(b.build(member_keys={b.MEMBER_KEY_ID: b.OTHER_PUBLIC.hex()}))

    assert (check.code, check.where) == (
        codes.BUNDLE_EVENT_SIGNATURE,
        "ledger/events.json: event seq 4",
    )
    assert check.message.startswith("CHAIN_ACTOR_SIGNATURE: event 4's actor signature")


def test_it_names_a_key_used_outside_its_window():
    late = [
        bundle.server_key_record(
            chain.ServerKey(b.KEY_ID, b.PUBLIC, valid_from=b.T0, revoked_at=b.T0)
        )
    ]
    check = bundle.verify_bundle(b.build(server_keys=late))

    assert (check.code, check.where) == (
        codes.BUNDLE_EVENT_SIGNATURE,
        "ledger/events.json: event seq 1",
    )
    assert check.message.startswith("CHAIN_KEY_WINDOW:")


def test_it_names_events_out_of_order():
    events = [bundle.event_record(r) for r in b.ledger()]
    events[1], events[2] = events[2], events[1]
    check = bundle.verify_bundle(b.build(events=events))

    assert (check.code, check.where, check.message) == (
        codes.BUNDLE_CHAIN,
        "ledger/events.json: event seq 2",
        "follows event 3 (not in order)",
    )


def test_it_names_consecutive_events_that_are_not_linked():
    rows = b.ledger()
    rows[2] = b.row(3, "sha256:" + "00" * 32)
    check = bundle.verify_bundle(b.build(rows=rows[:3], with_checkpoint=False))

    assert (check.code, check.where) == (codes.BUNDLE_CHAIN, "ledger/events.json: event seq 3")
    assert check.message == f"its prev_hash is not event 2's hash {rows[1][-2]}"


def test_events_that_are_not_consecutive_need_no_link():
    rows = b.ledger()
    check = bundle.verify_bundle(b.build(rows=[rows[0], rows[2]], with_checkpoint=False))

    assert check.ok, check


def test_it_names_an_event_the_checkpoint_does_not_reach():
    rows = b.ledger()
    data = b.build(rows=rows, checkpoint=b.checkpoint(rows[:3]))
    check = bundle.verify_bundle(data)

    assert (check.code, check.where, check.message) == (
        codes.BUNDLE_CHAIN,
        "ledger/events.json: event seq 4",
        "after the checkpoint's head (size 3)",
    )


def test_it_names_a_head_event_that_is_not_the_checkpoints():
    rows = b.ledger()
    point = b.checkpoint(rows)
    point["checkpoint"]["head_hash"] = rows[2][-2]
    point["signature"] = signing.sign(b.PRIVATE, jcs(point["checkpoint"]))
    check = bundle.verify_bundle(b.build(rows=rows, checkpoint=point))

    assert (check.code, check.where, check.message) == (
        codes.BUNDLE_CHAIN,
        "ledger/events.json: event seq 4",
        "the head event is not the checkpoint's head",
    )


def test_every_failure_code_is_reached_by_a_test_in_this_module_or_the_tlog_one():
    here = Path(__file__)
    source = here.read_text(encoding="utf-8") + here.with_name("test_bundle_tlog.py").read_text(
        encoding="utf-8"
    )
    for code in codes.BUNDLE_FAILURES:
        assert f"codes.{code}" in source, code


# --- building -------------------------------------------------------------------------------


def test_an_event_record_is_the_stored_row_with_its_time_as_text():
    rows = b.ledger()
    record = bundle.event_record(rows[3])

    assert record["created_at"] == "2026-01-02T03:04:09.678901Z"
    assert record["actor"] == "adam"
    assert "actor_label" not in record
    assert set(record) == {("actor" if f == "actor_label" else f) for f in chain.FIELDS}


@pytest.mark.parametrize(
    ("over", "message"),
    [
        ({"request_ref": ""}, "request_ref must be a non-empty string"),
        ({"subject_refs": ()}, "subject_refs must be non-empty strings"),
        (
            {"traces": (bundle.TraceEvidence("t", "md5:00", "x"),)},
            "file_sha256 'md5:00' is not sha256:<64 lower-case hex>",
        ),
        (
            {"traces": (bundle.TraceEvidence("t", b.FILE_A, "x", values=[{"value": 1}]),)},
            "trace t value 0: fields must be",
        ),
        (
            {"traces": (bundle.TraceEvidence("t", b.FILE_A, "x", report={"x": float("nan")}),)},
            "member traces/.*/report.json is not canonical JSON",
        ),
    ],
)
def test_it_refuses_inputs_a_bundle_cannot_hold(over, message):
    with pytest.raises(ValueError, match=message):
        b.build(**over)


def test_it_refuses_a_signer_that_changes_keys():
    calls = []

    def fickle(message):
        calls.append(message)
        private = b.PRIVATE if len(calls) == 1 else b.OTHER_PRIVATE
        return b.signer(private)(message)

    with pytest.raises(ValueError, match="the signer changed keys"):
        bundle.build_bundle(b.inputs(), fickle)
    assert calls[0] == bundle.KEY_PROBE


JSON = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**53), 2**53) | st.text(max_size=8),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner, max_size=3)
    ),
    max_leaves=8,
)


def _paths(value, prefix=()):
    yield prefix
    if isinstance(value, dict):
        for key, child in value.items():
            yield from _paths(child, (*prefix, key))
    elif isinstance(value, list):
        for i, child in enumerate(value):
            yield from _paths(child, (*prefix, i))


PATHS = [p for p in _paths(json.loads(SMALL)) if p]


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.sampled_from(PATHS), JSON)
def test_a_signed_bundle_of_any_shape_is_checked_without_crashing(path, value):
    def change(doc):
        node = doc
        for step in path[:-1]:
            node = node[step]
        node[path[-1]] = value

    check = bundle.verify_bundle(b.edit(SMALL, change, resign=True))

    assert check.ok or check.code in codes.BUNDLE_FAILURES
