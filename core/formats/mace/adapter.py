"""MACE reflective logs (:mod:`core.formats.mace`) behind the one format interface
(:mod:`core.formats.protocol`).

Pure: no Django.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import IO, Any

from core import errors
from core.errors import ReplayError
from core.formats import mace
from core.formats.common import differences, halt_refusal, halts_clear
from core.formats.protocol import (
    CompanionRule,
    Difference,
    FormatRegistry,
    NativeCode,
    StoredFacts,
    VerifyContext,
)
from core.replay.report import ReplayReport

MACE_KEYS = frozenset(
    {"log_id", "percept", "router_decision", "iteration_trace", "immutable_subpayload"}
    | {"signature_key_id", "REPLAYABLE", "council_votes", "brainstate_before"}
    | {"brainstate_after", "final_output", "config_hash", "seed_namespace"}
    | set(mace.SNAPSHOT_FIELDS.values())
)


#: a log's snapshot files, by the fields that name them (seed 003 §3): ``<snapshot_id>.json``
NAMED_SNAPSHOTS = CompanionRule(
    trace=r"\.json$",
    companion="{named}.json",
    named_by=tuple(mace.SNAPSHOT_FIELDS.values()),
    max_bytes=mace.MAX_LOG_BYTES,
    describes="a MACE log's snapshot",
)


class MaceFormat:
    """MACE reflective logs (:mod:`core.formats.mace`); the snapshot files uploaded with a
    log (``<snapshot_id>.json``) that verify are stored as its snapshots (kinds
    ``mace-selfrep``...)."""

    name = mace.FORMAT
    label = "a MACE reflective log"
    keys = MACE_KEYS
    #: by content: the snapshot files a log names (``<selfrep_snapshot_id>.json``...) go with it
    companions: tuple[CompanionRule, ...] = (NAMED_SNAPSHOTS,)
    #: every code a report of it can carry besides the console's own (protocol.CONSOLE_CODES)
    codes = frozenset(
        {
            errors.MALFORMED_TRACE,
            errors.UNSUPPORTED_SCHEMA_VERSION,
            errors.MISSING_SNAPSHOT,
            errors.INTEGRITY_FAILURE,
            errors.UNKNOWN_KEY,
            errors.MISSING_PERSISTED_AGENT_OUTPUT,
            errors.REPLAY_DIVERGENCE,
        }
    )
    #: a log whose snapshots did not come with it is not stored (nothing to re-verify it by),
    #: nor one whose key is not registered (its snapshots' signatures could not be checked,
    #: so none could be stored): register the key and upload it again
    unstorable_codes = frozenset(
        {errors.MALFORMED_TRACE, errors.UNSUPPORTED_SCHEMA_VERSION, errors.MISSING_SNAPSHOT}
        | {errors.UNKNOWN_KEY}
    )
    replay_note = (
        "MACE's router and agents are not in the log, so nothing is re-executed: re-verifying "
        "checks the signature over the immutable sub-payload and, for a log with seed 003's "
        "replay fields, the stored snapshots' ids and signatures, the event ids, REPLAYABLE "
        "and, in production mode, the persisted agent outputs; a log as MACE's writer "
        "persists it is not replayable (no job seed, no snapshots)"
    )
    #: no templates of its own: the console's shared panel shows it
    templates: str | None = None
    report_template: str | None = None
    #: the stored snapshots it owns (kinds ``mace-selfrep``...), under MACE's own ids
    snapshot_prefix = "mace-"
    snapshot_tampered = staticmethod(mace.stored_snapshot_tampered)
    #: its ``broke_at`` names the snapshot's field, not an index
    failed_snapshot = staticmethod(mace.failed_snapshot_id)

    def sniff(self, head: bytes, filename: str) -> bool:
        return False

    def parse(self, source: IO[bytes], filename: str, ctx: VerifyContext) -> mace.Log:
        data = source.read(mace.MAX_LOG_BYTES + 1)
        return mace.parse_log(data, where=filename)

    def input_names(self, source: IO[bytes], filename: str) -> list[str]:
        """The snapshot files a log names ([] for a file that does not parse)."""
        try:
            log = mace.parse_log(source.read(mace.MAX_LOG_BYTES + 1), where=filename)
            return NAMED_SNAPSHOTS.named(log.document)
        except ReplayError:
            return []

    def refused(self, exc: ReplayError, filename: str, ctx: VerifyContext) -> ReplayReport:
        return mace.refused(exc, mode=ctx.mode)

    def verify(self, parsed: mace.Log, filename: str, ctx: VerifyContext) -> ReplayReport:
        log_id = str(parsed.document["log_id"])[:64]
        named = [sid for sid in parsed.snapshot_ids.values() if isinstance(sid, str)]
        refusal = halt_refusal(self.name, log_id, ctx, named)
        if refusal is not None:
            return refusal
        stored = {r.get("snapshot_id") for r in ctx.stored_inputs}

        def source(kind: str, sid: str) -> Any:
            if ctx.stored_inputs:  # a stored log: only what is stored with it
                return ctx.stored_snapshot(sid) if sid in stored else None
            return ctx.inputs.get(f"{sid}.json")

        report = mace.verify(
            parsed,
            snapshot_source=source,
            keys=ctx.keys,
            mode=ctx.mode,
            at=ctx.at,
            continue_past=frozenset(ctx.continue_past),
        )
        return halts_clear(report, ctx)

    replay = verify

    def facts(self, parsed: mace.Log, report: ReplayReport, ctx: VerifyContext) -> StoredFacts:
        return mace.stored_facts(parsed, report)

    def native_code(self, report: Mapping[str, Any]) -> NativeCode | None:
        return None  # its reports carry the console's codes only

    def panel(self, parsed: mace.Log) -> dict[str, str]:
        return mace.panel(parsed)

    def compare(self, a: mace.Log, b: mace.Log) -> list[Difference]:
        return differences(a.document, b.document)

    def records(self, parsed: mace.Log) -> Any:
        """The log as the trace page's records: its fields, each list's entries after its
        field (iterations, events, agent outputs, votes...) (:func:`.view.records`)."""
        from core.formats.mace.view import records

        return records(parsed)


def register(registry: FormatRegistry) -> None:
    registry.register(MaceFormat())
