"""The ContextOS trace (:mod:`core.formats.contextos`) behind the one format interface.

- Detection: a ``*.contextos.json`` name (a definite claim), or a top-level key only a
  ContextOS trace has (``invoke``, ``tool_envelopes``, ``decision_record``, ``pack_version``,
  ``kg_snapshot_id``) among the first bytes; its ``trace_id`` is shared with the native
  format, so it decides nothing (``shared_keys``).
- Parse: the strict streaming read; the pinned pack and KG snapshot are looked for among the
  files uploaded with the trace (``*.pack.json``, ``*.kg.json``, matched by content).
- Verify: the chain and the record, without the pinned inputs.
- Replay: the pinned inputs come from what is stored with the trace (a stored trace) or what
  was uploaded with it; each is stored as a snapshot (``contextos-pack``, ``contextos-kg``,
  the file's text, id ``snapshot_id_of(text)``) whatever its state, so a replay can say
  it is unsigned, or that its envelope hash differs.

Pure: no Django.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import IO, Any

from core import errors
from core.errors import ReplayError
from core.formats import contextos as cx
from core.formats.common import differences, halt_refusal, halts_clear, snapshot_id_of
from core.formats.protocol import (
    CompanionRule,
    Difference,
    FormatRegistry,
    InputLimits,
    NativeCode,
    Setting,
    StoredFacts,
    StoredSnapshot,
    VerifyContext,
)

CONTEXTOS_KEYS = frozenset(
    {"invoke", "tool_envelopes", "decision_record", "pack_version", "kg_snapshot_id"}
)
SUFFIX = ".contextos.json"
#: keys a ContextOS trace shares with another format: they decide nothing in detection
SHARED_KEYS = frozenset({"trace_id"})
#: at most this many tool envelopes are compared field by field (two runs of one job)
MAX_COMPARED_ENVELOPES = 1000


class ContextosRun:
    """A parsed trace and the pinned inputs uploaded with it."""

    def __init__(self, trace: cx.ContextosTrace, inputs: cx.Inputs) -> None:
        self.trace = trace
        self.inputs = inputs


class ContextosFormat:
    name = cx.FORMAT
    label = "a ContextOS trace"
    keys = CONTEXTOS_KEYS
    shared_keys = SHARED_KEYS
    #: its pinned pack and KG snapshot, dropped beside it
    companions: tuple[CompanionRule, ...] = (
        CompanionRule(
            r"\.contextos\.json$",
            r"\.(pack|kg)\.json$",
            describes="a ContextOS trace's pinned pack or KG snapshot",
        ),
    )
    #: every code a report of it can carry besides the console's own (protocol.CONSOLE_CODES)
    codes = frozenset(
        {
            errors.MALFORMED_TRACE,
            errors.UNSUPPORTED_SCHEMA_VERSION,
            errors.MISSING_SNAPSHOT,
            errors.INTEGRITY_FAILURE,
            errors.CAPABILITY_NOT_FOUND,
            errors.REPLAY_DIVERGENCE,
            errors.RESULT_MISMATCH,
            errors.UNKNOWN_KEY,
        }
    )
    #: a trace whose pinned pack or KG snapshot names a key the registry does not have is
    #: refused (its inputs' signatures could not be checked): register the key, upload again
    unstorable_codes = frozenset(
        {errors.MALFORMED_TRACE, errors.UNSUPPORTED_SCHEMA_VERSION, errors.UNKNOWN_KEY}
    )
    replay_note = (
        "runs the pack's registered canonical loop offline over the recorded tool results, "
        "with the pinned pack and KG snapshot stored beside the trace, and diffs the "
        "DecisionRecord (seed 004)"
    )
    #: its own templates, in this package (``templates/``): its part of a run's report page
    #: (the ContextOS status, the chain rule matched, the record hash, where it diverged)
    templates: str | None = str(Path(__file__).with_name("templates"))
    report_template: str | None = "report.html"

    def input_limits(self, setting: Setting) -> InputLimits:
        """A pinned pack or KG snapshot file: at most what its reader takes
        (``contextos.MAX_INPUT_BYTES``; no setting)."""
        return InputLimits(max_input_bytes=cx.MAX_INPUT_BYTES)

    def sniff(self, head: bytes, filename: str) -> bool:
        return filename.lower().endswith(SUFFIX)

    def parse(self, source: IO[bytes], filename: str, ctx: VerifyContext) -> ContextosRun:
        trace = cx.parse(source, filename)
        return ContextosRun(trace, cx.find_inputs(trace, ctx.inputs))

    def refused(self, exc: ReplayError, filename: str, ctx: VerifyContext) -> cx.ContextosReport:
        return cx.refused_report(exc, ctx.mode)

    def _stored_inputs(self, run: ContextosRun, ctx: VerifyContext) -> tuple[cx.Inputs, list]:
        """The inputs stored with a trace, read back from the snapshot store."""
        files: dict[str, bytes] = {}
        for ref in ctx.stored_inputs:
            sid = ref.get("snapshot_id")
            body = ctx.stored_snapshot(sid) if sid else None
            if isinstance(body, str):
                files[f"{ref.get('kind')}:{sid}"] = body.encode("utf-8", "surrogatepass")
        return cx.find_inputs(run.trace, files), []

    def verify(self, parsed: ContextosRun, filename: str, ctx: VerifyContext) -> Any:
        refusal = halt_refusal(self.name, parsed.trace.trace_id, ctx)
        if refusal is not None:
            return refusal
        inputs = parsed.inputs
        if ctx.stored_inputs:
            inputs, _ = self._stored_inputs(parsed, ctx)
        report = cx.verify(
            parsed.trace,
            mode=ctx.mode,
            progress=ctx.progress,
            inputs_present=(inputs.pack is not None, inputs.kg is not None),
            inputs=inputs,
            keys=ctx.keys,
        )
        return halts_clear(report, ctx)

    def replay(self, parsed: ContextosRun, filename: str, ctx: VerifyContext) -> Any:
        refusal = halt_refusal(self.name, parsed.trace.trace_id, ctx)
        if refusal is not None:
            return refusal
        inputs = parsed.inputs
        if ctx.stored_inputs:
            inputs, _ = self._stored_inputs(parsed, ctx)
        report = cx.replay(
            parsed.trace, inputs, keys=ctx.keys, at=ctx.at, mode=ctx.mode, progress=ctx.progress
        )
        return halts_clear(report, ctx)

    def facts(self, parsed: ContextosRun, report: Any, ctx: VerifyContext) -> StoredFacts:
        trace = parsed.trace
        head = trace.head
        refs = []
        snapshots = []
        for kind, pin, text in (
            (cx.PACK_KIND, head["pack_version"], parsed.inputs.pack_text),
            (cx.KG_KIND, head["kg_snapshot_id"], parsed.inputs.kg_text),
        ):
            sid = snapshot_id_of(text) if text is not None else None
            refs.append({"kind": kind, "snapshot_id": sid, "path": pin})
            if text is not None and sid is not None:
                snapshots.append(StoredSnapshot(sid, kind, text))
        return StoredFacts(
            trace_id=trace.trace_id[:64],
            schema_version=head.get("schema_version", cx.SCHEMA_VERSION),
            job_id=str(head["decision_record"].get("decision_key", ""))[:255],
            runtime_name="contextos",
            runtime_version=head["pack_version"][:64],
            event_count=2 * len(trace.envelopes) + 2,
            step_count=len(trace.envelopes),
            required_snapshot_ids=refs,
            snapshots=snapshots,
        )

    def native_code(self, report: Mapping[str, Any]) -> NativeCode | None:
        return None  # its reports carry the console's codes only

    def panel(self, parsed: ContextosRun) -> dict[str, str]:
        head = parsed.trace.head
        record = head.get("decision_record", {})
        audit = head.get("audit", {})
        request = head.get("invoke", {}).get("request", {})
        return {
            "trace_id": parsed.trace.trace_id,
            "pack": str(head.get("pack_version", "")),
            "KG snapshot": str(head.get("kg_snapshot_id", "")),
            "request": ", ".join(f"{k}={v}" for k, v in sorted(request.items()))[:300],
            "tool envelopes": str(len(parsed.trace.envelopes)),
            "chain entries": str(2 * len(parsed.trace.envelopes) + 2),
            "decision_key": str(record.get("decision_key", "")),
            "record status": str(record.get("status", "")),
            "signed_by": str(audit.get("signed_by") or "not recorded"),
            "chain_root_hash": str(audit.get("chain_root_hash") or "not recorded"),
        }

    def compare(self, a: ContextosRun, b: ContextosRun) -> list[Difference]:
        def doc(run: ContextosRun) -> dict[str, Any]:
            out = dict(run.trace.head)
            if len(run.trace.envelopes) <= MAX_COMPARED_ENVELOPES:
                out["tool_envelopes"] = list(run.trace.envelopes)
            else:
                out["tool_envelopes"] = f"{len(run.trace.envelopes)} envelopes (not compared)"
            return out

        return differences(doc(a), doc(b))

    def records(self, parsed: ContextosRun) -> Any:
        """The trace as the trace page's records, in its chain's order: its fields, the
        invoke, each tool envelope, the DecisionRecord and its fields (:func:`.view.records`)."""
        from core.formats.contextos.view import records

        return records(parsed.trace)


def register(registry: FormatRegistry) -> None:
    registry.register(ContextosFormat())
