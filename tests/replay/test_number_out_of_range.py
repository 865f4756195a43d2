"""A number no double holds (``1e400``) in any format's file is refused MALFORMED_TRACE at its
real place in the uploaded text: the line and column (in characters) of the number, and its
JSON pointer; never a place in a text the console made from it (Paxman's rehydration read
back the artifact's canonical bytes, where ``inf`` had become ``Infinity``).

Each file is a real fixture with one number swapped for ``1e400``; the expected line and
column are counted in the file the test uploads, so a wrong position fails.
"""

from __future__ import annotations

import gzip
import io
import json
from pathlib import Path

import pytest

from core.errors import MALFORMED_TRACE
from core.formats import contextos, native
from core.formats import paxman as px
from core.formats.jsonstrict import loads_strict
from replay.services import trace_verify_file
from tests.published import PUBLISHED

HERE = Path(__file__).resolve().parent / "fixtures"
SHARED = PUBLISHED
GOLDEN = HERE / "golden" / "ok.trace.json"
MONEY = SHARED / "paxman" / "money_unresolved.json"
SWISS = SHARED / "ahd" / "checkout" / "docs" / "evals" / "2026-04-21-swiss.replay.json"
WHY = "is larger in magnitude than any double (at most 1.7976931348623157e+308)"

pytestmark = pytest.mark.django_db


def swapped(data: bytes, old: bytes, new: bytes = b"1e400", *, among: int = 1) -> bytes:
    """``data`` with the first ``old`` (of ``among`` in all) replaced by ``new``."""
    assert data.count(old) == among, old
    return data.replace(old, new, 1)


def place(data: bytes, literal: str = "1e400") -> tuple[int, int]:
    """The line and column (1-based, in characters) of the one ``literal`` in ``data``."""
    text = data.decode("utf-8")
    assert text.count(literal) == 1
    index = text.index(literal)
    return text.count("\n", 0, index) + 1, index - text.rfind("\n", 0, index)


def expected(where: str, data: bytes, pointer: str, literal: str = "1e400") -> str:
    line, column = place(data, literal)
    at = f"line {line} column {column} ({pointer})"
    return f"{where}: number out of range at {at}: {literal} {WHY}"


def verified(data: bytes, filename: str, **kwargs) -> dict:
    return trace_verify_file(source=io.BytesIO(data), filename=filename, **kwargs)


def assert_refused_at(report: dict, message: str) -> None:
    assert (report["status"], report["error_code"]) == ("refused", MALFORMED_TRACE)
    assert report["message"] == message


# --- Paxman: the case that named the rehydration's text ------------------------------------


def test_it_refuses_a_paxman_1e400_at_its_line_column_and_pointer():
    data = swapped(MONEY.read_bytes(), b'"metadata":{}', b'"metadata":{"x":1e400}')
    report = verified(data, MONEY.name)
    assert_refused_at(
        report,
        "artifact: number out of range at line 1 column 1831 (/metadata/x): 1e400 is larger "
        "in magnitude than any double (at most 1.7976931348623157e+308)",
    )
    assert place(data) == (1, 1831)
    assert [c["name"] for c in report["checks"]] == ["type"]


def test_it_refuses_a_negative_overflow_in_an_indented_paxman_artifact_too():
    doc = json.loads(MONEY.read_bytes())
    doc["statistics"]["wall_clock_ms"] = 7.5
    data = swapped(json.dumps(doc, indent=2).encode(), b"7.5", b"-2.5e308")
    report = px.verify_bytes(data).to_json()
    assert_refused_at(report, expected("artifact", data, "/statistics/wall_clock_ms", "-2.5e308"))


# --- every other format's strict reader ----------------------------------------------------


def test_it_refuses_a_native_json_document_at_the_number_in_an_array():
    data = swapped(GOLDEN.read_bytes(), b"0.076856978")
    assert_refused_at(
        verified(data, GOLDEN.name), expected("trace", data, "/snapshots/2/body/routes/1/bias")
    )


def test_it_refuses_a_native_json_lines_trace_at_the_files_line_not_the_records():
    doc = json.loads(GOLDEN.read_bytes())
    lines = b"".join(native.iter_jsonl(doc))
    data = swapped(lines, b'"load":0.382628609', b'"load":1e400')
    message = expected("line 8", data, "/payload/load")
    assert place(data)[0] == 8
    assert_refused_at(verified(data, "ok.trace.jsonl"), message)
    assert_refused_at(verified(data, "ok.trace.jsonl", workers=2), message)
    # gzip-compressed: the place in the decompressed text
    assert_refused_at(verified(gzip.compress(data), "ok.trace.jsonl.gz"), message)


def test_it_refuses_an_ahd_sidecar_at_the_number(tmp_path):
    data = swapped(SWISS.read_bytes(), b'"n": 5', b'"n": 1e400')
    path = tmp_path / SWISS.name
    path.write_bytes(data)
    report = verified(data, SWISS.name, path=str(path))
    assert_refused_at(report, expected(SWISS.name, data, "/sampling/n"))


@pytest.mark.parametrize(
    ("name", "old", "new", "pointer"),
    [
        # one line, with non-ASCII text before the number: the column counts characters
        (
            "pass.snapshot.json",
            b'"wordCount":8}',
            b'"wordCount":1e400}',
            "/artifacts/1/content/events/0/wordCount",
        ),
        (
            "pass.baseline.json",
            b'"capturedAt": 1767225600000',
            b'"capturedAt": 1e400',
            "/snapshot/capturedAt",
        ),
    ],
)
def test_it_refuses_a_verist_file_at_the_number(name, old, new, pointer):
    data = swapped((HERE / "verist" / name).read_bytes(), old, new)
    assert_refused_at(verified(data, name), expected("snapshot", data, pointer))
    if name == "pass.snapshot.json":  # café, Straße... come before it on its one line
        assert place(data)[1] < data.index(b"1e400") + 1


def test_it_refuses_a_mace_log_at_the_number():
    data = swapped(
        (HERE / "mace" / "log_s1.json").read_bytes(), b'"depth_level": 1', b'"depth_level": 1e400'
    )
    assert_refused_at(
        verified(data, "log_s1.json"), expected("log_s1.json", data, "/router_decision/depth_level")
    )


CONTEXTOS = HERE / "contextos" / "pass.trace.json"


def test_it_refuses_a_small_contextos_trace_at_the_number():
    data = swapped(CONTEXTOS.read_bytes(), b'"amount": 42.5', b'"amount": 1e400', among=2)
    with pytest.raises(contextos.ReplayError) as refused:
        contextos.loads(data, "pass.trace.json")
    assert refused.value.code == MALFORMED_TRACE
    assert refused.value.message == expected("pass.trace.json", data, "/invoke/request/amount")


def test_it_refuses_a_large_indented_contextos_trace_past_its_first_megabytes():
    # many ignored keys, one per line, push the number past the reader's first chunks (it
    # drops what it has read): the line is still the file's
    padding = b"".join(b'  "pad%06d": 0,\n' % i for i in range(150_000))
    data = CONTEXTOS.read_bytes().replace(b"{\n", b"{\n" + padding, 1)
    data = swapped(data, b'"amount": 42.5', b'"amount": 1e400', among=2)
    assert len(data) > 2 * 1024**2
    with pytest.raises(contextos.ReplayError) as refused:
        contextos.loads(data, "big.trace.json")
    message = expected("big.trace.json", data, "/invoke/request/amount")
    assert refused.value.message == message
    assert place(data)[0] > 150_000


def test_it_refuses_a_large_compact_contextos_trace_far_along_its_one_line():
    doc = json.loads(CONTEXTOS.read_bytes())
    # many values: the reader drops the text it has read between them (no newline in it)
    doc = {**{f"pad{i}": "x" * 65536 for i in range(48)}, **doc}
    doc["tool_envelopes"][1]["result"]["n"] = 7.25
    data = swapped(json.dumps(doc, separators=(",", ":")).encode(), b"7.25")
    with pytest.raises(contextos.ReplayError) as refused:
        contextos.loads(data, "big.trace.json")
    assert refused.value.message == expected("big.trace.json", data, "/tool_envelopes/1/result/n")
    assert place(data)[0] == 1


def test_it_refuses_a_contextos_pack_at_the_number():
    pack = HERE / "contextos" / "refund-triage@1.4.0.pack.json"
    doc = json.loads(pack.read_bytes())
    doc["contextos_pack"]["body"]["limit"] = 7.25
    data = swapped(json.dumps(doc, indent=2).encode(), b"7.25")
    with pytest.raises(contextos.ReplayError) as refused:
        contextos.parse_input(data, pack.name)
    assert refused.value.message == expected(pack.name, data, "/contextos_pack/body/limit")


# --- the reader itself ---------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "line", "column", "pointer", "literal"),
    [
        ("1e400", 1, 1, "", "1e400"),
        ('[1, 2.5, {"a": [0, -1E+309]}]', 1, 20, " (/2/a/1)", "-1E+309"),
        ('{\n "a/b": {"~k": [\n  "1e400", 1e400]}}', 3, 12, " (/a~1b/~0k/1)", "1e400"),
        ('{"s": "\\"1e400", "t": 1' + "0" * 400 + ".5}", 1, 23, " (/t)", "1" + "0" * 29),
    ],
)
def test_loads_strict_names_line_column_and_pointer(text, line, column, pointer, literal):
    with pytest.raises(contextos.ReplayError) as refused:
        loads_strict(text.encode(), where="doc")
    message = refused.value.message
    assert message.startswith(f"doc: number out of range at line {line} column {column}{pointer}: ")
    assert literal in message
    assert message.endswith(WHY)


def test_numbers_that_round_to_zero_or_the_largest_double_are_read():
    assert loads_strict(b"[1e-400, 1.7976931348623157e308, -0.0]", where="doc") == [
        0.0,
        1.7976931348623157e308,
        -0.0,
    ]
