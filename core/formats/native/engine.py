"""The replay engine: seed 003 §6 over a native trace, in audit, sandbox or production mode.

One streaming pass reads every record (so memory stays bounded), verifying event ids and the
chain, accumulating the sealed message, materialising state and checking output hashes. Then
the checks are settled in the contract's order (contracts.md §3), most specific first:

    format -> halts -> required_snapshots -> snapshots -> events -> seal -> outputs
    -> persisted_outputs (production) -> steps (deterministic re-execution) -> final_answer

and the report names the first that fails, with its exact error code, where it broke, and
the expected and observed values. Each step is a named check over one state object
(`_Run`), run in order by `core.replay.pipeline.run` (`_CHECKS`): the snapshots read, the
materialiser built, the streaming pass (`_stream`, the one hot function), then the checks
above, each returning None or the refusal the report fails with. A divergence stops the
replay unless its step is in `continue_past` (a governed, approved force-continue); the
result is then non-authoritative.

`outputs` also checks that each consumed external output's recorded hash is the hash its
consuming step recorded (`_Consumption`); in sandbox mode a registered mock's output stands
in for a missing one and feeds the consuming step (`substituted`); recomputed floats within
NUMERIC_EPSILON of the recorded ones are equal, and listed (`within_epsilon`). Every report
serialises: an absent side of a divergence is `null` named by `"absent"`.

Speed and memory (bench/bench_replay.py measures both): each event is canonicalised once, its
chain bytes reused for the seal; an HMAC seal is computed as the records stream past, so the
sealed message is never stored; JSON Lines come in chunks whose runs of plain events a reader
has already checked among themselves (`native.Row`), in worker processes with `workers` > 1.

Pure: no Django, no network; the caller injects the clock, the key ring, the snapshot store
and the halts.
"""

from __future__ import annotations

import decimal
import hashlib
import hmac
import itertools
import json
import tempfile
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import ExitStack
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from core import errors
from core.canonical import NUMERIC_EPSILON, mace_v1
from core.errors import ReplayError
from core.formats import native
from core.formats.memory_ids import memory_id_problem
from core.replay import pipeline
from core.replay.diff import MISSING, DiffEntry, diff
from core.replay.limits import ReplayLimits
from core.replay.pipeline import Refusal
from core.replay.registry import Registry, ReplayState
from core.replay.report import (  # noqa: F401 - the report model; callers still name it here
    AUDIT,
    DIVERGED,
    MODES,
    OK,
    PRODUCTION,
    REFUSED,
    SANDBOX,
    TAMPER_DETECTED,
    Check,
    Divergence,
    ReplayReport,
)
from core.replay.rng import DeterministicRNG
from core.replay.signatures import HMAC_SHA256, KeyRing, Verdict, verify

#: the halts check when the caller passed no halts (``halted=None``): no ledger was read
HALTS_NOT_CHECKED = "not checked (offline, no ledger)"

CHECK_ORDER = (
    "format",
    "halts",
    "required_snapshots",
    "snapshots",
    "events",
    "seal",
    "outputs",
    "persisted_outputs",
    "steps",
    "final_answer",
)

#: a replay without caps (the default of :func:`replay`)
NO_LIMITS = ReplayLimits()

UNPROTECTED_FIELDS = ["meta", "job.started_at"]


class _Timeout(Exception):
    pass


class _Clock:
    def __init__(self, clock: Callable[[], float] | None, limits: ReplayLimits) -> None:
        self._clock = clock
        self._deadline = None
        if clock is not None and limits.max_seconds is not None:
            self._deadline = clock() + limits.max_seconds
        self.max_seconds = limits.max_seconds

    def check(self) -> None:
        if (
            self._deadline is not None
            and self._clock is not None
            and self._clock() > self._deadline
        ):
            raise _Timeout(f"the replay ran longer than its cap of {self.max_seconds} s")


@dataclass
class _Scan:
    """What the streaming pass learnt."""

    events: int = 0
    chain_error: tuple[str, dict[str, Any]] | None = None
    memory_ids: int = 0  # events whose payload records a wm_id or an episodic_id
    outputs: dict[str, str] = field(default_factory=dict)  # ref -> recorded hash
    output_has_content: dict[str, bool] = field(default_factory=dict)
    output_error: tuple[str, dict[str, Any]] | None = None
    steps: list[dict[str, Any]] = field(default_factory=list)
    step_spool: Any = None
    step_count: int = 0
    step_error: str | None = None


def _first_event_problem(
    event: dict[str, Any], expected_seq: int, prev: str, job_seed: str
) -> tuple[str | None, dict[str, Any], str, bytes]:
    seq = event["seq"]
    if seq != expected_seq:
        return (
            f"event seq {seq} where {expected_seq} was expected: the event stream has a gap, "
            "a duplicate or a reordering",
            {"broke_at": seq, "expected": str(expected_seq), "observed": str(seq)},
            "",
            b"",
        )
    want_id = native.event_id_of(job_seed, seq, event["type"])
    if event["event_id"] != want_id:
        return (
            f"event {seq}: event_id does not derive from job_seed, seq and type",
            {"broke_at": seq, "expected": want_id, "observed": event["event_id"]},
            "",
            b"",
        )
    computed, body = native.event_hash(prev, event, f"event {seq}")
    if computed != event["hash"]:
        return (
            f"event {seq}: the chain hash does not verify (the event or one before it changed)",
            {"broke_at": seq, "expected": computed, "observed": event["hash"]},
            computed,
            body,
        )
    return None, {}, computed, body


def _memory_id_failure(event: dict[str, Any], job_seed: str) -> tuple[str, dict[str, Any]] | None:
    """Why a memory write's ``wm_id`` or ``episodic_id`` (in the event's payload) does not
    derive from ``job_seed`` and its counter (seed 003 §5), worded as the event id's
    check words its own; None when each does."""
    problem = memory_id_problem(event["payload"], job_seed)
    if problem is None:
        return None
    seq = event["seq"]
    return (
        f"event {seq}: payload.{problem.field} {problem.observed_text} does not derive from "
        f"job_seed and {problem.counter_field}{problem.why_not}",
        {"broke_at": seq, "expected": problem.expected, "observed": problem.observed_text},
    )


#: `pre` of a row nobody worked out in advance: (derived id, body, previous hash, chain hash)
_NO_PRE: tuple[str | None, bytes | None, str | None, str | None] = (None, None, None, None)


def _seal_mac(signature: dict[str, Any], keys: KeyRing, at: datetime | None) -> Any:
    """A streaming HMAC of the sealed message, when `verify` would get as far as computing it.

    `signatures.verify` needs the whole message in memory; an HMAC does not, so for an
    HMAC seal whose key is known, of the right algorithm and valid at `at` (everything
    `verify` checks before it reads the message), the message is fed to the MAC as the
    records stream past and never stored. Any other seal is left to `verify` itself.
    """
    if signature.get("alg") != HMAC_SHA256 or not isinstance(signature.get("value"), str):
        return None
    key = keys.lookup(signature["key_id"])
    if key is None or key.alg != HMAC_SHA256 or key.window_problem(at) is not None:
        return None
    return hmac.new(key.secret or b"", digestmod=hashlib.sha256)


def _signature_code(verdict: Verdict) -> str:
    """A signature that did not verify: ``UNKNOWN_KEY`` when its key is not in the registry
    (nothing was verified, so the file is refused, not stored as tampered), else
    ``INTEGRITY_FAILURE`` (a registered key whose signature does not verify, or a key outside
    its window)."""
    return errors.UNKNOWN_KEY if verdict.unknown_key is not None else errors.INTEGRITY_FAILURE


def _seal_verdict(signature: dict[str, Any], mac: Any) -> Verdict:
    """`signatures.verify`'s HMAC verdict, worded as it words it, from the streamed MAC."""
    expected = mac.hexdigest()
    key_id, value = signature["key_id"], signature["value"]
    if hmac.compare_digest(expected, value.lower()):
        return Verdict(True, f"HMAC-SHA256 by {key_id} verifies")
    return Verdict(False, f"HMAC-SHA256 by {key_id} does not verify", expected, value)


def replay(
    trace: native.NativeTrace,
    *,
    mode: str,
    registry: Registry,
    keys: KeyRing,
    stored_snapshot: Callable[[str], Mapping[str, Any] | None] = lambda _sid: None,
    halted: Mapping[str, str] | None = None,
    at: datetime | None = None,
    limits: ReplayLimits = NO_LIMITS,
    continue_past: frozenset[int] = frozenset(),
    clock: Callable[[], float] | None = None,
    progress: Callable[[int], None] | None = None,
    workers: int = 1,
    file_id: str | None = None,
    erased: Sequence[Mapping[str, str]] = (),
) -> ReplayReport:
    """Replay a native trace (seed 003 §6) and return its report; never raises ReplayError.

    `erased`: the fields whose values were erased (``{"location": "event N", "path"}``):
    those events' chain hashes cannot be recomputed, so their recorded hashes are taken as
    the chain's links, the seal is not checked, the report lists them and is not
    authoritative; every other check runs as ever.

    `halted` maps what may be halted to why: the trace id, a snapshot id, or `file_id` (the
    caller's name for this very file, e.g. its stored sha256); the first check after the
    format refuses the replay with every halt that concerns it, each as the caller worded it.

    `workers` > 1 parses, validates and hashes a JSON Lines trace in that many worker
    processes (`NativeTrace.rows`); the chain, the seal and the state are still settled
    here, in order, so the report is the one a single process gives.

    `halted` maps the halted trace and snapshot ids to why, as the caller read them from the
    ledger (``{}``: it read no active halt); None means no ledger was read, and the halts
    check says so (`HALTS_NOT_CHECKED`) rather than "no active halt".
    """
    if mode not in MODES:
        raise ValueError(f"mode must be one of {', '.join(MODES)}")
    header = trace.header
    report = ReplayReport(trace_id=header["trace_id"], format=native.FORMAT, mode=mode)
    report.unprotected_fields = list(UNPROTECTED_FIELDS)
    report.authoritative = mode != SANDBOX
    report.snapshot_ids = [s["snapshot_id"] for s in header["snapshots"]]
    timer = _Clock(clock, limits)
    try:
        with ExitStack() as cleanup:
            done: ReplayReport = pipeline.run(
                _CHECKS,
                _Run(
                    trace=trace,
                    report=report,
                    mode=mode,
                    registry=registry,
                    keys=keys,
                    stored_snapshot=stored_snapshot,
                    halted=halted,
                    at=at,
                    limits=limits,
                    continue_past=continue_past,
                    timer=timer,
                    progress=progress,
                    cleanup=cleanup,
                    workers=1 if erased else workers,
                    file_id=file_id,
                    erased=erased,
                ),
            )
            return done
    except ReplayError as exc:
        report.checks.append(Check("format", False, exc.message))
        return report.fail(exc.code, exc.message, broke_at=exc.broke_at)
    except _Timeout as exc:
        report.checks.append(Check("timeout", False, str(exc)))
        return report.fail(errors.REPLAY_TIMEOUT, str(exc))
    finally:
        report.checks.sort(key=lambda c: CHECK_ORDER.index(c.name) if c.name in CHECK_ORDER else 99)


def _seal_check(
    *,
    seal: Any,
    seal_mac: Any,
    header: dict[str, Any],
    keys: KeyRing,
    at: datetime | None,
    checks: list[Check],
) -> dict[str, Any] | None:
    """The seal's check; what the report fails with when it does not verify."""
    if seal_mac is not None:
        seal.send_rest(header)
        verdict = _seal_verdict(header["seal"], seal_mac)
    else:
        with seal.finish(header) as message_file:
            verdict = verify(header["seal"], message_file.read(), keys, at=at)
    if not verdict.ok:
        checks.append(Check("seal", False, verdict.reason))
        return {
            "code": _signature_code(verdict),
            "message": f"seal: {verdict.reason}",
            "broke_at": "seal",
            "expected": verdict.expected,
            "observed": verdict.observed,
        }
    checks.append(
        Check("seal", True, f"{verdict.reason}; not covered: {', '.join(UNPROTECTED_FIELDS)}")
    )
    return None


@dataclass
class _Run:
    """The state one replay's checks share (`pipeline.run` over `_CHECKS`)."""

    trace: native.NativeTrace
    report: ReplayReport
    mode: str
    registry: Registry
    keys: KeyRing
    stored_snapshot: Callable[[str], Mapping[str, Any] | None]
    halted: Mapping[str, str] | None
    at: datetime | None
    limits: ReplayLimits
    continue_past: frozenset[int]
    timer: _Clock
    progress: Callable[[int], None] | None
    cleanup: ExitStack
    workers: int
    file_id: str | None
    erased: Sequence[Mapping[str, str]] = ()
    # learnt on the way, check by check
    erased_seqs: dict[int, list[str]] = field(default_factory=dict)
    erased_seen: list[int] = field(default_factory=list)
    bodies: dict[str, Any] = field(default_factory=dict)
    missing_snapshots: list[str] = field(default_factory=list)
    #: (code, message, where) of the first snapshot whose id or signature does not verify
    snapshot_problem: tuple[str, str, dict[str, Any]] | None = None
    runtime: Any = None
    rng: Any = None
    materialiser: Any = None
    seal: Any = None
    seal_mac: Any = None
    scan: _Scan = field(default_factory=_Scan)
    external_refs: list[tuple[int, str]] = field(default_factory=list)
    consumption: _Consumption = field(default_factory=lambda: _Consumption())  # noqa: PLW0108 - defined below
    missing_outputs: list[str] = field(default_factory=list)
    last_output: Any = None

    @property
    def header(self) -> dict[str, Any]:
        return self.trace.header

    def passed(self, name: str, detail: str) -> None:
        self.report.checks.append(Check(name, True, detail))

    def failed(self, name: str, detail: str, code: str, message: str, **where: Any) -> Refusal:
        self.report.checks.append(Check(name, False, detail))
        return Refusal(code, message, where)


def _erasures(run: _Run) -> None:
    for erasure in run.erased:
        where_, _, number = str(erasure.get("location", "")).partition(" ")
        if where_ == "event" and number.isdigit():
            run.erased_seqs.setdefault(int(number), []).append(str(erasure.get("path", "")))
    if run.erased:
        run.report.erased = [{"location": e["location"], "path": e["path"]} for e in run.erased]
        run.report.authoritative = False


def _load_snapshots(run: _Run) -> None:
    """Snapshots present, retained, content-addressed, signed: the problems are noted here,
    refused in the contract's order (`_required_snapshots`, `_snapshots`)."""
    header, bodies, missing_snapshots = run.header, run.bodies, run.missing_snapshots
    stored_snapshot = run.stored_snapshot
    by_kind = {s["kind"]: s for s in header["snapshots"]}
    for kind in header["required_snapshots"]:
        snap = by_kind.get(kind)
        if snap is None:
            missing_snapshots.append(f"snapshot:{kind} (not referenced by the trace)")
            continue
        body = snap.get("body")
        if body is None:
            body = stored_snapshot(snap["snapshot_id"])
        if body is None:
            missing_snapshots.append(f"snapshot:{kind} {snap['snapshot_id']} (not retained)")
            continue
        bodies[kind] = body
    for kind, snap in by_kind.items():
        if kind not in bodies:
            body = snap.get("body") or stored_snapshot(snap["snapshot_id"])
            if body is not None:
                bodies[kind] = body
    for index, snap in enumerate(header["snapshots"]):
        body = bodies.get(snap["kind"])
        if body is None:
            continue
        message = native.canonical(body, f"snapshots[{index}].body")
        computed = "sha256:" + hashlib.sha256(message).hexdigest()
        if computed != snap["snapshot_id"]:
            run.snapshot_problem = (
                errors.INTEGRITY_FAILURE,
                f"snapshot {snap['kind']}: its body does not hash to its snapshot_id",
                {"broke_at": index, "expected": computed, "observed": snap["snapshot_id"]},
            )
            break
        verdict = verify(snap["signature"], message, run.keys, at=run.at)
        if not verdict.ok:
            run.snapshot_problem = (
                _signature_code(verdict),
                f"snapshot {snap['kind']}: {verdict.reason}",
                {"broke_at": index, "expected": verdict.expected, "observed": verdict.observed},
            )
            break


def _materialiser(run: _Run) -> None:
    job = run.header["job"]
    run.runtime = run.registry.runtime(job["runtime"]["name"])
    run.rng = DeterministicRNG(job["job_seed"])
    if run.runtime is not None and not run.missing_snapshots and run.snapshot_problem is None:
        run.materialiser = run.runtime.materialiser(run.bodies, run.rng)


def _stream(run: _Run) -> None:
    """The one streaming pass over the records: the hot loop, kept as one function."""
    header = run.header
    erased_seqs, erased_seen = run.erased_seqs, run.erased_seen
    progress, timer = run.progress, run.timer
    cleanup = run.cleanup
    seal_mac = _seal_mac(header["seal"], run.keys, run.at)
    seal = cleanup.enter_context(
        native.SealMessage(sink=seal_mac.update if seal_mac is not None else None)
    )
    run.seal, run.seal_mac = seal, seal_mac
    scan = run.scan
    prev = ""
    job_seed = header["job"]["job_seed"]
    spool_steps = run.trace.encoding == "jsonl"
    if spool_steps:
        spool = tempfile.SpooledTemporaryFile(max_size=16 * 1024**2)  # noqa: SIM115 - closed by cleanup
        scan.step_spool = cleanup.enter_context(spool)
    seen = 0
    n_events = 0
    memory_ids = 0
    chain_error: tuple[str, dict[str, Any]] | None = None
    add_hashed_event = seal.add_hashed_event
    event_id_of = native.event_id_deriver(job_seed)
    event_body_bytes = native.event_body_bytes
    apply = run.materialiser.apply if run.materialiser is not None else None
    sha256 = hashlib.sha256
    rows = run.trace.rows(run.workers)
    cleanup.callback(getattr(rows, "close", lambda: None))  # stops a parallel reader's workers
    pending: Iterator[native.Row] | None = iter(rows)
    while pending is not None:
        current, pending = pending, None
        for kind, item, where, ref, pre in current:
            seen += 1
            if not seen & 4095:
                if progress is not None:
                    progress(seen)
                timer.check()  # with or without a progress callback (ingest passes none)
            if kind == "events":
                # a run of events a worker validated and chained among themselves
                # (native.Row): if its first links to the last one here, take it whole
                first_seq, first_body, first_hash, blob, last_hash, count, parsed = pre
                if (
                    chain_error is None
                    and first_seq == n_events
                    and first_hash == "sha256:" + sha256(prev.encode() + first_body).hexdigest()
                ):
                    seal.add_event_blob(blob, count)
                    loads = native.orjson_loads
                    if parsed is not None:  # the loop below, lean
                        for i, event in enumerate(parsed):
                            if i:
                                seen += 1
                                if not seen & 4095:
                                    if progress is not None:
                                        progress(seen)
                                    timer.check()
                            if apply is not None:
                                apply(event)
                    else:  # JSON Lines: `item` holds the lines
                        for i, (_lineno, line) in enumerate(item):
                            if i:
                                seen += 1
                                if not seen & 4095:
                                    if progress is not None:
                                        progress(seen)
                                    timer.check()
                            if apply is not None:  # parsed is None here: parse the line
                                event = loads(line)
                                del event["record"]
                                apply(event)
                    n_events += count
                    prev = last_hash
                    del item, pre
                    parsed = blob = first_body = None
                    continue
                seen -= 1  # counted again, event by event
                pending = itertools.chain(native.expand_events(item, parsed), current)
                break
            if kind == "event":
                event = item
                if chain_error is None:
                    # the common case inline; _first_event_problem words any failure. `pre`
                    # holds what a parallel reader worked out (see native.Row).
                    seq = event["seq"]
                    recorded = event["hash"]
                    derived, body, pre_prev, chained = pre or _NO_PRE
                    if seq == n_events and event["event_id"] == (
                        derived or event_id_of(seq, event["type"])
                    ):
                        if body is None:
                            body = event_body_bytes(event, f"event {seq}", id_is_hex=True)
                        if chained is None or pre_prev != prev:
                            if len(body) < 1 << 16:
                                chained = "sha256:" + sha256(prev.encode() + body).hexdigest()
                            else:  # no copy of a large body
                                digest = sha256(prev.encode())
                                digest.update(body)
                                chained = "sha256:" + digest.hexdigest()
                    else:
                        chained = None
                    if chained is not None and chained == recorded:
                        add_hashed_event(body, chained)  # type: ignore[arg-type]  # set with chained
                        if apply is not None:
                            apply(event)
                        payload = event["payload"]
                        if "wm_id" in payload or "episodic_id" in payload:
                            # a memory write's ids derive from job_seed and its counters
                            memory_ids += 1
                            chain_error = _memory_id_failure(event, job_seed)
                    elif chained is not None and seq in erased_seqs:
                        # its values are erased: its hash cannot be recomputed; the recorded
                        # one links the chain on (what it covered is gone)
                        erased_seen.append(seq)
                        seal.add_event(event, where)
                        if apply is not None:
                            apply(event)
                    else:
                        problem, broke, _computed, _body = _first_event_problem(
                            event, n_events, prev, job_seed
                        )
                        assert problem is not None
                        chain_error = (problem, broke)
                        seal.add_event(event, where)
                    prev = recorded
                else:
                    seal.add_event(event, where)
                n_events += 1
                # hold nothing while the reader reads on: an event may be megabytes
                del item, pre
                event = body = None
            elif kind == "step":
                step = item
                if step["seq"] != scan.step_count and scan.step_error is None:
                    scan.step_error = (
                        f"{where}: step seq {step['seq']} where {scan.step_count} was expected"
                    )
                scan.step_count += 1
                seal.add_step(step, where)
                if spool_steps:
                    scan.step_spool.write(json.dumps(step, ensure_ascii=False).encode() + b"\n")
                else:
                    scan.steps.append(step)
            else:
                output = item
                if ref in scan.outputs:
                    raise ReplayError(errors.MALFORMED_TRACE, f"{where}: output {ref!r} twice")
                scan.outputs[ref] = output["hash"]
                seal.add_output(ref, output["hash"])
                scan.output_has_content[ref] = "content" in output
                if "content" in output and scan.output_error is None:
                    content_hash = pre or native.output_hash_of(output["content"], where)
                    if content_hash != output["hash"]:
                        scan.output_error = (
                            f"output {ref!r}: its content does not hash to its recorded hash",
                            {"broke_at": ref, "expected": content_hash, "observed": output["hash"]},
                        )
    scan.events = n_events
    scan.chain_error = chain_error
    scan.memory_ids = memory_ids
    if progress is not None:
        progress(seen)


def _format(run: _Run) -> None:
    scan, header, trace = run.scan, run.header, run.trace
    run.report.stats = {
        "events": scan.events,
        "steps": scan.step_count,
        "outputs": len(scan.outputs),
    }
    if scan.step_error:
        raise ReplayError(errors.MALFORMED_TRACE, scan.step_error)
    run.passed(
        "format",
        f"{native.FORMAT} v{header['schema_version']} ({trace.encoding}"
        f"{', gzip' if trace.compressed else ''}): {scan.events} events, "
        f"{scan.step_count} steps, {len(scan.outputs)} outputs",
    )


def _consumed(run: _Run) -> None:
    """Which outputs the steps consumed, and which are missing: the report's `missing`."""
    scan, report = run.scan, run.report
    for step in _steps(scan):
        if step["kind"] == "external":
            run.external_refs.append((step["seq"], step["output_ref"]))
        run.consumption.see(step, scan.outputs)
    run.missing_outputs = [
        ref for _seq, ref in run.external_refs if not scan.output_has_content.get(ref, False)
    ]
    report.missing = run.missing_snapshots + [
        f"output:{ref} (not persisted)" for ref in run.missing_outputs
    ]
    report.replayable = not report.missing


def _halts(run: _Run) -> Refusal | None:
    if run.halted is None:  # the caller read no ledger: say so, not "no active halt"
        run.passed("halts", HALTS_NOT_CHECKED)
        return None
    concerned = [run.file_id] if run.file_id is not None else []
    concerned += [run.header["trace_id"], *run.report.snapshot_ids]
    halted_here = list(dict.fromkeys(run.halted[i] for i in concerned if i in run.halted))
    if halted_here:
        return run.failed(
            "halts",
            "; ".join(halted_here),
            errors.FORCE_HALT_ACTIVE,
            f"replay is halted until a council FORCE_HALT_CLEAR: {'; '.join(halted_here)}",
        )
    run.passed("halts", "no active halt on the trace or its snapshots")
    return None


def _required_snapshots(run: _Run) -> Refusal | None:
    missing = run.missing_snapshots
    if missing:
        return run.failed(
            "required_snapshots",
            "; ".join(missing),
            errors.MISSING_SNAPSHOT,
            f"missing required snapshots: {'; '.join(missing)}",
        )
    run.passed("required_snapshots", f"all of {', '.join(run.header['required_snapshots'])}")
    return None


def _snapshots(run: _Run) -> Refusal | None:
    problem = run.snapshot_problem
    if problem is not None:
        code, message, where = problem
        return run.failed("snapshots", message, code, message, **where)
    run.passed("snapshots", f"{len(run.bodies)} snapshot ids and signatures verify")
    return None


def _events(run: _Run) -> Refusal | None:
    scan, erased_seen = run.scan, run.erased_seen
    if scan.chain_error is not None:
        message, where = scan.chain_error
        return run.failed("events", message, errors.INTEGRITY_FAILURE, message, **where)
    if erased_seen:
        named = ", ".join(f"event {seq} ({', '.join(run.erased_seqs[seq])})" for seq in erased_seen)
        run.passed(
            "events",
            f"{scan.events} event ids and chain links verify; the chain hashes of "
            f"{len(erased_seen)} event{'s' if len(erased_seen) != 1 else ''} cannot be "
            f"recomputed, their personal values are erased: {named}",
        )
        run.passed(
            "seal",
            "not checked: the seal covers the erased values of "
            + ", ".join(f"event {seq}" for seq in erased_seen),
        )
        return None
    detail = f"{scan.events} event ids and chain hashes verify"
    if scan.memory_ids:
        detail += (
            f"; the wm_id and episodic_id of {scan.memory_ids} memory "
            f"write{'s' if scan.memory_ids != 1 else ''} derive from job_seed and their "
            "counters"
        )
    run.passed("events", detail)
    return None


def _seal(run: _Run) -> Refusal | None:
    if run.erased_seen:
        return None  # `_events` said why the seal is not checked
    seal_problem = _seal_check(
        seal=run.seal,
        seal_mac=run.seal_mac,
        header=run.header,
        keys=run.keys,
        at=run.at,
        checks=run.report.checks,
    )
    if seal_problem is None:
        return None
    code, message = seal_problem.pop("code"), seal_problem.pop("message")
    return Refusal(code, message, seal_problem)


def _outputs(run: _Run) -> Refusal | None:
    scan, consumption = run.scan, run.consumption
    for problem in (scan.output_error, consumption.error):
        if problem is not None:
            return run.failed(
                "outputs", problem[0], errors.INTEGRITY_FAILURE, problem[0], **problem[1]
            )
    stored = sum(scan.output_has_content.values())
    run.passed(
        "outputs",
        f"{stored} stored outputs match their hashes; {consumption.checked} consumed "
        "outputs match the hashes their steps consumed",
    )
    return None


def _persisted_outputs(run: _Run) -> Refusal | None:
    if run.mode != PRODUCTION:
        return None
    missing_outputs = run.missing_outputs
    if missing_outputs:
        seq = next(s for s, ref in run.external_refs if ref in missing_outputs)
        detail = f"external output {missing_outputs[0]!r} (step {seq}) was not persisted"
        return run.failed(
            "persisted_outputs",
            detail,
            errors.MISSING_PERSISTED_AGENT_OUTPUT,
            f"{detail}; production replay never calls live services",
            broke_at=seq,
        )
    run.passed("persisted_outputs", "every external output is persisted")
    return None


def _runtime(run: _Run) -> Refusal | None:
    """The job's runtime is registered (else nothing can be re-executed)."""
    if run.runtime is None:
        detail = f"runtime {run.header['job']['runtime']['name']!r} is not registered"
        return run.failed("steps", detail, errors.CAPABILITY_NOT_FOUND, detail)
    return None


@dataclass
class _Execution:
    """What re-executing the steps carries from one step to the next (`_re_execute`)."""

    state: ReplayState
    #: the iteration cap: the tighter of the limits' and the governance snapshot's
    cap: int | None
    #: sandbox mocks draw from the job's "agent" stream, one external call after another,
    #: as the recorder's stand-in agent does; so each runs for every external step (in
    #: order), and its output is used only where the recorded one was not persisted
    mock_rng: Any
    mocked: dict[str, str] = field(default_factory=dict)  # output_ref -> the mock's hash
    unmocked: list[str] = field(default_factory=list)  # missing, no mock could stand in
    fed: _Consumption = field(default_factory=lambda: _Consumption())  # noqa: PLW0108 - below
    executed: int = 0
    last_output: Any = None


def _execution(run: _Run) -> _Execution:
    """The state re-execution starts from: the snapshots, the materialised state, the cap."""
    assert run.materialiser is not None
    bodies = run.bodies
    cap = run.limits.max_iterations
    governance_cap = bodies.get("governance", {}).get("max_iterations")
    if isinstance(governance_cap, int) and not isinstance(governance_cap, bool):
        cap = governance_cap if cap is None else min(cap, governance_cap)
    mocking = run.mode == SANDBOX and run.missing_outputs
    return _Execution(
        state=ReplayState(snapshots=bodies, materialised=run.materialiser.state()),
        cap=cap,
        mock_rng=run.rng.fork("agent") if mocking else None,
    )


def _within_cap(run: _Run, ex: _Execution, step: dict[str, Any]) -> Refusal | None:
    """One more step: refused past the iteration cap; the clock read every 256 steps."""
    ex.executed += 1
    if ex.cap is not None and ex.executed > ex.cap:
        detail = f"more than the iteration cap of {ex.cap} steps"
        return run.failed("steps", detail, errors.REPLAY_TIMEOUT, detail, broke_at=step["seq"])
    if ex.executed % 256 == 0:
        run.timer.check()
    return None


def _external_step(run: _Run, ex: _Execution, step: dict[str, Any]) -> None:
    """An external step is not re-executed; in sandbox mode its mock runs (in order), and
    stands in for its output where the recorded one was not persisted."""
    ex.fed.track(step)
    if ex.mock_rng is None:
        return
    ref = step["output_ref"]
    persisted = run.scan.output_has_content.get(ref, False)
    mock = run.registry.mock(step["name"])
    if mock is not None:
        where = f"step {step['seq']} sandbox mock output"
        mock_hash = native.output_hash_of(mock(step["input"], ex.mock_rng), where)
        if not persisted:
            ex.mocked[ref] = mock_hash
            run.report.substituted.append(
                {
                    "output_ref": ref,
                    "step": step["seq"],
                    "hash": mock_hash,
                    "matches_recorded": mock_hash == run.scan.outputs.get(ref),
                }
            )
    elif not persisted:
        ex.unmocked.append(f"{ref} (step {step['seq']}, {step['name']})")


def _computed_step(run: _Run, ex: _Execution, step: dict[str, Any]) -> Refusal | None:
    """Re-execute a computed step with its registered function and compare its output with
    the recorded one (canonical bytes; within epsilon noted, not a divergence)."""
    fn = run.registry.function(step["fn"])
    if fn is None:
        detail = (
            f"step {step['seq']} ({step['step_id']}): function {step['fn']!r} is not registered"
        )
        return run.failed(
            "steps", detail, errors.CAPABILITY_NOT_FOUND, detail, broke_at=step["seq"]
        )
    step_input = step["input"]
    fed_by = ex.fed.consumed_ref(step)
    if fed_by is not None and fed_by in ex.mocked:
        step_input = {**step_input, "output_hash": ex.mocked[fed_by]}
    else:
        fed_by = None
    recomputed = fn(step_input, ex.state, run.rng.fork(f"step:{step['seq']}"))
    ex.last_output = recomputed
    recorded_bytes = native.canonical(step["output"], f"step {step['seq']} output")
    if native.canonical(recomputed, f"step {step['seq']} recomputed") == recorded_bytes:
        return None
    real, close = _differences(step["output"], recomputed)
    run.report.within_epsilon += [
        Divergence(step["seq"], step["step_id"], e.path, e.before, e.after) for e in close
    ]
    if not real:
        return None
    return _diverged(
        run,
        ex,
        step,
        real=real,
        fed_by=fed_by,
        recorded_bytes=recorded_bytes,
        recomputed=recomputed,
    )


def _diverged(
    run: _Run,
    ex: _Execution,
    step: dict[str, Any],
    *,
    real: list[DiffEntry],
    fed_by: str | None,
    recorded_bytes: bytes,
    recomputed: Any,
) -> Refusal | None:
    """A step whose output differs: its divergences listed; the replay goes on past it when
    a force-continue approved it (non-authoritative), else it ends there."""
    report = run.report
    approved = step["seq"] in run.continue_past
    for entry in real:
        report.divergences.append(
            Divergence(
                step["seq"],
                step["step_id"],
                entry.path,
                entry.before,
                entry.after,
                force_continued=approved,
            )
        )
    if approved:
        report.force_continued = True
        report.authoritative = False
        return None
    detail = (
        f"step {step['seq']} ({step['step_id']}, {step['fn']}): the recomputed output "
        "differs from the recorded one"
    )
    if fed_by is not None:
        producer = ex.fed.producers.get(fed_by)
        detail += f"; its input's output_hash is the sandbox mock's output for {fed_by!r}" + (
            f" (step {producer[0]})" if producer is not None else ""
        )
    return run.failed(
        "steps",
        detail,
        errors.REPLAY_DIVERGENCE,
        detail,
        broke_at=step["seq"],
        expected=_short(recorded_bytes),
        observed=_short(mace_v1(recomputed)),
    )


def _steps_note(run: _Run, ex: _Execution) -> str:
    """The steps check's line: how many replayed, and what makes the replay non-authoritative
    (force-continued, sandbox mocks) or approximate (within epsilon)."""
    report = run.report
    note = f"{ex.executed} steps replayed"
    if report.within_epsilon:
        note += "; " + _epsilon_note(report.within_epsilon, with_step=True)
    if report.force_continued:
        note += "; force-continued past an approved divergence (non-authoritative)"
    if report.substituted:
        stood_in = ", ".join(f"{s['output_ref']} (step {s['step']})" for s in report.substituted)
        note += (
            f"; sandbox mocks stood in for {stood_in} and fed the steps that consumed them "
            "(non-authoritative)"
        )
        report.authoritative = False
    if ex.unmocked:
        note += (
            f"; no sandbox mock is registered for {', '.join(ex.unmocked)}: the steps that "
            "consumed it used its recorded hash"
        )
    return note


def _re_execute(run: _Run) -> Refusal | None:
    """Re-execute the steps (seed 003 §6 step 8), one after another, to the first refusal."""
    ex = _execution(run)
    for step in _steps(run.scan):
        refusal = _within_cap(run, ex, step)
        if refusal is None:
            if step["kind"] == "external":
                _external_step(run, ex, step)
                continue
            refusal = _computed_step(run, ex, step)
        if refusal is not None:
            return refusal
    run.last_output = ex.last_output
    run.passed("steps", _steps_note(run, ex))
    return None


def _final_answer(run: _Run) -> Refusal | None:
    report, header = run.report, run.header
    computed_final = run.runtime.final_answer(run.last_output, run.scan.step_count)
    real: list[DiffEntry] = []
    close_final: list[Divergence] = []
    if native.canonical(computed_final, "final answer") != native.canonical(
        header["final_answer"], "final_answer"
    ):
        real, close = _differences(header["final_answer"], computed_final)
        close_final = [
            Divergence("final_answer", "final_answer", e.path, e.before, e.after) for e in close
        ]
        report.within_epsilon += close_final
    if real:
        for entry in real:
            report.divergences.append(
                Divergence("final_answer", "final_answer", entry.path, entry.before, entry.after)
            )
        detail = "the recomputed final answer differs from the stored final_answer"
        return run.failed(
            "final_answer",
            detail,
            errors.RESULT_MISMATCH,
            detail,
            broke_at="final_answer",
            expected=_short(mace_v1(header["final_answer"])),
            observed=_short(mace_v1(computed_final)),
        )
    detail = "recomputed final answer equals the stored one"
    if close_final:
        detail += "; " + _epsilon_note(close_final, with_step=False)
    run.passed("final_answer", detail)
    return None


#: one replay, in order: what is read before the streaming pass, the pass, then the checks
#: settled in the contract's order (CHECK_ORDER); the first refusal ends it
_CHECKS: tuple[pipeline.Check[_Run], ...] = (
    pipeline.Check("erasures", _erasures),
    pipeline.Check("snapshot_bodies", _load_snapshots),
    pipeline.Check("materialiser", _materialiser),
    pipeline.Check("stream", _stream),
    pipeline.Check("format", _format),
    pipeline.Check("consumption", _consumed),
    pipeline.Check("halts", _halts),
    pipeline.Check("required_snapshots", _required_snapshots),
    pipeline.Check("snapshots", _snapshots),
    pipeline.Check("events", _events),
    pipeline.Check("seal", _seal),
    pipeline.Check("outputs", _outputs),
    pipeline.Check("persisted_outputs", _persisted_outputs),
    pipeline.Check("runtime", _runtime),
    pipeline.Check("steps", _re_execute),
    pipeline.Check("final_answer", _final_answer),
)


_EPSILON = decimal.Decimal(repr(NUMERIC_EPSILON))


def _canonical_number(x: float) -> decimal.Decimal:
    """The exact decimal value of a float's mace-v1 spelling (9 decimals, shortest repr)."""
    return decimal.Decimal(repr(float(f"{x:.9f}")))


def _within_epsilon(before: Any, after: Any) -> bool:
    """Two floats whose canonical values differ by at most NUMERIC_EPSILON.

    After mace-v1's rounding two different values are at least one unit of the ninth decimal
    apart, and in binary floating point that unit, `a - b`, comes out a little above or
    below 1e-9 depending on the magnitudes. So the difference is taken on the exact decimal
    spellings: one unit in the ninth decimal is within epsilon, two are not.
    """
    if type(before) is not float or type(after) is not float:
        return False
    try:
        return abs(_canonical_number(before) - _canonical_number(after)) <= _EPSILON
    except (ValueError, OverflowError, decimal.InvalidOperation):  # NaN/Infinity: never close
        return False


def _canonically_equal(before: Any, after: Any) -> bool:
    try:
        return mace_v1(before) == mace_v1(after)
    except ValueError:
        return False


def _differences(recorded: Any, recomputed: Any) -> tuple[list[DiffEntry], list[DiffEntry]]:
    """(divergent, equal only within NUMERIC_EPSILON) entries of a recorded vs recomputed
    value whose canonical bytes differ; fields with equal canonical bytes (a float that
    rounds to the same nine decimals, an NFKD-equal string) are neither."""
    real: list[DiffEntry] = []
    close: list[DiffEntry] = []
    for entry in diff(recorded, recomputed):
        if entry.before is not MISSING and entry.after is not MISSING:
            if _canonically_equal(entry.before, entry.after):
                continue
            if _within_epsilon(entry.before, entry.after):
                close.append(entry)
                continue
        real.append(entry)
    if not real and not close:  # the bytes differ, so something does: keep the whole diff
        real = diff(recorded, recomputed) or [DiffEntry("", recorded, recomputed)]
    return real, close


def _epsilon_note(entries: list[Divergence], *, with_step: bool) -> str:
    where = ", ".join(f"step {d.step} {d.path}" if with_step else d.path for d in entries[:10])
    if len(entries) > 10:
        where += f", … ({len(entries) - 10} more)"
    noun = "value" if len(entries) == 1 else "values"
    return f"{len(entries)} {noun} equal only within NUMERIC_EPSILON {NUMERIC_EPSILON} ({where})"


class _Consumption:
    """Which external output each consuming step consumed, checked against its recorded hash.

    A deterministic step whose input carries `output_hash` consumed the output of the latest
    external step before it, or the one its input's `output_ref` names. That output's
    recorded hash (sealed, whether its content was persisted or not) must be the hash the
    step consumed; otherwise the output was swapped after it was consumed (seed 003 §6 step
    8: a persisted output must be the one the run used).
    """

    def __init__(self) -> None:
        self.latest: tuple[str, int, str] | None = None  # (output_ref, seq, step_id)
        self.producers: dict[str, tuple[int, str]] = {}
        self.checked = 0
        self.error: tuple[str, dict[str, Any]] | None = None

    def consumed_ref(self, step: Mapping[str, Any]) -> str | None:
        """The output_ref a deterministic step consumed, or None if it consumed none."""
        step_input = step.get("input")
        if not isinstance(step_input, dict) or "output_hash" not in step_input:
            return None
        named = step_input.get("output_ref")
        if isinstance(named, str):
            return named
        return self.latest[0] if self.latest is not None else None

    def track(self, step: Mapping[str, Any]) -> None:
        """Note an external step: later consuming steps consumed its output."""
        ref = step["output_ref"]
        self.latest = (ref, step["seq"], step["step_id"])
        self.producers[ref] = (step["seq"], step["step_id"])

    def see(self, step: Mapping[str, Any], recorded: Mapping[str, str]) -> None:
        if step["kind"] == "external":
            self.track(step)
            return
        ref = self.consumed_ref(step)
        if ref is None or ref not in recorded or self.error is not None:
            return
        self.checked += 1
        consumed = step["input"]["output_hash"]
        if consumed == recorded[ref]:
            return
        consumed_text = consumed if isinstance(consumed, str) else json.dumps(consumed)
        producer = self.producers.get(ref)
        of = f" of step {producer[0]} ({producer[1]})" if producer is not None else ""
        self.error = (
            f"output {ref!r}{of}: its recorded hash {recorded[ref]} is not the hash "
            f"{consumed_text} that step {step['seq']} ({step['step_id']}) consumed",
            {"broke_at": step["seq"], "expected": consumed_text, "observed": recorded[ref]},
        )


def _steps(scan: _Scan) -> Iterator[dict[str, Any]]:
    if scan.step_spool is None:
        yield from scan.steps
        return
    scan.step_spool.seek(0)
    for line in scan.step_spool:
        yield json.loads(line)


def _short(data: bytes, limit: int = 4096) -> str:
    text = data.decode()
    return text if len(text) <= limit else text[:limit] + "…"
