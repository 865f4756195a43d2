"""Bad input, one test each: refused with the exact code and a message a person can act on,
through the `ingest` command (exit 1, the reason on stderr) and the `trace_ingest` service
(ReplayError), and nothing is stored: no row, no blob, no spooled upload left behind.
"""

from __future__ import annotations

import copy
import gzip
import io
import json
from pathlib import Path
from typing import Any

import pytest
from django.core.management import CommandError, call_command

from core.errors import MALFORMED_TRACE, UNSUPPORTED_SCHEMA_VERSION, ReplayError
from core.formats import native
from replay.services import trace_ingest
from tests.replay.helpers import files_under, golden, stored_counts

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("golden_key")]

NOTHING = {"traces": 0, "blobs": 0, "snapshots": 0}
MB = 1024**2


def ok_document() -> dict[str, Any]:
    return json.loads(golden("ok.trace.json").read_bytes())


def write(path: Path, data: bytes) -> Path:
    path.write_bytes(data)
    return path


def dumps(document: Any) -> bytes:
    return json.dumps(document, ensure_ascii=False, indent=1).encode()


@pytest.fixture
def refuse(var_dirs):
    """`refuse(path, code)`: checks the command and the service refuse `path` alike, with
    nothing stored, and returns the message."""

    def check(path: Path, code: str) -> str:
        with path.open("rb") as fh, pytest.raises(ReplayError) as refused:
            trace_ingest(source=fh, filename=path.name)
        assert refused.value.code == code
        message = refused.value.message

        err = io.StringIO()
        out = io.StringIO()
        with pytest.raises(CommandError) as failed:
            call_command("ingest", str(path), stdout=out, stderr=err)
        assert failed.value.returncode == 1
        assert str(failed.value) == "1 of 1 files refused"
        assert out.getvalue() == ""
        assert err.getvalue() == f"{path}: refused {code}: {message}\n"

        assert stored_counts() == NOTHING
        assert files_under(var_dirs.blobs) == []
        assert files_under(var_dirs.tmp) == []
        return message

    return check


def test_it_refuses_truncated_json(refuse, tmp_path):
    data = golden("ok.trace.json").read_bytes()
    path = write(tmp_path / "cut.trace.json", data[: len(data) // 2])

    message = refuse(path, MALFORMED_TRACE)

    assert message.startswith("trace: truncated JSON at line 204 column 4: ")


def test_it_refuses_a_truncated_jsonl_record(refuse, tmp_path):
    lines = golden("ok.trace.jsonl").read_bytes().splitlines(keepends=True)
    path = write(tmp_path / "cut.trace.jsonl", b"".join(lines[:3]) + lines[3][:40])

    message = refuse(path, MALFORMED_TRACE)

    assert message.startswith("line 4: malformed JSON at ")
    assert message.endswith("column 34: Unterminated string starting here")


def test_it_refuses_duplicate_keys(refuse, tmp_path):
    data = golden("ok.trace.json").read_bytes()
    twice = data.replace(b'"seq": 0,', b'"seq": 0,\n"seq": 1,', 1)
    path = write(tmp_path / "dup.trace.json", twice)

    message = refuse(path, MALFORMED_TRACE)

    assert message == "trace: duplicate key 'seq': a hash over duplicate keys is ambiguous"


@pytest.mark.parametrize("constant", ["NaN", "Infinity", "-Infinity"])
def test_it_refuses_nan_and_infinity_in_a_hashed_value(refuse, tmp_path, constant):
    data = golden("ok.trace.json").read_bytes()
    path = write(
        tmp_path / "nan.trace.json",
        data.replace(b'"load": 0.', f'"load": {constant}, "x": 0.'.encode(), 1),
    )

    message = refuse(path, MALFORMED_TRACE)

    assert message == f"trace: {constant} is not valid in a hashed JSON value"


@pytest.mark.parametrize("filename", ["deep.trace.json", "deep.trace.jsonl"])
def test_it_refuses_nesting_10000_deep(refuse, tmp_path, filename):
    doc = ok_document()
    doc["events"][0]["payload"]["deep"] = "@@DEEP@@"
    data = golden("ok.trace.jsonl").read_bytes() if filename.endswith("l") else dumps(doc)
    if filename.endswith("l"):
        lines = data.splitlines(keepends=True)
        lines[1] = lines[1].replace(b'"payload":{', b'"payload":{"deep":"@@DEEP@@",', 1)
        data = b"".join(lines)
    deep = b"[" * 10_000 + b"]" * 10_000
    path = write(tmp_path / filename, data.replace(b'"@@DEEP@@"', deep))

    message = refuse(path, MALFORMED_TRACE)

    where = "line 2" if filename.endswith("l") else "trace"
    assert message == f"{where}: nesting is deeper than the parser allows"


def test_it_refuses_nesting_past_the_depth_limit(refuse, tmp_path):
    doc = ok_document()
    doc["events"][0]["payload"]["deep"] = "@@DEEP@@"
    deep = b"[" * 100 + b"]" * 100
    path = write(tmp_path / "deep.trace.json", dumps(doc).replace(b'"@@DEEP@@"', deep))

    message = refuse(path, MALFORMED_TRACE)

    assert message == "trace: nesting deeper than 64 levels"


def _write_with_big_string(path: Path, data: bytes, size: int) -> Path:
    """`data` with its `"@@BIG@@"` placeholder replaced by a string of `size` characters,
    written a megabyte at a time (the string is never held in memory)."""
    before, after = data.split(b"@@BIG@@")
    chunk = b"a" * MB
    with path.open("wb") as fh:
        fh.write(before)
        for _ in range(size // MB):
            fh.write(chunk)
        fh.write(after)
    return path


def test_it_refuses_a_100_mb_string(refuse, tmp_path):
    doc = ok_document()
    doc["events"][0]["payload"]["text"] = "@@BIG@@"
    path = _write_with_big_string(tmp_path / "big.trace.json", dumps(doc), 100 * MB)

    message = refuse(path, MALFORMED_TRACE)

    assert message == (
        "trace: the string at key 'text' is 104857600 characters, longer than the limit of 16777216"
    )


def test_it_refuses_a_100_mb_string_in_a_jsonl_record_before_reading_it(refuse, tmp_path):
    lines = golden("ok.trace.jsonl").read_bytes().splitlines(keepends=True)
    lines[1] = lines[1].replace(b'"payload":{', b'"payload":{"text":"@@BIG@@",', 1)
    path = _write_with_big_string(tmp_path / "big.trace.jsonl", b"".join(lines), 100 * MB)

    message = refuse(path, MALFORMED_TRACE)

    assert message == "line 2: longer than 33554432 bytes; refused before reading it"


def _read_whole(data: bytes, limits: native.Limits, read: str) -> None:
    trace = native.open_native(io.BytesIO(data), "t.trace.jsonl", limits)
    if read == "records":
        list(trace.records())
    else:
        list(trace.rows(2 if read == "rows in workers" else 1))


@pytest.mark.parametrize("read", ["header", "records", "rows", "rows in workers"])
def test_every_jsonl_reader_refuses_a_line_past_the_limit_by_its_number(read):
    lines = golden("ok.trace.jsonl").read_bytes().splitlines(keepends=True)
    limit = max(len(line) for line in lines)
    if read == "header":
        limit = len(lines[0]) - 1
    else:
        lines[2] = lines[2].replace(b'"payload":{', b'"payload":{"text":"%s",' % (b"x" * limit), 1)
    data = b"".join(lines)
    limits = native.Limits(max_line_bytes=limit)

    with pytest.raises(ReplayError) as refused:
        _read_whole(data, limits, read)

    assert refused.value.code == MALFORMED_TRACE
    line = 1 if read == "header" else 3
    assert refused.value.message == (
        f"line {line}: longer than {limit} bytes; refused before reading it"
    )


# --- the wrong type at each field ------------------------------------------------------------

# (pointer into the document, a value of the wrong type, the message)
WRONG_TYPES: list[tuple[str, Any, str]] = [
    # the header
    ("/format", 1, "trace.format: expected 'replay-trace', got 1"),
    ("/schema_version", "1", "trace.schema_version: expected integer, got string"),
    ("/schema_version", True, "trace.schema_version: expected integer, got boolean"),
    ("/schema_version", 1.5, "trace.schema_version: expected integer, got number"),
    ("/trace_id", 7, "trace.trace_id: expected string, got number"),
    ("/job", [], "trace.job: expected object, got array"),
    ("/required_snapshots", "selfrep", "trace.required_snapshots: expected array, got string"),
    ("/required_snapshots/0", 5, "trace.required_snapshots[0]: expected string"),
    ("/snapshots", {}, "trace.snapshots: expected array, got object"),
    ("/seal", "x", "trace.seal: expected object, got string"),
    ("/seal/alg", 1, "trace.seal.alg: expected string, got number"),
    ("/seal/key_id", None, "trace.seal.key_id: expected string, got null"),
    ("/seal/value", 12, "trace.seal.value: expected string, got number"),
    ("/events", {}, "trace.events: expected array, got object"),
    ("/steps", "x", "trace.steps: expected array, got string"),
    ("/outputs", [], "trace.outputs: expected object, got array"),
    # the job and its runtime
    ("/job/job_id", 1, "trace.job.job_id: expected string, got number"),
    ("/job/job_seed", True, "trace.job.job_seed: expected string, got boolean"),
    ("/job/runtime", "mace", "trace.job.runtime: expected object, got string"),
    ("/job/replayable", "yes", "trace.job.replayable: expected boolean, got string"),
    ("/job/started_at", 0, "trace.job.started_at: expected string, got number"),
    ("/job/runtime/name", None, "trace.job.runtime.name: expected string, got null"),
    ("/job/runtime/version", 1.0, "trace.job.runtime.version: expected string, got number"),
    # a snapshot and its signature
    ("/snapshots/0", "x", "trace.snapshots[0]: expected object, got string"),
    ("/snapshots/0/kind", 1, "trace.snapshots[0].kind: expected string, got number"),
    ("/snapshots/0/snapshot_id", 1, "trace.snapshots[0].snapshot_id: expected string, got number"),
    (
        "/snapshots/0/schema_version",
        "1",
        "trace.snapshots[0].schema_version: expected integer, got string",
    ),
    ("/snapshots/0/body", [], "trace.snapshots[0].body: expected object, got array"),
    ("/snapshots/0/signature", "x", "trace.snapshots[0].signature: expected object, got string"),
    (
        "/snapshots/0/signature/alg",
        [],
        "trace.snapshots[0].signature.alg: expected string, got array",
    ),
    (
        "/snapshots/0/signature/key_id",
        {},
        "trace.snapshots[0].signature.key_id: expected string, got object",
    ),
    (
        "/snapshots/0/signature/value",
        False,
        "trace.snapshots[0].signature.value: expected string, got boolean",
    ),
    # an event
    ("/events/0", [], "events[0]: expected object, got array"),
    ("/events/0/seq", "0", "events[0].seq: expected integer, got string"),
    ("/events/0/seq", False, "events[0].seq: expected integer, got boolean"),
    ("/events/0/seq", 0.5, "events[0].seq: expected integer, got number"),
    ("/events/0/type", 1, "events[0].type: expected string, got number"),
    ("/events/0/event_id", 1, "events[0].event_id: expected string, got number"),
    ("/events/0/payload", [], "events[0].payload: expected object, got array"),
    ("/events/0/hash", None, "events[0].hash: expected string, got null"),
    # a deterministic step and an external one
    ("/steps/0", "x", "steps[0]: expected object, got string"),
    ("/steps/0/seq", "0", "steps[0].seq: expected integer, got string"),
    ("/steps/0/step_id", 0, "steps[0].step_id: expected string, got number"),
    ("/steps/0/kind", 1, "steps[0].kind: expected string, got number"),
    ("/steps/0/fn", ["router.decide@1"], "steps[0].fn: expected string, got array"),
    ("/steps/0/input", "x", "steps[0].input: expected object, got string"),
    ("/steps/1/name", 1, "steps[1].name: expected string, got number"),
    ("/steps/1/output_ref", 1, "steps[1].output_ref: expected string, got number"),
    ("/steps/1/input", None, "steps[1].input: expected object, got null"),
    # an output
    ("/outputs/out-0000", "x", "outputs['out-0000']: expected object, got string"),
    ("/outputs/out-0000/hash", 1, "outputs['out-0000'].hash: expected string, got number"),
]


def _set(document: Any, pointer: str, value: Any) -> Any:
    document = copy.deepcopy(document)
    *parents, last = pointer.lstrip("/").split("/")
    node = document
    for token in parents:
        node = node[int(token)] if isinstance(node, list) else node[token]
    if isinstance(node, list):
        node[int(last)] = value
    else:
        assert last in node, pointer
        node[last] = value
    return document


@pytest.mark.parametrize(
    ("pointer", "value", "expected"), WRONG_TYPES, ids=[f"{p}={v!r}" for p, v, _ in WRONG_TYPES]
)
def test_it_refuses_the_wrong_type_at_each_field(refuse, tmp_path, pointer, value, expected):
    path = write(tmp_path / "wrong.trace.json", dumps(_set(ok_document(), pointer, value)))

    message = refuse(path, MALFORMED_TRACE)

    assert message == expected


# the same fields in the JSON Lines spelling: the message names the line
WRONG_TYPES_JSONL: list[tuple[str, Any, str]] = [
    ("/job/job_seed", 1, "line 1.job.job_seed: expected string, got number"),
    ("/events/0/seq", "0", "line 2.seq: expected integer, got string"),
    ("/events/1/payload", 1, "line 3.payload: expected object, got number"),
    ("/steps/0/fn", 1, "line 13.fn: expected string, got number"),
    ("/steps/1/output_ref", 1, "line 14.output_ref: expected string, got number"),
    ("/outputs/out-0000/hash", 1, "line 22.hash: expected string, got number"),
]


@pytest.mark.parametrize(
    ("pointer", "value", "expected"),
    WRONG_TYPES_JSONL,
    ids=[f"{p}={v!r}" for p, v, _ in WRONG_TYPES_JSONL],
)
def test_it_names_the_line_of_a_wrong_type_in_json_lines(
    refuse, tmp_path, pointer, value, expected
):
    document = _set(ok_document(), pointer, value)
    path = write(tmp_path / "wrong.trace.jsonl", b"".join(native.iter_jsonl(document)))

    message = refuse(path, MALFORMED_TRACE)

    assert message == expected


def test_it_refuses_a_jsonl_line_that_is_not_a_record(refuse, tmp_path):
    lines = golden("ok.trace.jsonl").read_bytes().splitlines(keepends=True)
    lines[4] = lines[4].replace(b'"record":"event",', b"", 1)
    path = write(tmp_path / "bad.trace.jsonl", b"".join(lines))

    message = refuse(path, MALFORMED_TRACE)

    assert message == "line 5.record: expected 'event', 'step' or 'output', got None"


def test_it_refuses_a_jsonl_record_that_is_not_an_object(refuse, tmp_path):
    lines = golden("ok.trace.jsonl").read_bytes().splitlines(keepends=True)
    lines[6] = b"[1, 2, 3]\n"
    path = write(tmp_path / "bad.trace.jsonl", b"".join(lines))

    message = refuse(path, MALFORMED_TRACE)

    assert message == "line 7: expected a JSON object, got array"


def test_it_refuses_a_newer_schema_version(refuse, tmp_path):
    path = write(tmp_path / "v2.trace.json", dumps(_set(ok_document(), "/schema_version", 2)))

    message = refuse(path, UNSUPPORTED_SCHEMA_VERSION)

    assert message == (
        "trace.schema_version: 2 is newer than the 1 this console supports; upgrade the "
        "console to replay it"
    )


def test_it_refuses_a_gzip_bomb(refuse, tmp_path, settings):
    settings.REPLAY_MAX_DECOMPRESSED_BYTES = 8 * MB
    # 400 gzip members of 16 MB of spaces each: about 6.4 GB from a 6 MB file
    member = gzip.compress(b" " * (16 * MB), mtime=0)
    path = tmp_path / "bomb.trace.json.gz"
    with path.open("wb") as fh:
        for _ in range(400):
            fh.write(member)
    assert 3 * MB < path.stat().st_size < 10 * MB

    message = refuse(path, MALFORMED_TRACE)

    assert message == (
        "bomb.trace.json.gz: more than 8388608 bytes once decompressed; refused (a gzip bomb, "
        "or a trace larger than this console accepts)"
    )


def test_it_refuses_a_corrupt_gzip_stream(refuse, tmp_path):
    data = gzip.compress(golden("ok.trace.json").read_bytes(), mtime=0)
    path = write(tmp_path / "corrupt.trace.json.gz", data[: len(data) // 2])

    message = refuse(path, MALFORMED_TRACE)

    assert message.startswith("corrupt.trace.json.gz: the gzip stream is corrupt or truncated")


def test_it_refuses_invalid_utf8(refuse, tmp_path):
    data = golden("ok.trace.json").read_bytes().replace(b'"question 0"', b'"question \xff"', 1)
    path = write(tmp_path / "latin.trace.json", data)

    message = refuse(path, MALFORMED_TRACE)

    offset = data.index(b"\xff")
    line = data[:offset].count(b"\n") + 1
    column = offset - data.rindex(b"\n", 0, offset)
    assert message == (
        f"trace: invalid UTF-8 at line {line} column {column} (byte offset {offset}): "
        "invalid start byte"
    )


def test_it_refuses_a_byte_order_mark(refuse, tmp_path):
    path = write(
        tmp_path / "bom.trace.json", b"\xef\xbb\xbf" + golden("ok.trace.json").read_bytes()
    )

    message = refuse(path, MALFORMED_TRACE)

    assert message == (
        "trace: starts with a UTF-8 byte-order mark; save the file as UTF-8 without BOM"
    )


@pytest.mark.parametrize(
    ("filename", "expected"),
    [
        ("empty.trace.json", "the file is empty"),
        (
            "empty.trace.jsonl",
            "line 1: the file is empty; a JSON Lines trace starts with its header",
        ),
    ],
)
def test_it_refuses_an_empty_file(refuse, tmp_path, filename, expected):
    path = write(tmp_path / filename, b"")

    message = refuse(path, MALFORMED_TRACE)

    assert message == expected


def test_it_refuses_a_document_of_whitespace_only_as_empty(refuse, tmp_path):
    path = write(tmp_path / "blank.trace.json", b" \t\r\n\x0b\x0c" * 3)

    message = refuse(path, MALFORMED_TRACE)

    assert message == "the file is empty"


def test_it_refuses_a_json_array_instead_of_an_object(refuse, tmp_path):
    path = write(tmp_path / "array.trace.json", dumps([ok_document()]))

    message = refuse(path, MALFORMED_TRACE)

    assert message == "trace: expected a JSON object, got array"


def test_it_refuses_an_unknown_field(refuse, tmp_path):
    doc = ok_document()
    doc["events"][2]["extra"] = 1
    path = write(tmp_path / "extra.trace.json", dumps(doc))

    message = refuse(path, MALFORMED_TRACE)

    assert message == "events[2]: unknown field 'extra'"


@pytest.mark.parametrize("field", ["type", "payload"])
def test_it_refuses_a_lone_surrogate_escape(refuse, tmp_path, field):
    doc = ok_document()
    if field == "type":
        doc["events"][3]["type"] = "brain\ud800tick"
    else:
        doc["events"][3]["payload"]["note"] = "\udfff"
    path = write(tmp_path / "surrogate.trace.json", json.dumps(doc).encode())  # \u escapes

    message = refuse(path, MALFORMED_TRACE)

    shown = "'brain\\ud800tick'" if field == "type" else "'\\udfff'"
    lone = "ud800" if field == "type" else "udfff"
    assert message == (
        f"trace: the string {shown} holds a lone UTF-16 surrogate \\{lone}, which is not "
        "Unicode text; escape a character outside the BMP as a surrogate pair, or write it "
        "as UTF-8"
    )


def test_it_accepts_a_surrogate_pair_escape(var_dirs, tmp_path):
    doc = ok_document()
    doc["meta"] = {"note": "\U0001f600"}  # json.dumps writes it as \ud83d\ude00
    path = write(tmp_path / "pair.trace.json", json.dumps(doc).encode())

    with path.open("rb") as fh:
        trace = trace_ingest(source=fh, filename=path.name).trace

    assert trace.last_status == "ok"


def test_a_sealed_message_whose_header_cannot_be_written_leaves_no_spool_open(monkeypatch):
    """`SealMessage.finish` refuses a header mace-v1 cannot write (a NaN final answer) and
    closes the buffer it had started: the caller never gets it to close."""
    import tempfile

    from core.formats import native
    from core.formats.native import seal as native_seal

    made = []
    real = tempfile.SpooledTemporaryFile

    def tracked(*args, **kwargs):
        made.append(real(*args, **kwargs))
        return made[-1]

    monkeypatch.setattr(native_seal.tempfile, "SpooledTemporaryFile", tracked)
    header = {
        "format": "replay-trace",
        "schema_version": 1,
        "job": {"job_id": "j", "job_seed": "s"},
        "required_snapshots": [],
        "snapshots": [],
        "final_answer": float("nan"),
    }
    with native.SealMessage() as seal, pytest.raises(ReplayError) as refused:
        seal.finish(header)
    assert refused.value.code == MALFORMED_TRACE
    assert len(made) == 3  # events, steps, and the message finish began
    assert all(spool.closed for spool in made)
