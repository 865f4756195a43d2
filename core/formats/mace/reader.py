"""The strict, bounded read of a MACE reflective log and of its snapshot files
(:func:`parse_log`, :func:`parse_snapshot`, :func:`check_snapshot`); the names a log gives
its snapshot files are its companion rule's (``adapter.NAMED_SNAPSHOTS``).

A file is read by orjson where it proves the text (compact JSON, what MACE's canonical
serializer writes), else by the strict decoder, which words every refusal; depth and string
length are bounded. A refusal is ``MALFORMED_TRACE`` (or ``UNSUPPORTED_SCHEMA_VERSION``) naming
where and what.

Pure: no Django.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from itertools import accumulate
from typing import Any

from core import errors
from core.errors import ReplayError
from core.formats.jsonstrict import NOT_PROVEN, check_shape, loads_strict, parse_compact

FORMAT = "mace-reflective-log"
#: the log schema this console reads; MACE Stage-1 writes no version (read as 1)
SCHEMA_VERSION = 1
SNAPSHOT_SCHEMA_VERSION = 1
SNAPSHOT_KINDS = ("selfrep", "brainstate", "router", "privacy", "governance")
SNAPSHOT_FIELDS = {kind: f"{kind}_snapshot_id" for kind in SNAPSHOT_KINDS}

MAX_LOG_BYTES = 64 * 1024**2
MAX_SNAPSHOT_BYTES = 16 * 1024**2
MAX_DEPTH = 64
MAX_STRING = 16 * 1024**2
MAX_ITERATIONS = 100_000

REQUIRED_STRINGS = ("log_id", "timestamp", "job_id", "job_seed", "signature_key_id")
REQUIRED_OBJECTS = ("percept", "router_decision", "final_output", "immutable_subpayload")
#: what seed 003 adds to MACE's log for replay (§3, §9). A log with none of them is a
#: reflective log exactly as MACE's writer persists it: verified by its signature, not
#: replayable (no job seed, no snapshots); a log with any of them must carry them all.
REPLAY_FIELDS = (
    "job_id",
    "job_seed",
    "iteration_trace",
    "REPLAYABLE",
    "event_refs",
    *SNAPSHOT_FIELDS.values(),
)
#: the lists and objects MACE's writer persists besides the signed ones (optional; typed
#: when present)
WRITER_LISTS = (
    "council_votes",
    "agent_outputs",
    "claims",
    "evidence_items",
    "memory_reads",
    "memory_writes",
    "errors",
)
WRITER_OBJECTS = ("brainstate_before", "brainstate_after")


def _malformed(message: str) -> ReplayError:
    return ReplayError(errors.MALFORMED_TRACE, message)


@dataclass
class Log:
    """A parsed reflective log, and the snapshot files verifying it read (kind -> document)."""

    document: dict[str, Any]
    filename: str = ""
    snapshots: dict[str, dict[str, Any]] = field(default_factory=dict)
    #: the log carries seed 003's replay fields (job id and seed, iterations, snapshot ids);
    #: False for a log as MACE's writer persists it, which only its signature verifies
    replayable_shape: bool = True

    @property
    def snapshot_ids(self) -> dict[str, Any]:
        return {kind: self.document.get(name) for kind, name in SNAPSHOT_FIELDS.items()}


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
_WRITER_FIELDS = (
    ("log_id", str),
    ("timestamp", str),
    *((name, dict) for name in REQUIRED_OBJECTS),
    ("signature", str),
    ("signature_key_id", str),
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
    if not any(name in doc for name in REPLAY_FIELDS):
        return _writer_log(doc, where)
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


def _writer_log(doc: dict[str, Any], where: str) -> Log:
    """A log as MACE's writer persists it (no replay fields): the signed fields and the
    writer's other lists and objects, typed."""
    _require(doc, _WRITER_FIELDS, where)
    for name in WRITER_LISTS:
        _list(doc, name, where)
    for name in WRITER_OBJECTS:
        value = doc.get(name)
        if value is not None and type(value) is not dict:
            raise _malformed(f"{where}: {name} must be an object")
    return Log(doc, where, replayable_shape=False)


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
