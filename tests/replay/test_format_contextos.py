"""ContextOS traces (seed 004): the console agrees with the seed's own code on every file.

The fixtures under fixtures/contextos were made by make_fixtures.py: records by the
registered loop, every chain hash by reference.js (the seed's verify-chain.ts under Node.js),
the expected verdicts by reference.js verify / diff. Nothing here is hand-predicted except
the console's own codes and messages.
"""

from __future__ import annotations

import io
import json
import subprocess
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from core.errors import (
    CAPABILITY_NOT_FOUND,
    INTEGRITY_FAILURE,
    MALFORMED_TRACE,
    MISSING_SNAPSHOT,
    REPLAY_DIVERGENCE,
    RESULT_MISMATCH,
    UNSUPPORTED_SCHEMA_VERSION,
)
from core.formats import contextos as cx
from core.formats import detect_format, format_names
from core.formats.contextos import reader as cx_reader
from core.formats.protocol import VerifyContext
from tests.published import node_or_skip
from tests.replay.fixtures.make_golden import golden_key_ring

HERE = Path(__file__).resolve().parent / "fixtures" / "contextos"
EXPECTED = {
    json.loads(line)["file"]: json.loads(line)
    for line in (HERE / "expected.jsonl").read_text().splitlines()
}
EXPECTED_DIFF = {
    json.loads(line)["file"]: json.loads(line)["verdict"]
    for line in (HERE / "expected_diff.jsonl").read_text().splitlines()
}
PACK = HERE / "refund-triage@1.4.0.pack.json"
KG = HERE / "kg-snapshot.kg.json"
TRACE_ID = "4bf92f3577b34da6a3ce929d0e0e4736"


def load(name: str) -> cx.ContextosTrace:
    return cx.loads((HERE / name).read_bytes(), name)


def inputs_for(trace: cx.ContextosTrace, pack: Path = PACK, kg: Path = KG) -> cx.Inputs:
    return cx.find_inputs(trace, {pack.name: pack.read_bytes(), kg.name: kg.read_bytes()})


def replayed(name: str, **kw: Any) -> dict[str, Any]:
    trace = load(name)
    report = cx.replay(trace, inputs_for(trace, **kw), keys=golden_key_ring())
    return report.to_json()


def verified(name: str) -> dict[str, Any]:
    return cx.verify(load(name)).to_json()


# --- the chain agrees with the seed's code on every file -------------------------------------


@pytest.mark.parametrize("name", sorted(set(EXPECTED) - {"version_2.trace.json"}))
def test_it_computes_the_chain_as_the_seeds_code_does(name):
    trace = load(name)
    want = EXPECTED[name]
    assert cx.verify_chain(trace, cx.REFERENCE).verdict() == want["reference"]
    assert cx.verify_chain(trace, cx.ALTERNATIVE).verdict() == want["alternative"]
    assert cx.record_hash(trace.head["decision_record"]) == want["record_hash"]


def test_the_checked_in_verdicts_are_what_reference_js_prints_now(tmp_path):
    node = node_or_skip()
    files = [str(HERE / name) for name in sorted(EXPECTED)]
    out = subprocess.run(
        [node, str(HERE / "reference.js"), "verify", *files], capture_output=True, check=True
    )
    assert out.stdout.decode() == (HERE / "expected.jsonl").read_text()


@pytest.mark.parametrize("name", sorted(set(EXPECTED) - {"version_2.trace.json"}))
def test_the_one_walk_writes_the_profiles_bytes_and_finds_the_unprotected_fields(name):
    from core.canonical import contextos

    for entry in cx.entries(load(name)):
        dropped: set[str] = set()
        assert cx.reference_bytes(entry, dropped) == contextos(entry.payload)
        assert dropped == cx.unprotected_paths(entry)


def test_small_and_streamed_reads_give_the_same_trace(monkeypatch):
    data = (HERE / "tamper_reordered.trace.json").read_bytes()
    whole = cx.parse(io.BytesIO(data), "t")
    monkeypatch.setattr(cx_reader, "SMALL_DOCUMENT_BYTES", 0)
    streamed = cx.parse(io.BytesIO(data), "t")
    assert whole.head == streamed.head
    assert list(whole.envelopes) == list(streamed.envelopes)


# --- verify: the report of each file ----------------------------------------------------------

VERIFY_CASES = {
    # name: (status, code, broke_at, rule)
    "pass.trace.json": ("ok", None, None, "reference"),
    "pass_alternative.trace.json": ("ok", None, None, "alternative"),
    "tamper_invoke.trace.json": ("tamper_detected", INTEGRITY_FAILURE, 0, "reference"),
    "tamper_envelope_hash.trace.json": ("tamper_detected", INTEGRITY_FAILURE, 0, "reference"),
    "tamper_result.trace.json": ("tamper_detected", INTEGRITY_FAILURE, 1.5, "reference"),
    "tamper_call_hash.trace.json": ("tamper_detected", INTEGRITY_FAILURE, 2, "reference"),
    "tamper_result_hash_missing.trace.json": (
        "tamper_detected",
        INTEGRITY_FAILURE,
        2.5,
        "reference",
    ),
    "tamper_chain_prev_hash.trace.json": ("tamper_detected", INTEGRITY_FAILURE, 5, "reference"),
    "tamper_reordered.trace.json": ("tamper_detected", INTEGRITY_FAILURE, 1, "reference"),
    "tamper_dropped_envelope.trace.json": ("tamper_detected", INTEGRITY_FAILURE, 1, "reference"),
    # neither rule: the alternative verified the longer prefix
    "tamper_result_alternative.trace.json": (
        "tamper_detected",
        INTEGRITY_FAILURE,
        2.5,
        "alternative",
    ),
    "tamper_evidence_refs_alternative.trace.json": (
        "tamper_detected",
        INTEGRITY_FAILURE,
        5,
        "alternative",
    ),
    # the seed's own tamper example: evidence_refs is outside the reference rule's hash
    "tamper_evidence_refs.trace.json": ("ok", None, None, "reference"),
    "unprotected_output_edit.trace.json": ("ok", None, None, "reference"),
}


@pytest.mark.parametrize("name", sorted(VERIFY_CASES))
def test_it_verifies_each_file_with_the_exact_code_broke_at_expected_and_observed(name):
    status, code, broke_at, rule = VERIFY_CASES[name]
    report = verified(name)
    assert (report["status"], report["error_code"], report["broke_at"]) == (status, code, broke_at)
    assert report["contextos"]["rule"] == rule
    assert report["contextos"]["record_hash"] == EXPECTED[name]["record_hash"]
    want = EXPECTED[name][rule]
    if code is None:
        assert want == {"ok": True}
        assert report["contextos"]["status"] is None  # byte_equal needs a replay
    else:
        assert report["contextos"]["status"] == "tamper_detected"
        assert report["contextos"]["chain"] == want
        assert (report["expected"], report["observed"]) == (want["expected"], want["observed"])


def test_it_names_the_half_step_and_both_hashes_of_a_tampered_tool_result():
    report = verified("tamper_result.trace.json")
    want = EXPECTED["tamper_result.trace.json"]["reference"]
    assert [c["name"] for c in report["checks"]] == ["format", "chain"]
    assert report["checks"][-1]["detail"] == (
        "the chain breaks at entry 1.5 (tool_result) under the reference rule (the other rule "
        f"verified a shorter prefix or the same): computed {want['expected']}, recorded "
        f"{want['observed']}"
    )


def test_it_says_which_fields_the_reference_rule_leaves_unprotected():
    report = verified("pass.trace.json")
    fields = report["unprotected_fields"]
    assert fields[:6] == [
        "/trace_id",
        "/schema_version",
        "/pack_version",
        "/kg_snapshot_id",
        "/audit/chain_root_hash",
        "/audit/signed_by",
    ]
    # request.kind and result.kind are spelt like a payload key ("kind"): hashed
    assert "/invoke/request/amount" in fields
    assert "/invoke/request/kind" not in fields
    assert "/tool_envelopes/*/result/output" in fields
    assert "/tool_envelopes/*/result/kind" not in fields
    assert "/decision_record/evidence_refs" in fields
    assert "/tool_envelopes/*/call/payload_hash" in fields


def test_the_alternative_rule_leaves_only_the_never_hashed_fields_unprotected():
    report = verified("pass_alternative.trace.json")
    assert report["unprotected_fields"] == list(cx.NEVER_HASHED)
    assert report["checks"][1]["detail"].endswith(cx.RULES["alternative"])


# --- replay ----------------------------------------------------------------------------------


def test_a_clean_replay_is_byte_equal_with_the_seeds_record_hash():
    report = replayed("pass.trace.json")
    want = EXPECTED_DIFF["pass.trace.json"]
    assert (report["status"], report["error_code"]) == ("ok", None)
    assert report["contextos"]["status"] == "byte_equal"
    assert report["contextos"]["verdict"] == want
    assert report["contextos"]["record_hash"] == want["record_hash"]
    assert [c["name"] for c in report["checks"]] == [
        "format",
        "pack",
        "kg_snapshot",
        "chain",
        "record",
        "loop",
        "decision_record",
    ]
    assert all(c["ok"] for c in report["checks"])


def test_the_seeds_evidence_refs_tamper_diverges_at_evidence_refs():
    report = replayed("tamper_evidence_refs.trace.json")
    want = EXPECTED_DIFF["tamper_evidence_refs.trace.json"]
    assert (report["status"], report["error_code"]) == ("diverged", RESULT_MISMATCH)
    assert report["contextos"]["status"] == "diverged"
    assert report["contextos"]["diverged_at"] == "evidence_refs" == want["diverged_at"]
    assert report["contextos"]["diff"] == want["diff"]
    assert report["broke_at"] == "evidence_refs"
    assert report["divergences"] == [
        {
            "step": "decision_record",
            "step_id": "evidence_refs",
            "path": "/evidence_refs",
            "before": ["kg:f9", "kg:f3", "order:ord-1042", "history:cust-88"],
            "after": ["kg:f1", "kg:f3", "order:ord-1042", "history:cust-88"],
        }
    ]


def test_a_resealed_record_diverges_on_every_changed_field():
    report = replayed("diverged_resealed.trace.json")
    want = EXPECTED_DIFF["diverged_resealed.trace.json"]
    assert report["contextos"]["diverged_at"] == "outputs" == want["diverged_at"]
    assert report["contextos"]["diff"] == want["diff"]
    assert sorted(report["contextos"]["diff"]) == ["outputs", "status"]
    assert [d["path"] for d in report["divergences"]] == ["/outputs", "/status"]
    assert report["expected"] == report["contextos"]["record_hash"]
    assert report["observed"] == report["contextos"]["replayed_record_hash"]


def test_a_difference_outside_the_reference_hash_is_byte_equal_and_named():
    report = replayed("unprotected_output_edit.trace.json")
    assert report["contextos"]["status"] == "byte_equal"
    assert report["contextos"]["verdict"] == EXPECTED_DIFF["unprotected_output_edit.trace.json"]
    assert report["contextos"]["unprotected_differences"] == [
        "/outputs/tools/check_history/refunds_90d"
    ]
    assert "/outputs/tools/check_history/refunds_90d" in report["checks"][-1]["detail"]


def test_a_call_the_trace_does_not_record_fails_the_loop():
    report = replayed("missing_call_resealed.trace.json")
    assert (report["status"], report["error_code"]) == ("diverged", REPLAY_DIVERGENCE)
    assert report["broke_at"] == "req-7f3a-2"
    assert report["contextos"]["missing_call"] == "req-7f3a-2"
    assert report["contextos"]["diverged_at"] == "transcripts"
    assert report["message"].startswith("replay diverged: no recorded result for req-7f3a-2")


def test_a_tampered_chain_is_tamper_detected_before_the_loop_runs():
    report = replayed("tamper_result.trace.json")
    assert (report["status"], report["error_code"], report["broke_at"]) == (
        "tamper_detected",
        INTEGRITY_FAILURE,
        1.5,
    )
    assert report["contextos"]["status"] == "tamper_detected"
    assert "loop" not in [c["name"] for c in report["checks"]]


REFUSALS = {
    # trace, pack, kg: code, broke_at, message
    ("pass.trace.json", None, KG): (
        MISSING_SNAPSHOT,
        "pack",
        "refusing to replay: the pack refund-triage@1.4.0 was not retained",
    ),
    ("pass.trace.json", PACK, None): (
        MISSING_SNAPSHOT,
        "kg_snapshot",
        "refusing to replay: the KG snapshot "
        f"{json.loads(KG.read_text())['snapshot_id']} was not retained",
    ),
    ("unpinned_pack.trace.json", PACK, KG): (
        MISSING_SNAPSHOT,
        "pack",
        "refusing to replay: the pack 'refund-triage@latest' is unpinned (a pinned pack is "
        "name@MAJOR.MINOR.PATCH)",
    ),
    ("unretained_pack.trace.json", PACK, KG): (
        MISSING_SNAPSHOT,
        "pack",
        "refusing to replay: the pack refund-triage@1.3.9 was not retained",
    ),
    ("unpinned_kg.trace.json", PACK, KG): (
        MISSING_SNAPSHOT,
        "kg_snapshot",
        "refusing to replay: the KG snapshot 'kg-latest' is unpinned (a pinned snapshot is its "
        "content address sha256:<64 hex>)",
    ),
    ("unretained_kg.trace.json", PACK, KG): (
        MISSING_SNAPSHOT,
        "kg_snapshot",
        f"refusing to replay: the KG snapshot sha256:{'1' * 64} was not retained",
    ),
    ("pass.trace.json", HERE / "inputs/unsigned" / PACK.name, KG): (
        MISSING_SNAPSHOT,
        "pack",
        "refusing to replay: the pack refund-triage@1.4.0 is unsigned",
    ),
    ("pass.trace.json", PACK, HERE / "inputs/unsigned" / KG.name): (
        MISSING_SNAPSHOT,
        "kg_snapshot",
        f"refusing to replay: the KG snapshot {json.loads(KG.read_text())['snapshot_id']} "
        "is unsigned",
    ),
    ("pass.trace.json", HERE / "inputs/badsig" / PACK.name, KG): (
        INTEGRITY_FAILURE,
        "pack",
        "refusing to replay: the pack refund-triage@1.4.0 signature does not verify: "
        "HMAC-SHA256 by golden does not verify",
    ),
}


@pytest.mark.parametrize("case", sorted(REFUSALS, key=str))
def test_replay_refuses_naming_which_input(case):
    name, pack, kg = case
    code, broke_at, message = REFUSALS[case]
    trace = load(name)
    files = {p.name: p.read_bytes() for p in (pack, kg) if p is not None}
    report = cx.replay(trace, cx.find_inputs(trace, files), keys=golden_key_ring()).to_json()
    assert (report["error_code"], report["broke_at"], report["message"]) == (
        code,
        broke_at,
        message,
    )
    assert report["status"] == ("tamper_detected" if code == INTEGRITY_FAILURE else "refused")


def test_replay_refuses_a_pack_whose_envelope_hash_differs():
    edited = HERE / "inputs/edited" / PACK.name
    report = replayed("pass.trace.json", pack=edited)
    doc = json.loads(edited.read_text())
    recomputed = cx.pack_envelope_hash(doc["contextos_pack"])
    assert (report["error_code"], report["broke_at"]) == (INTEGRITY_FAILURE, "pack")
    assert (report["expected"], report["observed"]) == (recomputed, doc["envelope_hash"])
    assert recomputed != doc["envelope_hash"]
    assert report["message"] == (
        "refusing to replay: the pack refund-triage@1.4.0's envelope hash differs: recorded "
        f"{doc['envelope_hash']}, recomputed {recomputed}"
    )
    assert report["contextos"]["status"] == "tamper_detected"


def test_replay_refuses_a_kg_snapshot_whose_content_no_longer_hashes_to_its_pin():
    edited = HERE / "inputs/edited" / KG.name
    report = replayed("pass.trace.json", kg=edited)
    doc = json.loads(edited.read_text())
    assert (report["error_code"], report["broke_at"]) == (INTEGRITY_FAILURE, "kg_snapshot")
    assert report["expected"] == cx.kg_snapshot_id(doc["contextos_kg_snapshot"])
    assert report["observed"] == doc["snapshot_id"]
    assert report["message"] == (
        f"refusing to replay: the KG snapshot {doc['snapshot_id']}'s envelope hash differs: its "
        f"content hashes to {report['expected']}"
    )


def test_replay_refuses_a_kg_snapshot_whose_signature_does_not_verify():
    trace = load("pass.trace.json")
    doc = json.loads(KG.read_text())
    doc["signature"]["value"] = "0" * 64
    files = {PACK.name: PACK.read_bytes(), KG.name: json.dumps(doc).encode()}
    report = cx.replay(trace, cx.find_inputs(trace, files), keys=golden_key_ring()).to_json()
    assert (report["error_code"], report["broke_at"], report["message"]) == (
        INTEGRITY_FAILURE,
        "kg_snapshot",
        f"refusing to replay: the KG snapshot {doc['snapshot_id']} signature does not verify: "
        "HMAC-SHA256 by golden does not verify",
    )
    assert report["contextos"]["status"] == "tamper_detected"


def test_replay_says_what_it_found_of_each_input():
    checks = {c["name"]: c for c in replayed("pass.trace.json")["checks"]}
    pack = json.loads(PACK.read_text())
    kg = json.loads(KG.read_text())
    assert checks["pack"] == {
        "name": "pack",
        "ok": True,
        "detail": "pack refund-triage@1.4.0 retained, signed, envelope hash "
        f"{pack['envelope_hash']}",
    }
    assert checks["kg_snapshot"] == {
        "name": "kg_snapshot",
        "ok": True,
        "detail": f"KG snapshot {kg['snapshot_id']} retained and signed",
    }


def test_replay_refuses_a_pack_whose_loop_is_not_registered(monkeypatch):
    monkeypatch.delitem(cx.LOOPS, "refund-triage@1")
    report = replayed("pass.trace.json")
    assert (report["error_code"], report["broke_at"]) == (CAPABILITY_NOT_FOUND, "loop")
    assert report["message"].startswith(
        "pack refund-triage@1.4.0 names the loop 'refund-triage@1', which is not registered"
    )


def test_a_loop_is_registered_once_under_name_at_version():
    with pytest.raises(ValueError, match="already registered"):
        cx.register_loop("refund-triage@1", cx.refund_triage_v1)
    with pytest.raises(ValueError, match="name@version"):
        cx.register_loop("refund-triage", cx.refund_triage_v1)


# --- versions and malformed input ------------------------------------------------------------

MALFORMED = {
    "version_2.trace.json": (
        UNSUPPORTED_SCHEMA_VERSION,
        "version_2.trace.json: schema_version 2 is newer than this console supports (1)",
    ),
    "malformed_version_string.trace.json": (
        MALFORMED_TRACE,
        "malformed_version_string.trace.json: schema_version must be a positive integer, not '1'",
    ),
    "malformed_truncated.trace.json": (
        MALFORMED_TRACE,
        "malformed_truncated.trace.json: truncated in tool_envelopes[1]",
    ),
    "malformed_duplicate_key.trace.json": (
        MALFORMED_TRACE,
        "malformed_duplicate_key.trace.json: duplicate key 'audit'",
    ),
    "malformed_nan.trace.json": (
        MALFORMED_TRACE,
        "malformed_nan.trace.json: invoke: NaN is not valid in a hashed JSON value",
    ),
    "malformed_bom.trace.json": (
        MALFORMED_TRACE,
        "malformed_bom.trace.json: starts with a byte-order mark",
    ),
    "malformed_no_status.trace.json": (MALFORMED_TRACE, "decision_record: status is missing"),
    "malformed_null_outputs.trace.json": (MALFORMED_TRACE, "decision_record: outputs is null"),
    "malformed_no_call_id.trace.json": (
        MALFORMED_TRACE,
        "tool_envelopes[0].call.call_id: must be a string, not null",
    ),
    "malformed_envelopes_object.trace.json": (
        MALFORMED_TRACE,
        "malformed_envelopes_object.trace.json: expected tool_envelopes: an array, found '{'",
    ),
}


@pytest.mark.parametrize("name", sorted(MALFORMED))
def test_it_refuses_bad_input_with_the_exact_code_and_where(name):
    code, message = MALFORMED[name]
    with pytest.raises(cx.ReplayError) as caught:
        load(name)
    assert (caught.value.code, caught.value.message) == (code, message)


def test_schema_version_1_is_read():
    assert verified("version_1.trace.json")["status"] == "ok"


def test_a_version_refusal_names_expected_and_observed():
    with pytest.raises(cx.ReplayError) as caught:
        load("version_2.trace.json")
    assert (caught.value.expected, caught.value.observed) == ("1", "2")


# --- streaming and bounded ---------------------------------------------------------------------


def test_it_reads_the_same_through_tiny_chunks_and_a_spooled_file(monkeypatch):
    monkeypatch.setattr(cx_reader, "_CHUNK", 7)
    monkeypatch.setattr(cx_reader, "SPOOL_AFTER_BYTES", 10)
    monkeypatch.setattr(cx_reader, "SMALL_DOCUMENT_BYTES", 0)  # the streaming read, not the whole
    for name in ("pass.trace.json", "tamper_result.trace.json", "tamper_evidence_refs.trace.json"):
        trace = cx.parse(io.BytesIO((HERE / name).read_bytes()), name)
        assert trace.envelopes._spool is not None
        assert cx.verify_chain(trace).verdict() == EXPECTED[name]["reference"]
        trace.envelopes.close()
    with pytest.raises(cx.ReplayError, match="truncated in tool_envelopes"):
        cx.parse(io.BytesIO((HERE / "malformed_truncated.trace.json").read_bytes()), "t")


def test_a_number_cut_by_a_chunk_boundary_is_read_whole(monkeypatch):
    data = (HERE / "pass.trace.json").read_bytes()
    monkeypatch.setattr(cx_reader, "SMALL_DOCUMENT_BYTES", 0)
    for size in range(3, 40):
        monkeypatch.setattr(cx_reader, "_CHUNK", size)
        trace = cx.parse(io.BytesIO(data), "t")
        assert trace.head["invoke"]["request"]["amount"] == 42.5
        assert cx.verify_chain(trace).ok


def test_an_escape_cut_by_a_chunk_boundary_is_read_whole(monkeypatch):
    # a \uXXXX escape (and a surrogate pair's two) cut anywhere by the end of the buffer was
    # refused "Invalid \uXXXX escape" instead of read on
    doc = json.loads((HERE / "pass.trace.json").read_text())
    doc["invoke"]["request"]["note"] = "\x00é😀" * 40
    data = json.dumps(doc).encode()  # ASCII: every one of them a \u escape
    assert data.count(b"\\u") == 160
    monkeypatch.setattr(cx_reader, "SMALL_DOCUMENT_BYTES", 0)
    for size in range(3, 60):
        monkeypatch.setattr(cx_reader, "_CHUNK", size)
        trace = cx.parse(io.BytesIO(data), "t")
        assert trace.head["invoke"]["request"]["note"] == "\x00é😀" * 40
    bad = data.replace(b"\\u00e9", b"\\u00zz", 1)
    with pytest.raises(cx.ReplayError) as caught:
        cx.parse(io.BytesIO(bad), "t")
    assert caught.value.message == "t: invoke: Invalid \\uXXXX escape"


# --- one interface --------------------------------------------------------------------------


def test_it_is_a_registered_format_detected_by_its_keys_before_the_native_trace_id():
    assert "contextos-trace" in format_names()
    head = (HERE / "pass.trace.json").read_bytes()
    assert head.lstrip().startswith(b'{\n  "trace_id"')
    assert detect_format(head, "pass.trace.json") == "contextos-trace"
    assert detect_format(b'{"pack_version": "x"}', "upload.bin") == "contextos-trace"
    assert detect_format(b'{"format": "replay-trace"}', "t.json") == "replay-trace"
    assert detect_format(b"not json", "x.contextos.json") == "contextos-trace"


def test_the_adapter_verifies_and_replays_with_the_files_uploaded_beside_the_trace():
    from core.formats import formats

    fmt = formats().get("contextos-trace")
    ctx = VerifyContext(
        keys=golden_key_ring(), inputs={PACK.name: PACK.read_bytes(), KG.name: KG.read_bytes()}
    )
    with (HERE / "pass.trace.json").open("rb") as fh:
        parsed = fmt.parse(fh, "pass.trace.json", ctx)
    verify = fmt.verify(parsed, "pass.trace.json", ctx)
    assert (verify.status, verify.replayable, verify.missing) == ("ok", True, [])
    assert fmt.replay(parsed, "pass.trace.json", ctx).contextos["status"] == "byte_equal"
    facts = fmt.facts(parsed, verify, ctx)
    assert [r["kind"] for r in facts.required_snapshot_ids] == ["contextos-pack", "contextos-kg"]
    assert [s.kind for s in facts.snapshots] == ["contextos-pack", "contextos-kg"]
    assert facts.job_id == "refund:ord-1042"
    assert fmt.panel(parsed)["decision_key"] == "refund:ord-1042"
    with (HERE / "diverged_resealed.trace.json").open("rb") as fh:
        other = fmt.parse(fh, "d.trace.json", VerifyContext())
    paths = [d.path for d in fmt.compare(parsed, other)]
    assert "/decision_record/status" in paths
    assert "/decision_record/outputs/decision" in paths


def test_without_its_inputs_a_trace_verifies_but_is_not_replayable():
    from core.formats import formats

    fmt = formats().get("contextos-trace")
    ctx = VerifyContext()
    with (HERE / "pass.trace.json").open("rb") as fh:
        parsed = fmt.parse(fh, "pass.trace.json", ctx)
    report = fmt.verify(parsed, "pass.trace.json", ctx)
    assert (report.status, report.replayable) == ("ok", False)
    assert report.missing == [
        "pack refund-triage@1.4.0",
        f"kg {json.loads(KG.read_text())['snapshot_id']}",
    ]
    replay = fmt.replay(parsed, "pass.trace.json", ctx)
    assert (replay.error_code, replay.broke_at) == (MISSING_SNAPSHOT, "pack")


def test_the_bench_runs_and_both_verifiers_find_every_generated_file_intact():
    import sys

    bench = Path(__file__).resolve().parents[2] / "bench" / "bench_format_contextos.py"
    done = subprocess.run(
        [sys.executable, str(bench), "--files", "20", "--entries", "300"],
        capture_output=True,
        text=True,
        timeout=300,
        check=True,
    )
    lines = done.stdout.splitlines()
    assert lines[1].startswith(
        "console's reference chain: compiled (core/formats/contextos/_compiled.c, SHA-256 by "
    )
    assert lines[3].split()[-1] == "20"  # the console: 20 intact
    assert lines[4].split()[-1] == "20"  # reference.js: 20 intact
    assert "status ok" in done.stdout
    assert "seed reference.js: intact True" in done.stdout


# --- the one walk equals the profile on any JSON -----------------------------------------------

KEYS = st.sampled_from(
    ["kind", "call", "ctx", "req", "result", "dr", "__proto__", "a", "é", "😀", "a/b~c", "10"]
)
JSON = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**60), max_value=2**60)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=5),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(KEYS, inner, max_size=5),
    max_leaves=25,
)


@settings(max_examples=300, deadline=None, database=None)
@given(kind=st.sampled_from(sorted(cx._PLISTS)), a=JSON, b=JSON)
def test_the_one_walk_equals_the_contextos_profile_on_any_json(kind, a, b):
    from core.canonical import contextos

    names = [k for k in cx._PLISTS[kind] if k != "kind"]
    payload = {"kind": kind, **dict(zip(names, [a, b], strict=False))}
    entry = cx.Entry(0, kind, payload, "")
    dropped: set[str] = set()
    assert cx.reference_bytes(entry, dropped) == contextos(payload)
    assert dropped == cx.unprotected_paths(entry)


def deep(depth: int) -> bytes:
    doc = json.loads((HERE / "pass.trace.json").read_text())
    doc["invoke"]["request"]["kind"] = "DEEP"
    return json.dumps(doc).replace('"DEEP"', "[" * depth + "]" * depth).encode()


@pytest.mark.parametrize("depth", [62, 800, 5000])
def test_nesting_past_the_limit_is_refused_naming_where(depth):
    # invoke is level 2, request 3, kind's arrays from 4: the 62nd array is level 65 (issue
    # 20: one limit, MAX_DEPTH, not whatever the decoder's recursion reached on that stack)
    data = deep(depth)
    with pytest.raises(cx.ReplayError) as caught:
        cx.loads(data, "deep.json")
    column = data.index(b"[" * depth) + 61 + 1
    assert (caught.value.code, caught.value.message) == (
        MALFORMED_TRACE,
        f"deep.json: nesting deeper than 64 levels at line 1 column {column} "
        "(/invoke/request/kind" + "/0" * 61 + ")",
    )


@pytest.mark.parametrize("depth", [30, 61])
def test_deep_but_readable_nesting_is_a_precise_verdict_never_a_crash(depth):
    trace = cx.loads(deep(depth), "deep.json")
    report = cx.replay(trace, inputs_for(trace), keys=golden_key_ring()).to_json()
    assert report["error_code"] in {INTEGRITY_FAILURE, MALFORMED_TRACE}
    assert report["broke_at"] == 0


@pytest.mark.parametrize("small", [True, False])
def test_a_lone_surrogate_is_refused_in_a_small_or_a_streamed_read(monkeypatch, small):
    if not small:
        monkeypatch.setattr(cx_reader, "SMALL_DOCUMENT_BYTES", 0)
    data = (HERE / "pass.trace.json").read_bytes().replace(b'"acme"', b'"\\ud800acme"', 1)
    with pytest.raises(cx.ReplayError) as caught:
        cx.parse(io.BytesIO(data), "s.json")
    assert caught.value.code == MALFORMED_TRACE
    assert caught.value.message.startswith(
        "s.json: the string '\\ud800acme' holds a lone UTF-16 surrogate \\ud800"
    )
    # a surrogate pair is one character, read as such
    pair = (HERE / "pass.trace.json").read_bytes().replace(b'"acme"', b'"\\ud83d\\ude00"', 1)
    assert cx.parse(io.BytesIO(pair), "p.json").head["invoke"]["run_context"]["tenant"] == "😀"


# --- the fast writers (orjson) equal the exact ones ---------------------------------------------

STRINGS = st.text(max_size=6) | st.sampled_from(["\x00", "\x1f", "\x7f", "\u2028", "\ud800", "😀"])
FAST_JSON = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**60), max_value=2**60)
    | st.sampled_from([2**53, -(2**53), 2**53 + 1, 0.5, 1.0, 1e21, 5e-324])
    | st.floats(allow_nan=False, allow_infinity=False)
    | STRINGS,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(KEYS | STRINGS, inner, max_size=5),
    max_leaves=25,
)


@settings(max_examples=400, deadline=None, database=None)
@given(record=st.dictionaries(KEYS | STRINGS, FAST_JSON, max_size=8))
def test_the_fast_record_hash_equals_the_exact_one_on_any_json(record):
    from core.canonical import CanonicalError

    try:
        exact = cx.record_hash(record)
    except CanonicalError:
        return  # never for a parsed record (it has no surrogate), and the fast path is not tried
    assert cx._parsed_record_hash(record) == exact


@settings(max_examples=400, deadline=None, database=None)
@given(kind=st.sampled_from(sorted(cx._PLISTS)), a=FAST_JSON, b=FAST_JSON)
def test_the_fast_reference_bytes_equal_the_exact_writer_on_any_json(kind, a, b):
    names = [k for k in cx._PLISTS[kind] if k != "kind"]
    payload = {"kind": kind, **dict(zip(names, [a, b], strict=False))}
    entry = cx.Entry(0, kind, payload, "")
    fast: set[str] = set()
    exact: set[str] = set()
    assert cx.reference_bytes(entry, fast) == cx._exact_reference_bytes(entry, exact)
    assert fast == exact


def test_the_fast_writers_take_the_exact_one_for_what_orjson_would_spell_otherwise():
    # a float, an integer past 2**53, a lone surrogate: the exact writer's bytes
    for value, want in [(1.0, b"1"), (1e21, b"1e+21"), (2**53 + 1, b"9007199254740992")]:
        entry = cx.Entry(0, "tool_call", {"kind": "tool_call", "call": {"kind": value}}, "")
        assert cx.reference_bytes(entry, set()) == (
            b'{"call":{"kind":' + want + b'},"kind":"tool_call"}'
        )
    entry = cx.Entry(0, "tool_call", {"kind": "tool_call", "call": {"kind": "\ud800"}}, "")
    assert cx.reference_bytes(entry, set()) == b'{"call":{"kind":"\\ud800"},"kind":"tool_call"}'
    record = {"b": {"a": 0.5, "b": 1.0}, "a": "x"}
    assert cx._parsed_record_hash(record) == cx.record_hash(record)


def test_a_file_is_read_in_pieces_up_to_the_small_limit(monkeypatch):
    data = (HERE / "pass.trace.json").read_bytes()

    class Trickle(io.BytesIO):
        def read(self, size=-1):  # a stream that answers a few bytes at a time
            return super().read(min(size, 7) if size is not None and size >= 0 else 7)

    assert cx.parse(Trickle(data), "t").head == cx.parse(io.BytesIO(data), "t").head
    monkeypatch.setattr(cx_reader, "SMALL_DOCUMENT_BYTES", 100)
    assert cx._read_first(io.BytesIO(data)) == data[:101]


def _outcome(data: bytes, monkeypatch, fast: bool):
    """parse's answer (the trace's values, or the refusal) with or without orjson's help."""
    with monkeypatch.context() as m:
        m.setattr(cx_reader, "SMALL_DOCUMENT_BYTES", 0)  # the streaming read
        m.setattr(cx_reader, "SPOOL_AFTER_BYTES", 64)  # and the spool
        if not fast:
            m.setattr(cx_reader, "_orjson", None)
        try:
            trace = cx.parse(io.BytesIO(data), "s.json")
        except cx.ReplayError as exc:
            return ("refused", exc.code, exc.message)
        return (trace.head, list(trace.envelopes), trace.ignored)


def _compact_with(envelope_text: str) -> bytes:
    doc = json.loads((HERE / "pass.trace.json").read_text())
    first = json.dumps(doc["tool_envelopes"][0], separators=(",", ":"))
    doc["tool_envelopes"] = ["FIRST", "HOSTILE"]
    text = json.dumps(doc, separators=(",", ":"))
    text = text.replace('"FIRST"', first).replace('"HOSTILE"', envelope_text)
    return text.encode("utf-8", "surrogatepass")  # a raw lone surrogate: not UTF-8, refused


HOSTILE = [
    '{"call":{"call_id":"c","call_id":"d"},"result":{}}',  # a duplicate key
    '{"call":{"call_id":"c","x":NaN},"result":{}}',
    '{"call":{"call_id":"c","x":-Infinity},"result":{}}',
    '{"call":{"call_id":"c","x":"\\ud800"},"result":{}}',  # a lone surrogate
    '{"call":{"call_id":"c","x":"\\ud83d\\ude00"},"result":{}}',  # a pair: read
    '{"call":{"call_id":"c","x":123456789012345678901234567890},"result":{}}',
    '{"call":{"call_id":"c","x":1E5,"y":1e21,"z":-0.0},"result":{}}',
    '{"call":{"call_id":"c","x":"\\u00e9\\n"},"result":{}}',
    '{"call":{"call_id":"c"},"result":{"payload_hash":7}}',
    '{"call":{"call_id":"c"} , "result":{}}',
    '{"call":{"call_id":"c"},"result":{}',  # cut
]


@pytest.mark.parametrize("hostile", HOSTILE)
def test_the_proven_read_answers_as_the_strict_read_on_hostile_envelopes(hostile, monkeypatch):
    data = _compact_with(hostile)
    assert _outcome(data, monkeypatch, fast=True) == _outcome(data, monkeypatch, fast=False)


@settings(max_examples=150, deadline=None, database=None)
@given(extra=st.dictionaries(KEYS | STRINGS, FAST_JSON, max_size=4), ascii=st.booleans())
def test_the_proven_read_and_the_spool_answer_as_the_strict_read_on_any_json(extra, ascii):
    import _pytest.monkeypatch

    envelope = {"call": {"call_id": "c", **extra}, "result": {"extra": extra}}
    data = _compact_with(json.dumps(envelope, separators=(",", ":"), ensure_ascii=ascii))
    with _pytest.monkeypatch.MonkeyPatch.context() as mp:
        assert _outcome(data, mp, fast=True) == _outcome(data, mp, fast=False)


# --- an indented document (JSON.stringify(trace, null, 2)) is proven too -----------------------


def _indented_with(envelope_text: str, indent: int = 2) -> bytes:
    """pass.trace.json written with ``indent``, its second envelope replaced by ``envelope_text``
    (indented lines: each line of it gets the envelope's base indentation)."""
    doc = json.loads((HERE / "pass.trace.json").read_text())
    doc["tool_envelopes"] = [doc["tool_envelopes"][0], "HOSTILE"]
    text = json.dumps(doc, indent=indent)
    base = " " * (2 * indent)
    text = text.replace('"HOSTILE"', envelope_text.replace("\n", "\n" + base))
    return text.encode("utf-8", "surrogatepass")


INDENTED_HOSTILE = [
    '{\n  "call": {\n    "call_id": "c",\n    "call_id": "d"\n  },\n  "result": {}\n}',
    '{\n  "call": {\n    "call_id": "c",\n    "x": NaN\n  },\n  "result": {}\n}',
    '{\n  "call": {\n    "call_id": "c",\n    "x": "\\ud800"\n  },\n  "result": {}\n}',
    '{\n  "call": {\n    "call_id": "c",\n    "x": "\\ud83d\\ude00"\n  },\n  "result": {}\n}',
    '{\n  "call": {\n    "call_id": "c",\n    "x": 123456789012345678901234567890\n  },\n'
    '  "result": {}\n}',
    '{\n  "call": {\n    "call_id": "c",\n    "x": 1E5\n  },\n  "result": {}\n}',
    '{\n  "call": {\n    "call_id": "c",\n\t"x": 1\n  },\n  "result": {}\n}',  # a tab
    '{\n  "call": {\n      "call_id": "c"\n  },\n  "result": {}\n}',  # uneven
    '{\n  "call": {\n    "call_id": "c"\n  },\n  "result": {\n    "payload_hash": 7\n  }\n}',
    '{\n  "call": {\n    "call_id": "c"\n  },\n  "result": {}\n',  # cut
]


@pytest.mark.parametrize("hostile", INDENTED_HOSTILE)
def test_the_indented_proof_answers_as_the_strict_read_on_hostile_envelopes(hostile, monkeypatch):
    data = _indented_with(hostile)
    assert _outcome(data, monkeypatch, fast=True) == _outcome(data, monkeypatch, fast=False)


@settings(max_examples=150, deadline=None, database=None)
@given(
    extra=st.dictionaries(KEYS | STRINGS, FAST_JSON, max_size=4),
    ascii=st.booleans(),
    indent=st.integers(min_value=0, max_value=4),
)
def test_an_indented_document_is_read_as_the_strict_read_reads_it(extra, ascii, indent):
    import _pytest.monkeypatch

    envelope = {"call": {"call_id": "c", **extra}, "result": {"extra": extra}}
    data = _indented_with(json.dumps(envelope, indent=indent, ensure_ascii=ascii), indent)
    with _pytest.monkeypatch.MonkeyPatch.context() as mp:
        assert _outcome(data, mp, fast=True) == _outcome(data, mp, fast=False)


def test_an_envelope_indented_as_json_stringify_writes_it_is_proven(monkeypatch):
    # the seed writes traces with JSON.stringify(trace, null, 2): each envelope is proven
    # (no strict decode), and the trace is the one the strict read gives
    data = _indented_with(json.dumps({"call": {"call_id": "c", "n": 1}, "result": {}}, indent=2))
    proven = []
    original = cx._Reader._proven_value

    def counting(self):
        answer = original(self)
        proven.append(answer is not None)
        return answer

    monkeypatch.setattr(cx._Reader, "_proven_value", counting)
    fast = _outcome(data, monkeypatch, fast=True)
    assert len(proven) > 2
    assert proven.count(True) == len(proven)
    monkeypatch.undo()
    assert fast == _outcome(data, monkeypatch, fast=False)
    assert fast[1][1] == {"call": {"call_id": "c", "n": 1}, "result": {}}


# --- runs of envelopes read at once (proven_batch) answer as the strict read ---------------------


def _many_with(envelope_text: str, indent: int | None, count: int = 6) -> bytes:
    """pass.trace.json with ``count`` copies of its first envelope and ``envelope_text`` in the
    middle, written compact (``indent`` None) or indented."""
    doc = json.loads((HERE / "pass.trace.json").read_text())
    first = doc["tool_envelopes"][0]
    doc["tool_envelopes"] = [first] * (count // 2) + ["HOSTILE"] + [first] * (count - count // 2)
    if indent is None:
        text = json.dumps(doc, separators=(",", ":"))
    else:
        text = json.dumps(doc, indent=indent)
        envelope_text = envelope_text.replace("\n", "\n" + " " * (2 * indent))
    return text.replace('"HOSTILE"', envelope_text).encode("utf-8", "surrogatepass")


BATCH_HOSTILE = [
    *HOSTILE,
    '{"call":{"call_id":"c","x":"a},{b"},"result":{}}',  # the boundary inside a string
    '{"call":{"call_id":"c","x":[{}],"y":{"z":1}},"result":{"w":[{},{}]}}',
]


@pytest.mark.parametrize("hostile", BATCH_HOSTILE)
def test_a_compact_run_answers_as_the_strict_read_with_a_hostile_envelope_in_it(
    hostile, monkeypatch
):
    data = _many_with(hostile, None)
    assert _outcome(data, monkeypatch, fast=True) == _outcome(data, monkeypatch, fast=False)


@pytest.mark.parametrize("hostile", INDENTED_HOSTILE)
def test_an_indented_run_answers_as_the_strict_read_with_a_hostile_envelope_in_it(
    hostile, monkeypatch
):
    data = _many_with(hostile, 2)
    assert _outcome(data, monkeypatch, fast=True) == _outcome(data, monkeypatch, fast=False)


@settings(max_examples=150, deadline=None, database=None)
@given(
    extras=st.lists(st.dictionaries(KEYS | STRINGS, FAST_JSON, max_size=3), min_size=1, max_size=5),
    indent=st.none() | st.integers(min_value=0, max_value=4),
    ascii=st.booleans(),
)
def test_runs_of_any_envelopes_are_read_as_the_strict_read_reads_them(extras, indent, ascii):
    import _pytest.monkeypatch

    doc = json.loads((HERE / "pass.trace.json").read_text())
    doc["tool_envelopes"] = [
        {"call": {"call_id": f"c{n}", **extra}, "result": {"extra": extra}}
        for n, extra in enumerate(extras)
    ]
    separators = (",", ":") if indent is None else None
    data = json.dumps(doc, indent=indent, separators=separators, ensure_ascii=ascii)
    data = data.encode("utf-8", "surrogatepass")
    with _pytest.monkeypatch.MonkeyPatch.context() as mp:
        assert _outcome(data, mp, fast=True) == _outcome(data, mp, fast=False)


def _batches(data: bytes, monkeypatch) -> tuple[list[int], int, Any]:
    """(the size of each run read at once, the misses, parse's answer)."""
    runs: list[int] = []
    misses = []
    original = cx._Reader.proven_batch

    def counting(self):
        answer = original(self)
        if answer is not None:
            runs.append(len(answer[0]))
        misses.append(self.batch_misses)
        return answer

    monkeypatch.setattr(cx._Reader, "proven_batch", counting)
    outcome = _outcome(data, monkeypatch, fast=True)
    monkeypatch.undo()
    return runs, max(misses), outcome


@pytest.mark.parametrize("indent", [None, 2])
def test_a_run_of_well_formed_envelopes_is_read_at_once(indent, monkeypatch):
    # the seed writes JSON.stringify(trace, null, 2); the bench's files are compact
    envelope = {"call": {"call_id": "c"}, "result": {}}
    separators = (",", ":") if indent is None else None
    data = _many_with(json.dumps(envelope, indent=indent, separators=separators), indent, 40)
    runs, misses, outcome = _batches(data, monkeypatch)
    assert sum(runs) == 40  # all but the last of the 41 (no "}," after it)
    assert misses == 1  # that last one, read as one value
    assert outcome == _outcome(data, monkeypatch, fast=False)


def test_a_text_that_defeats_the_run_search_is_read_value_by_value_after_a_few_misses(
    monkeypatch,
):
    # every envelope spells the boundary inside a string more often than a search guesses:
    # each search misses, at most _BATCH_TRIES times, then the document is read value by
    # value, as before
    hostile = '{"call":{"call_id":"c","x":"a},{b"},"result":{"y":"},{},{},{},{},{"}}'
    data = _many_with(hostile, None, count=2)
    doc = json.loads(data)
    doc["tool_envelopes"] = [json.loads(hostile)] * 60
    data = json.dumps(doc, separators=(",", ":")).encode()
    runs, misses, outcome = _batches(data, monkeypatch)
    assert runs == []
    assert misses == cx._BATCH_TRIES
    assert outcome == _outcome(data, monkeypatch, fast=False)
    assert len(outcome[1]) == 60


@pytest.mark.parametrize("indent", [None, 2])
def test_many_runs_are_spooled_and_read_back_as_the_strict_read_reads_them(indent, monkeypatch):
    envelope = {"call": {"call_id": "c", "n": 2**63 - 1}, "result": {"x": [1.5, "é", None]}}
    separators = (",", ":") if indent is None else None
    data = _many_with(json.dumps(envelope, indent=indent, separators=separators), indent, 40)
    strict = _outcome(data, monkeypatch, fast=False)
    monkeypatch.setattr(cx_reader, "_BATCH_CHARS", 2000)  # runs of a few envelopes each
    runs, _misses, outcome = _batches(data, monkeypatch)
    assert len(runs) > 5
    assert outcome == strict


# --- a small document indented as the seed writes it is proven whole -----------------------------


def _small_outcome(data: bytes, monkeypatch, fast: bool):
    """parse's answer for a small document, with or without orjson's help."""
    with monkeypatch.context() as m:
        if not fast:
            m.setattr(cx_reader, "_orjson", None)
            m.setattr(cx_reader, "parse_compact", lambda _data: cx.NOT_PROVEN)
        try:
            trace = cx.parse(io.BytesIO(data), "s.json")
        except cx.ReplayError as exc:
            return ("refused", exc.code, exc.message)
        return (trace.head, list(trace.envelopes), trace.ignored)


@pytest.mark.parametrize("hostile", INDENTED_HOSTILE)
def test_a_small_indented_document_answers_as_the_strict_read(hostile, monkeypatch):
    data = _indented_with(hostile)
    assert _small_outcome(data, monkeypatch, True) == _small_outcome(data, monkeypatch, False)


@settings(max_examples=150, deadline=None, database=None)
@given(
    extra=st.dictionaries(KEYS | STRINGS, FAST_JSON, max_size=4),
    ascii=st.booleans(),
    indent=st.integers(min_value=0, max_value=4),
    newline=st.booleans(),
)
def test_any_small_indented_document_is_read_as_the_strict_read_reads_it(
    extra, ascii, indent, newline
):
    import _pytest.monkeypatch

    doc = json.loads((HERE / "pass.trace.json").read_text())
    doc["tool_envelopes"].append({"call": {"call_id": "c", **extra}, "result": {"x": extra}})
    text = json.dumps(doc, indent=indent, ensure_ascii=ascii) + ("\n" if newline else "")
    data = text.encode("utf-8", "surrogatepass")
    with _pytest.monkeypatch.MonkeyPatch.context() as mp:
        assert _small_outcome(data, mp, True) == _small_outcome(data, mp, False)


def test_a_small_document_as_json_stringify_indents_it_is_proven_whole():
    doc = json.loads((HERE / "pass.trace.json").read_text())
    data = (json.dumps(doc, indent=2) + "\n").encode()
    assert cx._parse_indented(data) == doc
    assert cx._parse_indented(data.replace(b'"trace_id"', b'"trace_id" ')) is cx.NOT_PROVEN
    duplicate = data.replace(b'"signed_by"', b'"chain_prev_hash": "x",\n    "signed_by"')
    assert cx._parse_indented(duplicate) is cx.NOT_PROVEN
