"""Verify and replay a ContextOS trace into a report: the checks in the seed's order
(``format``, ``pack``, ``kg_snapshot``, ``chain``, ``record``, ``loop``,
``decision_record``), the first failure named with its exact code, and ContextOS's own status
(``byte_equal``, ``diverged``, ``tamper_detected``) beside the console's.

Pure: no Django.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from core import errors
from core.canonical import CanonicalError
from core.errors import ReplayError
from core.formats.contextos.chain import (
    ALTERNATIVE,
    MAX_UNPROTECTED,
    NEVER_HASHED,
    REFERENCE,
    RULES,
    _parsed_record_hash,
    verify_chain,
)
from core.formats.contextos.differ import diff_records
from core.formats.contextos.inputs import (
    Inputs,
    KgSnapshot,
    Pack,
    _signed,
    kg_snapshot_id,
    pack_envelope_hash,
    unknown_key,
)
from core.formats.contextos.loop import LOOPS, MissingCall, run_loop
from core.formats.contextos.reader import FORMAT, SCHEMA_VERSION, ContextosTrace
from core.replay.report import AUDIT, Check, Divergence, ReplayReport
from core.replay.signatures import KeyRing, StaticKeyRing

#: ContextOS's own statuses (seed 004, index.ts)
BYTE_EQUAL = "byte_equal"
DIVERGED = "diverged"
TAMPER_DETECTED = "tamper_detected"

_HASH = re.compile(r"sha256:[0-9a-f]{64}\Z")
_PINNED_PACK = re.compile(r"(?P<name>[A-Za-z0-9][A-Za-z0-9._/-]*)@(?P<version>\d+\.\d+\.\d+)\Z")


@dataclass
class ContextosReport(ReplayReport):
    #: ContextOS's own vocabulary beside the console's: status (byte_equal, diverged,
    #: tamper_detected or None when not replayed), rule, record_hash, chain, diverged_at, diff
    contextos: dict[str, Any] = field(default_factory=dict)


def new_report(trace_id: str | None, mode: str = AUDIT) -> ContextosReport:
    return ContextosReport(
        trace_id=trace_id,
        format=FORMAT,
        mode=mode,
        contextos={
            "status": None,
            "rule": None,
            "rule_detail": None,
            "chain": None,
            "record_hash": None,
            "diverged_at": None,
            "diff": {},
            "entries": 0,
        },
    )


def refused_report(exc: ReplayError, mode: str = AUDIT) -> ContextosReport:
    report = new_report(None, mode)
    report.checks.append(Check("format", False, exc.message))
    return report.fail(exc.code, exc.message, expected=exc.expected, observed=exc.observed)


def _describe(trace: ContextosTrace) -> str:
    text = (
        f"ContextOS trace {trace.trace_id}, schema_version "
        f"{trace.head.get('schema_version', SCHEMA_VERSION)}, {len(trace.envelopes)} tool "
        f"envelopes, pack {trace.head['pack_version']}, KG snapshot {trace.head['kg_snapshot_id']}"
    )
    if trace.ignored:
        text += f"; ignored fields: {', '.join(trace.ignored)}"
    return text


def _tampered(report: Any, check: str, detail: str, chosen: Any) -> bool:
    """The failed `check` of a chain that does not verify: tamper_detected, the entry named."""
    report.contextos["status"] = TAMPER_DETECTED
    report.checks.append(Check(check, False, detail))
    report.fail(
        errors.INTEGRITY_FAILURE,
        detail,
        broke_at=chosen.broke_at,
        expected=chosen.expected,
        observed=chosen.observed,
    )
    return False


def _chain_checks(
    report: ContextosReport,
    trace: ContextosTrace,
    progress: Callable[[int], None] | None,
) -> bool:
    """The chain and record checks; False when the report failed."""
    unprotected: set[str] = set()
    ref = verify_chain(trace, REFERENCE, unprotected=unprotected, progress=progress)
    chosen = ref
    if not ref.ok and ref.problem is None:
        alt = verify_chain(trace, ALTERNATIVE)
        if alt.ok or alt.verified > ref.verified:
            chosen = alt
    tools = trace.envelopes.count
    n = 2 * tools + 2
    try:
        rhash: str | None = _parsed_record_hash(trace.head["decision_record"])
    except CanonicalError:
        rhash = None
    report.contextos.update(
        record_hash=rhash,
        entries=n,
        rule=chosen.rule,
        rule_detail=RULES[chosen.rule],
        chain=chosen.verdict(),
    )
    report.stats["entries"] = n
    fields = list(NEVER_HASHED)
    if chosen.rule == REFERENCE:
        fields += sorted(unprotected)[:MAX_UNPROTECTED]
        if len(unprotected) >= MAX_UNPROTECTED:
            fields.append(f"... (more than {MAX_UNPROTECTED})")
    if trace.ignored:
        fields += [f"/{k}" for k in trace.ignored]
    report.unprotected_fields = fields
    record_entry_ok = chosen.ok
    if chosen.ok:
        report.checks.append(
            Check(
                "chain",
                True,
                f"{n - 1} entries (invoke, {tools} tool calls and results) "
                f"verify under the {chosen.rule} rule: {RULES[chosen.rule]}",
            )
        )
    elif chosen.problem:
        # not a broken chain: a value the canonical cannot write (nested too deeply)
        detail = f"entry {_idx(chosen.broke_at)} ({chosen.kind}) cannot be hashed: {chosen.problem}"
        report.checks.append(Check("chain", False, detail))
        report.fail(errors.MALFORMED_TRACE, detail, broke_at=chosen.broke_at)
        return False
    elif chosen.kind != "decision_record":
        detail = (
            f"the chain breaks at entry {_idx(chosen.broke_at)} ({chosen.kind}) under the "
            f"{chosen.rule} rule (the other rule verified a shorter prefix or the same): "
            f"computed {chosen.expected}, recorded {chosen.observed or '(none)'}"
        )
        return _tampered(report, "chain", detail, chosen)
    else:
        report.checks.append(
            Check(
                "chain",
                True,
                f"{n - 1} entries before the record verify under the {chosen.rule} rule",
            )
        )
    rule = chosen.rule
    if not record_entry_ok:
        report.contextos["status"] = TAMPER_DETECTED
        detail = (
            f"the decision_record's chain entry ({_idx(chosen.broke_at)}) does not verify "
            f"under the {rule} rule: computed {chosen.expected}, recorded "
            f"audit.chain_prev_hash {chosen.observed or '(none)'}"
        )
        return _tampered(report, "record", detail, chosen)
    report.checks.append(
        Check(
            "record",
            True,
            f"the decision_record closes the chain (audit.chain_prev_hash); record_hash {rhash}",
        )
    )
    return True


def _idx(value: Any) -> str:
    return str(value)


def verify(
    trace: ContextosTrace,
    *,
    mode: str = AUDIT,
    progress: Callable[[int], None] | None = None,
    inputs_present: tuple[bool, bool] | None = None,
    inputs: Inputs | None = None,
    keys: KeyRing | None = None,
) -> ContextosReport:
    """The chain and the record, without the pinned inputs (``verify``, ingest). Given the
    ``inputs`` found and the ``keys``, a pinned input signed by a key the registry does not
    have is refused first (``UNKNOWN_KEY``: nothing is stored; its signature, hash and loop are
    the replay's checks)."""
    report = new_report(trace.trace_id, mode)
    report.checks.append(Check("format", True, _describe(trace)))
    if inputs is not None and keys is not None and not _keys_known(report, trace, inputs, keys):
        return report
    if inputs_present is not None:
        report.replayable = all(inputs_present)
        report.missing = [
            name
            for name, there in zip(
                (f"pack {trace.head['pack_version']}", f"kg {trace.head['kg_snapshot_id']}"),
                inputs_present,
                strict=True,
            )
            if not there
        ]
    _chain_checks(report, trace, progress)
    return report


def replay(
    trace: ContextosTrace,
    inputs: Inputs,
    *,
    keys: KeyRing | None = None,
    at: Any = None,
    mode: str = AUDIT,
    progress: Callable[[int], None] | None = None,
    input_checks: list[Check] | None = None,
) -> ContextosReport:
    """``replay(trace_id)`` of seed 004: the pinned inputs (refused, naming which), the chain
    (``tamper_detected``), the canonical loop over the recorded transcripts, the differ."""
    keys = keys if keys is not None else StaticKeyRing()
    report = new_report(trace.trace_id, mode)
    report.checks.append(Check("format", True, _describe(trace)))
    report.checks.extend(input_checks or [])
    if not _pack_check(report, trace, inputs, keys, at):
        return report
    if not _kg_check(report, trace, inputs, keys, at):
        return report
    report.replayable = True
    if not _chain_checks(report, trace, progress):
        return report
    assert inputs.pack is not None
    assert inputs.kg is not None
    if inputs.pack.loop not in LOOPS:
        message = (
            f"pack {trace.head['pack_version']} names the loop {inputs.pack.loop!r}, which is "
            f"not registered; registered: {', '.join(sorted(LOOPS)) or 'none'}"
        )
        report.checks.append(Check("loop", False, message))
        return report.fail(errors.CAPABILITY_NOT_FOUND, message, broke_at="loop")
    try:
        replayed = run_loop(trace, inputs.pack, inputs.kg)
    except MissingCall as exc:
        message = (
            f"replay diverged: no recorded result for {exc.call_id} (the loop "
            f"{inputs.pack.loop} made a call the trace does not record)"
        )
        report.contextos["status"] = DIVERGED
        report.contextos["diverged_at"] = "transcripts"
        report.contextos["missing_call"] = exc.call_id
        report.checks.append(Check("loop", False, message))
        return report.fail(errors.REPLAY_DIVERGENCE, message, broke_at=exc.call_id)
    except (KeyError, TypeError, ValueError, AttributeError) as exc:
        message = (
            f"the loop {inputs.pack.loop} cannot run on pack {trace.head['pack_version']} and "
            f"this trace's request: {type(exc).__name__} {exc}"
        )
        report.checks.append(Check("loop", False, message))
        return report.fail(errors.MALFORMED_TRACE, message, broke_at="loop")
    report.checks.append(
        Check(
            "loop",
            True,
            f"{inputs.pack.loop} ran offline on pack {trace.head['pack_version']} and KG "
            f"snapshot {trace.head['kg_snapshot_id']} over {len(trace.envelopes)} recorded "
            "tool results",
        )
    )
    persisted = trace.head["decision_record"]
    try:
        verdict = diff_records(persisted, replayed)
    except (RecursionError, CanonicalError) as exc:
        message = f"the DecisionRecord cannot be compared: {exc}"
        report.checks.append(Check("decision_record", False, message))
        return report.fail(errors.MALFORMED_TRACE, message, broke_at="decision_record")
    report.contextos["replayed_record_hash"] = verdict.replayed_hash
    report.contextos["unprotected_differences"] = verdict.unprotected_differences
    outside = ""
    if verdict.unprotected_differences:
        outside = (
            "; fields outside the seed's record hash differ and are not compared: "
            + ", ".join(verdict.unprotected_differences[:20])
        )
    if verdict.ok:
        report.contextos["status"] = BYTE_EQUAL
        report.contextos["verdict"] = {
            "ok": True,
            "trace_id": trace.trace_id,
            "record_hash": verdict.record_hash,
        }
        report.checks.append(
            Check(
                "decision_record",
                True,
                f"byte_equal: the replayed DecisionRecord hashes to {verdict.record_hash}"
                + outside,
            )
        )
        return report
    report.contextos["status"] = DIVERGED
    report.contextos["diverged_at"] = verdict.diverged_at
    report.contextos["diff"] = verdict.diff
    report.contextos["verdict"] = {
        "ok": False,
        "trace_id": trace.trace_id,
        "diverged_at": verdict.diverged_at,
        "diff": verdict.diff,
    }
    for name, (before, after) in verdict.diff.items():
        report.divergences.append(Divergence("decision_record", name, f"/{name}", before, after))
    message = (
        f"diverged at {verdict.diverged_at}: the replayed DecisionRecord differs in "
        f"{', '.join(verdict.diff) or 'no named field'} (persisted {verdict.record_hash}, "
        f"replayed {verdict.replayed_hash})"
    )
    report.checks.append(Check("decision_record", False, message + outside))
    return report.fail(
        errors.RESULT_MISMATCH,
        message,
        broke_at=verdict.diverged_at,
        expected=verdict.record_hash,
        observed=verdict.replayed_hash,
    )


def _refuse(report: ContextosReport, check: str, code: str, message: str, **where: Any) -> bool:
    report.checks.append(Check(check, False, message))
    if code == errors.INTEGRITY_FAILURE:
        report.contextos["status"] = TAMPER_DETECTED
    report.fail(code, message, broke_at=check, **where)
    return False


def _keys_known(
    report: ContextosReport, trace: ContextosTrace, inputs: Inputs, keys: KeyRing
) -> bool:
    """Every pinned input given is signed by a key of the registry (or unsigned: the replay
    refuses that); the first that is not refuses the report with ``UNKNOWN_KEY``."""
    for check, noun, pinned, held in (
        ("pack", "pack", trace.head["pack_version"], inputs.pack),
        ("kg_snapshot", "KG snapshot", trace.head["kg_snapshot_id"], inputs.kg),
    ):
        problem = unknown_key(held, keys) if held is not None else None
        if problem is not None:
            return _refuse(report, check, errors.UNKNOWN_KEY, f"the {noun} {pinned} {problem}")
    return True


def _pack_check(
    report: ContextosReport, trace: ContextosTrace, inputs: Inputs, keys: KeyRing, at: Any
) -> bool:
    pinned = trace.head["pack_version"]
    return _input_check(
        report,
        keys,
        at,
        check="pack",
        noun="pack",
        pinned=pinned,
        pin_rule=None if _PINNED_PACK.match(pinned) else "a pinned pack is name@MAJOR.MINOR.PATCH",
        held=inputs.pack,
        hashes=lambda pack: (
            pack_envelope_hash(pack.document["contextos_pack"]),
            pack.envelope_hash,
        ),
        differs="recorded {recorded}, recomputed {recomputed}",
        found="pack {pinned} retained, signed, envelope hash {recomputed}",
    )


def _kg_check(
    report: ContextosReport, trace: ContextosTrace, inputs: Inputs, keys: KeyRing, at: Any
) -> bool:
    pinned = trace.head["kg_snapshot_id"]
    return _input_check(
        report,
        keys,
        at,
        check="kg_snapshot",
        noun="KG snapshot",
        pinned=pinned,
        pin_rule=None
        if _HASH.match(pinned)
        else "a pinned snapshot is its content address sha256:<64 hex>",
        held=inputs.kg,
        hashes=lambda kg: (kg_snapshot_id(kg.body), pinned),
        differs="its content hashes to {recomputed}",
        found="KG snapshot {pinned} retained and signed",
    )


def _input_check(
    report: ContextosReport,
    keys: KeyRing,
    at: Any,
    *,
    check: str,
    noun: str,
    pinned: str,
    pin_rule: str | None,
    held: Pack | KgSnapshot | None,
    hashes: Callable[[Any], tuple[str, Any]],
    differs: str,
    found: str,
) -> bool:
    """A pinned input (the pack, the KG snapshot) is pinned (``pin_rule`` says what a pin is
    when it is not), retained, hashes (``hashes``: recomputed, recorded) to what was recorded,
    and is signed; the first that fails refuses the replay under ``check``."""
    if pin_rule is not None:
        return _refuse(
            report,
            check,
            errors.MISSING_SNAPSHOT,
            f"refusing to replay: the {noun} {pinned!r} is unpinned ({pin_rule})",
        )
    refusal = f"refusing to replay: the {noun} {pinned}"
    if held is None:
        return _refuse(report, check, errors.MISSING_SNAPSHOT, f"{refusal} was not retained")
    recomputed, recorded = hashes(held)
    if recorded != recomputed:
        return _refuse(
            report,
            check,
            errors.INTEGRITY_FAILURE,
            f"{refusal}'s envelope hash differs: "
            + differs.format(recorded=recorded, recomputed=recomputed),
            expected=recomputed,
            observed=str(recorded),
        )
    problem, code = _signed(held.signature, recomputed.encode(), keys, at)
    if problem is not None and code is not None:
        return _refuse(report, check, code, f"{refusal} {problem}")
    report.checks.append(Check(check, True, found.format(pinned=pinned, recomputed=recomputed)))
    return True
