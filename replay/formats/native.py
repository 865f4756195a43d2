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
from replay.errors import MALFORMED_TRACE, UNSUPPORTED_SCHEMA_VERSION, ReplayError
from replay.formats.jsonstrict import (
    check_shape,
    loads_compact,
    loads_strict,
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


def event_hash(prev: str, event: dict[str, Any], where: str = "event") -> tuple[str, bytes]:
    """The chain hash of `event` after `prev`, and the hashed body's canonical bytes.

    The body's bytes start with `{"event_id":"<64 hex>",` (79 bytes, keys sorted), which
    `sealed_event_bytes` uses to write the whole event without canonicalising it twice.
    """
    body = event_body_bytes(event, where)
    return "sha256:" + _sha256(prev.encode() + body).hexdigest(), body


_TYPE_BYTES: dict[str, bytes] = {}  # mace_v1 of event types seen (a trace uses a handful)
_TYPE_CACHE_MAX = 4096


def event_body_bytes(event: dict[str, Any], where: str = "event") -> bytes:
    """`mace_v1({seq, type, event_id, payload})`: the bytes an event's chain hash covers.

    Written from its parts: the four keys sort as event_id < payload < seq < type, and a
    canonical object is its members' canonical values in that order, so only the payload
    needs the canonicaliser (an event type's bytes are cached). Whenever a part is not the
    plain kind this shortcut covers (an int `seq`, an alphanumeric ASCII `event_id`, a
    `type` and `payload` mace_v1 can write), the whole body goes through `canonical`, which
    gives the same bytes or words the refusal as it always has.
    """
    seq = event["seq"]
    event_id = event["event_id"]
    type_ = event["type"]
    if (
        type(seq) is int
        and type(event_id) is str
        and event_id.isascii()
        and event_id.isalnum()
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
        out.write(b'{"events":[')
        _copy(self._events, out)
        for chunk in self._tail(header):
            out.write(chunk)
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


_EVENT_KEYS = frozenset({"seq", "type", "event_id", "payload", "hash"})
_fromhex = bytes.fromhex


def _plain_event(event: Any) -> bool:
    """True for an event every check of `validate_event` passes (decided quickly).

    `bytes.fromhex(s).hex() == s` holds exactly for lower-case hex of even length (spaces,
    capitals and other characters fail it), at a fraction of a regular expression's cost.
    """
    try:
        return (
            type(event) is dict
            and event.keys() == _EVENT_KEYS
            and type(event["seq"]) is int
            and type(event["type"]) is str
            and type(event["payload"]) is dict
            and type(event_id := event["event_id"]) is str
            and len(event_id) == 64
            and _fromhex(event_id).hex() == event_id
            and type(digest := event["hash"]) is str
            and len(digest) == 71
            and digest.startswith("sha256:")
            and _fromhex(digest[7:]).hex() == digest[7:]
        )
    except ValueError:  # not hex at all
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


@dataclass
class NativeTrace:
    """A parsed header and a one-pass stream of its records, in file order."""

    header: dict[str, Any]
    encoding: str  # "json" | "jsonl"
    compressed: bool
    _records: Iterator[Record] = field(repr=False, default_factory=lambda: iter(()))

    def records(self) -> Iterator[Record]:
        return self._records

    @property
    def format(self) -> str:
        return FORMAT


class _BoundedReader(io.RawIOBase):
    """Reads a (decompressed) stream and refuses to deliver more than `limit` bytes."""

    def __init__(self, raw: IO[bytes], limit: int, what: str) -> None:
        self._raw = raw
        self._left = limit
        self._limit = limit
        self._what = what

    def readable(self) -> bool:
        return True

    def readinto(self, b: Any) -> int:
        try:
            data = self._raw.read(min(len(b), self._left + 1))
        except (OSError, EOFError, zlib.error) as exc:
            raise _malformed(
                f"{self._what}: the gzip stream is corrupt or truncated ({exc})"
            ) from None
        if len(data) > self._left:
            raise _malformed(
                f"{self._what}: more than {self._limit} bytes once decompressed; refused "
                "(a gzip bomb, or a trace larger than this console accepts)"
            )
        self._left -= len(data)
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
        stream = io.BufferedReader(
            _BoundedReader(
                gzip.GzipFile(fileobj=rest, mode="rb"), limits.max_total_bytes, filename
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
            candidate = loads_strict(first[:newline], where="line 1")
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
    data = stream.read(limits.max_document_bytes + 1)
    if len(data) > limits.max_document_bytes:
        raise _malformed(
            f"the JSON document is larger than {limits.max_document_bytes} bytes; send large "
            "traces as JSON Lines (*.trace.jsonl), which are streamed"
        )
    if not data.strip():
        raise _malformed("the file is empty")
    return data


def _open_document(stream: IO[bytes], compressed: bool, limits: Limits) -> NativeTrace:
    doc = loads_strict(_read_document_bytes(stream, limits), where="trace")
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

    def records() -> Iterator[Record]:
        for i, event in enumerate(events):
            w = f"events[{i}]"
            yield Record("event", validate_event(event, w), w)
        for i, step in enumerate(steps):
            w = f"steps[{i}]"
            yield Record("step", validate_step(step, w), w)
        for ref in sorted(outputs):
            w = f"outputs[{ref!r}]"
            yield Record("output", validate_output(ref, outputs[ref], w), w, ref)

    return NativeTrace(header, "json", compressed, records())


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
    header = loads_strict(first, where="line 1")
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

    def records() -> Iterator[Record]:
        lineno = 1
        count = 0
        refs: set[str] = set()
        max_line, max_depth, max_string = (
            limits.max_line_bytes,
            limits.max_depth,
            limits.max_string,
        )
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
                continue
            where = f"line {lineno}"
            obj = loads_compact(line, where=where)
            if type(obj) is not dict:
                raise _malformed(f"{where}: expected a JSON object, got {_type_name(obj)}")
            # shape_is_bounded(), inline: most lines are too short to break the limits
            if len(line) > max_string or line.count(b"{") + line.count(b"[") > max_depth:
                check_shape(obj, where=where, max_depth=max_depth, max_string=max_string)
            count += 1
            if count > limits.max_records:
                raise _malformed(f"{where}: more than {limits.max_records} records")
            kind = obj.pop("record", None)
            if kind == "event":
                yield Record("event", validate_event(obj, where), where)
            elif kind == "step":
                yield Record("step", validate_step(obj, where), where)
            elif kind == "output":
                ref = _expect(obj, "output_ref", (str,), where)
                if ref in refs:
                    raise _malformed(f"{where}: output_ref {ref!r} appears twice")
                refs.add(ref)
                del obj["output_ref"]
                yield Record("output", validate_output(ref, obj, where), where, ref)
            else:
                raise _malformed(
                    f"{where}.record: expected 'event', 'step' or 'output', got {kind!r}"
                )

    return NativeTrace(header, "jsonl", compressed, records())


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
