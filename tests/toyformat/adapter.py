"""The toy format's adapter: the whole format, for the recipe test.

A toy log is a JSON object: ``toy`` (its id), ``job``, ``values`` (integers) and ``sum``
(their sum, which verify recomputes: a wrong sum is ``INTEGRITY_FAILURE``). Its note
(``<stem>.note.txt``, a companion) is stored with it and its length shown on the panel. Its
own part of a run's report page is ``templates/report.html`` in this package, and a wrong sum
is ``bad_sum`` in the toy's own words, beside the console's code.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import IO, Any

from core import errors
from core.errors import ReplayError
from core.formats.common import differences, halt_refusal, halts_clear
from core.formats.protocol import (
    CompanionRule,
    Difference,
    FormatRegistry,
    NativeCode,
    StoredFacts,
    VerifyContext,
)
from core.replay.report import Check, ReplayReport

FORMAT = "toy-log"
MAX_BYTES = 64 * 1024


class ToyLog:
    def __init__(self, document: dict, note: bytes | None) -> None:
        self.document = document
        self.note = note


class ToyFormat:
    name = FORMAT
    label = "a toy log"
    keys = frozenset({"toy"})
    companions: tuple[CompanionRule, ...] = (
        CompanionRule(r"\.toy\.json$", r"^{stem}\.note\.txt$", describes="a toy log's note"),
    )
    #: what it refuses with: its own codes, from core/errors.py (the console's own, such as
    #: FORCE_HALT_ACTIVE from ``halt_refusal``, need no declaring)
    codes = frozenset({errors.MALFORMED_TRACE, errors.INTEGRITY_FAILURE})
    unstorable_codes = frozenset({errors.MALFORMED_TRACE})
    replay_note = "re-adds the values and compares the sum"
    #: its own templates, in its package: its part of a run's report page
    templates: str | None = str(Path(__file__).with_name("templates"))
    report_template: str | None = "report.html"

    def sniff(self, head: bytes, filename: str) -> bool:
        return filename.lower().endswith(".toy.json")

    def parse(self, source: IO[bytes], filename: str, ctx: VerifyContext) -> ToyLog:
        try:
            doc = json.loads(source.read(MAX_BYTES + 1))
        except ValueError as exc:
            raise ReplayError(errors.MALFORMED_TRACE, f"{filename}: not JSON: {exc}") from None
        if not isinstance(doc, dict) or not isinstance(doc.get("toy"), str):
            raise ReplayError(errors.MALFORMED_TRACE, f"{filename}: toy: required")
        stem = filename[: -len(".toy.json")]
        return ToyLog(doc, ctx.inputs.get(f"{stem}.note.txt"))

    def refused(self, exc: ReplayError, filename: str, ctx: VerifyContext) -> ReplayReport:
        report = ReplayReport(trace_id=None, format=self.name, mode=ctx.mode)
        report.checks.append(Check("format", False, exc.message))
        return report.fail(exc.code, exc.message)

    def verify(self, parsed: ToyLog, filename: str, ctx: VerifyContext) -> ReplayReport:
        refusal = halt_refusal(self.name, parsed.document["toy"], ctx)
        if refusal is not None:
            return refusal
        report = ReplayReport(trace_id=parsed.document["toy"], format=self.name, mode=ctx.mode)
        total = sum(parsed.document.get("values", []))
        ok = total == parsed.document.get("sum")
        report.checks.append(Check("sum", ok, f"the values add up to {total}"))
        if not ok:
            report.fail(
                errors.INTEGRITY_FAILURE, f"sum is {parsed.document.get('sum')}, not {total}"
            )
        return halts_clear(report, ctx)

    replay = verify

    def facts(self, parsed: ToyLog, report: ReplayReport, ctx: VerifyContext) -> StoredFacts:
        doc = parsed.document
        return StoredFacts(
            trace_id=doc["toy"],
            schema_version=1,
            job_id=str(doc.get("job", "")),
            runtime_name="toy",
            runtime_version="1",
            step_count=len(doc.get("values", [])),
        )

    def native_code(self, report: Mapping[str, Any]) -> NativeCode | None:
        """A wrong sum in the toy's own words."""
        if report.get("error_code") == errors.INTEGRITY_FAILURE:
            return NativeCode("toy", "bad_sum")
        return None

    def panel(self, parsed: ToyLog) -> dict[str, str]:
        return {
            "toy id": parsed.document["toy"],
            "values": ", ".join(map(str, parsed.document.get("values", []))),
            "note": "none" if parsed.note is None else f"{len(parsed.note)} bytes",
        }

    def compare(self, a: ToyLog, b: ToyLog) -> list[Difference]:
        return differences(a.document, b.document)


def register(registry: FormatRegistry) -> None:
    registry.register(ToyFormat())
