"""MACE reflective logs (seed 003): files made by MACE's reference rules
(``tests/replay/mace_reference.py``), verified by the console (``core.formats.mace``).

Every verdict with its exact code, field (``broke_at``), expected and observed values; the
expected values are computed by the reference rules, never written by hand.
"""

from __future__ import annotations

import copy
import io
import json
from datetime import UTC, datetime
from pathlib import Path

import pytest

from core import errors
from core.canonical import mace_v1
from core.formats import detect_format, formats
from core.formats import mace as mace_format
from core.formats.protocol import VerifyContext
from core.replay.signatures import HMAC_SHA256, KeyMaterial, StaticKeyRing
from tests.replay import mace_reference as ref

FIXTURES = Path(__file__).parent / "fixtures" / "mace"
KEYS = StaticKeyRing([KeyMaterial(ref.KEY_ID, HMAC_SHA256, secret=ref.SECRET)])
FMT = formats().get(mace_format.FORMAT)


def _files(made: dict) -> dict[str, bytes]:
    return {f"{s['snapshot_id']}.json": ref.dumps(s) for s in made["snapshots"].values()}


def check(made: dict, *, keys=KEYS, mode: str = "audit", inputs: dict | None = None, at=None):
    """The console's report on a made job, through the format's adapter."""
    ctx = VerifyContext(
        mode=mode, keys=keys, at=at, inputs=_files(made) if inputs is None else inputs
    )
    parsed = FMT.parse(io.BytesIO(ref.dumps(made["log"])), "log.json", ctx)
    return FMT.verify(parsed, "log.json", ctx).to_json(), parsed


def refusal(data: bytes, name: str = "log.json") -> dict:
    ctx = VerifyContext()
    try:
        FMT.parse(io.BytesIO(data), name, ctx)
    except errors.ReplayError as exc:
        return FMT.refused(exc, name, ctx).to_json()
    raise AssertionError("parsed")


def resign_snapshot(snap: dict) -> None:
    """A tamperer who recomputes the ids but has no key: the signature stays the old one."""
    snap["config_hash"] = ref.sha256_hex(ref.canonical_json_serialize(snap["body"]))
    snap["snapshot_id"] = ref.sha256_hex(f"{snap['config_hash']}:1:{snap['seed_namespace']}")


# --- pass --------------------------------------------------------------------------------


def test_it_verifies_a_log_mace_signed_with_its_snapshots():
    made = ref.job()
    report, parsed = check(made)
    assert report["status"] == "ok"
    assert report["error_code"] is None
    assert report["format"] == "mace-reflective-log"
    assert report["trace_id"] == "log_s1"
    assert [c["name"] for c in report["checks"]] == [
        "format",
        "required_snapshots",
        "snapshots",
        "event_ids",
        "immutable_subpayload",
        "signature",
        "replayable",
    ]
    assert all(c["ok"] for c in report["checks"])
    assert report["replayable"] is True
    assert report["snapshot_ids"] == [made["snapshots"][k]["snapshot_id"] for k in ref.KINDS]
    assert sorted(parsed.snapshots) == sorted(ref.KINDS)
    assert "iteration_trace" in report["unprotected_fields"]
    assert "percept (except percept.text)" in report["unprotected_fields"]
    assert "log_id" not in report["unprotected_fields"]


def test_it_signs_byte_for_byte_as_the_reference_does():
    made = ref.job()
    sub = made["log"]["immutable_subpayload"]
    assert mace_v1(sub) == ref.canonical_json_serialize(sub).encode("utf-8")
    assert mace_format.hmac_hex(ref.SECRET, sub) == made["log"]["signature"]
    for snap in made["snapshots"].values():
        assert mace_format.config_hash_of(snap["body"]) == snap["config_hash"]
        assert (
            mace_format.snapshot_id_of(snap["config_hash"], 1, snap["seed_namespace"])
            == snap["snapshot_id"]
        )


def test_it_verifies_the_golden_files_as_generated():
    log = json.loads((FIXTURES / "log_s1.json").read_bytes())
    # pinned once from the reference rules (tests/replay/mace_reference.py) and checked
    # then against MACE's own signing.sign_payload (same hex), then reviewed
    assert log["signature"] == "2a520801a2567b2ca045a997adf23b2dda0d73bd2e7681f7334460108aedceb1"
    inputs = {p.name: p.read_bytes() for p in FIXTURES.glob("*.json") if p.name != "log_s1.json"}
    report, _ = check({"log": log, "snapshots": {}}, inputs=inputs)
    assert report["status"] == "ok"


def test_it_detects_a_mace_log_by_its_keys():
    made = ref.job()
    assert detect_format(ref.dumps(made["log"]), "anything.json") == "mace-reflective-log"


def test_it_refuses_a_snapshot_file_uploaded_alone():
    snap = ref.job()["snapshots"]["router"]
    data = ref.dumps(snap)
    assert detect_format(data, "x.json") == "mace-reflective-log"
    report = refusal(data, "x.json")
    assert report["error_code"] == errors.MALFORMED_TRACE
    assert report["message"] == (
        "x.json: a MACE snapshot file, not a reflective log; upload it together with the log "
        "that names it"
    )


def test_it_lists_the_snapshot_files_a_log_names():
    made = ref.job()
    names = FMT.input_names(io.BytesIO(ref.dumps(made["log"])), "log.json")
    assert names == [f"{made['snapshots'][k]['snapshot_id']}.json" for k in ref.KINDS]


# --- tampers -----------------------------------------------------------------------------


def test_it_names_an_edited_final_output_outside_the_signature():
    made = ref.job()
    made["log"]["final_output"]["text"] = "Goodbye!"
    report, _ = check(made)
    assert report["status"] == "tamper_detected"
    assert report["error_code"] == errors.INTEGRITY_FAILURE
    assert report["broke_at"] == "immutable_subpayload.final_output_text"
    assert report["expected"] == "Goodbye!"
    assert report["observed"] == "Hello!"
    assert report["message"] == (
        "immutable_subpayload.final_output_text: the signed value is not the log's "
        "final_output.text"
    )


def test_it_refuses_a_sub_payload_edited_without_the_key():
    made = ref.job()
    old = made["log"]["signature"]
    made["log"]["percept"]["text"] = "Hello world!"
    made["log"]["immutable_subpayload"]["percept_text"] = "Hello world!"
    report, _ = check(made)
    assert report["error_code"] == errors.INTEGRITY_FAILURE
    assert report["broke_at"] == "signature"
    assert report["expected"] == ref.sign_payload(made["log"]["immutable_subpayload"])
    assert report["observed"] == old
    assert report["message"] == "signature: HMAC-SHA256 by reflective_log_key does not verify"


def test_it_refuses_a_flipped_signature():
    made = ref.job()
    sig = made["log"]["signature"]
    made["log"]["signature"] = ("0" if sig[0] != "0" else "1") + sig[1:]
    report, _ = check(made)
    assert report["error_code"] == errors.INTEGRITY_FAILURE
    assert report["broke_at"] == "signature"
    assert report["expected"] == sig
    assert report["observed"] == made["log"]["signature"]


def test_it_refuses_a_snapshot_whose_body_was_edited():
    made = ref.job()
    snap = made["snapshots"]["router"]
    recorded = snap["config_hash"]
    snap["body"]["depth_level"] = 2
    report, parsed = check(made)
    assert report["error_code"] == errors.INTEGRITY_FAILURE
    assert report["broke_at"] == "router_snapshot.config_hash"
    assert report["expected"] == ref.sha256_hex(ref.canonical_json_serialize(snap["body"]))
    assert report["observed"] == recorded
    assert report["message"] == (
        "router_snapshot.config_hash: the body does not hash to the recorded config_hash"
    )
    assert "router" not in parsed.snapshots  # never stored under an id it does not have
    assert "privacy" in parsed.snapshots


def test_it_refuses_a_snapshot_file_with_one_byte_flipped():
    made = ref.job()
    snap = made["snapshots"]["router"]
    inputs = _files(made)
    name = f"{snap['snapshot_id']}.json"
    assert inputs[name].count(b"sem_only") == 1
    inputs[name] = inputs[name].replace(b"sem_only", b"sem_onlz")
    report, _ = check(made, inputs=inputs)
    assert report["error_code"] == errors.INTEGRITY_FAILURE
    assert report["broke_at"] == "router_snapshot.config_hash"
    flipped = dict(snap["body"], memory_strategy="sem_onlz")
    assert report["expected"] == ref.sha256_hex(ref.canonical_json_serialize(flipped))
    assert report["observed"] == snap["config_hash"]


def test_it_refuses_a_snapshot_rehashed_without_the_key():
    made = ref.job()
    snap = made["snapshots"]["privacy"]
    snap["body"]["redact"] = []
    resign_snapshot(snap)
    made["log"]["privacy_snapshot_id"] = snap["snapshot_id"]
    ref.sign_log(made["log"])
    report, _ = check(made)
    assert report["error_code"] == errors.INTEGRITY_FAILURE
    assert report["broke_at"] == "privacy_snapshot.signature"
    signed = {k: v for k, v in snap.items() if k not in ("signature", "signature_key_id")}
    assert report["expected"] == ref.sign_payload(signed)
    assert report["observed"] == snap["signature"]


def test_it_refuses_a_snapshot_id_that_does_not_recompute():
    made = ref.job()
    snap = made["snapshots"]["governance"]
    real = snap["snapshot_id"]
    snap["snapshot_id"] = ref.sha256_hex("forged")
    inputs = _files(made)
    inputs[f"{real}.json"] = inputs.pop(f"{snap['snapshot_id']}.json")
    report, _ = check(made, inputs=inputs)
    assert report["error_code"] == errors.INTEGRITY_FAILURE
    assert report["broke_at"] == "governance_snapshot.snapshot_id"
    assert report["expected"] == real
    assert report["observed"] == ref.sha256_hex("forged")


def test_it_refuses_a_file_of_another_kind_in_a_snapshots_place():
    made = ref.job()
    inputs = _files(made)
    router = made["snapshots"]["router"]["snapshot_id"]
    privacy = made["snapshots"]["privacy"]["snapshot_id"]
    inputs[f"{router}.json"] = inputs[f"{privacy}.json"]
    report, _ = check(made, inputs=inputs)
    assert report["error_code"] == errors.INTEGRITY_FAILURE
    assert report["broke_at"] == "router_snapshot.kind"
    assert (report["expected"], report["observed"]) == ("router", "privacy")


def test_it_refuses_a_missing_snapshot_file():
    made = ref.job()
    sid = made["snapshots"]["brainstate"]["snapshot_id"]
    inputs = _files(made)
    del inputs[f"{sid}.json"]
    report, _ = check(made, inputs=inputs)
    assert report["status"] == "refused"
    assert report["error_code"] == errors.MISSING_SNAPSHOT
    assert report["broke_at"] == "brainstate_snapshot_id"
    assert report["expected"] == f"{sid}.json"
    assert report["missing"] == [f"brainstate:{sid}"]
    assert report["message"] == (
        f"brainstate_snapshot_id: snapshot file {sid}.json is not there (1 of 5 missing: "
        "brainstate)"
    )


def test_it_refuses_a_log_that_names_no_snapshot_of_a_kind():
    made = ref.job()
    made["log"]["privacy_snapshot_id"] = None
    report, _ = check(made)
    assert report["error_code"] == errors.MISSING_SNAPSHOT
    assert report["broke_at"] == "privacy_snapshot_id"
    assert report["message"] == "the log names no privacy_snapshot_id"


def test_it_refuses_an_event_id_that_does_not_recompute():
    made = ref.job()
    made["log"]["event_refs"][1]["event_id"] = ref.sha256_hex("s1:2:council_vote")
    report, _ = check(made)
    assert report["error_code"] == errors.INTEGRITY_FAILURE
    assert report["broke_at"] == 2
    assert report["expected"] == ref.sha256_hex("s1:2:action_request")
    assert report["observed"] == ref.sha256_hex("s1:2:council_vote")
    assert report["message"].startswith("event_refs[1].event_id: does not recompute as")


def test_it_refuses_events_out_of_order():
    made = ref.job()
    refs = made["log"]["event_refs"]
    refs[0], refs[1] = refs[1], refs[0]
    report, _ = check(made)
    assert report["error_code"] == errors.INTEGRITY_FAILURE
    assert report["broke_at"] == 1
    assert (report["expected"], report["observed"]) == ("> 2", "1")


def test_it_refuses_a_replayable_claim_without_persisted_outputs():
    made = ref.job()
    made["log"]["agent_outputs"] = made["log"]["agent_outputs"][:1]
    report, _ = check(made)
    assert report["error_code"] == errors.MISSING_PERSISTED_AGENT_OUTPUT
    assert report["broke_at"] == "REPLAYABLE"
    assert (report["expected"], report["observed"]) == ("false", "true")
    assert report["missing"] == ["agent_output:it_1"]


def test_it_accepts_an_honest_non_replayable_log_in_audit_and_refuses_it_in_production():
    made = ref.job(persisted=False)
    audit, _ = check(made)
    assert audit["status"] == "ok"
    assert audit["replayable"] is False
    production, _ = check(made, mode="production")
    assert production["error_code"] == errors.MISSING_PERSISTED_AGENT_OUTPUT
    assert production["broke_at"] == "it_0"
    assert production["expected"] == "out_s1_0"


def test_it_finds_a_persisted_output_that_differs_in_production():
    made = ref.job()
    made["log"]["agent_outputs"][1]["output"]["text"] = "answer 1 tampered"
    report, _ = check(made, mode="production")
    assert report["status"] == "diverged"
    assert report["error_code"] == errors.REPLAY_DIVERGENCE
    assert report["broke_at"] == 1
    assert report["divergences"] == [
        {
            "step": 1,
            "step_id": "it_1",
            "path": "/iteration_trace/1/agent_output/text",
            "before": "answer 1 café",
            "after": "answer 1 tampered",
        }
    ]
    ok, _ = check(ref.job(), mode="production")
    assert ok["status"] == "ok"
    assert ok["checks"][-1]["name"] == "persisted_outputs"


# --- keys ---------------------------------------------------------------------------------


def test_it_refuses_precisely_when_the_key_is_not_registered():
    report, _ = check(ref.job(), keys=StaticKeyRing())
    assert report["status"] == "refused"
    assert report["error_code"] == errors.UNKNOWN_KEY
    assert report["broke_at"] == "selfrep_snapshot.signature"
    assert report["message"] == (
        "selfrep_snapshot.signature: no HMAC-SHA256 key 'reflective_log_key' in the "
        "verification-key registry; register MACE's secret with `keys add-hmac "
        "reflective_log_key --secret-file F`"
    )


def test_it_refuses_a_log_verified_with_the_wrong_key():
    wrong = b"another-secret-0123456789abcdef"
    keys = StaticKeyRing([KeyMaterial(ref.KEY_ID, HMAC_SHA256, secret=wrong)])
    made = ref.job()
    report, _ = check(made, keys=keys)
    assert report["error_code"] == errors.INTEGRITY_FAILURE
    assert report["broke_at"] == "selfrep_snapshot.signature"
    snap = made["snapshots"]["selfrep"]
    signed = {k: v for k, v in snap.items() if k not in ("signature", "signature_key_id")}
    assert report["expected"] == ref.sign_payload(signed, wrong)
    assert report["observed"] == snap["signature"]


def test_it_refuses_a_signature_made_by_a_revoked_key():
    revoked = datetime(2024, 1, 1, tzinfo=UTC)
    keys = StaticKeyRing(
        [KeyMaterial(ref.KEY_ID, HMAC_SHA256, secret=ref.SECRET, revoked_at=revoked)]
    )
    report, _ = check(ref.job(), keys=keys, at=datetime(2025, 1, 1, tzinfo=UTC))
    assert report["error_code"] == errors.INTEGRITY_FAILURE
    assert report["message"] == (
        "selfrep_snapshot.signature: key reflective_log_key was revoked at "
        "2024-01-01T00:00:00+00:00"
    )


@pytest.mark.parametrize("placeholder", ["mock_signature", "", "PLACEHOLDER", "0" * 64])
def test_it_refuses_a_placeholder_signature(placeholder):
    made = ref.job()
    made["log"]["signature"] = placeholder
    report, _ = check(made)
    assert report["error_code"] == errors.INTEGRITY_FAILURE
    assert report["broke_at"] == "signature"
    assert report["expected"] == ref.sign_payload(made["log"]["immutable_subpayload"])
    assert report["observed"] == placeholder
    assert report["message"] == (
        f"signature: {placeholder!r} is a placeholder, not an HMAC-SHA256 signature "
        "(64 lower-case hex)"
    )


def test_it_names_a_signature_made_with_maces_development_fallback_secret():
    made = ref.job()
    fallback = f"test_secret_for_{ref.KEY_ID}".encode()
    made["log"]["signature"] = ref.sign_payload(made["log"]["immutable_subpayload"], fallback)
    report, _ = check(made)
    assert report["error_code"] == errors.INTEGRITY_FAILURE
    assert report["broke_at"] == "signature"
    assert report["observed"] == made["log"]["signature"]
    assert report["expected"] == ref.sign_payload(made["log"]["immutable_subpayload"])
    assert (
        "development fallback secret ('test_secret_for_reflective_log_key')" in (report["message"])
    )


def test_it_refuses_a_registered_key_that_is_maces_fallback_secret():
    fallback = f"test_secret_for_{ref.KEY_ID}".encode()
    keys = StaticKeyRing([KeyMaterial(ref.KEY_ID, HMAC_SHA256, secret=fallback)])
    report, _ = check(ref.job(), keys=keys)
    assert report["error_code"] == errors.INTEGRITY_FAILURE
    assert "a placeholder key" in report["message"]


# --- versions and malformed input ---------------------------------------------------------


def test_it_refuses_a_newer_log_schema():
    made = ref.job()
    made["log"]["schema_version"] = 2
    report = refusal(ref.dumps(made["log"]))
    assert report["error_code"] == errors.UNSUPPORTED_SCHEMA_VERSION
    assert report["broke_at"] == "schema_version"
    assert (report["expected"], report["observed"]) == ("1", "2")


def test_it_refuses_a_newer_snapshot_schema():
    made = ref.job()
    made["snapshots"]["router"]["schema_version"] = 2
    report, _ = check(made)
    assert report["error_code"] == errors.UNSUPPORTED_SCHEMA_VERSION
    assert report["broke_at"] == "router_snapshot"
    assert (report["expected"], report["observed"]) == ("1", "2")


@pytest.mark.parametrize(
    ("mutate", "message"),
    [
        (lambda d: d.pop("log_id"), "log.json: log_id is missing"),
        (
            lambda d: d.update(iteration_trace={}),
            "log.json: iteration_trace must be list, got dict",
        ),
        (lambda d: d.update(REPLAYABLE="yes"), "log.json: REPLAYABLE must be bool, got str"),
        (
            lambda d: d["iteration_trace"][0].pop("router_output"),
            "log.json: iteration_trace[0]: router_output is missing",
        ),
        (
            lambda d: d.update(schema_version="1"),
            "log.json: schema_version must be a positive integer, got '1'",
        ),
        (
            lambda d: d["event_refs"][0].update(sequence_index=True),
            "log.json: event_refs[0]: sequence_index must be int, got bool",
        ),
    ],
)
def test_it_refuses_a_malformed_log(mutate, message):
    doc = copy.deepcopy(ref.job()["log"])
    mutate(doc)
    report = refusal(ref.dumps(doc))
    assert report["error_code"] == errors.MALFORMED_TRACE
    assert report["message"] == message


@pytest.mark.parametrize(
    ("data", "start"),
    [
        (b"[1, 2]", "log.json: a MACE file is a JSON object, not list"),
        (b'{"log_id": "a", "log_id": "b"}', "log.json: duplicate key 'log_id'"),
        (b'{"log_id": NaN}', "log.json: "),
        (b'{"log_id": "a"', "log.json: truncated JSON"),
        (b"\xef\xbb\xbf{}", "log.json: starts with a UTF-8 byte-order mark"),
    ],
)
def test_it_refuses_bad_json(data, start):
    report = refusal(data)
    assert report["error_code"] == errors.MALFORMED_TRACE
    assert report["message"].startswith(start)


def test_it_refuses_a_malformed_snapshot_file():
    made = ref.job()
    inputs = _files(made)
    sid = made["snapshots"]["selfrep"]["snapshot_id"]
    inputs[f"{sid}.json"] = b'{"snapshot_id": "x"'
    report, _ = check(made, inputs=inputs)
    assert report["error_code"] == errors.MALFORMED_TRACE
    assert report["broke_at"] == "selfrep_snapshot"
    assert report["message"].startswith(f"selfrep snapshot {sid}.json: truncated JSON")


# --- compare and panel --------------------------------------------------------------------


def test_it_compares_two_logs_of_the_same_job_field_by_field():
    a = ref.job()
    b = ref.job()
    b["log"]["final_output"]["text"] = "Hi!"
    b["log"]["iteration_trace"][1]["router_output"]["decision_id"] = "dec_other"
    ref.sign_log(b["log"])
    ctx = VerifyContext()
    pa = FMT.parse(io.BytesIO(ref.dumps(a["log"])), "a.json", ctx)
    pb = FMT.parse(io.BytesIO(ref.dumps(b["log"])), "b.json", ctx)
    diffs = {d.path: (d.kind, d.before, d.after) for d in FMT.compare(pa, pb)}
    assert diffs["/final_output/text"] == ("changed", "Hello!", "Hi!")
    assert diffs["/immutable_subpayload/final_output_text"] == ("changed", "Hello!", "Hi!")
    assert diffs["/iteration_trace/1/router_output/decision_id"] == (
        "changed",
        "dec_s1_1",
        "dec_other",
    )
    assert diffs["/signature"][0] == "changed"
    assert set(diffs) == {
        "/final_output/text",
        "/immutable_subpayload/final_output_text",
        "/iteration_trace/1/router_output/decision_id",
        "/signature",
    }


def test_its_panel_shows_iterations_and_router_decisions():
    made = ref.job()
    parsed = FMT.parse(io.BytesIO(ref.dumps(made["log"])), "log.json", VerifyContext())
    panel = FMT.panel(parsed)
    assert panel["iterations"] == "2"
    assert panel["router decision"] == "dec_s1 -> profile_agent"
    assert panel["router decisions per iteration"] == (
        "it_0: dec_s1_0 -> profile_agent; it_1: dec_s1_1 -> profile_agent"
    )
    assert panel["REPLAYABLE"] == "true"
    assert panel["router_snapshot_id"] == made["snapshots"]["router"]["snapshot_id"]


@pytest.mark.parametrize("namespace", ["s1", "naïve-ﬁle", "日本"], ids=["ascii", "nfkd", "cjk"])
def test_a_snapshots_signed_bytes_are_mace_v1_of_it_without_its_signature(namespace):
    snap = ref.snapshot("router", {"x": [1.5, "ﬁ", {"b": None}]}, namespace=namespace)
    part = {k: v for k, v in snap.items() if k not in ("signature", "signature_key_id")}
    expected = ref.canonical_json_serialize(part).encode("utf-8")
    assert mace_format.snapshot_signed_bytes(snap, mace_v1(snap["body"])) == expected
    assert mace_format.snapshot_signed_bytes(snap) == expected


def test_the_bench_runs_and_the_console_verifies_every_generated_log():
    import subprocess
    import sys

    root = Path(__file__).resolve().parents[2]
    done = subprocess.run(
        [sys.executable, str(root / "bench" / "bench_format_mace.py"), "--files", "40"],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        cwd=root,
    )
    assert done.returncode == 0, done.stderr
    assert "MACE reflective logs: 40 logs (+200 snapshot files" in done.stdout
    for row in ("reference", "console", "console / reference", "peak traced allocation"):
        assert row in done.stdout


def test_a_sandbox_verification_is_never_authoritative():
    sandbox, _ = check(ref.job(), mode="sandbox")
    audit, _ = check(ref.job())
    assert (sandbox["status"], sandbox["authoritative"]) == ("ok", False)
    assert (audit["status"], audit["authoritative"]) == ("ok", True)


def test_an_approved_force_continue_goes_past_a_divergent_iteration_non_authoritatively():
    made = ref.job(iterations=3)
    made["log"]["agent_outputs"][1]["output"]["text"] = "answer 1 tampered"
    ctx = VerifyContext(mode="production", keys=KEYS, inputs=_files(made), continue_past=(1,))
    parsed = FMT.parse(io.BytesIO(ref.dumps(made["log"])), "log.json", ctx)
    report = FMT.verify(parsed, "log.json", ctx).to_json()
    assert (report["status"], report["error_code"]) == ("ok", None)
    assert (report["force_continued"], report["authoritative"]) == (True, False)
    assert report["divergences"] == [
        {
            "step": 1,
            "step_id": "it_1",
            "path": "/iteration_trace/1/agent_output/text",
            "before": "answer 1 café",
            "after": "answer 1 tampered",
            "force_continued": True,
        }
    ]
    assert report["checks"][-1]["detail"].endswith(
        "force-continued past an approved divergence (non-authoritative)"
    )
    made["log"]["agent_outputs"][2]["output"]["confidence"] = 0.5
    ctx.inputs = _files(made)
    parsed = FMT.parse(io.BytesIO(ref.dumps(made["log"])), "log.json", ctx)
    second = FMT.verify(parsed, "log.json", ctx).to_json()
    assert (second["error_code"], second["broke_at"]) == (errors.REPLAY_DIVERGENCE, 2)


def test_it_refuses_nesting_deeper_than_its_bound_and_a_file_over_its_size():
    doc = ref.job()["log"]
    deep: dict = {}
    node = deep
    for _ in range(70):
        node["x"] = {}
        node = node["x"]
    doc["percept"]["context"] = deep
    report = refusal(json.dumps(doc).encode())
    assert report["error_code"] == errors.MALFORMED_TRACE
    assert report["message"] == "log.json: nesting deeper than 64 levels"
    big = b" " * (mace_format.MAX_LOG_BYTES + 1)
    report = refusal(big)
    assert report["message"] == f"log.json: larger than {mace_format.MAX_LOG_BYTES} bytes"
