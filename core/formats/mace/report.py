"""The report on one reflective log (:func:`verify`, :func:`refused`): the checks in their
order, the first failure ending the report with its exact code.

Pure: no Django.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from core import errors
from core.canonical import CanonicalError, mace_v1
from core.errors import ReplayError
from core.formats.mace.ids import (
    EVENT_ID_GENERATOR,
    SNAPSHOT_GENERATOR,
    _canonical,
    _snapshot_provenance,
    event_id_of,
    memory_id_failure,
)
from core.formats.mace.reader import (
    FORMAT,
    SCHEMA_VERSION,
    SNAPSHOT_FIELDS,
    SNAPSHOT_KINDS,
    Log,
    check_snapshot,
    parse_snapshot,
)
from core.formats.mace.signing import (
    SUBPAYLOAD_SOURCES,
    _signature_problem,
    _snapshot_signature,
    _subpayload_of_parsed,
    unprotected_fields,
)
from core.replay import pipeline
from core.replay.diff import diff
from core.replay.pipeline import Refusal
from core.replay.report import AUDIT, PRODUCTION, SANDBOX, Check, Divergence, ReplayReport
from core.replay.signatures import KeyRing

CHECK_ORDER = (
    "format",
    "halts",
    "required_snapshots",
    "snapshots",
    "event_ids",
    "immutable_subpayload",
    "signature",
    "replayable",
    "persisted_outputs",
)


def _report(mode: str, log: Log | None = None) -> ReplayReport:
    trace_id = None
    if log is not None:
        trace_id = str(log.document.get("log_id"))[:64]
    report = ReplayReport(trace_id=trace_id, format=FORMAT, mode=mode)
    report.authoritative = mode != SANDBOX  # contracts §3: a sandbox result never is
    if log is not None:
        report.unprotected_fields = unprotected_fields(log.document)
    return report


def refused(exc: ReplayError, *, mode: str = AUDIT) -> ReplayReport:
    report = _report(mode)
    report.checks.append(Check("format", False, exc.message))
    return report.fail(
        exc.code, exc.message, broke_at=exc.broke_at, expected=exc.expected, observed=exc.observed
    )


def _fail(
    report: ReplayReport,
    check: str,
    code: str,
    message: str,
    *,
    broke_at: Any = None,
    expected: Any = None,
    observed: Any = None,
) -> ReplayReport:
    report.checks.append(Check(check, False, message))
    return report.fail(code, message, broke_at=broke_at, expected=expected, observed=observed)


SnapshotSource = Callable[[str, str], "bytes | dict[str, Any] | None"]


@dataclass
class _Verify:
    """The state one log's checks share (`pipeline.run` over `_CHECKS`)."""

    log: Log
    report: ReplayReport
    snapshot_source: SnapshotSource
    keys: KeyRing | None
    mode: str
    at: datetime | None
    halted_check: Check | None
    continue_past: frozenset[int]
    raw: dict[str, Any] = field(default_factory=dict)
    refs: list[Any] = field(default_factory=list)
    persisted: dict[str, dict[str, Any]] = field(default_factory=dict)

    @property
    def doc(self) -> dict[str, Any]:
        return self.log.document

    def failed(
        self,
        check: str,
        code: str,
        message: str,
        *,
        broke_at: Any = None,
        expected: Any = None,
        observed: Any = None,
    ) -> Refusal:
        """:func:`_fail`'s refusal: the failed check appended, the report failed by the runner."""
        self.report.checks.append(Check(check, False, message))
        return Refusal(
            code, message, {"broke_at": broke_at, "expected": expected, "observed": observed}
        )


def verify(
    log: Log,
    *,
    snapshot_source: SnapshotSource,
    keys: KeyRing | None,
    mode: str = AUDIT,
    at: datetime | None = None,
    halted_check: Check | None = None,
    continue_past: frozenset[int] = frozenset(),
) -> ReplayReport:
    """The report on one reflective log. ``snapshot_source(kind, snapshot_id)`` gives the
    snapshot file (bytes, or an already parsed document) or None when it is not there.
    ``continue_past``: iterations whose divergence an approved force-continue lets the
    verification go past (the result is then non-authoritative). Never raises
    ``ReplayError``. The checks are `_CHECKS`, in order, to the first refusal."""
    report = _report(mode, log)
    if not log.replayable_shape:
        return _verify_writer_log(log, report, keys=keys, at=at, halted_check=halted_check)
    state = _Verify(log, report, snapshot_source, keys, mode, at, halted_check, continue_past)
    done: ReplayReport = pipeline.run(_CHECKS, state)
    return done


def _format(run: _Verify) -> None:
    doc, report = run.doc, run.report
    version = doc.get("schema_version", SCHEMA_VERSION)
    iterations = doc["iteration_trace"]
    report.stats = {"iterations": len(iterations), "events": len(doc.get("event_refs") or [])}
    report.checks.append(
        Check(
            "format",
            True,
            f"a MACE reflective log (schema {version}) of job {doc['job_id']!r}: "
            f"{len(iterations)} iterations",
        )
    )
    if run.halted_check is not None:
        report.checks.append(run.halted_check)


def _required_snapshots(run: _Verify) -> Refusal | None:
    """Required snapshots (§6 step 2): ids present, files present."""
    report = run.report
    ids = run.log.snapshot_ids
    report.snapshot_ids = [str(ids[k]) for k in SNAPSHOT_KINDS if ids[k]]
    absent = [SNAPSHOT_FIELDS[k] for k in SNAPSHOT_KINDS if not ids[k]]
    if absent:
        message = f"the log names no {', '.join(absent)}"
        report.missing = absent
        return run.failed(
            "required_snapshots", errors.MISSING_SNAPSHOT, message, broke_at=absent[0]
        )
    for kind in SNAPSHOT_KINDS:
        sid = str(ids[kind])
        data = run.snapshot_source(kind, sid)
        if data is None:
            report.missing.append(f"{kind}:{sid}")
        else:
            run.raw[kind] = data
    if report.missing:
        kind, sid = report.missing[0].split(":", 1)
        message = (
            f"{SNAPSHOT_FIELDS[kind]}: snapshot file {sid}.json is not there "
            f"({len(report.missing)} of {len(SNAPSHOT_KINDS)} missing: "
            f"{', '.join(m.split(':')[0] for m in report.missing)})"
        )
        return run.failed(
            "required_snapshots",
            errors.MISSING_SNAPSHOT,
            message,
            broke_at=SNAPSHOT_FIELDS[kind],
            expected=f"{sid}.json",
        )
    report.checks.append(
        Check("required_snapshots", True, f"all {len(SNAPSHOT_KINDS)} snapshot files present")
    )
    return None


def _snapshots(run: _Verify) -> Refusal | None:
    """Snapshots: parse, id provenance (§5), signature (§1). Every file is checked (the ones
    that verify are kept, to be stored); the first problem in kind order is the report's."""
    log, raw, ids = run.log, run.raw, run.log.snapshot_ids
    first: tuple[str, str, Any, Any, Any] | None = None
    for kind in SNAPSHOT_KINDS:
        sid = ids[kind]
        where = (kind, sid)
        try:
            if type(raw[kind]) is dict:
                snap = check_snapshot(raw[kind], where=where)
            else:
                snap = parse_snapshot(raw[kind], where=where)
        except ReplayError as exc:
            first = first or (exc.code, exc.message, f"{kind}_snapshot", exc.expected, exc.observed)
            continue
        body_bytes = _canonical(snap["body"], kind)
        problem = _snapshot_provenance(kind, sid, snap, body_bytes)
        if problem is None:
            problem = _snapshot_signature(kind, snap, body_bytes, keys=run.keys, at=run.at)
        if problem is None:
            # only a file whose id recomputes and whose signature verifies may be stored:
            # the store keeps the first body of an id, so a badly signed copy kept first
            # would fail every later log that names the id
            log.snapshots[kind] = snap
        first = first or problem
    if first is not None:
        code, message, broke_at, expected, observed = first
        return run.failed(
            "snapshots", code, message, broke_at=broke_at, expected=expected, observed=observed
        )
    run.report.checks.append(
        Check(
            "snapshots",
            True,
            "every snapshot id recomputes from its body (" + SNAPSHOT_GENERATOR + ") and "
            "its signature verifies",
        )
    )
    return None


def _event_ids(run: _Verify) -> Refusal | None:
    """Event ids (§5) and their order (§4); the memory ids (§5) a memory write records."""
    doc = run.doc
    refs = run.refs = doc.get("event_refs") or []
    previous = None
    for i, ref in enumerate(refs):
        seq = ref["sequence_index"]
        if previous is not None and seq <= previous:
            message = (
                f"event_refs[{i}].sequence_index: {seq} does not follow {previous} "
                "(events are ordered by sequence_index)"
            )
            return run.failed(
                "event_ids",
                errors.INTEGRITY_FAILURE,
                message,
                broke_at=seq,
                expected=f"> {previous}",
                observed=str(seq),
            )
        previous = seq
        expected = event_id_of(doc["job_seed"], seq, ref["event_type"])
        if ref["event_id"] != expected:
            message = (
                f"event_refs[{i}].event_id: does not recompute as {EVENT_ID_GENERATOR} "
                f"(sequence_index {seq}, {ref['event_type']})"
            )
            return run.failed(
                "event_ids",
                errors.INTEGRITY_FAILURE,
                message,
                broke_at=seq,
                expected=expected,
                observed=ref["event_id"],
            )
    memory, memory_problem = memory_id_failure(doc)
    if memory_problem is not None:
        message, broke_at, recomputed, observed = memory_problem
        return run.failed(
            "event_ids",
            errors.INTEGRITY_FAILURE,
            message,
            broke_at=broke_at,
            expected=recomputed,
            observed=observed,
        )
    detail = f"{len(refs)} event ids recompute as {EVENT_ID_GENERATOR}"
    if memory:
        detail += (
            f"; the wm_id and episodic_id of {memory} memory write{'s' if memory != 1 else ''} "
            "recompute as sha256(job_seed:counter)"
        )
    run.report.checks.append(Check("event_ids", True, detail))
    return None


def _signed(run: _Verify) -> Refusal | None:
    """The ``immutable_subpayload`` and ``signature`` checks (:func:`_signed_part`)."""
    failed = _signed_part(run.report, run.doc, keys=run.keys, at=run.at)
    if failed is None:
        return None
    where = {"broke_at": failed.broke_at, "expected": failed.expected, "observed": failed.observed}
    return Refusal(str(failed.error_code), str(failed.message), where)


def _replayable(run: _Verify) -> Refusal | None:
    """REPLAYABLE (§9): what the console finds, against what the log claims."""
    doc, report = run.doc, run.report
    persisted = run.persisted = _persisted(doc)
    unpersisted = [
        it["iteration_id"]
        for it in doc["iteration_trace"]
        if it.get("agent_output_id") is not None and it["agent_output_id"] not in persisted
    ]
    report.replayable = not unpersisted
    report.missing = [f"agent_output:{it}" for it in unpersisted]
    claimed = doc["REPLAYABLE"]
    if claimed and unpersisted:
        message = (
            f"REPLAYABLE: the log says true, but the agent output of iteration "
            f"{unpersisted[0]} was not persisted ({len(unpersisted)} missing)"
        )
        return run.failed(
            "replayable",
            errors.MISSING_PERSISTED_AGENT_OUTPUT,
            message,
            broke_at="REPLAYABLE",
            expected="false",
            observed="true",
        )
    if report.replayable:
        note = f"REPLAYABLE: {str(claimed).lower()}; every agent output is persisted"
        if not claimed:
            note += " (the log understates it)"
    else:
        note = (
            f"REPLAYABLE: false, as the log says: {len(unpersisted)} agent outputs were not "
            "persisted (production replay refuses it)"
        )
    report.checks.append(Check("replayable", True, note))
    return None


def _persisted_outputs(run: _Verify) -> Refusal | None:
    """Persisted agent outputs (§6 step 8, production)."""
    if run.mode != PRODUCTION:
        return None
    report, persisted = run.report, run.persisted
    for i, it in enumerate(run.doc["iteration_trace"]):
        oid = it.get("agent_output_id")
        if oid is None:
            continue
        if oid not in persisted:
            message = (
                f"iteration_trace[{i}] ({it['iteration_id']}): agent output {oid} was "
                "not persisted; production replay never calls a live agent"
            )
            return run.failed(
                "persisted_outputs",
                errors.MISSING_PERSISTED_AGENT_OUTPUT,
                message,
                broke_at=it["iteration_id"],
                expected=oid,
            )
        entries = diff(it.get("agent_output"), persisted[oid].get("output"))
        if entries:
            approved = i in run.continue_past
            here = [
                Divergence(
                    i,
                    it["iteration_id"],
                    f"/iteration_trace/{i}/agent_output" + e.path,
                    e.before,
                    e.after,
                    force_continued=approved,
                )
                for e in entries
            ]
            report.divergences += here
            if approved:
                report.force_continued = True
                report.authoritative = False
                continue
            first_divergence = here[0]
            message = (
                f"iteration_trace[{i}] ({it['iteration_id']}): the recorded agent output "
                f"differs from persisted output {oid} at {first_divergence.path}"
            )
            return run.failed(
                "persisted_outputs",
                errors.REPLAY_DIVERGENCE,
                message,
                broke_at=i,
                expected=_text(first_divergence.after),
                observed=_text(first_divergence.before),
            )
    note = "every agent output equals its persisted copy"
    if report.force_continued:
        note = (
            "every agent output equals its persisted copy, but for the iterations "
            "force-continued past an approved divergence (non-authoritative)"
        )
    report.checks.append(Check("persisted_outputs", True, note))
    return None


def _verified(run: _Verify) -> None:
    run.report.message = (
        f"MACE log {run.doc['log_id']} verifies: signature, {len(SNAPSHOT_KINDS)} snapshots, "
        f"{len(run.refs)} event ids"
    )


#: one log's verification, in order; the first refusal ends it
_CHECKS: tuple[pipeline.Check[_Verify], ...] = (
    pipeline.Check("format", _format),
    pipeline.Check("required_snapshots", _required_snapshots),
    pipeline.Check("snapshots", _snapshots),
    pipeline.Check("event_ids", _event_ids),
    pipeline.Check("signature", _signed),
    pipeline.Check("replayable", _replayable),
    pipeline.Check("persisted_outputs", _persisted_outputs),
    pipeline.Check("verified", _verified),
)


def _signed_part(
    report: ReplayReport, doc: Mapping[str, Any], *, keys: KeyRing | None, at: datetime | None
) -> ReplayReport | None:
    """The ``immutable_subpayload`` and ``signature`` checks: the failed report, or None
    when both pass (their passed checks appended)."""
    # the immutable sub-payload is the one the log's fields give (stricter than MACE's own
    # check, which reads the sub-payload alone: an edited final_output.text fails here)
    recorded = doc["immutable_subpayload"]
    derived = _subpayload_of_parsed(doc)
    for key, path in SUBPAYLOAD_SOURCES.items():
        if key not in recorded:
            message = (
                f"immutable_subpayload.{key} is missing: MACE's writer signs "
                f"{', '.join(SUBPAYLOAD_SOURCES)}, so the log's {'.'.join(path)} is unsigned"
            )
            return _fail(
                report,
                "immutable_subpayload",
                errors.INTEGRITY_FAILURE,
                message,
                broke_at=f"immutable_subpayload.{key}",
                expected=_text(derived[key]),
            )
        if recorded[key] != derived[key] and _canonical(recorded[key], key) != _canonical(
            derived[key], key
        ):
            message = (
                f"immutable_subpayload.{key}: the signed value is not the log's {'.'.join(path)}"
            )
            return _fail(
                report,
                "immutable_subpayload",
                errors.INTEGRITY_FAILURE,
                message,
                broke_at=f"immutable_subpayload.{key}",
                expected=_text(derived[key]),
                observed=_text(recorded[key]),
            )
    extra = (
        []
        if len(recorded) == len(SUBPAYLOAD_SOURCES)
        else sorted(set(recorded) - set(SUBPAYLOAD_SOURCES))
    )
    report.checks.append(
        Check(
            "immutable_subpayload",
            True,
            "log_id, percept.text, final_output.text and router_decision.decision_id are "
            "the signed values" + (f" (also signed: {', '.join(extra)})" if extra else ""),
        )
    )

    # the log's signature
    signature_problem = _signature_problem(
        what="signature",
        value=doc["signature"],
        key_id=doc["signature_key_id"],
        payload=recorded,
        keys=keys,
        at=at,
    )
    if signature_problem is not None:
        return _fail(
            report,
            "signature",
            signature_problem.code,
            signature_problem.message,
            broke_at="signature",
            expected=signature_problem.expected,
            observed=signature_problem.observed,
        )
    report.checks.append(
        Check(
            "signature",
            True,
            f"HMAC-SHA256 by {doc['signature_key_id']} over the immutable sub-payload verifies",
        )
    )
    return None


#: why a log as MACE's writer persists it is not replayable (seed 003 §3)
NOT_REPLAYABLE = (
    "not replayable: no job seed, no snapshots (a reflective log as MACE's writer persists "
    "it records neither job_id and job_seed nor the iteration trace and snapshot ids seed 003 "
    "§3 replays from)"
)
#: what such a log misses for a replay (the report's ``missing``)
WRITER_LOG_MISSING = ("job_seed", *SNAPSHOT_FIELDS.values())


def _verify_writer_log(
    log: Log,
    report: ReplayReport,
    *,
    keys: KeyRing | None,
    at: datetime | None,
    halted_check: Check | None,
) -> ReplayReport:
    """A log as MACE's writer persists it: its signed part, and why it is not replayable.
    Production replay refuses it (no snapshots to load: seed 003 §6 step 2)."""
    doc = log.document
    report.stats = {"iterations": 0, "events": 0}
    report.checks.append(
        Check(
            "format",
            True,
            "a MACE reflective log as MACE's writer persists it (no job_id, job_seed, "
            "iteration_trace or snapshot ids)",
        )
    )
    if halted_check is not None:
        report.checks.append(halted_check)
    report.replayable = False
    report.missing = list(WRITER_LOG_MISSING)
    if report.mode == PRODUCTION:
        return _fail(
            report,
            "required_snapshots",
            errors.MISSING_SNAPSHOT,
            f"production replay refuses this log, {NOT_REPLAYABLE}",
            broke_at=SNAPSHOT_FIELDS[SNAPSHOT_KINDS[0]],
        )
    failed = _signed_part(report, doc, keys=keys, at=at)
    if failed is not None:
        return failed
    report.checks.append(Check("replayable", True, NOT_REPLAYABLE))
    report.message = (
        f"MACE log {doc['log_id']} verifies: its signature over the immutable sub-payload; "
        "not replayable (no job seed, no snapshots)"
    )
    return report


def _persisted(doc: Mapping[str, Any]) -> dict[str, dict[str, Any]]:
    out = {}
    for entry in doc.get("agent_outputs") or []:
        if isinstance(entry, dict) and isinstance(entry.get("agent_output_id"), str):
            out[entry["agent_output_id"]] = entry
    return out


def _text(value: Any) -> str | None:
    if value is None:
        return None
    if isinstance(value, str):
        return value
    try:
        return mace_v1(value).decode()
    except CanonicalError:
        return repr(value)
