"""MACE reflective logs as MACE writes them, with their snapshot files (seed 003).

A reflective log is one JSON object: the ReflectiveLogEntry MACE's writer persists
(``log_id``, ``timestamp``, ``percept``, ``router_decision``, ``final_output``, ...) with what
seed 003 adds to it for replay (§3, §9): ``job_id``, ``job_seed``, the full
``iteration_trace``, the five snapshot ids (``selfrep_snapshot_id``,
``brainstate_snapshot_id``, ``router_snapshot_id``, ``privacy_snapshot_id``,
``governance_snapshot_id``), the ``REPLAYABLE`` flag, and optionally ``event_refs`` (the
ordered events it used) and ``agent_outputs`` (outputs persisted for production replay).

The writer signs an *immutable sub-payload* only::

    immutable_subpayload = {"log_id", "percept_text", "final_output_text", "router_decision_id"}
    signature = hex(HMAC-SHA256(secret(signature_key_id), mace-v1(immutable_subpayload)))

so the console checks (1) that the recorded sub-payload is the one the log's own fields give,
and (2) the HMAC, with the key looked up in the verification-key registry by
``signature_key_id``. Every other field of the log is outside the signature: the report lists
them in ``unprotected_fields``.

A snapshot file (MACE's own; content-addressed, named ``<snapshot_id>.json``)::

    {"snapshot_id": hex, "kind": "selfrep"|"brainstate"|"router"|"privacy"|"governance",
     "schema_version": 1, "seed_namespace": str, "config_hash": hex,
     "generator": "sha256(config_hash:schema_version:seed_namespace)", "body": {...},
     "signature": hex, "signature_key_id": str}

    config_hash = hex(sha256(mace-v1(body)))
    snapshot_id = hex(sha256(config_hash + ":" + schema_version + ":" + seed_namespace))  (§5)
    signature   = hex(HMAC-SHA256(secret, mace-v1(the file without signature, signature_key_id)))

An event reference is ``{"sequence_index", "event_type", "event_id"}`` with
``event_id = hex(sha256(job_seed + ":" + sequence_index + ":" + event_type))`` (§5), in
strictly increasing ``sequence_index`` order (§4).

Checks, in order; the first failure ends the report with its exact code: ``format``
(version refusals: ``UNSUPPORTED_SCHEMA_VERSION``), ``halts``, ``required_snapshots``
(``MISSING_SNAPSHOT``), ``snapshots`` (id provenance and signatures: ``INTEGRITY_FAILURE``;
an unregistered key: ``UNKNOWN_KEY``), ``event_ids``, ``immutable_subpayload``,
``signature``, ``replayable`` (a ``REPLAYABLE: true`` log whose outputs were not persisted:
``MISSING_PERSISTED_AGENT_OUTPUT``), ``persisted_outputs`` (production mode: a missing one is
``MISSING_PERSISTED_AGENT_OUTPUT``, one that differs from the iteration's ``REPLAY_DIVERGENCE``).

MACE's router and agents are not part of the log, so nothing is re-executed: re-verifying a
stored log re-checks all of the above against the snapshots stored with it.

Pure: no Django.
"""

from __future__ import annotations

import functools
import hashlib
import hmac
import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from itertools import accumulate
from typing import Any

from replay import errors
from replay.canonical import CanonicalError, mace_v1
from replay.diff import diff
from replay.engine import AUDIT, PRODUCTION, SANDBOX, Check, Divergence, ReplayReport
from replay.errors import ReplayError
from replay.formats.jsonstrict import NOT_PROVEN, check_shape, loads_strict, parse_compact
from replay.signatures import HMAC_SHA256, KeyRing

try:  # accelerator for snapshot_signed_bytes; mace-v1 itself decides without it
    import orjson as _orjson
except ImportError:  # pragma: no cover - exercised only where orjson is absent
    _orjson = None  # type: ignore[assignment]

FORMAT = "mace-reflective-log"
#: the log schema this console reads; MACE Stage-1 writes no version (read as 1)
SCHEMA_VERSION = 1
SNAPSHOT_SCHEMA_VERSION = 1
SNAPSHOT_KINDS = ("selfrep", "brainstate", "router", "privacy", "governance")
SNAPSHOT_FIELDS = {kind: f"{kind}_snapshot_id" for kind in SNAPSHOT_KINDS}
SNAPSHOT_GENERATOR = "sha256(config_hash:schema_version:seed_namespace)"
EVENT_ID_GENERATOR = "sha256(job_seed:sequence_index:event_type)"

MAX_LOG_BYTES = 64 * 1024**2
MAX_SNAPSHOT_BYTES = 16 * 1024**2
MAX_DEPTH = 64
MAX_STRING = 16 * 1024**2
MAX_ITERATIONS = 100_000

#: the sub-payload MACE's writer signs: key -> where in the log its value comes from
SUBPAYLOAD_SOURCES: dict[str, tuple[str, ...]] = {
    "log_id": ("log_id",),
    "percept_text": ("percept", "text"),
    "final_output_text": ("final_output", "text"),
    "router_decision_id": ("router_decision", "decision_id"),
}
#: MACE's development fallback when no key is configured (``test_secret_for_<key_id>``):
#: a signature made with it is a placeholder, whatever key id it names
FALLBACK_SECRET = "test_secret_for_{key_id}"  # noqa: S105 - the placeholder MACE uses, refused
_HEX64 = re.compile(r"[0-9a-f]{64}")

REQUIRED_STRINGS = ("log_id", "timestamp", "job_id", "job_seed", "signature_key_id")
REQUIRED_OBJECTS = ("percept", "router_decision", "final_output", "immutable_subpayload")
SIGNED_FIELDS = frozenset({"immutable_subpayload", "signature", "signature_key_id"})

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


def _malformed(message: str) -> ReplayError:
    return ReplayError(errors.MALFORMED_TRACE, message)


@dataclass
class Log:
    """A parsed reflective log, and the snapshot files verifying it read (kind -> document)."""

    document: dict[str, Any]
    filename: str = ""
    snapshots: dict[str, dict[str, Any]] = field(default_factory=dict)

    @property
    def snapshot_ids(self) -> dict[str, Any]:
        return {kind: self.document.get(name) for kind, name in SNAPSHOT_FIELDS.items()}


# --- the hashing rules (seed 003 §4, §5; MACE's writer) ---------------------------------


def _canonical(value: Any, where: str) -> bytes:
    try:
        return mace_v1(value)
    except CanonicalError as exc:
        raise _malformed(f"{where}: {exc}") from None


def hmac_hex(secret: bytes, value: Any, *, where: str = "payload") -> str:
    """MACE's ``sign_payload``: hex HMAC-SHA256 over the mace-v1 bytes of ``value`` (or over
    ``value`` itself when it is those bytes already)."""
    message = value if isinstance(value, bytes) else _canonical(value, where)
    return hmac.digest(secret, message, "sha256").hex()


def config_hash_of(body: Any) -> str:
    return hashlib.sha256(_canonical(body, "body")).hexdigest()


_I64 = 2**63


def snapshot_signed_bytes(snapshot: Mapping[str, Any], body_bytes: bytes | None = None) -> bytes:
    """mace-v1 of :func:`snapshot_signed_part`. With the body's own mace-v1 bytes (already
    made for its config_hash), the body is not serialised twice: canonical bytes of a value
    do not depend on where it sits, and the other fields (ASCII strings, small integers)
    need no transform, so orjson with sorted keys writes what mace-v1 would. Anything else
    takes mace-v1 itself."""
    part = snapshot_signed_part(snapshot)
    if body_bytes is not None and _orjson is not None:
        plain = True
        for k, v in part.items():
            t = type(v)
            if k == "body" or (t is str and v.isascii()) or (t is int and -_I64 <= v < _I64):
                continue
            plain = False
            break
        if plain:
            part["body"] = _orjson.Fragment(body_bytes)
            return _orjson.dumps(part, option=_orjson.OPT_SORT_KEYS)
    return _canonical(part, "snapshot")


def snapshot_id_of(config_hash: str, schema_version: int, seed_namespace: str) -> str:
    text = f"{config_hash}:{schema_version}:{seed_namespace}"
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def event_id_of(job_seed: str, sequence_index: int, event_type: str) -> str:
    return hashlib.sha256(f"{job_seed}:{sequence_index}:{event_type}".encode()).hexdigest()


def _at(document: Mapping[str, Any], path: tuple[str, ...]) -> Any:
    value: Any = document
    for key in path:
        if not isinstance(value, Mapping) or key not in value:
            return None
        value = value[key]
    return value


def subpayload_of(document: Mapping[str, Any]) -> dict[str, Any]:
    """The immutable sub-payload MACE's writer builds from a log's own fields (None for a
    field the log lacks)."""
    return {key: _at(document, path) for key, path in SUBPAYLOAD_SOURCES.items()}


def _subpayload_of_parsed(doc: Mapping[str, Any]) -> dict[str, Any]:
    """:func:`subpayload_of` for a parsed log (its percept, final_output and router_decision
    are objects)."""
    return {
        "log_id": doc["log_id"],
        "percept_text": doc["percept"].get("text"),
        "final_output_text": doc["final_output"].get("text"),
        "router_decision_id": doc["router_decision"].get("decision_id"),
    }


def snapshot_signed_part(snapshot: Mapping[str, Any]) -> dict[str, Any]:
    """A snapshot file without its signature and signature_key_id: what is signed."""
    part = dict(snapshot)
    part.pop("signature", None)
    part.pop("signature_key_id", None)
    return part


def make_snapshot(
    kind: str,
    body: Any,
    *,
    seed_namespace: str,
    key_id: str,
    secret: bytes,
    schema_version: int = SNAPSHOT_SCHEMA_VERSION,
) -> dict[str, Any]:
    """A snapshot file as seed 003 §5 derives it, signed (demo data, tests, the bench)."""
    config_hash = config_hash_of(body)
    snapshot: dict[str, Any] = {
        "snapshot_id": snapshot_id_of(config_hash, schema_version, seed_namespace),
        "kind": kind,
        "schema_version": schema_version,
        "seed_namespace": seed_namespace,
        "config_hash": config_hash,
        "generator": SNAPSHOT_GENERATOR,
        "body": body,
    }
    snapshot["signature"] = hmac_hex(secret, snapshot)
    snapshot["signature_key_id"] = key_id
    return snapshot


def sign_log(document: dict[str, Any], *, key_id: str, secret: bytes) -> dict[str, Any]:
    """What MACE's writer does to a log before persisting it: the sub-payload, signed."""
    subpayload = subpayload_of(document)
    document["immutable_subpayload"] = subpayload
    document["signature"] = hmac_hex(secret, subpayload)
    document["signature_key_id"] = key_id
    return document


# --- parse -----------------------------------------------------------------------------


def _depth_bound(data: bytes) -> int:
    """An upper bound of the text's nesting depth: brackets counted as if none sat inside a
    string (one inside a string can only raise the bound, never hide a level)."""
    brackets = data.translate(None, _NOT_BRACKETS)
    if not brackets:
        return 0
    return max(accumulate(_STEP[b] for b in brackets))


_NOT_BRACKETS = bytes(b for b in range(256) if b not in b"[]{}")
_STEP = {ord("["): 1, ord("{"): 1, ord("]"): -1, ord("}"): -1}


def _object(data: bytes, *, where: Any, limit: int) -> dict[str, Any]:
    """The JSON object ``data`` is, strictly; ``where`` as for :func:`_place`."""
    if len(data) > limit:
        raise _malformed(f"{_place(where)}: larger than {limit} bytes")
    # compact JSON (what MACE's canonical serializer writes) is proven by orjson; anything
    # else goes through the strict decoder, which words every refusal
    value = parse_compact(data)
    if value is NOT_PROVEN:
        value = loads_strict(data, where=_place(where))
    few_brackets = data.count(b"{") + data.count(b"[") <= MAX_DEPTH
    if len(data) > MAX_STRING or (not few_brackets and _depth_bound(data) > MAX_DEPTH):
        check_shape(value, where=_place(where), max_depth=MAX_DEPTH, max_string=MAX_STRING)
    if type(value) is not dict:
        raise _malformed(
            f"{_place(where)}: a MACE file is a JSON object, not {type(value).__name__}"
        )
    return value


def _place(where: Any) -> str:
    """A refusal's place: a string, or ``(file, list name, index)`` worded only when needed,
    or ``(kind, snapshot id)`` for a snapshot file."""
    if type(where) is tuple:
        if len(where) == 3:
            return f"{where[0]}: {where[1]}[{where[2]}]"
        return f"{where[0]} snapshot {where[1]}.json"
    return where


def _version(value: Any, *, where: str, supported: int) -> None:
    if value is None:
        return
    if type(value) is not int or value < 1:
        raise _malformed(f"{where}: schema_version must be a positive integer, got {value!r}")
    if value > supported:
        raise ReplayError(
            errors.UNSUPPORTED_SCHEMA_VERSION,
            f"{where}: schema_version {value} is newer than this console reads ({supported})",
            broke_at="schema_version",
            expected=str(supported),
            observed=str(value),
        )


_TYPE_NAMES = {str: "str", int: "int", bool: "bool", dict: "dict", list: "list"}


def _need(doc: Mapping[str, Any], name: str, kind: type, where: str) -> Any:
    """``doc[name]``, of exactly the JSON type ``kind`` (a bool is not an int)."""
    try:
        value = doc[name]
    except KeyError:
        raise _malformed(f"{where}: {name} is missing") from None
    if type(value) is not kind:
        raise _malformed(f"{where}: {name} must be {kind.__name__}, got {type(value).__name__}")
    return value


_LOG_FIELDS = (
    *((name, str) for name in REQUIRED_STRINGS),
    *((name, dict) for name in REQUIRED_OBJECTS),
    ("signature", str),
    ("REPLAYABLE", bool),
    ("iteration_trace", list),
)
_ITERATION_FIELDS = (("iteration_id", str), ("router_output", dict))
_EVENT_FIELDS = (("sequence_index", int), ("event_type", str), ("event_id", str))
_SNAPSHOT_FILE_FIELDS = (
    *((name, str) for name in ("snapshot_id", "kind", "seed_namespace", "config_hash")),
    ("signature", str),
    ("signature_key_id", str),
    ("schema_version", int),
)


def _require(doc: Mapping[str, Any], spec: tuple[tuple[str, type], ...], where: Any) -> None:
    """Every (name, type) of ``spec`` in ``doc``; ``where`` as for :func:`_place`."""
    for name, kind in spec:
        if type(doc.get(name)) is not kind:
            _need(doc, name, kind, _place(where))


def _list(doc: Mapping[str, Any], name: str, where: str) -> list[Any]:
    value = doc.get(name)
    if value is None:
        return []
    if type(value) is not list:
        raise _malformed(f"{where}: {name} must be a list")
    return value


def parse_log(data: bytes, *, where: str = "log") -> Log:
    """The strict, bounded parse of a reflective log; ``MALFORMED_TRACE`` or
    ``UNSUPPORTED_SCHEMA_VERSION`` with where and what."""
    doc = _object(data, where=where, limit=MAX_LOG_BYTES)
    if "config_hash" in doc and "log_id" not in doc:
        raise _malformed(
            f"{where}: a MACE snapshot file, not a reflective log; upload it together with "
            "the log that names it"
        )
    _version(doc.get("schema_version"), where=where, supported=SCHEMA_VERSION)
    _require(doc, _LOG_FIELDS, where)
    iterations = doc["iteration_trace"]
    if len(iterations) > MAX_ITERATIONS:
        raise _malformed(f"{where}: more than {MAX_ITERATIONS} iterations")
    for i, it in enumerate(iterations):
        if type(it) is not dict:
            raise _malformed(f"{where}: iteration_trace[{i}] must be an object")
        _require(it, _ITERATION_FIELDS, (where, "iteration_trace", i))
        oid = it.get("agent_output_id")
        if oid is not None and type(oid) is not str:
            raise _malformed(
                f"{where}: iteration_trace[{i}]: agent_output_id must be a string or null"
            )
    for kind, name in SNAPSHOT_FIELDS.items():
        sid = doc.get(name)
        if sid is not None and type(sid) is not str:
            raise _malformed(f"{where}: {name} must be a string ({kind} snapshot id) or null")
    for i, ref in enumerate(_list(doc, "event_refs", where)):
        if type(ref) is not dict:
            raise _malformed(f"{where}: event_refs[{i}] must be an object")
        _require(ref, _EVENT_FIELDS, (where, "event_refs", i))
    _list(doc, "agent_outputs", where)
    # strict JSON (no NaN, no lone surrogates) is always serialisable by mace-v1
    return Log(doc, where)


def parse_snapshot(data: bytes, *, where: Any) -> dict[str, Any]:
    """The strict, bounded parse of one snapshot file (``where``: as for :func:`_object`)."""
    return check_snapshot(_object(data, where=where, limit=MAX_SNAPSHOT_BYTES), where=where)


def check_snapshot(doc: Any, *, where: Any) -> dict[str, Any]:
    """A snapshot document's shape (a parsed file, or a body read back from the store)."""
    if type(doc) is not dict:
        raise _malformed(f"{_place(where)}: a snapshot file is a JSON object")
    version = doc.get("schema_version")
    if version != SNAPSHOT_SCHEMA_VERSION or type(version) is not int:
        _version(version, where=_place(where), supported=SNAPSHOT_SCHEMA_VERSION)
    _require(doc, _SNAPSHOT_FILE_FIELDS, where)
    if "body" not in doc:
        raise _malformed(f"{_place(where)}: body is missing")
    if doc["kind"] not in SNAPSHOT_KINDS:
        raise _malformed(
            f"{_place(where)}: kind {doc['kind']!r} is not one of {', '.join(SNAPSHOT_KINDS)}"
        )
    return doc


def snapshot_file_names(document: Mapping[str, Any]) -> list[str]:
    """The snapshot files a log names (``<snapshot_id>.json``), in kind order."""
    return [
        f"{sid}.json"
        for sid in (document.get(name) for name in SNAPSHOT_FIELDS.values())
        if isinstance(sid, str) and sid
    ]


# --- verify ----------------------------------------------------------------------------


def unprotected_fields(document: Mapping[str, Any]) -> list[str]:
    """The log's fields the signature does not protect (everything but the sub-payload's
    sources and the signature itself)."""
    return list(_unprotected(tuple(document)))


@functools.lru_cache(maxsize=256)
def _unprotected(names: tuple[str, ...]) -> tuple[str, ...]:
    signed_roots = {path[0] for path in SUBPAYLOAD_SOURCES.values()}
    out = []
    for name in names:
        if name in SIGNED_FIELDS:
            continue
        if name in signed_roots and name != "log_id":
            out.append(f"{name} (except {'.'.join(SUBPAYLOAD_SOURCES_BY_ROOT[name])})")
        elif name != "log_id":
            out.append(name)
    return tuple(out)


SUBPAYLOAD_SOURCES_BY_ROOT = {path[0]: path for path in SUBPAYLOAD_SOURCES.values()}


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


@dataclass(frozen=True)
class _SignatureProblem:
    code: str
    message: str
    expected: str | None
    observed: str | None


def _signature_problem(
    *,
    what: str,
    value: Any,
    key_id: str,
    payload: Any,
    keys: KeyRing | None,
    at: datetime | None,
) -> _SignatureProblem | None:
    """Why a MACE HMAC signature does not verify (None when it does). ``what`` names the
    field (``signature``, ``router snapshot signature``)."""
    key = keys.lookup(key_id) if keys is not None else None
    if key is None or key.alg != HMAC_SHA256 or key.secret is None:
        return _SignatureProblem(
            errors.UNKNOWN_KEY,
            f"{what}: no HMAC-SHA256 key {key_id!r} in the verification-key registry; "
            f"register MACE's secret with `keys add-hmac {key_id} --secret-file F`",
            None,
            value if isinstance(value, str) else None,
        )
    expected = hmac_hex(key.secret, payload, where=what)
    fallback = _fallback(key_id)
    if key.secret == fallback:
        return _SignatureProblem(
            errors.INTEGRITY_FAILURE,
            f"{what}: key {key_id!r} is MACE's development fallback secret "
            f"({FALLBACK_SECRET.format(key_id=key_id)!r}), a placeholder key",
            expected,
            value,
        )
    problem = key.window_problem(at)
    if problem:
        return _SignatureProblem(errors.INTEGRITY_FAILURE, f"{what}: {problem}", expected, value)
    if isinstance(value, str) and value.isascii() and hmac.compare_digest(expected, value):
        return None
    if not isinstance(value, str) or not _HEX64.fullmatch(value) or set(value) == {"0"}:
        return _SignatureProblem(
            errors.INTEGRITY_FAILURE,
            f"{what}: {value!r} is a placeholder, not an HMAC-SHA256 signature (64 lower-case hex)",
            expected,
            value if isinstance(value, str) else repr(value),
        )
    if hmac.compare_digest(hmac_hex(fallback, payload, where=what), value):
        return _SignatureProblem(
            errors.INTEGRITY_FAILURE,
            f"{what}: made with MACE's development fallback secret "
            f"({FALLBACK_SECRET.format(key_id=key_id)!r}), a placeholder key, not the "
            f"registered key {key_id!r}",
            expected,
            value,
        )
    return _SignatureProblem(
        errors.INTEGRITY_FAILURE,
        f"{what}: HMAC-SHA256 by {key_id} does not verify",
        expected,
        value,
    )


@functools.lru_cache(maxsize=64)
def _fallback(key_id: str) -> bytes:
    return FALLBACK_SECRET.format(key_id=key_id).encode()


SnapshotSource = Callable[[str, str], "bytes | dict[str, Any] | None"]


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
    ``ReplayError``."""
    doc = log.document
    report = _report(mode, log)
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
    if halted_check is not None:
        report.checks.append(halted_check)

    # required snapshots (§6 step 2): ids present, files present
    ids = log.snapshot_ids
    report.snapshot_ids = [str(ids[k]) for k in SNAPSHOT_KINDS if ids[k]]
    absent = [SNAPSHOT_FIELDS[k] for k in SNAPSHOT_KINDS if not ids[k]]
    if absent:
        message = f"the log names no {', '.join(absent)}"
        report.missing = absent
        return _fail(
            report, "required_snapshots", errors.MISSING_SNAPSHOT, message, broke_at=absent[0]
        )
    raw: dict[str, Any] = {}
    for kind in SNAPSHOT_KINDS:
        sid = str(ids[kind])
        data = snapshot_source(kind, sid)
        if data is None:
            report.missing.append(f"{kind}:{sid}")
        else:
            raw[kind] = data
    if report.missing:
        kind, sid = report.missing[0].split(":", 1)
        message = (
            f"{SNAPSHOT_FIELDS[kind]}: snapshot file {sid}.json is not there "
            f"({len(report.missing)} of {len(SNAPSHOT_KINDS)} missing: "
            f"{', '.join(m.split(':')[0] for m in report.missing)})"
        )
        return _fail(
            report,
            "required_snapshots",
            errors.MISSING_SNAPSHOT,
            message,
            broke_at=SNAPSHOT_FIELDS[kind],
            expected=f"{sid}.json",
        )
    report.checks.append(
        Check("required_snapshots", True, f"all {len(SNAPSHOT_KINDS)} snapshot files present")
    )

    # snapshots: parse, id provenance (§5), signature (§1)
    # every file is checked (the ones that verify are kept, to be stored); the first
    # problem in kind order is the report's
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
            problem = _snapshot_signature(kind, snap, body_bytes, keys=keys, at=at)
        if problem is None:
            # only a file whose id recomputes and whose signature verifies may be stored:
            # the store keeps the first body of an id, so a badly signed copy kept first
            # would fail every later log that names the id
            log.snapshots[kind] = snap
        first = first or problem
    if first is not None:
        code, message, broke_at, expected, observed = first
        return _fail(
            report,
            "snapshots",
            code,
            message,
            broke_at=broke_at,
            expected=expected,
            observed=observed,
        )
    report.checks.append(
        Check(
            "snapshots",
            True,
            "every snapshot id recomputes from its body (" + SNAPSHOT_GENERATOR + ") and "
            "its signature verifies",
        )
    )

    # event ids (§5) and their order (§4)
    refs = doc.get("event_refs") or []
    previous = None
    for i, ref in enumerate(refs):
        seq = ref["sequence_index"]
        if previous is not None and seq <= previous:
            message = (
                f"event_refs[{i}].sequence_index: {seq} does not follow {previous} "
                "(events are ordered by sequence_index)"
            )
            return _fail(
                report,
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
            return _fail(
                report,
                "event_ids",
                errors.INTEGRITY_FAILURE,
                message,
                broke_at=seq,
                expected=expected,
                observed=ref["event_id"],
            )
    report.checks.append(
        Check("event_ids", True, f"{len(refs)} event ids recompute as {EVENT_ID_GENERATOR}")
    )

    # the immutable sub-payload is the one the log's fields give
    recorded = doc["immutable_subpayload"]
    derived = _subpayload_of_parsed(doc)
    for key, path in SUBPAYLOAD_SOURCES.items():
        if key not in recorded or (
            recorded[key] != derived[key]
            and _canonical(recorded[key], key) != _canonical(derived[key], key)
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
                observed=_text(recorded[key]) if key in recorded else None,
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
    problem = _signature_problem(
        what="signature",
        value=doc["signature"],
        key_id=doc["signature_key_id"],
        payload=recorded,
        keys=keys,
        at=at,
    )
    if problem is not None:
        return _fail(
            report,
            "signature",
            problem.code,
            problem.message,
            broke_at="signature",
            expected=problem.expected,
            observed=problem.observed,
        )
    report.checks.append(
        Check(
            "signature",
            True,
            f"HMAC-SHA256 by {doc['signature_key_id']} over the immutable sub-payload verifies",
        )
    )

    # REPLAYABLE (§9): what the console finds, against what the log claims
    persisted = _persisted(doc)
    unpersisted = [
        it["iteration_id"]
        for it in iterations
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
        return _fail(
            report,
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

    # persisted agent outputs (§6 step 8, production)
    if mode == PRODUCTION:
        for i, it in enumerate(iterations):
            oid = it.get("agent_output_id")
            if oid is None:
                continue
            if oid not in persisted:
                message = (
                    f"iteration_trace[{i}] ({it['iteration_id']}): agent output {oid} was "
                    "not persisted; production replay never calls a live agent"
                )
                return _fail(
                    report,
                    "persisted_outputs",
                    errors.MISSING_PERSISTED_AGENT_OUTPUT,
                    message,
                    broke_at=it["iteration_id"],
                    expected=oid,
                )
            entries = diff(it.get("agent_output"), persisted[oid].get("output"))
            if entries:
                approved = i in continue_past
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
                first = here[0]
                message = (
                    f"iteration_trace[{i}] ({it['iteration_id']}): the recorded agent output "
                    f"differs from persisted output {oid} at {first.path}"
                )
                return _fail(
                    report,
                    "persisted_outputs",
                    errors.REPLAY_DIVERGENCE,
                    message,
                    broke_at=i,
                    expected=_text(first.after),
                    observed=_text(first.before),
                )
        note = "every agent output equals its persisted copy"
        if report.force_continued:
            note = (
                "every agent output equals its persisted copy, but for the iterations "
                "force-continued past an approved divergence (non-authoritative)"
            )
        report.checks.append(Check("persisted_outputs", True, note))
    report.message = (
        f"MACE log {doc['log_id']} verifies: signature, {len(SNAPSHOT_KINDS)} snapshots, "
        f"{len(refs)} event ids"
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


def _snapshot_provenance(
    kind: str, sid: str, snap: Mapping[str, Any], body_bytes: bytes
) -> tuple[str, str, str, str | None, str | None] | None:
    """Why a snapshot file's id does not recompute (seed 003 §5), or None; ``body_bytes``
    is mace-v1 of its body."""
    prefix = f"{kind}_snapshot"
    if snap["kind"] != kind:
        return (
            errors.INTEGRITY_FAILURE,
            f"{prefix}.kind: the file named by {SNAPSHOT_FIELDS[kind]} is a "
            f"{snap['kind']} snapshot",
            f"{prefix}.kind",
            kind,
            snap["kind"],
        )
    config_hash = hashlib.sha256(body_bytes).hexdigest()
    if snap["config_hash"] != config_hash:
        return (
            errors.INTEGRITY_FAILURE,
            f"{prefix}.config_hash: the body does not hash to the recorded config_hash",
            f"{prefix}.config_hash",
            config_hash,
            snap["config_hash"],
        )
    computed = snapshot_id_of(config_hash, snap["schema_version"], snap["seed_namespace"])
    if snap["snapshot_id"] != computed:
        return (
            errors.INTEGRITY_FAILURE,
            f"{prefix}.snapshot_id: does not recompute as {SNAPSHOT_GENERATOR}",
            f"{prefix}.snapshot_id",
            computed,
            snap["snapshot_id"],
        )
    if sid != computed:
        return (
            errors.INTEGRITY_FAILURE,
            f"{SNAPSHOT_FIELDS[kind]}: the log names {sid}, the snapshot file is {computed}",
            SNAPSHOT_FIELDS[kind],
            computed,
            sid,
        )
    return None


def _snapshot_signature(
    kind: str,
    snap: Mapping[str, Any],
    body_bytes: bytes,
    *,
    keys: KeyRing | None,
    at: datetime | None,
) -> tuple[str, str, str, str | None, str | None] | None:
    problem = _signature_problem(
        what=f"{kind}_snapshot.signature",
        value=snap["signature"],
        key_id=snap["signature_key_id"],
        payload=snapshot_signed_bytes(snap, body_bytes),
        keys=keys,
        at=at,
    )
    if problem is None:
        return None
    return (
        problem.code,
        problem.message,
        f"{kind}_snapshot.signature",
        problem.expected,
        problem.observed,
    )


def failed_snapshot_id(report: Mapping[str, Any]) -> str | None:
    """The snapshot id a report's failed ``snapshots`` check is about (its ``broke_at`` names
    the kind: ``router_snapshot.config_hash``), or None."""
    failed = [c for c in report.get("checks", []) if not c.get("ok")]
    where = report.get("broke_at")
    ids = report.get("snapshot_ids") or []
    if not failed or failed[-1].get("name") != "snapshots" or not isinstance(where, str):
        return None
    kind = where.split("_snapshot", 1)[0]
    if kind not in SNAPSHOT_KINDS or len(ids) != len(SNAPSHOT_KINDS):
        return None
    return str(ids[SNAPSHOT_KINDS.index(kind)])


def stored_snapshot_tampered(body: Any, snapshot_id: str) -> bool:
    """A stored snapshot file no longer is one whose id recomputes as ``snapshot_id`` (it
    was rewritten in the store)."""
    try:
        snap = check_snapshot(body, where="stored snapshot")
    except ReplayError:
        return True
    kind = snap["kind"]
    return _snapshot_provenance(kind, snapshot_id, snap, _canonical(snap["body"], kind)) is not None


# --- compare and panel -----------------------------------------------------------------


def router_decisions(log: Log) -> Iterable[str]:
    for it in log.document.get("iteration_trace", []):
        out = it.get("router_output", {})
        agents = out.get("selected_agents") or []
        names = ", ".join(
            str(a.get("agent_id", a)) if isinstance(a, dict) else str(a) for a in agents
        )
        yield f"{it.get('iteration_id')}: {out.get('decision_id', '?')} -> {names or 'none'}"


def panel(log: Log) -> dict[str, str]:
    doc = log.document
    decision = doc.get("router_decision", {})
    agents = decision.get("selected_agents") or []
    return {
        "log_id": str(doc.get("log_id", "")),
        "job_id": str(doc.get("job_id", "")),
        "job_seed": str(doc.get("job_seed", "")),
        "timestamp": str(doc.get("timestamp", "")),
        "REPLAYABLE": "true" if doc.get("REPLAYABLE") else "false",
        "signature_key_id": str(doc.get("signature_key_id", "")),
        "iterations": str(len(doc.get("iteration_trace", []))),
        "router decision": (
            f"{decision.get('decision_id', '')} -> "
            + (
                ", ".join(
                    str(a.get("agent_id", a)) if isinstance(a, dict) else str(a) for a in agents
                )
                or "no agents"
            )
        ),
        "router decisions per iteration": "; ".join(router_decisions(log)) or "none",
        "final output": str(doc.get("final_output", {}).get("text", "")),
        **{SNAPSHOT_FIELDS[k]: str(v or "(none)") for k, v in log.snapshot_ids.items()},
    }
