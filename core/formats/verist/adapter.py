"""A Verist snapshot (or ``verist-baseline@`` envelope) behind the one format interface
(:mod:`core.formats.protocol`): a baseline envelope's first bytes are a definite claim;
verify and replay re-hash and recompute (:func:`core.formats.verist.verify`); compare is
Verist's ``compareSnapshots``.

Pure: no Django.
"""

from __future__ import annotations

import datetime
import re
from collections.abc import Mapping
from typing import IO, Any

from core import errors
from core.errors import ReplayError
from core.formats import default_registry, verist
from core.formats.common import halt_refusal, halts_clear
from core.formats.protocol import (
    CompanionRule,
    Difference,
    FormatRegistry,
    NativeCode,
    StoredFacts,
    VerifyContext,
)
from core.replay.report import ReplayReport

#: Top-level keys of a bare Verist snapshot, and the baseline envelope's own (``format`` is
#: native's too: a ``verist-baseline@`` file is claimed by ``sniff`` before keys are asked)
VERIST_KEYS = frozenset(
    {"workflowId", "workflowVersion", "stepName", "inputHash", "artifacts", "capturedAt"}
    | {"snapshot"}
)
_VERIST_HEAD = re.compile(rb'\A(?:\xef\xbb\xbf)?\s*\{\s*"format"\s*:\s*"verist-baseline@')


class VeristFormat:
    name = verist.FORMAT
    label = "a Verist snapshot"
    keys = VERIST_KEYS
    companions: tuple[CompanionRule, ...] = ()
    #: every code a report of it can carry besides the console's own (protocol.CONSOLE_CODES)
    codes = frozenset(
        {
            errors.MALFORMED_TRACE,
            errors.UNSUPPORTED_SCHEMA_VERSION,
            errors.HASH_MISMATCH,
            errors.INPUT_HASH_MISMATCH,
            errors.MISSING_PERSISTED_AGENT_OUTPUT,
            errors.REPLAY_DIVERGENCE,
        }
    )
    unstorable_codes = frozenset({errors.MALFORMED_TRACE, errors.UNSUPPORTED_SCHEMA_VERSION})
    replay_note = (
        "re-hashes the input and artifacts (hashValue, js-sorted), loads the step-output and "
        "recomputes the step with its registered function (seed 002)"
    )
    #: no templates of its own: the console's shared panel shows it
    templates: str | None = None
    report_template: str | None = None
    replay_options = verist.REPLAY_OPTIONS
    check_options = staticmethod(verist.check_options)
    #: its reference step function (seed 002), which a replay of the golden sample re-executes
    functions = staticmethod(verist.register_functions)

    def sniff(self, head: bytes, filename: str) -> bool:
        return _VERIST_HEAD.match(head) is not None

    def storable(self, report: ReplayReport) -> bool:
        """Refused only for the file's own faults: the recompute's input-schema gate
        (MALFORMED_TRACE at ``input``, the last check) judges a well-formed snapshot, which
        is stored with that verdict and replays with ``validate`` off."""
        if report.error_code not in self.unstorable_codes:
            return True
        return bool(report.checks) and report.checks[-1].name == "recompute"

    def parse(self, source: IO[bytes], filename: str, ctx: VerifyContext) -> verist.VeristFile:
        data = source.read(verist.MAX_SNAPSHOT_BYTES + 1)
        return verist.parse(data)

    def refused(self, exc: ReplayError, filename: str, ctx: VerifyContext) -> ReplayReport:
        return verist.refused(exc, ctx.mode)

    def verify(self, parsed: verist.VeristFile, filename: str, ctx: VerifyContext) -> ReplayReport:
        refusal = halt_refusal(self.name, ctx.file_id, ctx)
        if refusal is not None:
            report = verist.new_report(refusal.trace_id, ctx.mode)
            report.checks = refusal.checks
            report.fail(refusal.error_code or errors.FORCE_HALT_ACTIVE, refusal.message)
            report.verist["code"] = verist.VERIST_CODES[errors.FORCE_HALT_ACTIVE]
            return report
        report = verist.verify(
            parsed,
            mode=ctx.mode,
            registry=ctx.registry or default_registry(),
            options=verist.recompute_options(ctx.options),
            trace_id=ctx.file_id,
        )
        return halts_clear(report, ctx)

    replay = verify

    def facts(
        self, parsed: verist.VeristFile, report: ReplayReport, ctx: VerifyContext
    ) -> StoredFacts:
        s = parsed.snapshot
        return StoredFacts(
            trace_id=(ctx.file_id or s["inputHash"])[:64],
            schema_version=verist.SCHEMA_VERSION,
            job_id=f"{s['workflowId']}/{s['stepName']}"[:200],
            job_seed=s["inputHash"],
            runtime_name="verist",
            runtime_version=str(s["workflowVersion"])[:64],
            started_at=_iso_ms(s["capturedAt"]),
            event_count=len(s["artifacts"]),
            step_count=1,
            missing_outputs=["step-output"] if not report.replayable else [],
        )

    def native_code(self, report: Mapping[str, Any]) -> NativeCode | None:
        """Verist's own word for the report's code (``report["verist"]["code"]``)."""
        own = report.get("verist")
        code = own.get("code") if isinstance(own, Mapping) else None
        return NativeCode("Verist", code) if isinstance(code, str) and code else None

    def panel(self, parsed: verist.VeristFile) -> dict[str, str]:
        s = parsed.snapshot
        facts = {
            "file": parsed.kind,
            "workflowId": s["workflowId"],
            "workflowVersion": s["workflowVersion"],
            "stepName": s["stepName"],
            "inputHash": s["inputHash"],
            "capturedAt": f"{s['capturedAt']} ({_iso_ms(s['capturedAt']) or 'out of range'})",
            "artifacts": ", ".join(
                f"{a['kind']}{'' if 'content' in a else ' (hash-only)'}" for a in s["artifacts"]
            )
            or "none",
            "step function": f"{parsed.step_key}",
        }
        if parsed.envelope is not None:
            meta = parsed.envelope["metadata"]
            facts["inputPath"] = meta["inputPath"]
            facts["label"] = meta.get("label", "") or "none"
            facts["commandsCaptured"] = "yes" if meta["commandsCaptured"] else "no"
        return facts

    def compare(self, a: verist.VeristFile, b: verist.VeristFile) -> list[Difference]:
        """``compareSnapshots``: ``/input/...`` (inputDiff), ``/output/...`` (outputDiff),
        ``/commands/...`` (commandsDiff); a diff Verist leaves undefined is one row saying so."""
        result = verist.compare_snapshots(a, b)
        rows: list[Difference] = []
        for key, prefix in (
            ("inputDiff", "/input"),
            ("outputDiff", "/output"),
            ("commandsDiff", "/commands"),
        ):
            d = result[key]
            if d is None:
                rows.append(Difference(prefix, "not comparable", None, f"{key} is undefined"))
                continue
            for e in d["entries"]:
                absent = e.get("absent")
                kind = (
                    "added" if absent == "before" else "removed" if absent == "after" else "changed"
                )
                rows.append(
                    Difference(
                        prefix + e["path"],
                        kind,
                        None if absent == "before" else e["before"],
                        None if absent == "after" else e["after"],
                    )
                )
        return rows

    def records(self, parsed: verist.VeristFile) -> Any:
        """The file as the trace page's records: the snapshot's fields, its input's entries,
        its artifacts and what its step output and commands recorded
        (:func:`.view.records`)."""
        from core.formats.verist.view import records

        return records(parsed)


def _iso_ms(ms: int | float) -> str | None:
    try:
        when = datetime.datetime.fromtimestamp(ms / 1000, tz=datetime.UTC)
    except (OverflowError, OSError, ValueError):
        return None
    return when.isoformat(timespec="milliseconds").replace("+00:00", "Z")


def register(registry: FormatRegistry) -> None:
    registry.register(VeristFormat())
