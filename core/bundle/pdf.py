"""The printable summary of an evidence bundle: ``render_summary(summary) -> PDF bytes``.

Pure (no Django, no clock): the same summary gives the same bytes (the PDF's creation date is
the bundle's ``created_at``). ``summary`` is what ``core.bundle.pdf_summary(bundle_bytes)``
returns, optionally with a ``request`` mapping of label -> text (kind, legal basis, due date:
whatever the caller wants shown about the request); subjects appear by opaque ref only.

Text is set in the PDF core fonts (Helvetica, Courier), which cover Latin-1; any other
character is written as ``?`` (refs, hashes, keys and codes are ASCII).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from fpdf import FPDF
from fpdf.enums import XPos, YPos

from core.ledger.signing import parse_time


def _text(value: Any) -> str:
    text = "-" if value is None else str(value)
    return text.encode("latin-1", "replace").decode("latin-1")


class _Summary(FPDF):
    def footer(self) -> None:
        self.set_y(-12)
        self.set_font("Helvetica", size=8)
        self.cell(0, 6, f"page {self.page_no()}/{{nb}}", align="C")


def _heading(pdf: FPDF, text: str) -> None:
    pdf.ln(3)
    pdf.set_font("Helvetica", "B", 12)
    pdf.cell(0, 7, _text(text), new_x=XPos.LMARGIN, new_y=YPos.NEXT)
    pdf.set_font("Helvetica", size=10)


def _field(pdf: FPDF, label: str, value: Any, *, mono: bool = False) -> None:
    pdf.set_font("Helvetica", "B", 9)
    pdf.cell(42, 5, _text(label))
    pdf.set_font("Courier" if mono else "Helvetica", size=8 if mono else 9)
    pdf.multi_cell(0, 5, _text(value), new_x=XPos.LMARGIN, new_y=YPos.NEXT)


_HEADINGS = ("trace", "format", "verdict", "replay", "code", "fields", "file")
_WIDTHS = (40, 20, 20, 28, 36, 22, 24)  # mm: the A4 page's 190 between the margins


def _fit(pdf: FPDF, text: str, width: float) -> str:
    """``text`` cut (with ``..``) to fit one line of ``width`` mm in the current font."""
    room = width - 2
    if pdf.get_string_width(text) <= room:
        return text
    low, high = 0, len(text)  # the longest prefix that fits with ".." after it
    while low < high:
        mid = (low + high + 1) // 2
        if pdf.get_string_width(text[:mid] + "..") <= room:
            low = mid
        else:
            high = mid - 1
    return text[:low] + ".."


def _row(pdf: FPDF, cells: tuple[Any, ...], *, bold: bool = False) -> None:
    """One table row of single-line cells (a thousand traces render in about a second, where
    fpdf2's wrapping ``table()`` took ten)."""
    pdf.set_font("Helvetica", "B" if bold else "", 8)
    if pdf.will_page_break(5):
        pdf.add_page()
    for i, (value, width) in enumerate(zip(cells, _WIDTHS, strict=True)):
        last = i == len(_WIDTHS) - 1
        pdf.cell(
            width,
            5,
            _fit(pdf, _text(value), width),
            border="B",
            new_x=XPos.LMARGIN if last else XPos.RIGHT,
            new_y=YPos.NEXT if last else YPos.TOP,
        )


def render_summary(summary: Mapping[str, Any]) -> bytes:
    """A readable PDF: the request, its subjects (by ref), the traces with their verdicts and
    replay status, the manifest hash, the signing key and the signature."""
    pdf = _Summary(format="A4")
    pdf.set_creation_date(parse_time(str(summary["created_at"])))
    pdf.set_title(_text(f"Evidence bundle {summary['request_ref']}"))
    pdf.set_author("Replay Audit Console")
    pdf.set_auto_page_break(auto=True, margin=16)
    pdf.add_page()
    pdf.set_font("Helvetica", "B", 16)
    pdf.cell(
        0,
        10,
        _text(f"Evidence bundle for request {summary['request_ref']}"),
        new_x=XPos.LMARGIN,
        new_y=YPos.NEXT,
    )
    pdf.set_font("Helvetica", size=9)
    pdf.multi_cell(
        0,
        5,
        "Subjects are named by opaque reference. Values are redacted unless an admin released"
        " them (each release is a PII_REVEALED event in the governance ledger). Check the"
        " bundle file itself offline with: python -m dsr.bundle_cli FILE --trust-key KEY",
        new_x=XPos.LMARGIN,
        new_y=YPos.NEXT,
    )

    _heading(pdf, "Request")
    _field(pdf, "request", summary["request_ref"])
    for label, value in (summary.get("request") or {}).items():
        _field(pdf, label, value)
    _field(pdf, "bundle created", summary["created_at"])
    _field(pdf, "subjects", ", ".join(summary["subject_refs"]))

    traces = summary.get("traces") or []
    _heading(pdf, f"Traces ({len(traces)})")
    if summary.get("nothing_held") or not traces:
        pdf.multi_cell(
            0,
            5,
            "Nothing held: no stored trace concerns these subjects.",
            new_x=XPos.LMARGIN,
            new_y=YPos.NEXT,
        )
    else:
        _row(pdf, _HEADINGS, bold=True)
        for trace in traces:
            _row(
                pdf,
                (
                    trace.get("trace_id"),
                    trace.get("format"),
                    trace.get("verdict"),
                    f"{_text(trace.get('replay_mode'))}: {_text(trace.get('replay_status'))}",
                    trace.get("replay_error_code") or "",
                    f"{trace.get('fields', 0)} ({trace.get('released', 0)} released)",
                    trace.get("file_sha256"),
                ),
            )
        pdf.ln(2)
    _field(pdf, "ledger events", summary.get("events", 0))

    _heading(pdf, "Integrity")
    _field(pdf, "manifest", summary["manifest_sha256"], mono=True)
    if summary.get("bundle_sha256"):
        _field(pdf, "bundle file", summary["bundle_sha256"], mono=True)
    _field(pdf, "signing key", summary["key_id"], mono=True)
    _field(pdf, "public key", summary["public_key"], mono=True)
    _field(pdf, "signature", summary["signature"], mono=True)
    if summary.get("tlog_size") is not None:
        _heading(pdf, "Transparency log")
        _field(pdf, "checkpoint size", summary["tlog_size"])
        _field(pdf, "checkpoint root", summary["tlog_root"], mono=True)
        _field(
            pdf,
            "proofs",
            f"{summary.get('proven', 0)} event(s): the signed checkpoint and each event's "
            "inclusion proof are in ledger/tlog.json of the bundle; check them with "
            "python -m dsr.bundle_cli FILE --vkey KEY",
        )
    return bytes(pdf.output())
