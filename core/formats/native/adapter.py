"""The native ``replay-trace`` behind the one format interface
(:mod:`core.formats.protocol`): parse is ``open_native``; verify and replay are
``engine.replay``. A gzip file or a ``*.jsonl`` name is a definite claim; otherwise the first
top-level key only a native trace has decides.

Pure: no Django.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import IO, Any

from core import errors
from core.errors import ReplayError
from core.formats import default_registry, native
from core.formats.common import differences
from core.formats.native import engine
from core.formats.protocol import (
    CompanionRule,
    Difference,
    FormatRegistry,
    NativeCode,
    StoredFacts,
    StoredSnapshot,
    VerifyContext,
)
from core.replay.limits import ReplayLimits
from core.replay.report import Check, ReplayReport

# Top-level keys only a native trace has (the first one met decides).
NATIVE_KEYS = frozenset(
    {"format", "trace_id", "job", "required_snapshots", "snapshots", "final_answer", "seal"}
    | {"events", "steps", "outputs", "meta"}
)


class NativeFormat:
    name = native.FORMAT
    label = "a native replay-trace"
    keys = NATIVE_KEYS
    companions: tuple[CompanionRule, ...] = ()
    #: every code a report of it can carry besides the console's own (protocol.CONSOLE_CODES)
    codes = frozenset(
        {
            errors.MALFORMED_TRACE,
            errors.UNSUPPORTED_SCHEMA_VERSION,
            errors.MISSING_SNAPSHOT,
            errors.INTEGRITY_FAILURE,
            errors.CAPABILITY_NOT_FOUND,
            errors.MISSING_PERSISTED_AGENT_OUTPUT,
            errors.REPLAY_DIVERGENCE,
            errors.RESULT_MISMATCH,
            errors.REPLAY_TIMEOUT,
            errors.UNKNOWN_KEY,
        }
    )
    #: a trace whose snapshot signature or seal names a key the registry does not have is
    #: refused (nothing was verified, so nothing is stored): register the key, upload it again
    unstorable_codes = frozenset(
        {errors.MALFORMED_TRACE, errors.UNSUPPORTED_SCHEMA_VERSION, errors.UNKNOWN_KEY}
    )
    replay_note = "replays every step with the registered step functions (seed 003 §6)"
    #: no templates of its own: the console's shared panel shows it
    templates: str | None = None
    report_template: str | None = None
    #: the stored snapshots it owns: every kind (a native trace names its own), unless a
    #: format claims a longer prefix (MACE's ``mace-``)
    snapshot_prefix = ""

    @staticmethod
    def snapshot_tampered(body: Any, snapshot_id: str) -> bool:
        """A stored snapshot's body no longer hashes to its own id (it was rewritten in the
        store); a body that cannot even be canonicalised no longer matches either."""
        try:
            return native.snapshot_id_of(body) != snapshot_id
        except ReplayError:
            return True

    @staticmethod
    def failed_snapshot(report: Mapping[str, Any]) -> str | None:
        """The snapshot a report's failed ``snapshots`` check is about: its ``broke_at`` is
        that snapshot's index in ``snapshot_ids``."""
        failed = [c for c in report.get("checks", []) if not c.get("ok")]
        snapshot_ids = report.get("snapshot_ids") or []
        index = report.get("broke_at")
        if (
            failed
            and failed[-1].get("name") == "snapshots"
            and isinstance(index, int)
            and 0 <= index < len(snapshot_ids)
        ):
            return str(snapshot_ids[index])
        return None

    def sniff(self, head: bytes, filename: str) -> bool:
        name = filename.lower()
        return head.startswith(native.GZIP_MAGIC) or name.removesuffix(".gz").endswith(".jsonl")

    def parse(self, source: IO[bytes], filename: str, ctx: VerifyContext) -> native.NativeTrace:
        trace = native.open_native(source, filename, ctx.limits or native.DEFAULT_LIMITS)
        if ctx.retained_only:
            _use_retained_snapshots(trace)
        return trace

    def refused(self, exc: ReplayError, filename: str, ctx: VerifyContext) -> ReplayReport:
        report = ReplayReport(trace_id=None, format=self.name, mode=ctx.mode)
        report.checks.append(Check("format", False, exc.message))
        return report.fail(exc.code, exc.message)

    def verify(self, parsed: native.NativeTrace, filename: str, ctx: VerifyContext) -> ReplayReport:
        return engine.replay(
            parsed,
            mode=ctx.mode,
            registry=ctx.registry or default_registry(),
            keys=ctx.keys,
            stored_snapshot=ctx.stored_snapshot,
            halted=ctx.halted,
            at=ctx.at,
            limits=ctx.replay_limits or ReplayLimits(),
            continue_past=frozenset(ctx.continue_past),
            clock=ctx.clock,
            progress=ctx.progress,
            workers=ctx.workers,
            file_id=ctx.file_id,
            erased=ctx.erased,
        )

    replay = verify

    def facts(
        self, parsed: native.NativeTrace, report: ReplayReport, ctx: VerifyContext
    ) -> StoredFacts:
        header = parsed.header
        job = header["job"]
        snapshots = [
            StoredSnapshot(
                snap["snapshot_id"],
                snap["kind"],
                snap["body"],
                snap["schema_version"],
                snap["signature"],
            )
            for snap in header["snapshots"]
            # the store is content-addressed: only a body that hashes to its id goes in
            if snap.get("body") is not None
            and native.snapshot_id_of(snap["body"]) == snap["snapshot_id"]
        ]
        by_kind = {s["kind"]: s["snapshot_id"] for s in header["snapshots"]}
        return StoredFacts(
            trace_id=header["trace_id"],
            schema_version=header["schema_version"],
            encoding=parsed.encoding + (".gz" if parsed.compressed else ""),
            job_id=job["job_id"],
            job_seed=job["job_seed"],
            runtime_name=job["runtime"]["name"],
            runtime_version=job["runtime"]["version"],
            started_at=job.get("started_at"),
            event_count=report.stats.get("events", 0),
            step_count=report.stats.get("steps", 0),
            required_snapshot_ids=[
                {"kind": kind, "snapshot_id": by_kind.get(kind)}
                for kind in header["required_snapshots"]
            ],
            missing_outputs=[
                m.split(" ")[0].removeprefix("output:")
                for m in report.missing
                if m.startswith("output:")
            ],
            snapshots=snapshots,
        )

    def native_code(self, report: Mapping[str, Any]) -> NativeCode | None:
        return None  # its reports carry the console's codes only

    def panel(self, parsed: native.NativeTrace) -> dict[str, str]:
        header = parsed.header
        job = header.get("job", {})
        return {
            "trace_id": str(header.get("trace_id", "")),
            "job_id": str(job.get("job_id", "")),
            "runtime": f"{job.get('runtime', {}).get('name', '')} "
            f"{job.get('runtime', {}).get('version', '')}".strip(),
            "snapshots": str(len(header.get("snapshots", []))),
        }

    def compare(self, a: native.NativeTrace, b: native.NativeTrace) -> list[Difference]:
        def head(t: native.NativeTrace) -> dict[str, Any]:
            return {k: v for k, v in t.header.items() if k not in ("events", "steps", "outputs")}

        return differences(head(a), head(b))


def _use_retained_snapshots(trace: native.NativeTrace) -> None:
    """For a stored trace, snapshot bodies come from the retained store, not from the file.

    Retention decides: once a body is removed from the store, every stored trace that needs
    it is MISSING_SNAPSHOT, even one whose original file still carries a copy. A body in the
    file that does not hash to its snapshot_id is kept, so the replay reports the tampering.
    (The seal never covers bodies, so dropping them changes no other check.)
    """
    for snap in trace.header["snapshots"]:
        body = snap.get("body")
        if body is not None and native.snapshot_id_of(body) == snap["snapshot_id"]:
            del snap["body"]


def register(registry: FormatRegistry) -> None:
    registry.register(NativeFormat())
