"""A whole ``.trace.json`` document's events reach the engine as runs of plain events
(`runs.EventRun`, one ``"events"`` row each), the way JSON Lines chunks do: the report is
the very one the record-by-record read gives (`NativeTrace.records`, each event through
`validate_event`), for a good document and for each way an event can be bad, wherever it
falls, and every refusal names ``events[i]`` as before."""

from __future__ import annotations

import copy
import functools
import io
import json
from typing import Any

import pytest

from core.formats import default_registry, native
from core.formats.native import engine, reader, runs
from core.formats.native.recorder import rechain, record, reseal
from core.replay.runtime import RecordOptions
from tests.replay.helpers import golden_key_ring, golden_signer

MIDDLE = 1500


@functools.cache
def document() -> dict[str, Any]:
    opts = RecordOptions(seed="document-runs", iterations=6, filler_events=3000)
    return record(opts, default_registry(), golden_signer())


def edited(edit: Any, *, chained: bool = False) -> bytes:
    doc = copy.deepcopy(document())
    edit(doc["events"])
    if chained:  # re-chained and re-sealed, as a runtime writing these events would
        rechain(doc)
        doc = reseal(doc, golden_signer())
    return json.dumps(doc).encode()


def _set(index: int, key: str, value: Any) -> Any:
    def edit(events: list[Any]) -> None:
        events[index][key] = value

    return edit


def _replace(index: int, value: Any) -> Any:
    def edit(events: list[Any]) -> None:
        events[index] = value

    return edit


def _upper(index: int, key: str) -> Any:
    def edit(events: list[Any]) -> None:
        events[index][key] = events[index][key].replace("a", "A").replace("b", "B")

    return edit


def _payload(index: int, **more: Any) -> Any:
    def edit(events: list[Any]) -> None:
        events[index]["payload"] = {**events[index]["payload"], **more}

    return edit


def variants() -> dict[str, bytes]:
    return {
        "ok": json.dumps(document()).encode(),
        "payload edited": edited(_payload(MIDDLE, x=1)),
        "hash edited": edited(_set(MIDDLE, "hash", "sha256:" + "0" * 64)),
        "first event edited": edited(_payload(0, x=1)),
        "last event edited": edited(lambda events: events[-1]["payload"].update(x=1)),
        "seq skipped": edited(_set(2222, "seq", 2223)),
        "seq a string": edited(_set(MIDDLE, "seq", str(MIDDLE))),
        "upper-case event_id": edited(_upper(MIDDLE, "event_id")),
        "upper-case hash": edited(_upper(MIDDLE, "hash")),
        "an extra key": edited(_set(MIDDLE, "note", 1)),
        "a five-character string": edited(_replace(MIDDLE, "abcde")),
        "a list of five": edited(_replace(MIDDLE, [1, 2, 3, 4, 5])),
        "a memory write, its id not derived": edited(
            _payload(MIDDLE, wm_id=native.event_id_of("x", 0, "y")), chained=True
        ),
        "an event removed, rechained": edited(lambda events: events.pop(MIDDLE), chained=True),
    }


def report_of(data: bytes, *, by_record: bool) -> dict:
    trace = native.open_native(io.BytesIO(data), "t.trace.json")
    if by_record:  # the reader's rows one record each, as before runs
        rows = trace._rows
        trace = native.NativeTrace(trace.header, trace.encoding, False, lambda _w: rows(0))
    report = engine.replay(
        trace, mode=engine.AUDIT, registry=default_registry(), keys=golden_key_ring()
    )
    return report.to_json()


def test_a_document_reaches_the_engine_as_runs_of_its_events(monkeypatch):
    monkeypatch.setattr(reader, "_RUN_EVENTS", 2048)  # so this document's events make two
    events = document()["events"]
    trace = native.open_native(io.BytesIO(variants()["ok"]), "t.trace.json")
    rows = list(trace.rows(1))
    runs = [row for row in rows if row[0] == "events"]
    assert {row[0] for row in rows[len(runs) :]} == {"step", "output"}
    cut = reader._RUN_EVENTS  # runs of at most this many events
    assert [(row[1], row[2]) for row in runs] == [
        (range(cut), "events[0]"),
        (range(cut, len(events)), f"events[{cut}]"),
    ]
    first_seq, _body, first_hash, blob, last_hash, count, parsed = runs[1][4]
    assert (first_seq, first_hash, last_hash, count) == (
        cut,
        events[cut]["hash"],
        events[-1]["hash"],
        len(events) - cut,
    )
    assert parsed == events[cut:]
    # the seal's bytes of the events, as the record-by-record read writes them
    assert blob == b",".join(
        native.sealed_event_bytes(native.event_body_bytes(e), e["hash"]) for e in events[cut:]
    )
    # records() still gives one validated record per event
    again = native.open_native(io.BytesIO(variants()["ok"]), "t.trace.json")
    assert [r.where for r in again.records() if r.kind == "event"] == [
        f"events[{i}]" for i in range(len(events))
    ]


def test_a_bad_event_ends_the_run_and_comes_as_its_own_row():
    trace = native.open_native(io.BytesIO(variants()["payload edited"]), "t.trace.json")
    kinds = [(row[0], row[2]) for row in trace.rows(1)][:3]
    assert kinds == [
        ("events", "events[0]"),
        ("event", f"events[{MIDDLE}]"),
        ("events", f"events[{MIDDLE + 1}]"),
    ]


@pytest.mark.parametrize("run_events", [reader._RUN_EVENTS, 97])  # runs cut anywhere too
@pytest.mark.parametrize("name", list(variants()))
def test_runs_give_the_report_the_record_by_record_read_gives(name, run_events, monkeypatch):
    monkeypatch.setattr(reader, "_RUN_EVENTS", run_events)
    data = variants()[name]
    by_record = report_of(data, by_record=True)
    assert report_of(data, by_record=False) == by_record
    assert (by_record["status"] == "ok") == (name == "ok"), (name, by_record)


def test_the_variants_fail_where_they_were_made():
    reports = {name: report_of(data, by_record=False) for name, data in variants().items()}
    assert reports["ok"]["status"] == "ok"
    for name, at in (
        ("payload edited", MIDDLE),
        ("hash edited", MIDDLE),
        ("first event edited", 0),
        ("last event edited", len(document()["events"]) - 1),
        ("seq skipped", 2223),  # the seq it found where 2222 was due
    ):
        assert reports[name]["error_code"] == "INTEGRITY_FAILURE", name
        assert reports[name]["broke_at"] == at, name
    where = f"events[{MIDDLE}]"
    for name, message in (
        ("seq a string", f"{where}.seq: expected integer, got string"),
        ("upper-case event_id", f"{where}.event_id: expected 64 lower-case hex characters"),
        ("upper-case hash", f"{where}.hash: expected 'sha256:' and 64 lower-case hex"),
        ("an extra key", f"{where}: unknown field 'note'"),
        ("a five-character string", f"{where}: expected object, got string"),
        ("a list of five", f"{where}: expected object, got array"),
    ):
        assert reports[name]["error_code"] == "MALFORMED_TRACE", name
        assert reports[name]["message"] == message, name
    # a memory id that does not derive from the job seed fails as the event-id check does
    assert reports["a memory write, its id not derived"]["error_code"] == "INTEGRITY_FAILURE"
    assert reports["a memory write, its id not derived"]["broke_at"] == MIDDLE
    assert reports["a memory write, its id not derived"]["message"].startswith(
        f"event {MIDDLE}: payload.wm_id "
    )
    assert reports["an event removed, rechained"]["broke_at"] == MIDDLE + 1


def test_a_runs_bytes_are_the_body_and_sealed_bytes_of_each_event():
    # the run writes each event's hashed body and sealed bytes from its parts; they are the
    # very bytes `event_body_bytes` and `sealed_event_bytes` write, for any payload and type
    doc = copy.deepcopy(document())
    kinds = [
        {"text": 'Ünïcödé ﬁ and \u2028 and "quotes" \\ back', "n": -0.0},
        {"floats": [1e-07, 1e16, 0.1 + 0.2, -1.5e-300], "deep": {"a": {"b": [None, True]}}},
        {"big": 2**63 - 1, "neg": -(2**63), "empty": {}, "list": []},
        {"\u00e9": 1, "e\u0301": 2, "z": "\U0001f600"},
    ]
    for i, event in enumerate(doc["events"][:40]):
        event["payload"] = {**event["payload"], **kinds[i % len(kinds)]}
        if i % 5 == 3:
            event["type"] = 'custom "type" é'
    rechain(doc)
    events = doc["events"][:40]
    derive = native.event_id_deriver(doc["job"]["job_seed"])
    run = runs.EventRun(events, derive)
    assert len(run.events) == 40
    bodies = [native.event_body_bytes(e, "event") for e in events]
    first_seq, first_body, first_hash, blob, last, count, kept = run.summary(keep=True)
    assert (first_seq, first_body, first_hash) == (0, bodies[0], events[0]["hash"])
    assert blob == b",".join(
        native.sealed_event_bytes(body, e["hash"]) for body, e in zip(bodies, events, strict=True)
    )
    assert (last, count, kept) == (events[-1]["hash"], 40, events)


def test_a_payload_mace_v1_cannot_write_ends_the_run_before_it():
    doc = copy.deepcopy(document())
    doc["events"][7]["payload"] = {"x": float("nan")}
    run = runs.EventRun(doc["events"][:20], native.event_id_deriver(doc["job"]["job_seed"]))
    assert len(run.events) == 7
