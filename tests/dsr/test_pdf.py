"""The bundle's printable summary (``core.bundle.pdf``): a PDF that says what the bundle holds and
carries its manifest hash and signature. The text is read back by inflating the page streams
(fpdf2 writes core-font text as literal strings), no PDF library needed."""

from __future__ import annotations

import re
import zlib

from core import bundle
from core.bundle import pdf
from tests.dsr import bundles as b

SUMMARY = bundle.pdf_summary(b.build())


def page_text(data: bytes) -> str:
    lines = []
    for stream in re.findall(rb"stream\r?\n(.*?)\r?\nendstream", data, re.S):
        try:
            content = zlib.decompress(stream)
        except zlib.error:
            continue  # not a page's content (e.g. a font)
        lines += [m.decode("latin-1") for m in re.findall(rb"\((.*?)\) Tj", content)]
    return "\n".join(lines).replace("\\(", "(").replace("\\)", ")")


def test_it_is_a_pdf_with_the_manifest_hash_and_signature():
    data = pdf.render_summary(SUMMARY)
    text = page_text(data)

    assert data.startswith(b"%PDF-")
    assert data.rstrip().endswith(b"%%EOF")
    assert SUMMARY["manifest_sha256"] in text.splitlines()
    assert SUMMARY["bundle_sha256"] in text.splitlines()
    assert b.KEY_ID in text.splitlines()
    signature = SUMMARY["signature"]
    assert signature in text.replace("\n", "")


def test_it_shows_the_request_subjects_and_each_traces_verdict_and_replay():
    text = page_text(pdf.render_summary({**SUMMARY, "request": {"legal basis": "GDPR Art. 15"}}))
    lines = text.splitlines()

    assert "Evidence bundle for request dsr_0001" in lines
    assert "GDPR Art. 15" in lines
    assert b.SUBJECT in lines
    assert "Traces (2)" in lines
    for expected in ("run-7", "paxman", "diverged", "audit: diverged", "RESULT_MISMATCH"):
        assert expected in lines
    assert "2 (1 released)" in lines


def test_it_says_when_nothing_is_held():
    summary = bundle.pdf_summary(b.build(traces=(), rows=[], with_checkpoint=False))
    text = page_text(pdf.render_summary(summary))

    assert "Nothing held: no stored trace concerns these subjects." in text.splitlines()
    assert summary["manifest_sha256"] in text.splitlines()


def test_a_value_too_long_for_its_column_is_cut_to_fit():
    long_id = "trace-" + "x" * 80
    traces = [{**SUMMARY["traces"][0], "trace_id": long_id}]
    lines = page_text(pdf.render_summary({**SUMMARY, "traces": traces})).splitlines()

    cut = next(line for line in lines if line.startswith("trace-x"))
    assert cut.endswith("..")
    assert len(cut) < 30


def test_a_thousand_traces_fit_on_numbered_pages():
    traces = [{**SUMMARY["traces"][0], "trace_id": f"t{i:04d}"} for i in range(1000)]
    data = pdf.render_summary({**SUMMARY, "traces": traces})
    lines = page_text(data).splitlines()

    assert [line for line in lines if line.startswith("t0")][:2] == ["t0000", "t0001"]
    assert "t0999" in lines
    assert len(re.findall(rb"/Type /Page(?!s)", data)) > 10


def test_the_same_summary_gives_the_same_bytes():
    assert pdf.render_summary(SUMMARY) == pdf.render_summary(SUMMARY)


def test_it_writes_characters_outside_latin_1_as_question_marks():
    text = page_text(pdf.render_summary({**SUMMARY, "request": {"note": "Zoë → 東京"}}))

    assert "Zo\xeb ? ??" in text.splitlines()
