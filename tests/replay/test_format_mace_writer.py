"""MACE reflective logs exactly as MACE's writer persists them (no job id or seed, no iteration
trace, no snapshot ids), verified by the console (``core.formats.mace``).

The files under ``fixtures/mace/writer/`` were written by MACE's own writer and signing code
(see the README there); expected signatures are recomputed by the independent reference rules
(``tests/replay/mace_reference.py``), never written by hand.
"""

from __future__ import annotations

import copy
import io
import json
from pathlib import Path

import pytest

from core import errors
from core.canonical import mace_v1
from core.formats import detect_format, formats
from core.formats import mace as mace_format
from core.formats.mace.signing import hmac_hex
from core.formats.protocol import VerifyContext
from core.replay.signatures import HMAC_SHA256, KeyMaterial, StaticKeyRing
from tests.replay import mace_reference as ref

WRITER = Path(__file__).parent / "fixtures" / "mace" / "writer"
KEYS = StaticKeyRing([KeyMaterial(ref.KEY_ID, HMAC_SHA256, secret=ref.SECRET)])
FMT = formats().get(mace_format.FORMAT)
CLEAN_ID = "19ec5ffdbeccb82fb3b2192d20a358d77cfd97e5729dc7a013f0befd41b862e4"
NOT_REPLAYABLE = (
    "not replayable: no job seed, no snapshots (a reflective log as MACE's writer persists "
    "it records neither job_id and job_seed nor the iteration trace and snapshot ids seed 003 "
    "§3 replays from)"
)


def data(name: str) -> bytes:
    return (WRITER / name).read_bytes()


def doc(name: str) -> dict:
    return json.loads(data(name))


def check(raw: bytes, *, keys=KEYS, mode: str = "audit", name: str = "log.json") -> dict:
    """The console's report on one file, through the format's adapter (nothing beside it)."""
    ctx = VerifyContext(mode=mode, keys=keys)
    try:
        parsed = FMT.parse(io.BytesIO(raw), name, ctx)
    except errors.ReplayError as exc:
        return FMT.refused(exc, name, ctx).to_json()
    return FMT.verify(parsed, name, ctx).to_json()


def expected_signature(name: str) -> str:
    """What the registered key signs over the file's recorded sub-payload (reference rules)."""
    return ref.sign_payload(doc(name)["immutable_subpayload"])


# --- what MACE wrote, byte for byte --------------------------------------------------------


@pytest.mark.parametrize("name", ["clean.json", "clean_b.json"])
def test_the_files_are_maces_canonical_form_and_its_hmac_byte_for_byte(name):
    raw = data(name)
    log = json.loads(raw)
    # the writer persists canonical_json_serialize(log): mace-v1 writes the same bytes
    assert mace_v1(log) == raw
    # and its signature is the console's HMAC over mace-v1 of the sub-payload
    assert hmac_hex(ref.SECRET, log["immutable_subpayload"]) == log["signature"]
    assert ref.sign_payload(log["immutable_subpayload"]) == log["signature"]
    assert detect_format(raw[:4096], name) == mace_format.FORMAT


def test_the_sub_payload_is_signed_after_nfkd_as_mace_signs_it():
    log = doc("clean.json")
    # MACE NFKD-normalises string values before signing and persisting: the ligature and the
    # precomposed letter the percept was written with are gone from the file
    assert log["percept"]["text"] == "What is my name? \u2014 cafe\u0301 file"
    assert log["immutable_subpayload"]["percept_text"] == log["percept"]["text"]


# --- verdicts ------------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["clean.json", "clean_b.json"])
def test_a_log_as_maces_writer_persists_it_verifies_and_is_not_replayable(name):
    log = doc(name)
    report = check(data(name))
    assert (report["status"], report["error_code"], report["authoritative"]) == ("ok", None, True)
    assert report["message"] == (
        f"MACE log {log['log_id']} verifies: its signature over the immutable sub-payload; "
        "not replayable (no job seed, no snapshots)"
    )
    assert [(c["name"], c["ok"], c["detail"]) for c in report["checks"]] == [
        (
            "format",
            True,
            "a MACE reflective log as MACE's writer persists it (no job_id, job_seed, "
            "iteration_trace or snapshot ids)",
        ),
        (
            "immutable_subpayload",
            True,
            "log_id, percept.text, final_output.text and router_decision.decision_id are "
            "the signed values",
        ),
        (
            "signature",
            True,
            "HMAC-SHA256 by reflective_log_key over the immutable sub-payload verifies",
        ),
        ("replayable", True, NOT_REPLAYABLE),
    ]
    assert report["replayable"] is False
    assert report["missing"] == [
        "job_seed",
        "selfrep_snapshot_id",
        "brainstate_snapshot_id",
        "router_snapshot_id",
        "privacy_snapshot_id",
        "governance_snapshot_id",
    ]
    assert (report["trace_id"], report["snapshot_ids"]) == (log["log_id"], [])


#: file -> (check, code, message, broke_at, expected, observed); None: computed in the test
TAMPERED = {
    "edited_output.json": (
        "immutable_subpayload",
        "immutable_subpayload.final_output_text: the signed value is not the log's "
        "final_output.text",
        "immutable_subpayload.final_output_text",
        "Your name is Eve.",
        "Your name is Ada.",
    ),
    "edited_percept.json": (
        "immutable_subpayload",
        "immutable_subpayload.percept_text: the signed value is not the log's percept.text",
        "immutable_subpayload.percept_text",
        "What is my password?",
        "What is my name? \u2014 cafe\u0301 file",
    ),
    "subpayload_consistent.json": (
        "signature",
        "signature: HMAC-SHA256 by reflective_log_key does not verify",
        "signature",
        None,
        None,
    ),
    "wrong_key.json": (
        "signature",
        "signature: HMAC-SHA256 by reflective_log_key does not verify",
        "signature",
        None,
        None,
    ),
    "placeholder_signature.json": (
        "signature",
        "signature: 'mock_signature' is a placeholder, not an HMAC-SHA256 signature "
        "(64 lower-case hex)",
        "signature",
        None,
        "mock_signature",
    ),
    "fallback_secret.json": (
        "signature",
        "signature: made with MACE's development fallback secret "
        "('test_secret_for_reflective_log_key'), a placeholder key, not the registered key "
        "'reflective_log_key'",
        "signature",
        None,
        None,
    ),
    "reflective_sample.json": (
        "immutable_subpayload",
        "immutable_subpayload.percept_text is missing: MACE's writer signs log_id, "
        "percept_text, final_output_text, router_decision_id, so the log's percept.text is "
        "unsigned",
        "immutable_subpayload.percept_text",
        "Hello world",
        None,
    ),
}


@pytest.mark.parametrize("name", sorted(TAMPERED))
def test_a_tampered_or_badly_signed_log_is_an_integrity_failure(name):
    check_name, message, broke_at, expected, observed = TAMPERED[name]
    if check_name == "signature":
        expected = expected_signature(name)
        observed = observed or doc(name)["signature"]
    report = check(data(name))
    assert (report["status"], report["error_code"]) == ("tamper_detected", errors.INTEGRITY_FAILURE)
    assert report["message"] == message
    assert (report["broke_at"], report["expected"], report["observed"]) == (
        broke_at,
        expected,
        observed,
    )
    assert [(c["name"], c["ok"]) for c in report["checks"]][-1] == (check_name, False)
    assert report["checks"][0]["name"] == "format"


@pytest.mark.parametrize("name", ["edited_output.json", "edited_percept.json"])
def test_maces_own_check_passes_an_edited_log_the_console_refuses(name):
    """MACE's tools/verify_signatures.py checks the recorded sub-payload alone."""
    log = doc(name)
    assert ref.verify_signature(log["immutable_subpayload"], log["signature"])
    assert check(data(name))["error_code"] == errors.INTEGRITY_FAILURE


def test_a_key_the_registry_does_not_hold_is_refused_by_name():
    report = check(data("clean.json"), keys=StaticKeyRing([]))
    assert (report["status"], report["error_code"], report["broke_at"]) == (
        "refused",
        errors.UNKNOWN_KEY,
        "signature",
    )
    assert report["message"] == (
        "signature: no HMAC-SHA256 key 'reflective_log_key' in the verification-key registry; "
        "register MACE's secret with `keys add-hmac reflective_log_key --secret-file F`"
    )
    assert (report["expected"], report["observed"]) == (None, doc("clean.json")["signature"])


def test_the_sample_names_a_key_the_registry_does_not_hold_once_its_sub_payload_is_whole():
    sample = doc("reflective_sample.json")
    sample["immutable_subpayload"].update(percept_text="Hello world", router_decision_id="dec_001")
    report = check(json.dumps(sample).encode())
    assert (report["error_code"], report["broke_at"]) == (errors.UNKNOWN_KEY, "signature")
    assert report["message"].startswith("signature: no HMAC-SHA256 key 'test_key' in the ")


def test_production_replay_refuses_it_as_missing_its_snapshots():
    report = check(data("clean.json"), mode="production")
    assert (report["status"], report["error_code"], report["broke_at"]) == (
        "refused",
        errors.MISSING_SNAPSHOT,
        "selfrep_snapshot_id",
    )
    assert report["message"] == f"production replay refuses this log, {NOT_REPLAYABLE}"


def test_a_sandbox_verification_of_it_is_not_authoritative():
    report = check(data("clean.json"), mode="sandbox")
    assert (report["status"], report["authoritative"]) == ("ok", False)


# --- shape ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("mutate", "message"),
    [
        (lambda d: d.pop("signature"), "log.json: signature is missing"),
        (lambda d: d.pop("timestamp"), "log.json: timestamp is missing"),
        (lambda d: d.update(percept="hi"), "log.json: percept must be dict, got str"),
        (lambda d: d.update(council_votes={}), "log.json: council_votes must be a list"),
        (lambda d: d.update(brainstate_after=[]), "log.json: brainstate_after must be an object"),
        # a log with any of seed 003's replay fields must carry them all
        (lambda d: d.update(job_id="job_1"), "log.json: job_seed is missing"),
        (lambda d: d.update(REPLAYABLE=False), "log.json: job_id is missing"),
    ],
)
def test_it_refuses_a_malformed_writer_log(mutate, message):
    log = doc("clean.json")
    mutate(log)
    report = check(json.dumps(log).encode())
    assert (report["status"], report["error_code"]) == ("refused", errors.MALFORMED_TRACE)
    assert report["message"] == message


def test_a_seed_003_log_still_needs_every_replay_field():
    log = copy.deepcopy(ref.job()["log"])
    log.pop("job_id")
    report = check(ref.dumps(log))
    assert (report["error_code"], report["message"]) == (
        errors.MALFORMED_TRACE,
        "log.json: job_id is missing",
    )


# --- panel, compare, stored facts ----------------------------------------------------------


def parsed(name: str) -> mace_format.Log:
    return FMT.parse(io.BytesIO(data(name)), name, VerifyContext())


def test_its_panel_shows_what_it_recorded_and_why_it_is_not_replayable():
    decision = doc("clean.json")["router_decision"]["decision_id"]
    assert FMT.panel(parsed("clean.json")) == {
        "log_id": CLEAN_ID,
        "timestamp": doc("clean.json")["timestamp"],
        "signature_key_id": "reflective_log_key",
        "percept": "What is my name? \u2014 cafe\u0301 file",
        "router decision": f"{decision} -> profile_agent",
        "agent outputs": "profile_agent: Your name is Ada.",
        "council votes": "1 (1 approve)",
        "memory reads": "user/profile/name",
        "memory writes": "user/profile/last_seen",
        "final output": "Your name is Ada.",
        "replayable": "no: no job seed, no snapshots (a log as MACE's writer persists it)",
    }


def test_two_logs_compare_field_by_field():
    diffs = FMT.compare(parsed("clean.json"), parsed("edited_output.json"))
    assert [(d.path, d.kind, d.before, d.after) for d in diffs] == [
        ("/final_output/text", "changed", "Your name is Ada.", "Your name is Eve.")
    ]


def test_its_stored_facts_name_no_job_and_no_snapshot():
    log = parsed("clean.json")
    report = FMT.verify(log, "clean.json", VerifyContext(keys=KEYS))
    facts = FMT.facts(log, report, VerifyContext())
    assert (facts.trace_id, facts.job_id, facts.job_seed, facts.runtime_name) == (
        CLEAN_ID,
        "",
        "",
        "mace",
    )
    assert (facts.runtime_version, facts.started_at) == (
        "stage0_stub",
        doc("clean.json")["timestamp"],
    )
    assert (facts.event_count, facts.step_count, facts.snapshots, facts.missing_outputs) == (
        0,
        0,
        [],
        [],
    )
    assert facts.required_snapshot_ids == [
        {
            "kind": f"mace-{kind}",
            "snapshot_id": None,
            "path": "",
            "why": "not named: a log as MACE's writer persists it has no job seed and no snapshots",
        }
        for kind in ref.KINDS
    ]
