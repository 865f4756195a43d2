"""`--workers N`: a JSON Lines trace read by worker processes gives the very report the
single-process reader gives, for a good trace and for each way a line can be bad, wherever
the bad line falls among the chunks."""

from __future__ import annotations

import functools
import io
import json
import re

import pytest

from core.formats import default_registry, native
from core.formats.native import engine
from core.formats.native import parallel as native_parallel
from core.formats.native.recorder import record
from core.replay.runtime import RecordOptions
from tests.replay.helpers import golden_key_ring, golden_signer

CHUNK = 97  # lines per chunk here, so a few thousand events make dozens of chunks


@functools.cache
def lines() -> tuple[bytes, ...]:
    opts = RecordOptions(seed="parallel-reader", iterations=6, filler_events=3000)
    document = record(opts, default_registry(), golden_signer())
    return tuple(native.iter_jsonl(document))


def event_line(seq: int) -> int:
    """The index of the line holding event `seq`."""
    return next(
        i for i, line in enumerate(lines()) if line.startswith(b'{"record":"event","seq":%d,' % seq)
    )


def edited(index: int, old: bytes, new: bytes) -> bytes:
    out = list(lines())
    assert old in out[index], out[index][:120]
    out[index] = out[index].replace(old, new, 1)
    return b"".join(out)


def zero_hash(index: int) -> bytes:
    out = list(lines())
    out[index] = re.sub(
        rb'"hash":"sha256:[0-9a-f]{64}"', b'"hash":"sha256:' + b"0" * 64 + b'"', out[index]
    )
    return b"".join(out)


def variants() -> dict[str, bytes]:
    middle = event_line(1500)
    return {
        "ok": b"".join(lines()),
        "payload edited": edited(middle, b'"payload":{', b'"payload":{"x":1,'),
        "hash edited": zero_hash(middle),
        "truncated line": edited(middle, b"}\n", b"\n"),
        "duplicate key": edited(middle, b'{"record":"event",', b'{"record":"event","seq":0,'),
        "wrong type": edited(middle, b'"seq":1500', b'"seq":"1500"'),
        "seq skipped": edited(event_line(2222), b'"seq":2222', b'"seq":2223'),
        "last line cut": b"".join(lines())[:-40],
        "first event edited": edited(event_line(0), b'"payload":{', b'"payload":{"x":1,'),
        # a run checks a later event's id and hash by equality with the derived ones:
        # spellings validate_event refuses must still be refused, as such
        "upper-case event_id": upper_case(middle, rb'"event_id":"([0-9a-f]{64})"'),
        "upper-case hash": upper_case(middle, rb'"hash":"sha256:([0-9a-f]{64})"'),
    }


def upper_case(index: int, pattern: bytes) -> bytes:
    """The trace with the hex digits `pattern`'s group matches on line `index` upper-cased."""
    out = list(lines())
    out[index] = re.sub(pattern, lambda m: m.group().replace(m[1], m[1].upper()), out[index])
    assert out[index] != lines()[index]
    return b"".join(out)


def report_of(data: bytes, workers: int) -> dict:
    trace = native.open_native(io.BytesIO(data), "t.trace.jsonl")
    report = engine.replay(
        trace,
        mode=engine.AUDIT,
        registry=default_registry(),
        keys=golden_key_ring(),
        workers=workers,
    )
    return report.to_json()


@pytest.fixture(autouse=True)
def _small_chunks(monkeypatch):
    monkeypatch.setattr(native_parallel, "_CHUNK_LINES", CHUNK)


def test_the_trace_spans_many_chunks():
    assert len(lines()) > 30 * CHUNK


def test_the_reader_hands_out_chunks_of_chunk_lines():
    trace = native.open_native(io.BytesIO(b"".join(lines())), "t.trace.jsonl")
    runs = [len(row[1]) for row in trace.rows(1) if row[0] == "events"]
    assert max(runs) == CHUNK  # no run of events spans two chunks
    assert len(runs) > 30


@pytest.mark.parametrize("name", list(variants()))
def test_workers_give_the_same_report_as_one_process(name):
    data = variants()[name]
    alone = report_of(data, 1)
    assert report_of(data, 3) == alone
    if name == "ok":
        assert alone["status"] == "ok"
    else:
        assert alone["status"] != "ok", alone


def test_the_variants_fail_where_they_were_made():
    reports = {name: report_of(data, 2) for name, data in variants().items()}
    assert reports["payload edited"]["error_code"] == "INTEGRITY_FAILURE"
    assert reports["payload edited"]["broke_at"] == 1500
    assert reports["hash edited"]["broke_at"] == 1500
    assert reports["first event edited"]["broke_at"] == 0
    line = event_line(1500) + 1
    assert reports["upper-case event_id"]["message"].endswith(
        ".event_id: expected 64 lower-case hex characters"
    )
    assert reports["upper-case hash"]["message"].endswith(
        ".hash: expected 'sha256:' and 64 lower-case hex"
    )
    for name in (
        "truncated line",
        "duplicate key",
        "wrong type",
        *(n for n in reports if n.startswith("upper")),
    ):
        assert reports[name]["error_code"] == "MALFORMED_TRACE", name
        assert f"line {line}" in reports[name]["message"], (name, reports[name]["message"])


@pytest.mark.django_db
@pytest.mark.usefixtures("var_dirs", "golden_key")
def test_the_verify_command_takes_workers_and_prints_the_same_report(tmp_path):
    from tests.replay.test_services import run

    path = tmp_path / "t.trace.jsonl"
    for name in ("ok", "payload edited"):
        path.write_bytes(variants()[name])
        one = run("verify", str(path), "--json")
        many = run("verify", str(path), "--json", "--workers", "2")
        auto = run("verify", str(path), "--json", "--workers", "auto")
        assert one[0] == (0 if name == "ok" else 1)
        assert json.loads(many[1]) == json.loads(one[1]) == json.loads(auto[1])
        assert many[0] == auto[0] == one[0]


@pytest.mark.parametrize("bad", ["0", "-1", "65", "two"])
def test_a_number_of_workers_out_of_range_is_a_usage_error(tmp_path, bad):
    from django.core.management import CommandError, call_command

    path = tmp_path / "t.trace.jsonl"
    path.write_bytes(b"")
    with pytest.raises(CommandError, match="workers"):
        call_command("verify", str(path), "--workers", bad)


@pytest.mark.django_db
@pytest.mark.usefixtures("var_dirs", "golden_key")
def test_ingest_and_replay_take_workers_too(tmp_path):
    from tests.replay.test_services import run

    path = tmp_path / "t.trace.jsonl"
    path.write_bytes(variants()["ok"])
    code, out, err = run("ingest", str(path), "--workers", "2")
    assert (code, err) == (0, "")
    trace_id = out.split()[0]
    code, out, _ = run("replay", trace_id, "--json", "--workers", "2")
    assert code == 0
    report = json.loads(out)
    events = sum(line.startswith(b'{"record":"event"') for line in lines())
    assert (report["status"], report["stats"]["events"]) == ("ok", events)
