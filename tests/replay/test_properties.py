"""Property tests over what `record` produces (Hypothesis), through the pure core only.

- every recorded trace replays `ok` in every mode its artifacts allow, in every spelling
  (.trace.json / .trace.jsonl, gzipped or not), with the same report;
- any single-field change to a hashed or signed part is detected;
- a change to `meta` or `job.started_at` (documented as unprotected) is not;
- every report of a drifted trace (keys added, removed or changed in step outputs and the
  final answer) serialises as strict JSON and round-trips, an absent side spelled one way.
"""

from __future__ import annotations

import copy
import gzip
import io
import json
from datetime import UTC, datetime
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from core.canonical import mace_v1
from core.errors import MISSING_PERSISTED_AGENT_OUTPUT, ReplayError
from core.formats import default_registry, native
from core.formats.native import engine
from core.formats.native.recorder import record
from core.replay.runtime import RecordOptions
from tests.replay.helpers import golden_key_ring, golden_signer
from tests.replay.mutations import drifted_documents

KEYS = golden_key_ring()
SIGNER = golden_signer()
REGISTRY = default_registry()

SPELLINGS = ("t.trace.json", "t.trace.jsonl", "t.trace.json.gz", "t.trace.jsonl.gz")

seeds = st.text(st.characters(codec="utf-8"), min_size=1, max_size=24)
options = st.builds(
    RecordOptions,
    seed=seeds,
    iterations=st.integers(0, 4),
    filler_events=st.integers(0, 12),
    persist_outputs=st.booleans(),
)

FAST = settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow], database=None
)


def spell(document: dict[str, Any], filename: str) -> bytes:
    if ".jsonl" in filename:
        data = b"".join(native.iter_jsonl(document))
    else:
        data = native.dumps_document(document)
    return gzip.compress(data, mtime=0) if filename.endswith(".gz") else data


def replay_bytes(data: bytes, filename: str, mode: str) -> dict[str, Any]:
    """The report as the console would give it; a refusal to open is a `refused` report."""
    try:
        trace = native.open_native(io.BytesIO(data), filename)
    except ReplayError as exc:
        return {"status": engine.REFUSED, "error_code": exc.code, "message": exc.message}
    return engine.replay(trace, mode=mode, registry=REGISTRY, keys=KEYS).to_json()


def without_spelling(report: dict[str, Any]) -> dict[str, Any]:
    """The report minus the one detail that names the spelling (checked separately)."""
    report = copy.deepcopy(report)
    report["checks"][0]["detail"] = report["checks"][0]["detail"].split(": ", 1)[1]
    return report


@FAST
@given(opts=options)
def test_it_replays_every_recorded_trace_ok_in_every_mode_its_artifacts_allow(opts):
    document = record(opts, REGISTRY, SIGNER)
    has_external = opts.iterations > 0
    for mode in engine.MODES:
        reports = {}
        for filename in SPELLINGS:
            report = replay_bytes(spell(document, filename), filename, mode)
            if mode == engine.PRODUCTION and has_external and not opts.persist_outputs:
                assert report["status"] == engine.REFUSED
                assert report["error_code"] == MISSING_PERSISTED_AGENT_OUTPUT
                assert report["broke_at"] == 1  # the first external step
            else:
                assert report["status"] == engine.OK, report["message"]
                assert report["error_code"] is None
                assert report["divergences"] == []
            # sandbox is never authoritative, and neither is a refusal (it reached no verdict)
            assert report["authoritative"] is (
                mode != engine.SANDBOX and report["status"] != engine.REFUSED
            )
            assert report["replayable"] is (opts.persist_outputs or not has_external)
            missing = (
                []
                if opts.persist_outputs
                else [f"output:out-{i:04d} (not persisted)" for i in range(opts.iterations)]
            )
            assert report["missing"] == missing
            encoding = "jsonl" if ".jsonl" in filename else "json"
            gz = ", gzip" if filename.endswith(".gz") else ""
            assert report["checks"][0]["detail"].startswith(f"replay-trace v1 ({encoding}{gz}): ")
            reports[filename] = mace_v1(without_spelling(report))
        assert len(set(reports.values())) == 1, f"{mode}: the spellings disagree"


# --- single-field changes --------------------------------------------------------------------

UNPROTECTED = {"/job/started_at"}


def leaves(value: Any, path: str = "") -> list[str]:
    """JSON Pointers to every scalar in `value`."""
    if isinstance(value, dict):
        return [p for k, v in value.items() for p in leaves(v, f"{path}/{k}")]
    if isinstance(value, list):
        return [p for i, v in enumerate(value) for p in leaves(v, f"{path}/{i}")]
    return [path]


def get(document: Any, pointer: str) -> Any:
    node = document
    for token in pointer.lstrip("/").split("/"):
        node = node[int(token)] if isinstance(node, list) else node[token]
    return node


def put(document: Any, pointer: str, value: Any) -> None:
    *parents, last = pointer.lstrip("/").split("/")
    node = document
    for token in parents:
        node = node[int(token)] if isinstance(node, list) else node[token]
    if isinstance(node, list):
        node[int(last)] = value
    else:
        node[last] = value


def changed(value: Any, retype: bool) -> Any:
    """A different value: of the same type (one that survives NFKD and 9-decimal rounding),
    or, with `retype`, of another type."""
    if retype:
        return [] if not isinstance(value, list) else {}
    if isinstance(value, bool):
        return not value
    if isinstance(value, int):
        return value + 1
    if isinstance(value, float):
        return value + 1.0
    if isinstance(value, str):
        return value + "x"
    return "x"  # null


small_options = st.builds(
    RecordOptions,
    seed=seeds,
    iterations=st.integers(1, 3),
    filler_events=st.integers(1, 8),
    persist_outputs=st.booleans(),
)


@settings(FAST, max_examples=200)
@given(opts=small_options, data=st.data())
def test_it_detects_any_single_field_change_to_a_hashed_or_signed_part(opts, data):
    document = record(opts, REGISTRY, SIGNER)
    candidates = [p for p in leaves(document) if p not in UNPROTECTED]
    pointer = data.draw(st.sampled_from(candidates), label="field")
    retype = data.draw(st.booleans(), label="retype")
    filename = data.draw(st.sampled_from(SPELLINGS), label="spelling")
    mutated = copy.deepcopy(document)
    put(mutated, pointer, changed(get(document, pointer), retype))

    for mode in (engine.AUDIT, engine.SANDBOX):
        report = replay_bytes(spell(mutated, filename), filename, mode)
        assert report["status"] != engine.OK, f"{pointer} changed, yet {mode} replay is ok"


json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-(2**63), 2**63)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=20),
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4)
    ),
    max_leaves=12,
)
iso_times = st.datetimes(datetime(1970, 1, 1), datetime(2100, 1, 1), timezones=st.just(UTC)).map(
    lambda t: t.strftime("%Y-%m-%dT%H:%M:%S.%fZ")
)


@FAST
@given(opts=small_options, meta=json_values, started_at=iso_times, data=st.data())
def test_it_ignores_changes_to_meta_and_started_at_as_documented(opts, meta, started_at, data):
    document = record(opts, REGISTRY, SIGNER)
    filename = data.draw(st.sampled_from(SPELLINGS), label="spelling")
    mutated = copy.deepcopy(document)
    mutated["meta"] = meta
    mutated["job"]["started_at"] = started_at

    before = replay_bytes(spell(document, filename), filename, engine.AUDIT)
    after = replay_bytes(spell(mutated, filename), filename, engine.AUDIT)

    assert after["status"] == engine.OK, after["message"]
    assert mace_v1(after) == mace_v1(before)
    assert after["unprotected_fields"] == ["meta", "job.started_at"]


def test_it_says_which_fields_the_seal_does_not_protect():
    document = record(RecordOptions(seed="unprotected"), REGISTRY, SIGNER)
    report = replay_bytes(spell(document, "t.trace.json"), "t.trace.json", engine.AUDIT)

    seal = next(c for c in report["checks"] if c["name"] == "seal")
    assert seal["detail"] == "HMAC-SHA256 by golden verifies; not covered: meta, job.started_at"
    assert report["unprotected_fields"] == ["meta", "job.started_at"]


# --- every report prints -----------------------------------------------------------------------


@settings(FAST, max_examples=150)
@given(document=drifted_documents(), data=st.data())
def test_every_report_of_a_drifted_trace_serialises_and_round_trips(document, data):
    filename = data.draw(st.sampled_from(SPELLINGS), label="spelling")
    try:
        spelled = spell(document, filename)
    except ValueError:  # NaN/Infinity: json.dumps writes them, the parser must refuse them
        spelled = native.dumps_document(document) if "jsonl" not in filename else b"{}"
    for mode in engine.MODES:
        report = replay_bytes(spelled, filename, mode)
        text = json.dumps(report, allow_nan=False, ensure_ascii=False)
        assert json.loads(text) == report
        for d in report.get("divergences", []) + report.get("within_epsilon", []):
            assert set(d) <= {"step", "step_id", "path", "before", "after", "absent"}
            assert {"step", "step_id", "path", "before", "after"} <= set(d)
            if "absent" in d:
                assert d["absent"] in ("before", "after")
                assert d[d["absent"]] is None
