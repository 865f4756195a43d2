"""Verify and replay a ContextOS trace into a report: one ordered list of named checks over one
state (`_CHECKS`, run by :func:`core.replay.pipeline.run`) in the seed's order (``format``,
``pack``, ``kg_snapshot``, ``chain``, ``record``, ``loop``, ``decision_record``), the first
refusal ending the report with its exact code, and ContextOS's own status (``byte_equal``,
``diverged``, ``tamper_detected``) beside the console's.

A verify runs the same list up to the record (`_VERIFY_CHECKS`): its input checks only refuse
a pinned input signed by a key the registry does not have; the loop and the record's diff are
the replay's.

Pure: no Django.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
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
    ChainResult,
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
from core.replay import pipeline
from core.replay.pipeline import Refusal
from core.replay.report import AUDIT, Check, Divergence, ReplayReport
from core.replay.signatures import KeyRing, StaticKeyRing

#: ContextOS's own statuses (seed 004, index.ts)
BYTE_EQUAL = "byte_equal"
DIVERGED = "diverged"
TAMPER_DETECTED = "tamper_detected"

_HASH = re.compile(r"sha256:[0-9a-f]{64}\Z")
#: the head field each input check's input is pinned by
_PINS = {"pack": "pack_version", "kg_snapshot": "kg_snapshot_id"}
_PINNED_PACK = re.compile(r"(?P<name>[A-Za-z0-9][A-Za-z0-9._/-]*)@(?P<version>\d+\.\d+\.\d+)\Z")


@dataclass
class ContextosReport(ReplayReport):
    #: ContextOS's own vocabulary beside the console's: status (byte_equal, diverged,
    #: tamper_detected or None when not replayed), rule, record_hash, chain, diverged_at, diff
    contextos: dict[str, Any] = field(default_factory=dict)


def new_report(trace_id: str | None, mode: str = AUDIT) -> ContextosReport:
    report = ContextosReport(trace_id, FORMAT, mode)  # positional: made once a file
    report.contextos = {
        "status": None,
        "rule": None,
        "rule_detail": None,
        "chain": None,
        "record_hash": None,
        "diverged_at": None,
        "diff": {},
        "entries": 0,
    }
    return report


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


def _idx(value: Any) -> str:
    return str(value)


@dataclass(slots=True)
class _Run:
    """The state one trace's checks share (`pipeline.run` over `_CHECKS`): what the caller
    gave, and what each check learnt for the ones after it."""

    trace: ContextosTrace
    report: ContextosReport
    #: a replay (the inputs' checks, the loop, the diff), or a verify
    replaying: bool
    inputs: Inputs | None = None
    keys: KeyRing | None = None
    at: Any = None
    progress: Callable[[int], None] | None = None
    #: a verify's: whether the pack and the KG snapshot were found (None: not looked for)
    inputs_present: tuple[bool, bool] | None = None
    input_checks: Sequence[Check] = ()
    #: the chain under the rule that matched, or verified the longer prefix
    chain: ChainResult | None = None
    record_hash: str | None = None
    #: the DecisionRecord the loop made (what the loop returned, as it returned it)
    replayed: Any = None

    def failed(self, check: str, code: str, message: str, **where: Any) -> Refusal:
        """The failed `check` appended; an integrity failure is ContextOS's tamper_detected."""
        self.report.checks.append(Check(check, False, message))
        if code == errors.INTEGRITY_FAILURE:
            self.report.contextos["status"] = TAMPER_DETECTED
        return Refusal(code, message, where)


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
    # positional: the state is made once a file, and keywords cost it twice the time
    state = _Run(
        trace, new_report(trace.trace_id, mode), False, inputs, keys, None, progress, inputs_present
    )
    done: ContextosReport = pipeline.run(_VERIFY_CHECKS, state)
    return done


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
    state = _Run(
        trace,
        new_report(trace.trace_id, mode),
        True,
        inputs,
        keys if keys is not None else StaticKeyRing(),
        at,
        progress,
        None,
        input_checks or (),
    )
    done: ContextosReport = pipeline.run(_CHECKS, state)
    return done


# --- the checks, in order --------------------------------------------------------------------


def _format(run: _Run) -> None:
    run.report.checks.append(Check("format", True, _describe(run.trace)))
    if run.replaying:
        run.report.checks.extend(run.input_checks)


def _pack(run: _Run) -> Refusal | None:
    """A replay's pinned pack: pinned (name@MAJOR.MINOR.PATCH), retained, its envelope hash
    the recorded one, signed; a verify's: not signed by a key the registry does not have."""
    inputs = run.inputs
    if not run.replaying:
        if inputs is None or inputs.pack is None or run.keys is None:
            return None
        return _key_known(run, "pack", "pack", inputs.pack)
    pinned = run.trace.head["pack_version"]
    return _input_check(
        run,
        check="pack",
        noun="pack",
        pinned=pinned,
        pin_rule=None if _PINNED_PACK.match(pinned) else "a pinned pack is name@MAJOR.MINOR.PATCH",
        held=inputs.pack if inputs is not None else None,
        hashes=lambda pack: (
            pack_envelope_hash(pack.document["contextos_pack"]),
            pack.envelope_hash,
        ),
        differs="recorded {recorded}, recomputed {recomputed}",
        found="pack {pinned} retained, signed, envelope hash {recomputed}",
    )


def _kg_snapshot(run: _Run) -> Refusal | None:
    """:func:`_pack` for the pinned KG snapshot, pinned by its content address. Both inputs
    judged, the report says whether the trace is replayable: a replay got past both, a verify
    says which it found."""
    inputs = run.inputs
    report = run.report
    if not run.replaying:
        if inputs is not None and inputs.kg is not None and run.keys is not None:
            refusal = _key_known(run, "kg_snapshot", "KG snapshot", inputs.kg)
            if refusal is not None:
                return refusal
        if run.inputs_present is not None:
            head = run.trace.head
            report.replayable = all(run.inputs_present)
            report.missing = [
                name
                for name, there in zip(
                    (f"pack {head['pack_version']}", f"kg {head['kg_snapshot_id']}"),
                    run.inputs_present,
                    strict=True,
                )
                if not there
            ]
        return None
    pinned = run.trace.head["kg_snapshot_id"]
    refusal = _input_check(
        run,
        check="kg_snapshot",
        noun="KG snapshot",
        pinned=pinned,
        pin_rule=None
        if _HASH.match(pinned)
        else "a pinned snapshot is its content address sha256:<64 hex>",
        held=inputs.kg if inputs is not None else None,
        hashes=lambda kg: (kg_snapshot_id(kg.body), pinned),
        differs="its content hashes to {recomputed}",
        found="KG snapshot {pinned} retained and signed",
    )
    if refusal is None:
        report.replayable = True
    return refusal


def _chain(run: _Run) -> Refusal | None:
    """The chain under the reference rule, else the alternative one (the one that verified
    the longer prefix names the break), up to the record's own entry."""
    trace, report = run.trace, run.report
    unprotected: set[str] = set()
    ref = verify_chain(trace, REFERENCE, unprotected=unprotected, progress=run.progress)
    chosen = ref
    if not ref.ok and ref.problem is None:
        alt = verify_chain(trace, ALTERNATIVE)
        if alt.ok or alt.verified > ref.verified:
            chosen = alt
    run.chain = chosen
    tools = trace.envelopes.count
    n = 2 * tools + 2
    try:
        run.record_hash = _parsed_record_hash(trace.head["decision_record"])
    except CanonicalError:
        run.record_hash = None
    report.contextos.update(
        record_hash=run.record_hash,
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
    if chosen.ok:
        detail = (
            f"{n - 1} entries (invoke, {tools} tool calls and results) "
            f"verify under the {chosen.rule} rule: {RULES[chosen.rule]}"
        )
    elif chosen.problem:
        # not a broken chain: a value the canonical cannot write (nested too deeply)
        detail = f"entry {_idx(chosen.broke_at)} ({chosen.kind}) cannot be hashed: {chosen.problem}"
        return run.failed("chain", errors.MALFORMED_TRACE, detail, broke_at=chosen.broke_at)
    elif chosen.kind != "decision_record":
        detail = (
            f"the chain breaks at entry {_idx(chosen.broke_at)} ({chosen.kind}) under the "
            f"{chosen.rule} rule (the other rule verified a shorter prefix or the same): "
            f"computed {chosen.expected}, recorded {chosen.observed or '(none)'}"
        )
        return _tampered(run, "chain", detail)
    else:
        detail = f"{n - 1} entries before the record verify under the {chosen.rule} rule"
    report.checks.append(Check("chain", True, detail))
    return None


def _record(run: _Run) -> Refusal | None:
    """The decision_record's own entry closes the chain (``audit.chain_prev_hash``)."""
    chosen = run.chain
    assert chosen is not None
    if not chosen.ok:
        detail = (
            f"the decision_record's chain entry ({_idx(chosen.broke_at)}) does not verify "
            f"under the {chosen.rule} rule: computed {chosen.expected}, recorded "
            f"audit.chain_prev_hash {chosen.observed or '(none)'}"
        )
        return _tampered(run, "record", detail)
    run.report.checks.append(
        Check(
            "record",
            True,
            "the decision_record closes the chain (audit.chain_prev_hash); record_hash "
            f"{run.record_hash}",
        )
    )
    return None


def _loop(run: _Run) -> Refusal | None:
    """The loop the pack names, registered, run offline over the recorded transcripts (a
    call nobody recorded is a divergence)."""
    trace, report = run.trace, run.report
    inputs = run.inputs
    assert inputs is not None
    assert inputs.pack is not None
    assert inputs.kg is not None
    pack = inputs.pack
    if pack.loop not in LOOPS:
        message = (
            f"pack {trace.head['pack_version']} names the loop {pack.loop!r}, which is "
            f"not registered; registered: {', '.join(sorted(LOOPS)) or 'none'}"
        )
        return run.failed("loop", errors.CAPABILITY_NOT_FOUND, message, broke_at="loop")
    try:
        run.replayed = run_loop(trace, pack, inputs.kg)
    except MissingCall as exc:
        message = (
            f"replay diverged: no recorded result for {exc.call_id} (the loop "
            f"{pack.loop} made a call the trace does not record)"
        )
        report.contextos["status"] = DIVERGED
        report.contextos["diverged_at"] = "transcripts"
        report.contextos["missing_call"] = exc.call_id
        return run.failed("loop", errors.REPLAY_DIVERGENCE, message, broke_at=exc.call_id)
    except (KeyError, TypeError, ValueError, AttributeError) as exc:
        message = (
            f"the loop {pack.loop} cannot run on pack {trace.head['pack_version']} and "
            f"this trace's request: {type(exc).__name__} {exc}"
        )
        return run.failed("loop", errors.MALFORMED_TRACE, message, broke_at="loop")
    report.checks.append(
        Check(
            "loop",
            True,
            f"{pack.loop} ran offline on pack {trace.head['pack_version']} and KG "
            f"snapshot {trace.head['kg_snapshot_id']} over {len(trace.envelopes)} recorded "
            "tool results",
        )
    )
    return None


def _decision_record(run: _Run) -> Refusal | None:
    """``diffRecords`` of the persisted and the replayed DecisionRecord, ``byte_equal`` or
    ``diverged`` with every field that differs."""
    trace, report = run.trace, run.report
    try:
        verdict = diff_records(trace.head["decision_record"], run.replayed)
    except (RecursionError, CanonicalError) as exc:
        message = f"the DecisionRecord cannot be compared: {exc}"
        return run.failed(
            "decision_record", errors.MALFORMED_TRACE, message, broke_at="decision_record"
        )
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
        return None
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
    return Refusal(
        errors.RESULT_MISMATCH,
        message,
        {
            "broke_at": verdict.diverged_at,
            "expected": verdict.record_hash,
            "observed": verdict.replayed_hash,
        },
    )


#: a trace's replay, in the seed's order; the first refusal ends it
_CHECKS: tuple[pipeline.Check[_Run], ...] = (
    pipeline.Check("format", _format),
    pipeline.Check("pack", _pack),
    pipeline.Check("kg_snapshot", _kg_snapshot),
    pipeline.Check("chain", _chain),
    pipeline.Check("record", _record),
    pipeline.Check("loop", _loop),
    pipeline.Check("decision_record", _decision_record),
)
#: a trace's verify: the same checks up to the record (the loop and the diff are the replay's)
_VERIFY_CHECKS = _CHECKS[: [c.name for c in _CHECKS].index("record") + 1]


# --- what the checks share -------------------------------------------------------------------


def _tampered(run: _Run, check: str, detail: str) -> Refusal:
    """The failed `check` of a chain that does not verify: tamper_detected, the entry named."""
    chosen = run.chain
    assert chosen is not None
    return run.failed(
        check,
        errors.INTEGRITY_FAILURE,
        detail,
        broke_at=chosen.broke_at,
        expected=chosen.expected,
        observed=chosen.observed,
    )


def _key_known(run: _Run, check: str, noun: str, held: Pack | KgSnapshot) -> Refusal | None:
    """A verify given the inputs and the keys: the pinned input given (named by its pin,
    ``check``'s head field) is signed by a key of the registry (or unsigned: the replay
    refuses that), else ``UNKNOWN_KEY``."""
    assert run.keys is not None
    problem = unknown_key(held, run.keys)
    if problem is None:
        return None
    pinned = run.trace.head[_PINS[check]]
    return run.failed(check, errors.UNKNOWN_KEY, f"the {noun} {pinned} {problem}", broke_at=check)


def _input_check(
    run: _Run,
    *,
    check: str,
    noun: str,
    pinned: str,
    pin_rule: str | None,
    held: Pack | KgSnapshot | None,
    hashes: Callable[[Any], tuple[str, Any]],
    differs: str,
    found: str,
) -> Refusal | None:
    """A pinned input (the pack, the KG snapshot) is pinned (``pin_rule`` says what a pin is
    when it is not), retained, hashes (``hashes``: recomputed, recorded) to what was recorded,
    and is signed; the first that fails refuses the replay under ``check``."""
    if pin_rule is not None:
        return run.failed(
            check,
            errors.MISSING_SNAPSHOT,
            f"refusing to replay: the {noun} {pinned!r} is unpinned ({pin_rule})",
            broke_at=check,
        )
    refusal = f"refusing to replay: the {noun} {pinned}"
    if held is None:
        return run.failed(
            check, errors.MISSING_SNAPSHOT, f"{refusal} was not retained", broke_at=check
        )
    recomputed, recorded = hashes(held)
    if recorded != recomputed:
        return run.failed(
            check,
            errors.INTEGRITY_FAILURE,
            f"{refusal}'s envelope hash differs: "
            + differs.format(recorded=recorded, recomputed=recomputed),
            broke_at=check,
            expected=recomputed,
            observed=str(recorded),
        )
    assert run.keys is not None
    problem, code = _signed(held.signature, recomputed.encode(), run.keys, run.at)
    if problem is not None and code is not None:
        return run.failed(check, code, f"{refusal} {problem}", broke_at=check)
    run.report.checks.append(Check(check, True, found.format(pinned=pinned, recomputed=recomputed)))
    return None
