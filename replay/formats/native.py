"""The native trace format, "replay-trace" v1 (contracts.md §2).

Two spellings of one trace: a JSON document (`*.trace.json`) or JSON Lines (`*.trace.jsonl`:
the document without `events`, `steps` and `outputs` on the first line, then one record a
line), either optionally gzipped. JSON Lines are streamed so memory stays bounded whatever
the trace's size; both spellings verify identically.

Hashing rules (all with the `mace-v1` canonical profile):

- `snapshot_id = "sha256:" + hex(sha256(mace_v1(body)))`; its signature is over those bytes;
- `event_id = hex(sha256(job_seed + ":" + seq + ":" + type))`;
- `hash_i = "sha256:" + hex(sha256(prev + mace_v1({seq, type, event_id, payload})))`,
  `prev` = "" for the first event, else the previous event's `hash` string;
- output `hash = "sha256:" + hex(sha256(mace_v1(content)))`;
- the seal signs `mace_v1` of the whole document without `seal`, `meta`, `job.started_at`,
  snapshot `body`s and output `content`s. Fields the seal does not protect: `meta` and
  `job.started_at` (informational only); snapshot bodies and output contents are protected
  through `snapshot_id` and the output `hash`.

Pure: no Django.
"""

from __future__ import annotations

import binascii
import gzip
import hashlib
import io
import re
import tempfile
import zlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import IO, Any

from replay.canonical import CanonicalError, mace_v1

try:
    from orjson import loads as orjson_loads
except ImportError:  # pragma: no cover - parse_compact proves nothing without orjson
    orjson_loads = None  # type: ignore[assignment]
from replay.errors import MALFORMED_TRACE, UNSUPPORTED_SCHEMA_VERSION, ReplayError
from replay.formats.jsonstrict import (
    MAX_KEYS,
    MAX_OBJECT_KEYS,
    NOT_PROVEN,
    check_key_count,
    check_shape,
    loads_strict,
    parse_compact,
)

FORMAT = "replay-trace"
SCHEMA_VERSION = 1
SIGNATURE_ALGS = ("hmac-sha256", "ed25519")

_HEX32 = re.compile(r"[0-9a-f]{32}\Z")
_HEX64 = re.compile(r"[0-9a-f]{64}\Z")
_SHA = re.compile(r"sha256:[0-9a-f]{64}\Z")
_SEMVER = re.compile(
    r"(0|[1-9]\d*)\.(0|[1-9]\d*)\.(0|[1-9]\d*)(?:-[0-9A-Za-z.-]+)?(?:\+[0-9A-Za-z.-]+)?\Z"
)
_ISO = re.compile(r"\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?(Z|[+-]\d{2}:\d{2})\Z")

HEADER_KEYS = {
    "format",
    "schema_version",
    "trace_id",
    "job",
    "required_snapshots",
    "snapshots",
    "final_answer",
    "seal",
    "meta",
}
DOCUMENT_KEYS = HEADER_KEYS | {"events", "steps", "outputs"}
GZIP_MAGIC = b"\x1f\x8b"
_READ_BYTES = 1 << 20  # what one read of an upload asks for
_WHITESPACE = frozenset(b" \t\n\r\x0b\x0c")  # what bytes.strip() removes


@dataclass(frozen=True)
class Limits:
    """What an upload may be. Oversized input is refused before it is held in memory."""

    max_document_bytes: int = 256 * 1024**2  # a .trace.json is parsed whole; use JSONL beyond
    max_total_bytes: int = 8 * 1024**3  # decompressed, JSONL included (gzip bombs stop here)
    max_line_bytes: int = 32 * 1024**2  # one JSONL record
    max_depth: int = 64
    max_string: int = 16 * 1024**2  # characters in one string
    max_records: int = 50_000_000
    max_blank_lines: int = 1024  # whitespace-only JSONL lines: padding, not records
    # gzip: past `ratio_floor` decompressed bytes, at most `max_ratio` times the bytes read
    max_ratio: int = 200
    ratio_floor: int = 32 * 1024**2
    max_keys: int = MAX_KEYS  # keys in one JSON text (the document, or one JSONL line)
    max_object_keys: int = MAX_OBJECT_KEYS

    def keys(self) -> dict[str, int]:
        return {"max_keys": self.max_keys, "max_object_keys": self.max_object_keys}


DEFAULT_LIMITS = Limits()


def _malformed(message: str) -> ReplayError:
    return ReplayError(MALFORMED_TRACE, message)


# --- hashing rules ---------------------------------------------------------------------------


def canonical(value: Any, where: str) -> bytes:
    """mace-v1 bytes of a hashed value; a value it cannot write is a malformed trace."""
    try:
        return mace_v1(value)
    except CanonicalError as exc:
        raise _malformed(f"{where}: {exc}") from None
    except RecursionError:
        raise _malformed(f"{where}: nesting is deeper than the canonicaliser allows") from None


def snapshot_id_of(body: Any) -> str:
    return "sha256:" + hashlib.sha256(canonical(body, "snapshot body")).hexdigest()


_sha256 = hashlib.sha256


def event_id_of(job_seed: str, seq: int, type_: str) -> str:
    return _sha256(f"{job_seed}:{seq}:{type_}".encode()).hexdigest()


def event_id_deriver(job_seed: str) -> Callable[[int, str], str]:
    """`event_id_of` with `job_seed` fixed: the same ids, for a fraction of the cost.

    The seed's bytes are encoded once and each event type's once (a trace has a handful).
    """
    try:
        prefix = job_seed.encode() + b":"
    except UnicodeEncodeError:  # let event_id_of fail as it does, event by event
        return lambda seq, type_: event_id_of(job_seed, seq, type_)
    types: dict[str, bytes] = {}

    def derive(seq: int, type_: str) -> str:
        type_bytes = types.get(type_)
        if type_bytes is None:
            type_bytes = type_.encode()
            if len(types) < _TYPE_CACHE_MAX:
                types[type_] = type_bytes
        if type(seq) is not int:  # "%d" would not write what f"{seq}" writes
            return event_id_of(job_seed, seq, type_)
        return _sha256(b"%s%d:%s" % (prefix, seq, type_bytes)).hexdigest()

    return derive


def event_hash(prev: str, event: dict[str, Any], where: str = "event") -> tuple[str, bytes]:
    """The chain hash of `event` after `prev`, and the hashed body's canonical bytes.

    The body's bytes start with `{"event_id":"<64 hex>",` (79 bytes, keys sorted), which
    `sealed_event_bytes` uses to write the whole event without canonicalising it twice.
    """
    body = event_body_bytes(event, where)
    return "sha256:" + _sha256(prev.encode() + body).hexdigest(), body


_TYPE_BYTES: dict[str, bytes] = {}  # mace_v1 of event types seen (a trace uses a handful)
_TYPE_CACHE_MAX = 4096


def event_body_bytes(
    event: dict[str, Any], where: str = "event", *, id_is_hex: bool = False
) -> bytes:
    """`mace_v1({seq, type, event_id, payload})`: the bytes an event's chain hash covers.

    Written from its parts: the four keys sort as event_id < payload < seq < type, and a
    canonical object is its members' canonical values in that order, so only the payload
    needs the canonicaliser (an event type's bytes are cached). Whenever a part is not the
    plain kind this shortcut covers (an int `seq`, an alphanumeric ASCII `event_id`, a
    `type` and `payload` mace_v1 can write), the whole body goes through `canonical`, which
    gives the same bytes or words the refusal as it always has. `id_is_hex`: the caller
    has checked that `event_id` is lower-case hex (the engine compares it with the id it
    derives), which spares the check here.
    """
    seq = event["seq"]
    event_id = event["event_id"]
    type_ = event["type"]
    if (
        type(seq) is int
        and type(event_id) is str
        and (id_is_hex or (event_id.isascii() and event_id.isalnum()))
        and type(type_) is str
    ):
        try:
            type_bytes = _TYPE_BYTES.get(type_)
            if type_bytes is None:
                type_bytes = mace_v1(type_)
                if len(_TYPE_BYTES) < _TYPE_CACHE_MAX:
                    _TYPE_BYTES[type_] = type_bytes
            return b'{"event_id":"%s","payload":%s,"seq":%d,"type":%s}' % (
                event_id.encode(),
                mace_v1(event["payload"]),
                seq,
                type_bytes,
            )
        except (CanonicalError, RecursionError, ValueError):
            pass  # canonical() below raises the refusal, worded for the whole body
    return canonical(
        {"seq": seq, "type": type_, "event_id": event_id, "payload": event["payload"]}, where
    )


_EVENT_ID_PREFIX = 79  # len('{"event_id":"') + 64 + len('",')


def sealed_event_bytes(body: bytes, event_hash_value: str) -> bytes:
    """mace_v1 of the whole event (with its `hash`), from the hashed body's bytes."""
    return (
        body[:_EVENT_ID_PREFIX]
        + b'"hash":"'
        + event_hash_value.encode()
        + b'",'
        + body[_EVENT_ID_PREFIX:]
    )


def output_hash_of(content: Any, where: str = "output") -> str:
    return "sha256:" + hashlib.sha256(canonical(content, where)).hexdigest()


class SealMessage:
    """Builds the sealed message, `mace_v1(document without the unsealed parts)`, in a stream.

    Events come first in the message's key order, so they go straight out: to `sink` when
    one is given (e.g. an HMAC's `update`: the message is then never stored), otherwise into
    a spooled buffer. Steps are spooled apart because a JSON Lines trace may interleave them
    with events; outputs keep only their hashes. Writes are batched. Memory stays bounded:
    the spools move to disk past `_SPOOL` bytes.
    """

    _SPOOL = 32 * 1024**2
    _BATCH = 256 * 1024

    def __init__(self, sink: Callable[[bytes], object] | None = None) -> None:
        self._sink = sink
        self._events = (
            None if sink is not None else tempfile.SpooledTemporaryFile(max_size=self._SPOOL)  # noqa: SIM115
        )
        self._steps = tempfile.SpooledTemporaryFile(max_size=self._SPOOL)  # noqa: SIM115
        self._pending: list[bytes] = []
        self._pending_bytes = 0
        self._n_events = 0
        self._n_steps = 0
        self.outputs: dict[str, str] = {}
        if sink is not None:
            sink(b'{"events":[')

    def add_event(self, event: dict[str, Any], where: str) -> None:
        self.add_event_bytes(canonical(event, where))

    def add_event_bytes(self, canonical_event: bytes) -> None:
        self._pending.append(canonical_event)
        self._pending_bytes += len(canonical_event)
        if self._pending_bytes >= self._BATCH:
            self._flush_events()

    def add_event_blob(self, blob: bytes, count: int) -> None:
        """`count` events' canonical bytes at once, already joined with commas."""
        self._flush_events()
        if self._n_events:
            blob = b"," + blob
        if self._sink is not None:
            self._sink(blob)
        else:
            assert self._events is not None
            self._events.write(blob)
        self._n_events += count

    def add_hashed_event(self, body: bytes, event_hash_value: str) -> None:
        """`add_event_bytes(sealed_event_bytes(body, event_hash_value))`, in one call.

        A large body is written in place, in pieces, rather than copied into a new event.
        """
        if len(body) >= self._BATCH:
            self._flush_events()
            out: Callable[[Any], object] = (
                self._sink if self._sink is not None else self._events.write  # type: ignore[union-attr]
            )
            if self._n_events:
                out(b",")
            view = memoryview(body)
            out(view[:_EVENT_ID_PREFIX])
            out(b'"hash":"%s",' % event_hash_value.encode())
            out(view[_EVENT_ID_PREFIX:])
            self._n_events += 1
            return
        event = b'%s"hash":"%s",%s' % (
            body[:_EVENT_ID_PREFIX],
            event_hash_value.encode(),
            body[_EVENT_ID_PREFIX:],
        )
        self._pending.append(event)
        self._pending_bytes += len(event)
        if self._pending_bytes >= self._BATCH:
            self._flush_events()

    def _flush_events(self) -> None:
        if not self._pending:
            return
        chunk = b",".join(self._pending)
        if self._n_events:
            chunk = b"," + chunk
        self._n_events += len(self._pending)
        self._pending = []
        self._pending_bytes = 0
        if self._sink is not None:
            self._sink(chunk)
        else:
            assert self._events is not None
            self._events.write(chunk)

    def add_step(self, step: dict[str, Any], where: str) -> None:
        if self._n_steps:
            self._steps.write(b",")
        self._steps.write(canonical(step, where))
        self._n_steps += 1

    def add_output(self, ref: str, digest: str) -> None:
        self.outputs[ref] = digest

    def _tail(self, header: dict[str, Any]) -> Iterator[bytes]:
        """Everything after the events, in pieces."""
        job = {k: v for k, v in header["job"].items() if k != "started_at"}
        snapshots = [{k: v for k, v in s.items() if k != "body"} for s in header["snapshots"]]
        tail = {
            "final_answer": header["final_answer"],
            "format": header["format"],
            "job": job,
            "outputs": {ref: {"hash": h} for ref, h in self.outputs.items()},
            "required_snapshots": header["required_snapshots"],
            "schema_version": header["schema_version"],
            "snapshots": snapshots,
        }
        # mace_v1 sorts keys: events < final_answer < ... < snapshots < steps < trace_id
        yield b"],"
        yield canonical(tail, "trace header")[1:-1]
        yield b',"steps":['
        self._steps.seek(0)
        while chunk := self._steps.read(1 << 20):
            yield chunk
        yield b'],"trace_id":'
        yield canonical(header["trace_id"], "trace_id")
        yield b"}"

    def send_rest(self, header: dict[str, Any]) -> None:
        """With a sink: send it the rest of the message (after the last event)."""
        assert self._sink is not None, "send_rest() is for a SealMessage with a sink"
        self._flush_events()
        for chunk in self._tail(header):
            self._sink(chunk)

    def close(self) -> None:
        """Drop the spools (a message returned by `finish` stays readable until closed)."""
        if self._events is not None:
            self._events.close()
        self._steps.close()

    def __enter__(self) -> SealMessage:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def finish(self, header: dict[str, Any]) -> IO[bytes]:
        """The whole sealed message as a readable file positioned at its start."""
        assert self._events is not None, "a SealMessage with a sink has no stored message"
        self._flush_events()
        out = tempfile.SpooledTemporaryFile(max_size=self._SPOOL)  # noqa: SIM115
        try:
            out.write(b'{"events":[')
            _copy(self._events, out)
            for chunk in self._tail(header):  # refuses a header mace-v1 cannot write
                out.write(chunk)
        except BaseException:
            out.close()  # the caller never gets it to close
            raise
        out.seek(0)
        return out


def _copy(src: IO[bytes], dst: IO[bytes]) -> None:
    src.seek(0)
    while chunk := src.read(1 << 20):
        dst.write(chunk)


def seal_message_of(document: dict[str, Any]) -> bytes:
    """The sealed message of a whole in-memory document (the recorder and tests use it)."""
    with SealMessage() as seal:
        for i, event in enumerate(document["events"]):
            seal.add_event(event, f"events[{i}]")
        for i, step in enumerate(document["steps"]):
            seal.add_step(step, f"steps[{i}]")
        for ref in sorted(document["outputs"]):
            seal.add_output(ref, document["outputs"][ref]["hash"])
        with seal.finish(document) as message:
            return message.read()


# --- validation ------------------------------------------------------------------------------


def _type_name(value: Any) -> str:
    return {dict: "object", list: "array", str: "string", bool: "boolean", type(None): "null"}.get(
        type(value), "number"
    )


def _kind_name(kind: type) -> str:
    # an int field given 1.5 must not read "expected number, got number"
    if kind is int:
        return "integer"
    return "null" if kind is type(None) else _type_name(kind())


def _expect(obj: dict[str, Any], key: str, kinds: tuple[type, ...], where: str) -> Any:
    if key not in obj:
        raise _malformed(f"{where}: missing required field {key!r}")
    value = obj[key]
    # bool is an int subclass in Python; JSON keeps them apart
    ok = isinstance(value, kinds) and not (isinstance(value, bool) and bool not in kinds)
    if not ok:
        wanted = " or ".join(_kind_name(k) for k in kinds)
        raise _malformed(f"{where}.{key}: expected {wanted}, got {_type_name(value)}")
    return value


def _no_extra(obj: dict[str, Any], allowed: set[str], where: str) -> None:
    extra = sorted(set(obj) - allowed)
    if extra:
        raise _malformed(f"{where}: unknown field {extra[0]!r}")


def _signature(sig: Any, where: str) -> None:
    if not isinstance(sig, dict):
        raise _malformed(f"{where}: expected object, got {_type_name(sig)}")
    _no_extra(sig, {"alg", "key_id", "value"}, where)
    alg = _expect(sig, "alg", (str,), where)
    if alg not in SIGNATURE_ALGS:
        raise _malformed(f"{where}.alg: {alg!r} is not one of {', '.join(SIGNATURE_ALGS)}")
    _expect(sig, "key_id", (str,), where)
    value = _expect(sig, "value", (str,), where)
    if not re.fullmatch(r"[0-9a-f]+", value):
        raise _malformed(f"{where}.value: expected lower-case hex")


def validate_header(header: Any, where: str = "trace") -> dict[str, Any]:
    """Check the format, schema version and every header field; returns the header."""
    if not isinstance(header, dict):
        raise _malformed(f"{where}: expected a JSON object, got {_type_name(header)}")
    fmt = header.get("format")
    if fmt != FORMAT:
        raise _malformed(f"{where}.format: expected {FORMAT!r}, got {fmt!r}")
    version = _expect(header, "schema_version", (int,), where)
    if version > SCHEMA_VERSION:
        raise ReplayError(
            UNSUPPORTED_SCHEMA_VERSION,
            f"{where}.schema_version: {version} is newer than the {SCHEMA_VERSION} this console "
            "supports; upgrade the console to replay it",
        )
    if version < 1:
        raise _malformed(f"{where}.schema_version: {version} is not a schema version")
    trace_id = _expect(header, "trace_id", (str,), where)
    if not _HEX32.match(trace_id):
        raise _malformed(f"{where}.trace_id: expected 32 lower-case hex characters")
    job = _expect(header, "job", (dict,), where)
    _no_extra(job, {"job_id", "job_seed", "runtime", "replayable", "started_at"}, f"{where}.job")
    _expect(job, "job_id", (str,), f"{where}.job")
    _expect(job, "job_seed", (str,), f"{where}.job")
    runtime = _expect(job, "runtime", (dict,), f"{where}.job")
    _no_extra(runtime, {"name", "version"}, f"{where}.job.runtime")
    _expect(runtime, "name", (str,), f"{where}.job.runtime")
    semver = _expect(runtime, "version", (str,), f"{where}.job.runtime")
    if not _SEMVER.match(semver):
        raise _malformed(f"{where}.job.runtime.version: {semver!r} is not a semantic version")
    _expect(job, "replayable", (bool,), f"{where}.job")
    if "started_at" in job:
        started = _expect(job, "started_at", (str,), f"{where}.job")
        if not _ISO.match(started):
            raise _malformed(f"{where}.job.started_at: {started!r} is not an ISO-8601 date-time")
    required = _expect(header, "required_snapshots", (list,), where)
    for i, kind in enumerate(required):
        if not isinstance(kind, str):
            raise _malformed(f"{where}.required_snapshots[{i}]: expected string")
    if len(set(required)) != len(required):
        raise _malformed(f"{where}.required_snapshots: lists a kind twice")
    snapshots = _expect(header, "snapshots", (list,), where)
    kinds = set()
    for i, snap in enumerate(snapshots):
        w = f"{where}.snapshots[{i}]"
        if not isinstance(snap, dict):
            raise _malformed(f"{w}: expected object, got {_type_name(snap)}")
        _no_extra(snap, {"kind", "snapshot_id", "schema_version", "body", "signature"}, w)
        kind = _expect(snap, "kind", (str,), w)
        if kind in kinds:
            raise _malformed(f"{w}.kind: a second {kind!r} snapshot")
        kinds.add(kind)
        sid = _expect(snap, "snapshot_id", (str,), w)
        if not _SHA.match(sid):
            raise _malformed(f"{w}.snapshot_id: expected 'sha256:' and 64 lower-case hex")
        _expect(snap, "schema_version", (int,), w)
        if "body" in snap and not isinstance(snap["body"], dict):
            raise _malformed(f"{w}.body: expected object, got {_type_name(snap['body'])}")
        _signature(_expect(snap, "signature", (dict,), w), f"{w}.signature")
    if "final_answer" not in header:
        raise _malformed(f"{where}: missing required field 'final_answer'")
    _signature(_expect(header, "seal", (dict,), where), f"{where}.seal")
    return header


_unhexlify = binascii.unhexlify


def _plain_event(event: Any) -> bool:
    """True for an event every check of `validate_event` passes (decided quickly).

    `unhexlify(s)` succeeds exactly for hex of even length (no spaces, signs or prefixes)
    and `s.lower() == s` rules out capitals: together, a fraction of a regular expression's
    cost. Five keys that are all the expected ones leave no room for an unknown one.
    """
    try:
        return (
            type(event) is dict
            and len(event) == 5
            and type(event["seq"]) is int
            and type(event["type"]) is str
            and type(event["payload"]) is dict
            and type(event_id := event["event_id"]) is str
            and len(event_id) == 64
            and _unhexlify(event_id) is not None
            and event_id.lower() == event_id
            and type(digest := event["hash"]) is str
            and len(digest) == 71
            and digest.startswith("sha256:")
            and _unhexlify(digest[7:]) is not None
            and digest.lower() == digest
        )
    except (KeyError, ValueError):  # a key missing, or not hex at all (binascii.Error)
        return False


def validate_event(event: Any, where: str) -> dict[str, Any]:
    if _plain_event(event):  # the common case; anything else gets the worded checks below
        return event
    if not isinstance(event, dict):
        raise _malformed(f"{where}: expected object, got {_type_name(event)}")
    _no_extra(event, {"seq", "type", "event_id", "payload", "hash"}, where)
    _expect(event, "seq", (int,), where)
    _expect(event, "type", (str,), where)
    if not _HEX64.match(_expect(event, "event_id", (str,), where)):
        raise _malformed(f"{where}.event_id: expected 64 lower-case hex characters")
    _expect(event, "payload", (dict,), where)
    if not _SHA.match(_expect(event, "hash", (str,), where)):
        raise _malformed(f"{where}.hash: expected 'sha256:' and 64 lower-case hex")
    return event


def validate_step(step: Any, where: str) -> dict[str, Any]:
    if not isinstance(step, dict):
        raise _malformed(f"{where}: expected object, got {_type_name(step)}")
    kind = _expect(step, "kind", (str,), where)
    _expect(step, "seq", (int,), where)
    _expect(step, "step_id", (str,), where)
    _expect(step, "input", (dict,), where)
    if kind == "deterministic":
        _no_extra(step, {"seq", "step_id", "kind", "fn", "input", "output"}, where)
        fn = _expect(step, "fn", (str,), where)
        if "@" not in fn:
            raise _malformed(f"{where}.fn: {fn!r} must name its version as 'name@version'")
        if "output" not in step:
            raise _malformed(f"{where}: missing required field 'output'")
    elif kind == "external":
        _no_extra(step, {"seq", "step_id", "kind", "name", "input", "output_ref"}, where)
        _expect(step, "name", (str,), where)
        _expect(step, "output_ref", (str,), where)
    else:
        raise _malformed(f"{where}.kind: expected 'deterministic' or 'external', got {kind!r}")
    return step


def validate_output(ref: str, output: Any, where: str) -> dict[str, Any]:
    if not isinstance(output, dict):
        raise _malformed(f"{where}: expected object, got {_type_name(output)}")
    _no_extra(output, {"content", "hash"}, where)
    if not _SHA.match(_expect(output, "hash", (str,), where)):
        raise _malformed(f"{where}.hash: expected 'sha256:' and 64 lower-case hex")
    return output


# --- reading ---------------------------------------------------------------------------------


@dataclass(slots=True)
class Record:
    kind: str  # "event" | "step" | "output"
    body: dict[str, Any]
    where: str
    ref: str = ""  # the output_ref of an output record


#: A record as `NativeTrace.rows` yields it: `(kind, body, where, ref, pre)`. `pre` is None
#: or what a parallel reader worked out already: for an event `(derived event_id, hashed
#: body bytes or None, previous event's hash or None, chain hash after it or None)`, for an
#: output the hash of its content (or None). A parallel reader also yields runs of plain,
#: validated events whose ids and inner links it checked as one row, `("events", [(line
#: number, line), ...], where, "", (first seq, first body bytes, first hash, the events'
#: sealed bytes joined with commas, last hash, count, the events or None))`: the engine
#: checks the run's link to what came before and takes it whole, or expands it with
#: `expand_events`. The events come parsed for long lines; short ones are parsed again.
Row = tuple[str, Any, str, str, Any]


def expand_events(
    lines: list[tuple[int, bytes]], events: list[dict[str, Any]] | None
) -> Iterator[Row]:
    """The rows of an `"events"` run, one event each (lines a worker parsed and validated)."""
    for i, (lineno, line) in enumerate(lines):
        if events is not None:
            event = events[i]
        else:
            event = orjson_loads(line)
            del event["record"]
        yield ("event", event, f"line {lineno}", "", None)


@dataclass
class NativeTrace:
    """A parsed header and a one-pass stream of its records, in file order."""

    header: dict[str, Any]
    encoding: str  # "json" | "jsonl"
    compressed: bool
    _rows: Callable[[int], Iterator[Row]] = field(repr=False, default=lambda _workers: iter(()))

    def records(self) -> Iterator[Record]:
        """The records, validated, in file order (one pass: call this or `rows` once)."""
        return (Record(kind, body, where, ref) for kind, body, where, ref, _pre in self._rows(0))

    def rows(self, workers: int = 1) -> Iterator[Row]:
        """The records as plain tuples, and runs of plain events as one row (see `Row`):
        the engine's fast path; one pass.

        A JSON Lines trace is read in chunks of lines, each parsed, validated and hashed at
        once; with `workers` > 1 by that many worker processes. The rows still come in file
        order, with the same refusals at the same place as `records` gives. A JSON document
        is already in memory and always read here, record by record.
        """
        return self._rows(workers)

    @property
    def format(self) -> str:
        return FORMAT


class _BoundedReader(io.RawIOBase):
    """Reads a (decompressed) stream and refuses to deliver more than `limit` bytes."""

    def __init__(
        self,
        raw: IO[bytes] | io.RawIOBase | gzip.GzipFile,
        limit: int,
        what: str,
        compressed: _Counted | None = None,
        limits: Limits = DEFAULT_LIMITS,
    ) -> None:
        self._raw = raw
        self._left = limit
        self._limit = limit
        self._what = what
        self._compressed = compressed
        self._ratio = limits.max_ratio
        self._floor = limits.ratio_floor

    def readable(self) -> bool:
        return True

    def readinto(self, b: Any) -> int:
        # At most 1 MiB a call (a caller's huge buffer must not be filled at once), and never
        # past the limit: the bytes up to it are delivered, and only a read beyond it, when
        # the stream has more, is refused (a page reading a stored file up to its budget
        # gets what lies before it).
        if not len(b):
            return 0
        want = min(len(b), self._left, _READ_BYTES) or 1
        try:
            data = self._raw.read(want)
        except (OSError, EOFError, zlib.error) as exc:
            raise _malformed(
                f"{self._what}: the gzip stream is corrupt or truncated ({exc})"
            ) from None
        if len(data) > self._left:
            raise ReplayError(
                MALFORMED_TRACE,
                f"{self._what}: more than {self._limit} bytes once decompressed; refused "
                "(a gzip bomb, or a trace larger than this console accepts)",
                detail={"limit": "max_total_bytes"},
            )
        self._left -= len(data)
        if self._compressed is not None:
            out = self._limit - self._left
            if out > self._floor and out > self._ratio * self._compressed.count:
                raise _malformed(
                    f"{self._what}: decompresses to more than {self._ratio} times its "
                    f"compressed size ({out} bytes from {self._compressed.count}, past the "
                    f"first {self._floor}); refused as a gzip bomb"
                )
        b[: len(data)] = data
        return len(data)


class _Counted(io.RawIOBase):
    """A stream that counts the bytes read from it (the compressed side of a gzip)."""

    def __init__(self, raw: IO[bytes] | io.RawIOBase) -> None:
        self._raw = raw
        self.count = 0

    def readable(self) -> bool:
        return True

    def readinto(self, b: Any) -> int:
        data = self._raw.read(len(b))
        self.count += len(data)
        b[: len(data)] = data
        return len(data)


def open_native(source: IO[bytes], filename: str, limits: Limits = DEFAULT_LIMITS) -> NativeTrace:
    """Open a native trace from a binary stream; detects gzip and the JSON/JSONL spelling."""
    head = source.read(2)
    rest = _Prefixed(head, source)
    compressed = head == GZIP_MAGIC
    name = filename.lower().removesuffix(".gz")
    stream: IO[bytes]
    if compressed:
        counted = _Counted(rest)
        stream = io.BufferedReader(
            _BoundedReader(
                gzip.GzipFile(fileobj=counted, mode="rb"),
                limits.max_total_bytes,
                filename,
                counted,
                limits,
            ),
            buffer_size=1 << 20,
        )
    else:
        stream = io.BufferedReader(
            _BoundedReader(rest, limits.max_total_bytes, filename), buffer_size=1 << 20
        )
    if name.endswith(".jsonl"):
        return _open_jsonl(stream, compressed, limits)
    if name.endswith(".json"):
        return _open_document(stream, compressed, limits)
    # no telling suffix: a JSONL trace's first line is a complete header without events
    first = stream.peek(limits.max_line_bytes)[: limits.max_line_bytes]
    newline = first.find(b"\n")
    if newline > 0:
        try:
            candidate = loads_strict(first[:newline], where="line 1", **limits.keys())
        except ReplayError:
            candidate = None
        if isinstance(candidate, dict) and "events" not in candidate and "format" in candidate:
            return _open_jsonl(stream, compressed, limits)
    return _open_document(stream, compressed, limits)


class _Prefixed(io.RawIOBase):
    """Puts the sniffed bytes back in front of the stream."""

    def __init__(self, prefix: bytes, raw: IO[bytes]) -> None:
        self._prefix = prefix
        self._raw = raw

    def readable(self) -> bool:
        return True

    def readinto(self, b: Any) -> int:
        if self._prefix:
            n = min(len(b), len(self._prefix))
            b[:n] = self._prefix[:n]
            self._prefix = self._prefix[n:]
            return n
        data = self._raw.read(len(b))
        b[: len(data)] = data
        return len(data)


def _read_document_bytes(stream: IO[bytes], limits: Limits) -> bytes:
    # in pieces, refused as soon as the limit is crossed: never a buffer of the limit's size
    chunks: list[bytes] = []
    size = 0
    while chunk := stream.read(_READ_BYTES):
        size += len(chunk)
        if size > limits.max_document_bytes:
            raise ReplayError(
                MALFORMED_TRACE,
                f"the JSON document is larger than {limits.max_document_bytes} bytes; send "
                "large traces as JSON Lines (*.trace.jsonl), which are streamed",
                detail={"limit": "max_document_bytes"},
            )
        chunks.append(chunk)
    data = b"".join(chunks)
    del chunks
    if not data.strip():
        raise _malformed("the file is empty")
    return data


def _open_document(stream: IO[bytes], compressed: bool, limits: Limits) -> NativeTrace:
    doc = loads_strict(_read_document_bytes(stream, limits), where="trace", **limits.keys())
    if not isinstance(doc, dict):
        raise _malformed(f"trace: expected a JSON object, got {_type_name(doc)}")
    if doc.get("format") != FORMAT:
        validate_header(doc)  # names the format problem
    _no_extra(doc, DOCUMENT_KEYS, "trace")
    check_shape(doc, where="trace", max_depth=limits.max_depth, max_string=limits.max_string)
    header = validate_header({k: v for k, v in doc.items() if k in HEADER_KEYS})
    events = _expect(doc, "events", (list,), "trace")
    steps = _expect(doc, "steps", (list,), "trace")
    outputs = _expect(doc, "outputs", (dict,), "trace")
    total = len(events) + len(steps) + len(outputs)
    if total > limits.max_records:
        raise _malformed(f"trace: {total} records, more than the limit of {limits.max_records}")

    def rows(_workers: int) -> Iterator[Row]:
        for i, event in enumerate(events):
            w = f"events[{i}]"
            yield ("event", validate_event(event, w), w, "", None)
        for i, step in enumerate(steps):
            w = f"steps[{i}]"
            yield ("step", validate_step(step, w), w, "", None)
        for ref in sorted(outputs):
            w = f"outputs[{ref!r}]"
            yield ("output", validate_output(ref, outputs[ref], w), w, ref, None)

    return NativeTrace(header, "json", compressed, rows)


def _read_line(stream: IO[bytes], limits: Limits, lineno: int) -> bytes:
    line = stream.readline(limits.max_line_bytes + 1)
    if len(line) > limits.max_line_bytes:
        raise _malformed(
            f"line {lineno}: longer than {limits.max_line_bytes} bytes; refused before reading it"
        )
    return line


def _open_jsonl(stream: IO[bytes], compressed: bool, limits: Limits) -> NativeTrace:
    first = _read_line(stream, limits, 1)
    if not first.strip():
        raise _malformed("line 1: the file is empty; a JSON Lines trace starts with its header")
    header = loads_strict(first, where="line 1", **limits.keys())
    if isinstance(header, dict):
        for key in ("events", "steps", "outputs"):
            if key in header:
                raise _malformed(f"line 1: the JSON Lines header must not carry {key!r}")
        if header.get("format") == FORMAT:
            _no_extra(header, HEADER_KEYS, "line 1")
        check_shape(
            header, where="line 1", max_depth=limits.max_depth, max_string=limits.max_string
        )
    validate_header(header, "line 1")

    def rows(workers: int) -> Iterator[Row]:
        if workers < 1:  # records(): one row per record
            return _serial_rows(stream, limits)
        return _chunked_rows(stream, limits, header["job"]["job_seed"], workers)

    return NativeTrace(header, "jsonl", compressed, rows)


def _parse_line(
    line: bytes, lineno: int, where: str, limits: Limits
) -> tuple[dict[str, Any], bool]:
    """One JSON Lines record (line ``lineno`` of the file): strictly parsed, an object,
    within the shape limits; and whether `parse_compact` proved it (so ``orjson.loads`` of
    the line gives it again)."""
    check_key_count(line, where=where, **limits.keys())
    obj = parse_compact(line)
    proven = obj is not NOT_PROVEN
    if not proven:
        obj = loads_strict(line, where=where, line_offset=lineno - 1, **limits.keys())
    if type(obj) is not dict:
        raise _malformed(f"{where}: expected a JSON object, got {_type_name(obj)}")
    # jsonstrict.shape_is_bounded, inline: most lines are too short to break the limits
    if len(line) > limits.max_string or line.count(b"{") + line.count(b"[") > limits.max_depth:
        check_shape(obj, where=where, max_depth=limits.max_depth, max_string=limits.max_string)
    return obj, proven


def _blank_lines(lineno: int, limit: int) -> ReplayError:
    return _malformed(
        f"line {lineno}: more than {limit} blank lines; refused (padding, not records)"
    )


def _bad_kind(kind: Any, where: str) -> ReplayError:
    return _malformed(f"{where}.record: expected 'event', 'step' or 'output', got {kind!r}")


def _serial_rows(stream: IO[bytes], limits: Limits) -> Iterator[Row]:
    lineno = 1
    count = 0
    refs: set[str] = set()
    max_line = limits.max_line_bytes
    max_records = limits.max_records
    max_blank = limits.max_blank_lines
    blank = 0
    readline = stream.readline
    while True:
        lineno += 1
        line = readline(max_line + 1)
        if len(line) > max_line:
            raise _malformed(
                f"line {lineno}: longer than {max_line} bytes; refused before reading it"
            )
        if not line:
            return
        if line[0] in _WHITESPACE and not line.strip():
            blank += 1
            if blank > max_blank:
                raise _blank_lines(lineno, max_blank)
            continue
        where = f"line {lineno}"
        obj, _proven = _parse_line(line, lineno, where, limits)
        count += 1
        if count > max_records:
            raise _malformed(f"{where}: more than {max_records} records")
        kind = obj.pop("record", None)
        if kind == "event":
            yield ("event", validate_event(obj, where), where, "", None)
        elif kind == "step":
            yield ("step", validate_step(obj, where), where, "", None)
        elif kind == "output":
            ref = _expect(obj, "output_ref", (str,), where)
            if ref in refs:
                raise _malformed(f"{where}: output_ref {ref!r} appears twice")
            refs.add(ref)
            del obj["output_ref"]
            yield ("output", validate_output(ref, obj, where), where, ref, None)
        else:
            raise _bad_kind(kind, where)


# --- reading JSON Lines in worker processes ---------------------------------------------------
#
# The main process reads lines and hands them out in chunks; a worker parses, validates and
# hashes each line exactly as `_serial_rows` would, and stops at the first refusal, which it
# sends back as (code, message) in its place. The main process keeps what depends on order
# (the record count, duplicate output refs, the chain itself) and raises each refusal when
# the rows before it have been consumed, so the result is the single-process one.

_CHUNK_LINES = 2048
_CHUNK_BYTES = 1 << 20
_REPARSE_MAX = 4096  # lines up to this long come back as text, longer ones as values
_worker_state: dict[str, Any] = {}


def _worker_init(job_seed: str, limits: Limits) -> None:
    _worker_state["derive_id"] = event_id_deriver(job_seed)
    _worker_state["limits"] = limits


def _prepare_chunk(chunk: list[tuple[int, bytes]]) -> list[tuple[Any, ...]]:
    """In a worker: the rows of `chunk` ((line number, line) pairs), precomputed."""
    return _rows_of_chunk(chunk, _worker_state["derive_id"], _worker_state["limits"], False)


def _rows_of_chunk(
    chunk: list[tuple[int, bytes]],
    derive_id: Callable[[int, str], str],
    limits: Limits,
    keep: bool,
) -> list[tuple[Any, ...]]:
    """A run of plain events at the start of `chunk` as one row, then a row per record."""
    run, taken = _event_run(chunk, derive_id, limits, keep=keep)
    if taken == len(chunk):
        return run
    return run + _chunk_rows(chunk, derive_id, limits, keep=keep, start=taken)


def _event_run(
    chunk: list[tuple[int, bytes]],
    derive_id: Callable[[int, str], str],
    limits: Limits,
    *,
    keep: bool = False,
) -> tuple[list[tuple[Any, ...]], int]:
    """The plain events `chunk` starts with, as one `"events"` row (see `Row`), and how
    many lines that row covers (no row when none).

    A plain run is nothing but events, strictly parsed, within the shape limits, valid,
    with the id its seq and type derive, its seq one more than the last one's and its hash
    the chain hash after the last one: everything the engine would check of them but the
    first one's link to what comes before. The run stops before the first line that is
    anything else (a step, an output, a refusal, an event that breaks the chain), which
    `_chunk_rows` then takes, exactly as `_serial_rows` would.
    """
    sealed: list[bytes] = []
    events: list[dict[str, Any]] = []
    prev: str | None = None
    first_seq = 0
    first_body = b""
    size = 0
    reparse = not keep
    max_string, max_depth = limits.max_string, limits.max_depth
    for index, (_lineno, line) in enumerate(chunk):
        if len(line) > _CHUNK_BYTES:  # alone in its chunk: the row path copies less
            break
        if line.count(b":") > min(limits.max_keys, limits.max_object_keys):
            break  # the row path counts its keys and decides
        obj = parse_compact(line)
        if obj is NOT_PROVEN:  # e.g. 1e-07 where orjson writes 1e-7: the strict parser decides
            try:
                obj = loads_strict(line, where="")
            except ReplayError:
                break
            reparse = False  # orjson.loads would not give this value back
        if (
            type(obj) is not dict
            or len(line) > max_string
            or line.count(b"{") + line.count(b"[") > max_depth
            or obj.pop("record", None) != "event"
            or not _plain_event(obj)
        ):
            break
        seq, recorded = obj["seq"], obj["hash"]
        if derive_id(seq, obj["type"]) != obj["event_id"]:
            break
        try:
            body = event_body_bytes(obj, "event", id_is_hex=True)
        except ReplayError:  # a payload mace-v1 cannot write: the row will say so
            break
        if index == 0:
            first_seq, first_body = seq, body
        elif (
            seq != first_seq + index
            or "sha256:" + _sha256(prev.encode() + body).hexdigest() != recorded  # type: ignore[union-attr]
        ):
            break
        sealed.append(sealed_event_bytes(body, recorded))
        events.append(obj)
        size += len(line)
        prev = recorded
    if not events:
        return [], 0
    summary = (
        first_seq,
        first_body,
        events[0]["hash"],
        b",".join(sealed),
        prev,
        len(events),
        None if reparse and size <= _REPARSE_MAX * len(events) else events,
    )
    return [("events", summary)], len(events)


def _chunk_rows(
    chunk: list[tuple[int, bytes]],
    derive_id: Callable[[int, str], str],
    limits: Limits,
    *,
    keep: bool = False,
    start: int = 0,
) -> list[tuple[Any, ...]]:
    """The rows of `chunk` as `_serial_rows` makes them, with what can be worked out ahead.

    An event parsed by `parse_compact` is sent back without its body: the main process gets
    the same value from ``orjson.loads`` of the line faster than from a pickle. Every row
    is a 5-tuple with `where` fourth; a refusal, ``("!", counted, (code, message), where,
    None)``, ends the chunk.
    """
    out: list[tuple[Any, ...]] = []
    prev: str | None = None  # the previous event's recorded hash, within this chunk
    for index in range(start, len(chunk)):
        lineno, line = chunk[index]
        where = f"line {lineno}"
        try:
            obj, proven = _parse_line(line, lineno, where, limits)
        except ReplayError as exc:
            out.append(("!", False, (exc.code, exc.message), where, None))
            return out
        try:
            kind = obj.pop("record", None)
            if kind == "event":
                event = validate_event(obj, where)
                seq = event["seq"]
                derived = derive_id(seq, event["type"])
                try:
                    body: bytes | None = event_body_bytes(event, f"event {seq}", id_is_hex=True)
                except ReplayError:
                    body = None  # the engine words it, if and when it hashes this event
                digest = None
                if body is not None and prev is not None:
                    digest = "sha256:" + _sha256(prev.encode() + body).hexdigest()
                pre = (derived, body, prev if digest is not None else None, digest)
                # a short line is cheaper to parse again than to unpickle, a long one is not
                resend = keep or not proven or len(line) > _REPARSE_MAX
                out.append(("event", event if resend else None, index, where, pre))
                prev = event["hash"]
            elif kind == "step":
                out.append(("step", validate_step(obj, where), index, where, None))
            elif kind == "output":
                ref = _expect(obj, "output_ref", (str,), where)
                del obj["output_ref"]
                try:
                    output = validate_output(ref, obj, where)
                except ReplayError as exc:
                    # refused only after the duplicate-ref check, which needs every line
                    out.append(("output!", ref, (exc.code, exc.message), where, None))
                    return out
                digest = None
                if "content" in output:
                    try:
                        digest = output_hash_of(output["content"], where)
                    except ReplayError:
                        digest = None  # the engine words it
                out.append(("output", output, index, where, (ref, digest)))
            else:
                raise _bad_kind(kind, where)
        except ReplayError as exc:
            out.append(("!", True, (exc.code, exc.message), where, None))
            return out
    return out


def _mp_context() -> Any:
    """How to start workers: fork when this process has one thread (starts in milliseconds
    and imports nothing again), spawn otherwise (forking a threaded process can deadlock)."""
    import multiprocessing
    import threading

    if "fork" in multiprocessing.get_all_start_methods() and threading.active_count() == 1:
        return multiprocessing.get_context("fork")
    return multiprocessing.get_context("spawn")


class _Here:
    """A chunk's rows, worked out in this process when asked for (`workers` = 1)."""

    def __init__(self, chunk: list[tuple[int, bytes]], derive_id: Any, limits: Limits) -> None:
        self._args = (chunk, derive_id, limits)

    def result(self) -> list[tuple[Any, ...]]:
        return _rows_of_chunk(*self._args, True)


class _InProcess:
    """The part of an executor `_chunked_rows` uses, without processes."""

    def __init__(self, job_seed: str, limits: Limits) -> None:
        self._derive_id = event_id_deriver(job_seed)
        self._limits = limits

    def submit(self, _fn: Any, chunk: list[tuple[int, bytes]]) -> _Here:
        return _Here(chunk, self._derive_id, self._limits)

    def shutdown(self, wait: bool = True, *, cancel_futures: bool = False) -> None:
        pass


def _chunked_rows(stream: IO[bytes], limits: Limits, job_seed: str, workers: int) -> Iterator[Row]:
    from collections import deque

    pool: Any
    if workers > 1:
        from concurrent.futures import ProcessPoolExecutor

        pool = ProcessPoolExecutor(
            workers, mp_context=_mp_context(), initializer=_worker_init, initargs=(job_seed, limits)
        )
        ahead = 2 * workers + 2  # chunks handed out before the first is back
    else:
        pool = _InProcess(job_seed, limits)
        ahead = 1
    pending: deque[tuple[list[tuple[int, bytes]] | None, Any]] = deque()
    state = {"lineno": 1, "done": False, "blank": 0}
    max_line = limits.max_line_bytes
    max_blank = limits.max_blank_lines
    readline = stream.readline

    def read_chunk() -> None:
        chunk: list[tuple[int, bytes]] = []
        size = 0
        lineno = state["lineno"]
        try:
            while len(chunk) < _CHUNK_LINES and size < _CHUNK_BYTES:
                lineno += 1
                line = readline(max_line + 1)
                if len(line) > max_line:
                    raise _malformed(
                        f"line {lineno}: longer than {max_line} bytes; refused before reading it"
                    )
                if not line:
                    state["done"] = True
                    break
                if line[0] in _WHITESPACE and not line.strip():
                    state["blank"] += 1
                    if state["blank"] > max_blank:
                        raise _blank_lines(lineno, max_blank)
                    continue
                chunk.append((lineno, line))
                size += len(line)
        except Exception as exc:  # raised in its place, after the rows before it
            state["done"] = True
            if chunk:
                pending.append((chunk, pool.submit(_prepare_chunk, chunk)))
            pending.append((None, exc))
            return
        finally:
            state["lineno"] = lineno
        if chunk:
            pending.append((chunk, pool.submit(_prepare_chunk, chunk)))

    derive_id = event_id_deriver(job_seed)
    counter = {"count": 0}
    refs: set[str] = set()
    try:
        while True:
            while not state["done"] and len(pending) < ahead:
                read_chunk()
            if not pending:
                return
            chunk, future = pending.popleft()
            if chunk is None:
                raise future
            # the previous chunk's lines and rows are gone before this one's are made: a
            # chunk can be a single line of many megabytes
            yield from _chunk_out(
                chunk,
                future.result(),
                counter=counter,
                refs=refs,
                limits=limits,
                derive_id=derive_id,
            )
            del chunk, future
    finally:
        pool.shutdown(wait=True, cancel_futures=True)


def _chunk_out(
    chunk: list[tuple[int, bytes]],
    result: list[tuple[Any, ...]],
    *,
    counter: dict[str, int],
    refs: set[str],
    limits: Limits,
    derive_id: Callable[[int, str], str],
) -> Iterator[Row]:
    """The rows of one chunk, in order, with what depends on the chunks before it: the
    record count and the output refs seen."""
    max_records = limits.max_records
    if result and result[0][0] == "events":  # a run of events comes first, if any
        summary = result[0][1]
        if counter["count"] + summary[5] <= max_records:
            counter["count"] += summary[5]
            yield ("events", chunk[: summary[5]], f"line {chunk[0][0]}", "", summary)
            del summary
            result = result[1:]
        else:  # the record limit falls inside the run: take it line by line, here
            result = _chunk_rows(chunk, derive_id, limits, keep=True)
    for row in result:
        kind, where = row[0], row[3]
        if kind == "!":  # ("!", counted, (code, message), where, None)
            if row[1]:  # refused after the record was counted
                counter["count"] += 1
                if counter["count"] > max_records:
                    raise _malformed(f"{where}: more than {max_records} records")
            raise ReplayError(*row[2])
        counter["count"] += 1
        if counter["count"] > max_records:
            raise _malformed(f"{where}: more than {max_records} records")
        if kind == "event":  # ("event", body or None, index, where, pre)
            event = row[1]
            if event is None:
                event = orjson_loads(chunk[row[2]][1])
                del event["record"]
            yield ("event", event, where, "", row[4])
        elif kind == "step":  # ("step", body, index, where, None)
            yield ("step", row[1], where, "", None)
        else:  # ("output", body, index, where, (ref, digest)) or
            # ("output!", ref, (code, message), where, None)
            ref = row[1] if kind == "output!" else row[4][0]
            if ref in refs:
                raise _malformed(f"{where}: output_ref {ref!r} appears twice")
            refs.add(ref)
            if kind == "output!":
                raise ReplayError(*row[2])
            yield ("output", row[1], where, ref, row[4][1])


# --- writing ---------------------------------------------------------------------------------


def dumps_document(document: dict[str, Any]) -> bytes:
    """The .trace.json spelling (readable, two-space indent, UTF-8)."""
    import json

    return json.dumps(document, indent=2, ensure_ascii=False).encode() + b"\n"


def iter_jsonl(document: dict[str, Any]) -> Iterator[bytes]:
    """The .trace.jsonl spelling of a document, one line at a time."""
    import json

    def line(obj: Any) -> bytes:
        return json.dumps(obj, ensure_ascii=False, separators=(",", ":")).encode() + b"\n"

    yield line({k: v for k, v in document.items() if k not in ("events", "steps", "outputs")})
    for event in document["events"]:
        yield line({"record": "event", **event})
    for step in document["steps"]:
        yield line({"record": "step", **step})
    for ref in sorted(document["outputs"]):
        yield line({"record": "output", "output_ref": ref, **document["outputs"][ref]})
