"""ContextOS traces ("contextos-trace"): seed 004's replay harness, byte for byte.

A ContextOS trace is what the seed's ``readTrace(trace_id)`` returns, as one JSON document::

    {"trace_id": str, "schema_version": 1 (optional),
     "pack_version": "<name>@<version>", "kg_snapshot_id": "sha256:<64 hex>",
     "invoke": {"run_context": {...}, "request": {...}, "envelope_hash": "sha256:.."},
     "tool_envelopes": [{"call": {"call_id": str, ..., "payload_hash": "sha256:.."},
                         "result": {..., "payload_hash": "sha256:.."}}, ...],
     "decision_record": {"decision_key", "evidence_refs", "policy_decisions", "approvals",
                         "lineage", "outputs", "status"},
     "audit": {"chain_root_hash": str, "signed_by": str, "chain_prev_hash": "sha256:.."}}

**The chain** (``verify-chain.ts``): entries in this order, each hashed as
``"sha256:" + hex(sha256(prev + canonical(payload)))`` with ``prev`` the previous computed
hash (``""`` first) and compared with the hash recorded for it:

- ``idx 0``: ``{kind: "invoke", ctx: run_context, req: request}``, recorded
  ``invoke.envelope_hash``;
- ``idx i + 1``: ``{kind: "tool_call", call}``, recorded ``call.payload_hash ?? ""``;
- ``idx i + 1.5``: ``{kind: "tool_result", result}``, recorded ``result.payload_hash ?? ""``;
- ``idx 2n + 1``: ``{kind: "decision_record", dr: decision_record}``, recorded
  ``audit.chain_prev_hash``

(the last index is ``entries.length`` when it is pushed, so with two envelopes the indices are
0, 1, 1.5, 2, 2.5, 5). ``canonical`` is ``JSON.stringify(obj, Object.keys(obj).sort())``
(:func:`replay.canonical.contextos`): the array replacer is an allow-list applied at every
depth, so inside ``ctx``, ``req``, ``call``, ``result`` and ``dr`` only keys spelt like one
of the payload's own top-level keys are hashed. The report lists those unprotected fields
(:func:`unprotected_paths`), as JSON pointers with ``*`` for array indices.

**The alternative rule** (contracts.md §1): the same entries hashed with a full recursive key
sort (``js-sorted``), each tool envelope without its own ``payload_hash``. The report says
which rule matched (``contextos.rule``); when neither does, the rule that verified the longer
prefix, with its ``broke_at``, ``expected`` (computed) and ``observed`` (recorded).

**Verify** checks the chain and the record (its chain entry, and ``record_hash`` =
``"sha256:" + sha256(canonical(decision_record))``) without the pinned inputs.

**Replay** (``index.ts``) needs the pinned Context Pack and Knowledge-Graph snapshot, retained
beside the trace; it refuses, naming which, when one was not retained, is unpinned or
unsigned, or its envelope hash differs. Then the chain; then the canonical loop the pack names
(a registered ``name@version``, :func:`register_loop`) runs over a lookup of the recorded
transcripts that fails on a missing call; then ``diffRecords`` over the seven fields gives
``byte_equal`` or ``diverged`` with ``diverged_at`` and every diverged field. ContextOS's own
status (``contextos.status``: ``byte_equal``, ``diverged``, ``tamper_detected``) stands beside
the console's.

Bounded: the document is read as a stream; tool envelopes are kept in memory up to
:data:`SPOOL_AFTER_BYTES` and spilled to a temporary file beyond, so a 100 000-entry trace
verifies in bounded memory.

Fast where it is proven, exact everywhere: ``orjson`` reads a compact value (whole small
document or streamed envelope) only when writing the value back gives exactly its text
(else the strict decoder reads it and words the refusal), an indented value (``JSON.stringify
(trace, null, 2)``, as the seed writes traces) when its text less its base indentation is
exactly ``orjson``'s OPT_INDENT_2 writing (a small such document whole:
:func:`_parse_indented`), and a large trace's envelopes in runs of up to
64 K characters read by ``orjson`` at once and proven the same way
(:meth:`_Reader.proven_batch`); the reference rule's payloads and
a parsed record's hash are written by ``orjson`` from an allow-listed copy
(:func:`_fast_keep`) only when every kept value is a string, boolean, null or an integer
within 2**53 (``orjson`` escapes strings as ``JSON.stringify`` does and refuses lone
surrogates), else by the exact writers; the spool is written and read back by ``orjson``
(an integer past 64 bits by the stdlib). Hypothesis tests hold every fast path to the exact
one.

Pure: no Django.
"""

from __future__ import annotations

import codecs
import functools
import hashlib
import json
import re
import tempfile
import weakref
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import IO, Any

from replay import errors
from replay.canonical import CanonicalError, _js_sorted_write, contextos, js_sorted
from replay.diff import diff, pointer_join
from replay.engine import AUDIT, Check, Divergence, ReplayReport
from replay.errors import ReplayError
from replay.formats.jsonstrict import (
    _DECODER,
    _SURROGATE_ESCAPE,
    BOM,
    NOT_PROVEN,
    NumberOutOfRange,
    _refuse_lone_surrogates,
    out_of_range,
    parse_compact,
)
from replay.signatures import KeyRing, StaticKeyRing
from replay.signatures import verify as verify_signature

try:
    import orjson as _orjson
except ImportError:  # pragma: no cover - orjson is a dependency; the exact writers remain
    _orjson = None  # type: ignore[assignment]
else:
    _indented = functools.partial(_orjson.dumps, option=_orjson.OPT_INDENT_2)

FORMAT = "contextos-trace"
SCHEMA_VERSION = 1
PACK_KIND = "contextos-pack"
KG_KIND = "contextos-kg"
#: the file names of a trace's pinned inputs when uploaded beside it
PACK_SUFFIX = ".pack.json"
KG_SUFFIX = ".kg.json"
INPUT_SUFFIXES = (PACK_SUFFIX, KG_SUFFIX)

#: ContextOS's own statuses (seed 004, index.ts)
BYTE_EQUAL = "byte_equal"
DIVERGED = "diverged"
TAMPER_DETECTED = "tamper_detected"

REFERENCE = "reference"
ALTERNATIVE = "alternative"
RULES = {
    REFERENCE: "JSON.stringify(obj, Object.keys(obj).sort()) (seed 004's canonical)",
    ALTERNATIVE: "full recursive key sort (js-sorted), tool envelopes without payload_hash",
}

#: the DecisionRecord fields diffRecords walks, in its order
RECORD_FIELDS = (
    "decision_key",
    "evidence_refs",
    "policy_decisions",
    "approvals",
    "lineage",
    "outputs",
    "status",
)
TOP_KEYS = frozenset(
    {"trace_id", "schema_version", "pack_version", "kg_snapshot_id", "invoke"}
    | {"tool_envelopes", "decision_record", "audit"}
)
#: never inside a hashed payload, whichever rule
NEVER_HASHED = (
    "/trace_id",
    "/schema_version",
    "/pack_version",
    "/kg_snapshot_id",
    "/audit/chain_root_hash",
    "/audit/signed_by",
)

MAX_DOCUMENT_BYTES = 4 * 1024**3
MAX_VALUE_CHARS = 64 * 1024**2  # one tool envelope, or one other top-level value
MAX_INPUT_BYTES = 64 * 1024**2  # a pack or a KG snapshot file
SPOOL_AFTER_BYTES = 1024**2
SMALL_DOCUMENT_BYTES = 256 * 1024
MAX_UNPROTECTED = 200
_CHUNK = 1 << 20
_FIRST_PIECE = 16 * 1024

_HASH = re.compile(r"sha256:[0-9a-f]{64}\Z")
_PINNED_PACK = re.compile(r"(?P<name>[A-Za-z0-9][A-Za-z0-9._/-]*)@(?P<version>\d+\.\d+\.\d+)\Z")


#: the C scanner without hooks, for :meth:`_Reader._proven_value`
_PLAIN_DECODER = json.JSONDecoder()
#: at most this many characters of tool envelopes read by one :meth:`_Reader.proven_batch`
_BATCH_CHARS = 64 * 1024
_BATCH_TRIES = 8
#: cuts tried by one :meth:`_Reader.proven_batch` (the last window of the array also holds
#: the text after it)
_BATCH_GUESSES = 4
#: JSON's blanks between tokens
_BLANKS = re.compile(r"[ \t\r\n]*")


def _malformed(message: str) -> ReplayError:
    return ReplayError(errors.MALFORMED_TRACE, message)


# --- the streaming, strict read -------------------------------------------------------------


class _Reader:
    """A JSON document read from a byte stream in chunks: the top-level object by hand, each
    value by the strict decoder (duplicate keys and NaN refused)."""

    def __init__(self, source: IO[bytes], where: str) -> None:
        self._source = source
        self._decoder = codecs.getincrementaldecoder("utf-8")("strict")
        self.where = where
        self.buf = ""
        self.pos = 0
        self.eof = False
        self.read_bytes = 0
        self._first = True
        self.batch_misses = 0
        # where buf starts in the document: lines before it, characters since the last
        # newline before it (a refusal names a line and column of the whole text)
        self.lines_before = 0
        self.column_before = 0

    def fill(self) -> bool:
        if self.eof:
            return False
        chunk = self._source.read(_CHUNK)
        if self._first:
            self._first = False
            if chunk.startswith(BOM):
                raise _malformed(f"{self.where}: starts with a byte-order mark")
        self.read_bytes += len(chunk)
        if self.read_bytes > MAX_DOCUMENT_BYTES:
            raise _malformed(f"{self.where}: larger than {MAX_DOCUMENT_BYTES} bytes")
        try:
            text = self._decoder.decode(chunk, final=not chunk)
        except UnicodeDecodeError as exc:
            raise _malformed(
                f"{self.where}: not UTF-8 near byte {self.read_bytes - len(chunk) + exc.start}"
            ) from None
        if not chunk:
            self.eof = True
            self.buf += text  # the decoder's last characters, if any; positions stay valid
            return False
        if self.pos > _CHUNK:
            newlines = self.buf.count("\n", 0, self.pos)
            if newlines:
                self.lines_before += newlines
                self.column_before = self.pos - (self.buf.rfind("\n", 0, self.pos) + 1)
            else:
                self.column_before += self.pos
            self.buf = self.buf[self.pos :]
            self.pos = 0
        self.buf += text
        return True

    def skip_ws(self) -> str:
        """The next non-blank character, not consumed ("" at the end)."""
        while True:
            buf = self.buf
            pos = self.pos = _BLANKS.match(buf, self.pos).end()
            if pos < len(buf):
                return buf[pos]
            if not self.fill():
                return ""

    def expect(self, chars: str, what: str) -> str:
        ch = self.skip_ws()
        if ch == "" or ch not in chars:
            found = "the end of the file" if ch == "" else repr(ch)
            raise _malformed(f"{self.where}: expected {what}, found {found}")
        self.pos += 1
        return ch

    def place(self, index: int) -> tuple[int, int]:
        """The line and column (1-based, in characters) of ``buf[index]`` in the document."""
        newline = self.buf.rfind("\n", 0, index)
        line = self.lines_before + self.buf.count("\n", 0, index) + 1
        column = index - newline if newline != -1 else self.column_before + index + 1
        return line, column

    def value(self, what: str, pointer: str = "") -> tuple[Any, int]:
        """The next JSON value and how many characters it took (``pointer``: where the value
        is in the document, for a refusal)."""
        self.skip_ws()
        if _orjson is not None:
            fast = self._proven_value()
            if fast is not None:
                return fast
        while True:
            try:
                value, end = _DECODER.raw_decode(self.buf, self.pos)
            except RecursionError:
                raise _malformed(f"{self.where}: {what} nests too deeply") from None
            except NumberOutOfRange:
                raise out_of_range(
                    self.buf, self.where, start=self.pos, pointer=pointer, place=self.place
                ) from None
            except json.JSONDecodeError as exc:
                # cut off by the end of the buffer (an unterminated string names its start)
                cut = exc.pos >= len(self.buf) - 1 or exc.msg.startswith("Unterminated")
                if cut and not self.eof:
                    if len(self.buf) - self.pos > MAX_VALUE_CHARS:
                        raise _malformed(
                            f"{self.where}: {what} is longer than {MAX_VALUE_CHARS} characters"
                        ) from None
                    self.fill()
                    continue
                if cut:
                    raise _malformed(f"{self.where}: truncated in {what}") from None
                raise _malformed(f"{self.where}: {what}: {exc.msg}") from None
            except ValueError as exc:  # a duplicate key, NaN or Infinity
                raise _malformed(f"{self.where}: {what}: {exc}") from None
            if end < len(self.buf) or self.eof or not self.fill():
                size = end - self.pos
                # only a \u escape can make a lone surrogate (not Unicode text: refused)
                if self.buf.find("\\u", self.pos, end) != -1 and _SURROGATE_ESCAPE.search(
                    self.buf, self.pos, end
                ):
                    _refuse_lone_surrogates(value, self.where)
                self.pos = end
                return value, size
            # a number may go on in the next chunk: parse it again

    def _proven_value(self) -> tuple[Any, int] | None:
        """The next value, when the fast read proves it is what the strict one gives: the
        C scanner (no hook) reads it, and ``orjson`` writes that value back as exactly its
        text, so the text has no duplicate key (the value would have fewer members), no NaN
        or Infinity (written ``null``), no lone surrogate (``orjson`` refuses to write one)
        and no other spelling than the one read. Else None: the strict read decides, and
        words any refusal, exactly as before."""
        buf, pos = self.buf, self.pos
        try:
            value, end = _PLAIN_DECODER.raw_decode(buf, pos)
        except (ValueError, RecursionError):
            return None
        if end == len(buf) and not self.eof:
            return None  # a number may go on in the next chunk
        text = buf[pos:end]
        try:
            proven = _orjson.dumps(value) == text.encode()
            if not proven and "\n" in text:
                # an indented document (``JSON.stringify(trace, null, 2)``): the value's
                # text with its base indentation taken off each line is what ``orjson``
                # writes with OPT_INDENT_2. The text then differs from that proven text
                # only by spaces after newlines, which are blanks between tokens (a raw
                # newline cannot be inside a string): the same value, the same proof.
                # (the base indentation: the blanks that open the value's first line)
                line = buf[buf.rfind("\n", 0, pos) + 1 : pos]
                indent = line[: len(line) - len(line.lstrip(" "))]
                if indent:
                    text = text.replace("\n" + indent, "\n")
                proven = _orjson.dumps(value, option=_orjson.OPT_INDENT_2) == text.encode()
        except (_orjson.JSONEncodeError, UnicodeEncodeError):
            return None
        if not proven:
            return None
        self.pos = end
        return value, end - pos

    def proven_batch(self) -> tuple[list[Any], int] | None:
        """The next run of array elements (objects, up to ``_BATCH_CHARS`` characters of text)
        read at once by ``orjson``, when writing them back proves the text, as
        :meth:`_proven_value` does for one value: compact, the elements written by
        ``orjson`` and joined by ``,`` are exactly the text; indented, the text less its
        base indentation is exactly each element written with OPT_INDENT_2, joined by
        ``,\\n`` (only blanks differ). The run ends at a ``}`` followed by ``,``, found
        by a plain search from the window's end (a few earlier ones tried when ``orjson``
        cannot read the run: the window went past the array): a wrong guess (inside a
        string, at another depth) is not proven. Else None (one value is read as before);
        after ``_BATCH_TRIES`` such misses the document is read value by value (a hostile
        text cannot make each value cost a batch's search and parse)."""
        if self.batch_misses >= _BATCH_TRIES:
            return None
        if len(self.buf) - self.pos < _BATCH_CHARS and not self.eof:
            self.fill()
        if self.skip_ws() != "{":
            return None
        buf, pos = self.buf, self.pos
        # the base indentation (a compact document: none; the search looks back a little
        # only, any guess is sound: the run is proven or not read)
        nl = buf.rfind("\n", max(0, pos - 4096), pos)
        line = buf[nl + 1 : pos] if nl != -1 else ""
        indent = line[: len(line) - len(line.lstrip(" "))]
        boundary = "\n" + indent + "}," if indent else "},{"
        comma = boundary.rindex(",")
        end = pos + _BATCH_CHARS
        for _ in range(_BATCH_GUESSES):
            found = buf.rfind(boundary, pos, end)
            if found == -1:
                break
            cut = found + comma
            text = buf[pos:cut]
            try:
                items = _orjson.loads(f"[{text}]".encode())
            except _orjson.JSONDecodeError:
                end = found  # past the array's end, or inside a string: an earlier one
                continue
            try:
                if "\n" in text:
                    if indent:
                        text = text.replace("\n" + indent, "\n")
                    written = b",\n".join(map(_indented, items))
                else:
                    written = b",".join(map(_orjson.dumps, items))
            except _orjson.JSONEncodeError:
                break
            if written != text.encode():
                break  # another spelling: the strict read decides
            self.pos = cut
            return items, cut - pos
        self.batch_misses += 1
        return None


class Envelopes:
    """The tool envelopes of a trace, in order: a list, spilled to a temporary file (one JSON
    line each) past ``SPOOL_AFTER_BYTES``. Iterable any number of times."""

    def __init__(self) -> None:
        self._items: list[dict[str, Any]] = []
        self._spool: Any = None
        self._size = 0
        self.count = 0

    def append(self, item: dict[str, Any], size: int) -> None:
        self.count += 1
        if self._spool is None:
            self._items.append(item)
            self._size += size
            if self._size > SPOOL_AFTER_BYTES:
                # closed by close(), or with the trace when it is collected
                self._spool = tempfile.TemporaryFile(prefix="contextos-")  # noqa: SIM115
                weakref.finalize(self, self._spool.close)
                for kept in self._items:
                    self._write(kept)
                self._items = []
        else:
            self._write(item)

    def extend(self, items: list[dict[str, Any]], size: int) -> None:
        """A run of checked envelopes that ``orjson`` read and wrote back (``size``: their
        characters): spooled as one line, a JSON array (an envelope's line is an object)."""
        if self._spool is None:
            for item in items:
                self.append(item, size)
                size = 0  # the run's characters counted once
            return
        self.count += len(items)
        self._spool.write(_orjson.dumps(items) + b"\n")

    def _write(self, item: dict[str, Any]) -> None:
        try:
            line = _orjson.dumps(item) if _orjson is not None else None
        except _orjson.JSONEncodeError:  # an integer past 64 bits
            line = None
        if line is None:  # marked: orjson would read that integer back as a float
            line = b"#" + json.dumps(item, separators=(",", ":")).encode()
        self._spool.write(line + b"\n")

    def __iter__(self) -> Iterator[dict[str, Any]]:
        if self._spool is None:
            yield from self._items
            return
        self._spool.seek(0)
        for line in self._spool:
            # each line read back by the writer that wrote it: the same value
            if line.startswith(b"["):
                yield from _orjson.loads(line)  # a run (extend)
            elif line.startswith(b"#"):
                yield json.loads(line[1:])
            else:
                yield _orjson.loads(line)

    def __len__(self) -> int:
        return self.count

    def close(self) -> None:
        if self._spool is not None:
            self._spool.close()


@dataclass
class ContextosTrace:
    """A parsed trace: every top-level value but the envelopes, and the envelopes."""

    head: dict[str, Any]
    envelopes: Envelopes
    ignored: list[str] = field(default_factory=list)

    @property
    def trace_id(self) -> str:
        return self.head["trace_id"]


def _object(value: Any, where: str) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise _malformed(f"{where}: must be an object, not {_type(value)}")
    return value


def _type(value: Any) -> str:
    if value is None:
        return "null"
    return {
        bool: "a boolean",
        int: "a number",
        float: "a number",
        str: "a string",
        list: "an array",
        dict: "an object",
    }.get(type(value), type(value).__name__)


def _string(obj: dict[str, Any], key: str, where: str, *, optional: bool = False) -> Any:
    if key not in obj:
        if optional:
            return None
        raise _malformed(f"{where}: {key} is missing")
    value = obj[key]
    if optional and value is None:
        return None
    if not isinstance(value, str):
        raise _malformed(f"{where}.{key}: must be a string, not {_type(value)}")
    return value


def _check_envelope(item: Any, index: int) -> dict[str, Any]:
    # the common, well-formed envelope, answered without building any message
    if type(item) is dict:
        call, result = item.get("call"), item.get("result")
        if type(call) is dict and type(result) is dict and type(call.get("call_id")) is str:
            sent, got = call.get("payload_hash"), result.get("payload_hash")
            if (sent is None or type(sent) is str) and (got is None or type(got) is str):
                return item
    where = f"tool_envelopes[{index}]"
    env = _object(item, where)
    for part in ("call", "result"):
        if part not in env:
            raise _malformed(f"{where}: {part} is missing")
        body = _object(env[part], f"{where}.{part}")
        _string(body, "payload_hash", f"{where}.{part}", optional=True)
    call_id = env["call"].get("call_id")
    if not isinstance(call_id, str):
        raise _malformed(f"{where}.call.call_id: must be a string, not {_type(call_id)}")
    return env


def _head_is_well_formed(head: dict[str, Any]) -> bool:
    """The common, well-formed head, answered without building any message (True: every
    check of :func:`_check_head` passes; False: :func:`_check_head` words the refusal)."""
    version = head.get("schema_version", SCHEMA_VERSION)
    trace_id = head.get("trace_id")
    invoke = head.get("invoke")
    record = head.get("decision_record")
    audit = head.get("audit")
    if not (
        type(version) is int
        and 1 <= version <= SCHEMA_VERSION
        and type(trace_id) is str
        and 0 < len(trace_id) <= 128
        and type(head.get("pack_version")) is str
        and type(head.get("kg_snapshot_id")) is str
        and type(invoke) is dict
        and type(invoke.get("run_context")) is dict
        and type(invoke.get("request")) is dict
        and type(invoke.get("envelope_hash")) is str
        and type(record) is dict
        and type(audit) is dict
        and type(audit.get("chain_prev_hash")) is str
    ):
        return False
    for key in RECORD_FIELDS:
        if record.get(key) is None:
            return False
    root, signer = audit.get("chain_root_hash"), audit.get("signed_by")
    return (root is None or type(root) is str) and (signer is None or type(signer) is str)


def _check_head(head: dict[str, Any], where: str) -> None:
    if _head_is_well_formed(head):
        return
    version = head.get("schema_version", SCHEMA_VERSION)
    if type(version) is not int or version < 1:
        raise _malformed(f"{where}: schema_version must be a positive integer, not {version!r}")
    if version > SCHEMA_VERSION:
        raise ReplayError(
            errors.UNSUPPORTED_SCHEMA_VERSION,
            f"{where}: schema_version {version} is newer than this console supports "
            f"({SCHEMA_VERSION})",
            expected=str(SCHEMA_VERSION),
            observed=str(version),
        )
    for key in ("trace_id", "invoke", "decision_record", "audit"):
        if key not in head:
            raise _malformed(f"{where}: {key} is missing")
    trace_id = _string(head, "trace_id", where)
    if not trace_id or len(trace_id) > 128:
        raise _malformed(f"{where}.trace_id: must be 1 to 128 characters")
    _string(head, "pack_version", where)
    _string(head, "kg_snapshot_id", where)
    invoke = _object(head["invoke"], "invoke")
    for key in ("run_context", "request"):
        if key not in invoke:
            raise _malformed(f"invoke: {key} is missing")
        _object(invoke[key], f"invoke.{key}")
    _string(invoke, "envelope_hash", "invoke")
    record = _object(head["decision_record"], "decision_record")
    for key in RECORD_FIELDS:
        # diffRecords calls Object.keys() on each field: a missing or null one throws
        if record.get(key) is None:
            state = "missing" if key not in record else "null"
            raise _malformed(f"decision_record: {key} is {state}")
    audit = _object(head["audit"], "audit")
    _string(audit, "chain_prev_hash", "audit")
    _string(audit, "chain_root_hash", "audit", optional=True)
    _string(audit, "signed_by", "audit", optional=True)


class _Prefixed:
    """``head`` then the rest of ``source``."""

    def __init__(self, head: bytes, source: IO[bytes]) -> None:
        self._head = head
        self._source = source

    def read(self, size: int) -> bytes:
        if self._head:
            out, self._head = self._head[:size], self._head[size:]
            return out
        return self._source.read(size)


def _parse_indented(data: bytes) -> Any:
    """The value of a document indented as ``JSON.stringify(trace, null, 2)`` writes it (the
    seed's traces), when ``orjson`` writing that value with OPT_INDENT_2 gives exactly its
    bytes (one trailing newline aside): proven as :func:`parse_compact` proves a compact
    text (no duplicate key, NaN, byte-order mark or lone surrogate; the same spellings).
    Else ``NOT_PROVEN``."""
    try:
        value = _orjson.loads(data)
        out = _indented(value)
    except (_orjson.JSONDecodeError, _orjson.JSONEncodeError):
        return NOT_PROVEN
    n = len(out)
    if (len(data) == n or (len(data) == n + 1 and data[n] == 0x0A)) and data.startswith(out):
        return value
    return NOT_PROVEN


def _parse_small(data: bytes, filename: str) -> ContextosTrace | None:
    """A small document decoded whole (faster); None when it does not decode, so that the
    streaming read names the problem exactly as it does for a large one."""
    if data.startswith(BOM):
        return None
    doc = parse_compact(data)  # orjson, when its bytes prove the text (compact JSON)
    if doc is NOT_PROVEN and _orjson is not None:
        doc = _parse_indented(data)
    if doc is NOT_PROVEN:
        try:
            text = data.decode("utf-8")
            doc = _DECODER.decode(text)
        except (UnicodeDecodeError, ValueError, RecursionError):
            return None
        if "\\u" in text and _SURROGATE_ESCAPE.search(text):
            _refuse_lone_surrogates(doc, filename)
    if not isinstance(doc, dict) or not isinstance(doc.get("tool_envelopes"), list):
        return None
    envelopes = Envelopes()
    for index, item in enumerate(doc["tool_envelopes"]):
        envelopes.append(_check_envelope(item, index), 0)
    head = {k: v for k, v in doc.items() if k != "tool_envelopes"}
    _check_head(head, filename)
    return ContextosTrace(head, envelopes, sorted(k for k in head if k not in TOP_KEYS))


def _read_first(source: IO[bytes]) -> bytes:
    """The first ``SMALL_DOCUMENT_BYTES + 1`` bytes of ``source`` (fewer only at its end), in
    pieces: one ``read(SMALL_DOCUMENT_BYTES + 1)`` allocates (and the allocator maps and
    unmaps) a 256 KB buffer for every file, which cost more than verifying a 2 KB trace."""
    parts: list[bytes] = []
    total = 0
    size = _FIRST_PIECE
    while total <= SMALL_DOCUMENT_BYTES:
        piece = source.read(min(size, SMALL_DOCUMENT_BYTES + 1 - total))
        if not piece:
            break
        parts.append(piece)
        total += len(piece)
        size = _CHUNK // 16
    return parts[0] if len(parts) == 1 else b"".join(parts)


def parse(source: IO[bytes], filename: str = "trace") -> ContextosTrace:
    """The strict, streaming read of a ContextOS trace; raises ``ReplayError``
    (``MALFORMED_TRACE`` naming where, ``UNSUPPORTED_SCHEMA_VERSION``). A document of at
    most ``SMALL_DOCUMENT_BYTES`` is decoded whole, with the same checks."""
    first = _read_first(source)
    if len(first) <= SMALL_DOCUMENT_BYTES:
        small = _parse_small(first, filename)
        if small is not None:
            return small
    reader = _Reader(_Prefixed(first, source), filename)  # type: ignore[arg-type]
    head: dict[str, Any] = {}
    envelopes = Envelopes()
    seen: set[str] = set()
    reader.expect("{", "a JSON object")
    try:
        if reader.skip_ws() == "}":
            reader.pos += 1
        else:
            while True:
                key, _ = reader.value("a key")
                if not isinstance(key, str):
                    raise _malformed(f"{filename}: expected a key, found {_type(key)}")
                if key in seen:
                    raise _malformed(f"{filename}: duplicate key {key!r}")
                seen.add(key)
                reader.expect(":", "':'")
                if key == "tool_envelopes":
                    _read_envelopes(reader, envelopes)
                else:
                    head[key], _ = reader.value(key, pointer_join([key]))
                if reader.expect(",}", "',' or '}'") == "}":
                    break
        if reader.skip_ws() != "":
            raise _malformed(f"{filename}: data after the end of the JSON object")
        if "tool_envelopes" not in seen:
            raise _malformed(f"{filename}: tool_envelopes is missing")
        _check_head(head, filename)
    except BaseException:
        envelopes.close()
        raise
    ignored = sorted(k for k in head if k not in TOP_KEYS)
    return ContextosTrace(head, envelopes, ignored)


def _read_envelopes(reader: _Reader, envelopes: Envelopes) -> None:
    reader.expect("[", "tool_envelopes: an array")
    if reader.skip_ws() == "]":
        reader.pos += 1
        return
    while True:
        batch = reader.proven_batch() if _orjson is not None else None
        if batch is not None:
            items, size = batch
            first = envelopes.count
            for n, item in enumerate(items):
                _check_envelope(item, first + n)
            envelopes.extend(items, size)
        else:
            index = envelopes.count
            item, size = reader.value(f"tool_envelopes[{index}]", f"/tool_envelopes/{index}")
            envelopes.append(_check_envelope(item, index), size)
        if reader.expect(",]", "',' or ']' in tool_envelopes") == "]":
            return


def loads(data: bytes, filename: str = "trace") -> ContextosTrace:
    import io

    return parse(io.BytesIO(data), filename)


# --- the chain ------------------------------------------------------------------------------


@dataclass
class Entry:
    idx: int | float
    kind: str
    payload: dict[str, Any]
    recorded: str


def _recorded(value: Any) -> str:
    # t.call.payload_hash ?? ""
    return "" if value is None else value


def entries(trace: ContextosTrace, rule: str = REFERENCE, *, lazy: bool = False) -> Iterator[Any]:
    """The chain's entries in the seed's order, with the payload ``rule`` hashes (``lazy``:
    each tool envelope as ``(i, envelope)``, its two entries left to the caller)."""
    head = trace.head
    invoke = head["invoke"]
    yield Entry(
        0,
        "invoke",
        {"kind": "invoke", "ctx": invoke["run_context"], "req": invoke["request"]},
        invoke["envelope_hash"],
    )
    count = 1
    for i, env in enumerate(trace.envelopes):
        if lazy:
            yield (i, env)
            count += 2
            continue
        call, result = env["call"], env["result"]
        if rule == ALTERNATIVE:
            call_body = {k: v for k, v in call.items() if k != "payload_hash"}
            result_body = {k: v for k, v in result.items() if k != "payload_hash"}
        else:
            call_body, result_body = call, result
        yield Entry(
            i + 1,
            "tool_call",
            {"kind": "tool_call", "call": call_body},
            _recorded(call.get("payload_hash")),
        )
        yield Entry(
            i + 1.5,
            "tool_result",
            {"kind": "tool_result", "result": result_body},
            _recorded(result.get("payload_hash")),
        )
        count += 2
    yield Entry(
        count,  # entries.length when the record's entry is pushed
        "decision_record",
        {"kind": "decision_record", "dr": head["decision_record"]},
        head["audit"]["chain_prev_hash"],
    )


def canonical_for(rule: str) -> Callable[[Any], bytes]:
    return js_sorted if rule == ALTERNATIVE else contextos


class _Full(set):
    """A sink that keeps nothing more."""

    def add(self, _item: Any) -> None:
        return None


@dataclass
class ChainResult:
    rule: str
    ok: bool
    verified: int  # entries that verified before the break
    broke_at: int | float | None = None
    kind: str | None = None
    expected: str | None = None  # the computed hash
    observed: str | None = None  # the recorded one
    problem: str | None = None

    def verdict(self) -> dict[str, Any]:
        """As ``verifyChain`` returns it."""
        if self.ok:
            return {"ok": True}
        return {
            "ok": False,
            "broke_at": self.broke_at,
            "expected": self.expected,
            "observed": self.observed,
        }


def verify_chain(
    trace: ContextosTrace,
    rule: str = REFERENCE,
    *,
    unprotected: set[str] | None = None,
    progress: Callable[[int], None] | None = None,
) -> ChainResult:
    """``verifyChain`` under ``rule``; ``unprotected`` collects the pointers the reference
    rule's allow-list leaves out."""
    canon = canonical_for(rule)
    sink: set[str] = set()
    prev = b""
    done = 0
    fast = rule == REFERENCE and _orjson is not None
    for entry in entries(trace, rule, lazy=fast):
        if type(entry) is tuple:  # a tool envelope's two entries, unbuilt (the fast path)
            i, env = entry
            for key, kind, step, plist, allowed, at, head, tail in _TOOL_PARTS:
                body_of = env[key]
                idx = i + step
                recorded = body_of.get("payload_hash")
                if recorded is None:
                    recorded = ""  # t.call.payload_hash ?? ""
                # the common case inline: a known shape whose kept values are all written
                # alike by orjson and JSON.stringify (what _fast_keep returns as it is)
                body = None
                plan = _PLANS.get((plist, at, tuple(body_of)))
                if plan is not None:
                    keys, paths = plan
                    if paths:
                        sink.update(paths)
                    if len(keys) == 1:
                        k = keys[0]
                        kept = {k: body_of[k]}
                    else:
                        kept = dict(zip(keys, map(body_of.__getitem__, keys), strict=True))
                    if set(map(type, kept.values())) <= _LEAVES:
                        try:  # noqa: SIM105 - a with-block costs more here
                            body = head + _orjson.dumps(kept) + tail
                        except _orjson.JSONEncodeError:
                            pass  # the exact writer below decides
                if body is None:
                    try:
                        kept = _fast_keep(body_of, plist, allowed, at, sink)
                        body = head + _orjson.dumps(kept) + tail
                    except (_Slow, RecursionError, _orjson.JSONEncodeError):
                        pass
                if body is None:
                    exact = Entry(idx, kind, {"kind": kind, key: body_of}, recorded)
                    try:
                        body = _exact_reference_bytes(exact, sink)
                    except (CanonicalError, RecursionError) as exc:
                        return ChainResult(rule, False, done, idx, kind, None, recorded, str(exc))
                if len(sink) > MAX_UNPROTECTED:
                    if unprotected is not None:
                        unprotected.update(sink)
                    sink = _Full()
                computed = "sha256:" + hashlib.sha256(prev + body).hexdigest()
                if computed != recorded:
                    if unprotected is not None:
                        unprotected.update(sink)
                    return ChainResult(rule, False, done, idx, kind, computed, recorded)
                prev = computed.encode()
                done += 1
                if progress is not None and done % 1000 == 0:
                    progress(done)
            continue
        try:
            if fast:
                body = _fast_head_bytes(entry, sink) or _exact_reference_bytes(entry, sink)
            else:
                body = reference_bytes(entry, sink) if rule == REFERENCE else canon(entry.payload)
        except (CanonicalError, RecursionError) as exc:
            return ChainResult(
                rule, False, done, entry.idx, entry.kind, None, entry.recorded, str(exc)
            )
        if len(sink) > MAX_UNPROTECTED:  # enough to say; stop collecting (bounded memory)
            if unprotected is not None:
                unprotected.update(sink)
            sink = _Full()
        computed = "sha256:" + hashlib.sha256(prev + body).hexdigest()
        if computed != entry.recorded:
            if unprotected is not None:
                unprotected.update(sink)
            return ChainResult(rule, False, done, entry.idx, entry.kind, computed, entry.recorded)
        prev = computed.encode()
        done += 1
        if progress is not None and done % 1000 == 0:
            progress(done)
    if unprotected is not None:
        unprotected.update(sink)
    return ChainResult(rule, True, done)


_WHERE = {
    "invoke": {"ctx": "/invoke/run_context", "req": "/invoke/request"},
    "tool_call": {"call": "/tool_envelopes/*/call"},
    "tool_result": {"result": "/tool_envelopes/*/result"},
    "decision_record": {"dr": "/decision_record"},
}


def _pointer_part(key: str) -> str:
    return key.replace("~", "~0").replace("/", "~1")


def unprotected_paths(entry: Entry) -> set[str]:
    """The fields of one entry that the reference rule does not hash: every key, at any
    depth below the payload's top level, that is not spelt like one of the payload's own
    top-level keys (the array replacer's allow-list)."""
    allowed = set(entry.payload)
    out: set[str] = set()

    def walk(value: Any, at: str) -> None:
        if isinstance(value, dict):
            for key, sub in value.items():
                here = f"{at}/{_pointer_part(key)}"
                if key in allowed:
                    walk(sub, here)
                else:
                    out.add(here)
        elif isinstance(value, list):
            for sub in value:
                walk(sub, f"{at}/*")

    for key, where in _WHERE[entry.kind].items():
        walk(entry.payload[key], where)
    return out


#: the allow-list of each entry's payload: its own top-level keys, sorted (``canonical``)
_PLISTS = {
    "invoke": ("ctx", "kind", "req"),
    "tool_call": ("call", "kind"),
    "tool_result": ("kind", "result"),
    "decision_record": ("dr", "kind"),
}
_ALLOWED = {kind: frozenset(plist) for kind, plist in _PLISTS.items()}
#: a tool envelope's two entries: (key, kind, idx step, allow-list, allowed, pointer, and the
#: canonical bytes around the kept body, in the allow-list's order "call" < "kind" < "result")
_TOOL_PARTS = (
    (
        "call",
        "tool_call",
        1,
        _PLISTS["tool_call"],
        _ALLOWED["tool_call"],
        "/tool_envelopes/*/call",
        b'{"call":',
        b',"kind":"tool_call"}',
    ),
    (
        "result",
        "tool_result",
        1.5,
        _PLISTS["tool_result"],
        _ALLOWED["tool_result"],
        "/tool_envelopes/*/result",
        b'{"kind":"tool_result","result":',
        b"}",
    ),
)
_QUOTED = {k: f'"{k}":' for plist in _PLISTS.values() for k in plist}
_DROPPED: dict[tuple[str, frozenset[str]], tuple[str, ...]] = {}
#: (allow-list, pointer or None, keys in order) -> (kept keys in allow-list order, dropped)
_PLANS: dict[tuple[Any, ...], tuple[tuple[str, ...], tuple[str, ...]]] = {}


def _fused_write(  # noqa: PLR0917 - the hot recursion: positional on purpose
    o: Any, plist: tuple[str, ...], allowed: frozenset[str], out: list[str], at: str, dropped: set
) -> None:
    if type(o) is dict:
        # the same shapes repeat from entry to entry and file to file: their dropped
        # pointers are spelt once (the parent pointer fixes the allow-list)
        shape = (at, frozenset(o))
        paths = _DROPPED.get(shape)
        if paths is None:
            paths = tuple(f"{at}/{_pointer_part(key)}" for key in o.keys() - allowed)
            if len(_DROPPED) < 4096:  # a bounded cache
                _DROPPED[shape] = paths
        if paths:
            dropped.update(paths)
        out.append("{")
        first = True
        for k in plist:
            if k in o:
                v = o[k]
            else:
                continue  # "__proto__" is never in these allow-lists
            if first:
                first = False
            else:
                out.append(",")
            out.append(_QUOTED[k])
            _fused_write(v, plist, allowed, out, f"{at}/{k}", dropped)
        out.append("}")
    elif type(o) is list:
        out.append("[")
        inner = f"{at}/*"
        for i, v in enumerate(o):
            if i:
                out.append(",")
            _fused_write(v, plist, allowed, out, inner, dropped)
        out.append("]")
    else:
        _js_sorted_write(o, out)


class _Slow(Exception):
    """A value the fast writer does not prove it writes as JSON.stringify does."""


_SAFE_INT = 2**53
_PROTO = "__proto__"
#: the values orjson and JSON.stringify always write alike (a lone surrogate: orjson refuses)
_LEAVES = frozenset({str, bool, type(None)})


def _fast_keep(
    o: Any, plist: tuple[str, ...], allowed: frozenset[str], at: str, dropped: Any
) -> Any:
    """``o`` with only the allow-listed keys kept (in ``plist`` order: ``plist`` must be sorted
    in code point order, as an ASCII allow-list sorted by UTF-16 code units is) for
    ``orjson.dumps``,
    and the dropped pointers added to ``dropped`` (``None``: not collected). Raises
    :class:`_Slow` for a value ``orjson`` could write otherwise than ``JSON.stringify``: a
    float (number spelling differs), an integer beyond 2**53 (JS rounds it to a double), a
    type JSON has no name for. Strings are written identically (``orjson`` and
    ``JSON.stringify`` escape the same characters the same way; ``orjson`` refuses a lone
    surrogate, and the caller then takes the exact writer)."""
    if type(o) is dict:
        # the same shapes repeat from entry to entry and file to file: what a shape keeps
        # (in the allow-list's order) and the pointers it drops are worked out once per
        # (allow-list, pointer, keys in the file's order); ``at`` is None when the dropped
        # pointers are not collected
        shape = (plist, at, tuple(o))
        plan = _PLANS.get(shape)
        if plan is None:
            plan = (
                tuple(k for k in plist if k in o),
                ()
                if at is None
                else tuple(f"{at}/{_pointer_part(key)}" for key in o if key not in allowed),
            )
            if len(_PLANS) < 4096:  # a bounded cache
                _PLANS[shape] = plan
        keys, paths = plan
        if paths:
            dropped.update(paths)
        if not keys:
            return {}
        if len(keys) == 1:
            k = keys[0]
            kept = {k: o[k]}
        else:
            kept = dict(zip(keys, map(o.__getitem__, keys), strict=True))
        if set(map(type, kept.values())) <= _LEAVES:
            return kept
        for k, v in kept.items():
            t = type(v)
            if t is dict:
                sub = None if at is None else f"{at}/{k}"
                # inline: a known shape that keeps nothing (no call)
                plan = _PLANS.get((plist, sub, tuple(v)))
                if plan is not None and not plan[0]:
                    if plan[1]:
                        dropped.update(plan[1])
                    kept[k] = {}
                else:
                    kept[k] = _fast_keep(v, plist, allowed, sub, dropped)
            elif t is list:
                if set(map(type, v)) <= _LEAVES:
                    continue  # written as it is (no call)
                kept[k] = _fast_keep(
                    v, plist, allowed, None if at is None else f"{at}/{k}", dropped
                )
            elif not (t in _LEAVES or (t is int and -_SAFE_INT <= v <= _SAFE_INT)):
                raise _Slow
        return kept
    if type(o) is list:
        if set(map(type, o)) <= _LEAVES:
            return o  # written as it is
        inner = None if at is None else f"{at}/*"
        out = []
        for v in o:
            t = type(v)
            if t is dict:
                # inline: a known shape that keeps nothing (no call)
                plan = _PLANS.get((plist, inner, tuple(v)))
                if plan is not None and not plan[0]:
                    if plan[1]:
                        dropped.update(plan[1])
                    out.append({})
                else:
                    out.append(_fast_keep(v, plist, allowed, inner, dropped))
            elif t is list:
                out.append(_fast_keep(v, plist, allowed, inner, dropped))
            elif t in _LEAVES or (t is int and -_SAFE_INT <= v <= _SAFE_INT):
                out.append(v)
            else:
                raise _Slow
        return out
    t = type(o)
    if t is str or o is None or t is bool or (t is int and -_SAFE_INT <= o <= _SAFE_INT):
        return o
    raise _Slow


#: the invoke and record entries' canonical bytes around their kept bodies
_HEAD_LAYOUT = {
    "invoke": (("ctx", b'{"ctx":'), ("req", b',"kind":"invoke","req":'), (None, b"}")),
    "decision_record": (("dr", b'{"dr":'), (None, b',"kind":"decision_record"}')),
}


def _fast_head_bytes(entry: Entry, dropped: Any) -> bytes | None:
    """:func:`reference_bytes`' fast path for the invoke and record entries, each kept body
    written by ``orjson`` between the constant bytes around it; None when the exact writer
    must decide."""
    kind = entry.kind
    plist, allowed, where = _PLISTS[kind], _ALLOWED[kind], _WHERE[kind]
    payload = entry.payload
    out = []
    try:
        for key, before in _HEAD_LAYOUT[kind]:
            out.append(before)
            if key is not None:
                out.append(
                    _orjson.dumps(_fast_keep(payload[key], plist, allowed, where[key], dropped))
                )
    except (_Slow, RecursionError, _orjson.JSONEncodeError):
        return None
    return b"".join(out)


def reference_bytes(entry: Entry, dropped: set[str]) -> bytes:
    """``canonical(entry.payload)`` under the reference rule, and the pointers its allow-list
    leaves out added to ``dropped``, in one walk: the same bytes as
    :func:`replay.canonical.contextos` for a payload read from JSON (string keys, surrogate
    pairs already joined by the decoder); the tests hold it to both.

    Fast: the allow-listed copy written by ``orjson`` (:func:`_fast_keep`), when every kept
    value is one it writes as ``JSON.stringify`` does; else the exact writer."""
    if _orjson is not None:
        kind = entry.kind
        plist = _PLISTS[kind]
        allowed = _ALLOWED[kind]
        where = _WHERE[kind]
        payload = entry.payload
        try:
            return _orjson.dumps(
                {
                    key: kind
                    if key == "kind"
                    else _fast_keep(payload[key], plist, allowed, where[key], dropped)
                    for key in plist
                }
            )
        except (_Slow, RecursionError, _orjson.JSONEncodeError):
            pass  # the exact writer below decides (and adds the same pointers)
    return _exact_reference_bytes(entry, dropped)


def _exact_reference_bytes(entry: Entry, dropped: set[str]) -> bytes:
    plist = _PLISTS[entry.kind]
    allowed = frozenset(plist)
    out: list[str] = ["{"]
    first = True
    for key in plist:
        if first:
            first = False
        else:
            out.append(",")
        out.append(_QUOTED[key])
        if key == "kind":
            out.append(f'"{entry.kind}"')
        else:
            _fused_write(entry.payload[key], plist, allowed, out, _WHERE[entry.kind][key], dropped)
    out.append("}")
    return "".join(out).encode()


def record_hash(record: Any) -> str:
    """``hash(persisted_record)`` of ``diff.ts``: ``"sha256:" + sha256(canonical(record))``
    (the seed's canonical whichever rule the chain matched: the alternative rule is the
    chain's only)."""
    return "sha256:" + hashlib.sha256(contextos(record)).hexdigest()


#: a record's keys in its order -> (its allow-list, as a set) when it is ASCII without
#: __proto__, else () (the exact writer)
_RECORD_PLISTS: dict[tuple[str, ...], tuple[Any, ...]] = {}


def _parsed_record_hash(record: dict[str, Any]) -> str:
    """:func:`record_hash` of a record read from JSON by :func:`parse` (string keys, no
    surrogate code point: the read refuses lone surrogates and joins pairs), fast: its
    allow-listed copy written by ``orjson`` when the allow-list (its own keys) is ASCII
    (code point order = UTF-16 order) without ``__proto__`` and every kept value is one
    ``orjson`` writes as ``JSON.stringify`` does (:func:`_fast_keep`); else the exact
    writer. The tests hold both to the same hashes on any JSON."""
    if _orjson is not None and type(record) is dict:
        shape = tuple(record)
        lists = _RECORD_PLISTS.get(shape)
        if lists is None:
            plist = tuple(sorted(record))
            fast = _PROTO not in record and all(k.isascii() for k in plist)
            lists = (plist, frozenset(plist)) if fast else ()
            if len(_RECORD_PLISTS) < 4096:  # a bounded cache
                _RECORD_PLISTS[shape] = lists
        if lists:
            plist, allowed = lists
            try:
                body = _orjson.dumps(_fast_keep(record, plist, allowed, None, None))
            except (_Slow, RecursionError, _orjson.JSONEncodeError):
                pass
            else:
                return "sha256:" + hashlib.sha256(body).hexdigest()
    return record_hash(record)


# --- the differ -----------------------------------------------------------------------------


@dataclass
class RecordVerdict:
    ok: bool
    record_hash: str | None = None
    replayed_hash: str | None = None
    diverged_at: str | None = None
    diff: dict[str, list[Any]] = field(default_factory=dict)
    #: differences outside what the rule hashes (the reference rule's allow-list)
    unprotected_differences: list[str] = field(default_factory=list)


def diff_records(persisted: dict[str, Any], replayed: dict[str, Any]) -> RecordVerdict:
    """``diffRecords``: equal record hashes, else every one of the seven fields whose
    canonical bytes differ, the first of them ``diverged_at`` (``"unknown"`` if none).
    ``unprotected_differences``: what differs outside the seed's canonical (JSON pointers)."""
    canon = contextos
    a_hash, b_hash = record_hash(persisted), record_hash(replayed)
    outside = [e.path for e in diff(persisted, replayed)]
    if a_hash == b_hash:
        return RecordVerdict(True, a_hash, b_hash, unprotected_differences=outside)
    verdict = RecordVerdict(False, a_hash, b_hash)
    for name in RECORD_FIELDS:
        before, after = persisted.get(name), replayed.get(name)
        try:
            same = canon(before) == canon(after)
        except CanonicalError:  # a null field: Object.keys(null) throws
            same = before == after
        if not same:
            if verdict.diverged_at is None:
                verdict.diverged_at = name
            verdict.diff[name] = [before, after]
    if verdict.diverged_at is None:
        verdict.diverged_at = "unknown"
    verdict.unprotected_differences = [p for p in outside if p.split("/")[1] not in verdict.diff]
    return verdict


# --- pinned inputs --------------------------------------------------------------------------


@dataclass
class Pack:
    name: str
    version: str
    loop: str
    body: dict[str, Any]
    envelope_hash: Any
    signature: Any
    document: dict[str, Any]


@dataclass
class KgSnapshot:
    snapshot_id: Any
    body: dict[str, Any]
    signature: Any
    document: dict[str, Any]


def pack_envelope_hash(pack: Any) -> str:
    """``"sha256:" + sha256(js-sorted(contextos_pack))``: what a pack file records and signs."""
    return "sha256:" + hashlib.sha256(js_sorted(pack)).hexdigest()


def kg_snapshot_id(body: Any) -> str:
    """A KG snapshot's content address: ``"sha256:" + sha256(js-sorted(body))``."""
    return "sha256:" + hashlib.sha256(js_sorted(body)).hexdigest()


def input_kind(data: bytes) -> str | None:
    """``PACK_KIND`` or ``KG_KIND`` for a pack or KG snapshot file, else None."""
    head = data[:4096]
    if b'"contextos_pack"' in head:
        return PACK_KIND
    if b'"contextos_kg_snapshot"' in head:
        return KG_KIND
    return None


def parse_input(data: bytes, where: str) -> Pack | KgSnapshot:
    """A pack file ``{"contextos_pack": {"name", "version", "loop", "body"},
    "envelope_hash", "signature"}`` or a KG snapshot file ``{"contextos_kg_snapshot": {...},
    "snapshot_id", "signature"}``; raises ``MALFORMED_TRACE``."""
    if len(data) > MAX_INPUT_BYTES:
        raise _malformed(f"{where}: larger than {MAX_INPUT_BYTES} bytes")
    try:
        text = data.decode("utf-8")
        doc = _DECODER.decode(text)
    except NumberOutOfRange:
        raise out_of_range(text, where) from None
    except (UnicodeDecodeError, ValueError, RecursionError) as exc:
        raise _malformed(f"{where}: not a JSON pack or KG snapshot ({exc})") from None
    doc = _object(doc, where)
    if "contextos_pack" in doc:
        pack = _object(doc["contextos_pack"], f"{where}.contextos_pack")
        for key in ("name", "version", "loop"):
            _string(pack, key, f"{where}.contextos_pack")
        body = _object(pack.get("body"), f"{where}.contextos_pack.body")
        return Pack(
            pack["name"],
            pack["version"],
            pack["loop"],
            body,
            doc.get("envelope_hash"),
            doc.get("signature"),
            doc,
        )
    if "contextos_kg_snapshot" in doc:
        body = _object(doc["contextos_kg_snapshot"], f"{where}.contextos_kg_snapshot")
        return KgSnapshot(doc.get("snapshot_id"), body, doc.get("signature"), doc)
    raise _malformed(f"{where}: neither contextos_pack nor contextos_kg_snapshot")


@dataclass
class Inputs:
    """The pinned inputs found for a trace: parsed, or why not (per input)."""

    pack: Pack | None = None
    kg: KgSnapshot | None = None
    pack_text: str | None = None
    kg_text: str | None = None
    problems: list[str] = field(default_factory=list)


def find_inputs(trace: ContextosTrace, files: Mapping[str, bytes]) -> Inputs:
    """Among ``files`` (name -> bytes), the pack ``pack_version`` pins and the KG snapshot
    ``kg_snapshot_id`` pins, matched by content (a pack by its name@version, a snapshot by the
    id it records)."""
    found = Inputs()
    pinned_pack = trace.head["pack_version"]
    pinned_kg = trace.head["kg_snapshot_id"]
    for name, data in files.items():
        if input_kind(data) is None:
            continue
        try:
            item = parse_input(data, name)
        except ReplayError as exc:
            found.problems.append(exc.message)
            continue
        text = data.decode("utf-8")
        if isinstance(item, Pack) and f"{item.name}@{item.version}" == pinned_pack:
            found.pack, found.pack_text = item, text
        elif isinstance(item, KgSnapshot) and item.snapshot_id == pinned_kg:
            found.kg, found.kg_text = item, text
    return found


def _signed(sig: Any, message: bytes, keys: KeyRing, at: Any) -> tuple[str | None, bool]:
    """(problem, unsigned): None when the signature verifies."""
    if sig is None:
        return "is unsigned", True
    verdict = verify_signature(sig, message, keys, at=at)
    if verdict.ok:
        return None, False
    return f"signature does not verify: {verdict.reason}", False


# --- canonical loops ------------------------------------------------------------------------


class MissingCall(Exception):
    def __init__(self, call_id: str) -> None:
        super().__init__(call_id)
        self.call_id = call_id


@dataclass(frozen=True)
class Compiled:
    """What the loop runs on: ``compilePack`` of the pinned pack with the recorded invoke
    and the pinned KG snapshot; nothing live."""

    pack: dict[str, Any]
    pack_version: str
    kg: dict[str, Any]
    kg_snapshot_id: str
    run_context: dict[str, Any]
    request: dict[str, Any]


Loop = Callable[[Compiled, Callable[[dict[str, Any]], dict[str, Any]]], dict[str, Any]]
LOOPS: dict[str, Loop] = {}


def register_loop(name: str, loop: Loop) -> None:
    """Register a canonical loop under ``name@version`` (a new version for any change in
    behaviour, so old traces still replay)."""
    if "@" not in name:
        raise ValueError("a loop is registered as name@version")
    if name in LOOPS:
        raise ValueError(f"loop {name!r} is already registered")
    LOOPS[name] = loop


def refund_triage_v1(c: Compiled, call_tool: Callable[[dict[str, Any]], dict[str, Any]]):
    """The reference refund loop: plan the pack's tools in order, call each through the
    recorded transcripts, decide by the pack's policies and the KG snapshot's facts."""
    req = c.request
    order_id = req["order_id"]
    amount = req["amount"]
    calls = []
    evidence = sorted(
        str(fact["id"])
        for fact in c.kg.get("facts", [])
        if fact.get("subject") == req.get("customer_id")
    )
    tool_outputs: dict[str, Any] = {}
    for i, capability in enumerate(c.pack["tools"]):
        call_id = f"{req['request_id']}-{i + 1}"
        result = call_tool(
            {"call_id": call_id, "capability": capability, "args": {"order_id": order_id}}
        )
        calls.append(call_id)
        output = result.get("output", {})
        tool_outputs[capability] = output
        if isinstance(output, dict) and "evidence_ref" in output:
            evidence.append(str(output["evidence_ref"]))
    decisions = [
        {"policy": p["id"], "decision": "allow" if amount <= p["max_amount"] else "deny"}
        for p in c.pack["policies"]
    ]
    denied = any(d["decision"] == "deny" for d in decisions)
    over = amount > c.pack["approval_over"]
    approvals = list(c.run_context.get("approvals", [])) if over else []
    return {
        "decision_key": f"{req['kind']}:{order_id}",
        "evidence_refs": evidence,
        "policy_decisions": decisions,
        "approvals": approvals,
        "lineage": {"pack": c.pack_version, "kg_snapshot": c.kg_snapshot_id, "calls": calls},
        "outputs": {
            "decision": "deny" if denied else "refund",
            "amount": 0 if denied else amount,
            "tools": tool_outputs,
        },
        "status": "needs_approval" if over and not approvals else "completed",
    }


register_loop("refund-triage@1", refund_triage_v1)


def run_loop(trace: ContextosTrace, pack: Pack, kg: KgSnapshot) -> dict[str, Any]:
    """``runReplay``: the pack's registered loop over a lookup of the recorded transcripts
    (``call_id`` -> result; a later duplicate wins, as ``Map.set`` does). Raises
    ``MissingCall`` for a call nobody recorded, ``KeyError`` for an unregistered loop."""
    index: dict[str, Any] = {}
    for env in trace.envelopes:
        index[env["call"]["call_id"]] = env["result"]

    def call_tool(call: dict[str, Any]) -> dict[str, Any]:
        recorded = index.get(call["call_id"])
        if recorded is None:
            raise MissingCall(call["call_id"])
        return recorded

    loop = LOOPS[pack.loop]
    invoke = trace.head["invoke"]
    compiled = Compiled(
        pack=pack.body,
        pack_version=trace.head["pack_version"],
        kg=kg.body,
        kg_snapshot_id=trace.head["kg_snapshot_id"],
        run_context=invoke["run_context"],
        request=invoke["request"],
    )
    return loop(compiled, call_tool)


# --- the report -----------------------------------------------------------------------------


@dataclass
class ContextosReport(ReplayReport):
    #: ContextOS's own vocabulary beside the console's: status (byte_equal, diverged,
    #: tamper_detected or None when not replayed), rule, record_hash, chain, diverged_at, diff
    contextos: dict[str, Any] = field(default_factory=dict)


def new_report(trace_id: str | None, mode: str = AUDIT) -> ContextosReport:
    report = ContextosReport(trace_id=trace_id, format=FORMAT, mode=mode)
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
    n = 2 * len(trace.envelopes) + 2
    try:
        rhash: str | None = _parsed_record_hash(trace.head["decision_record"])
    except CanonicalError:
        rhash = None
    report.contextos["record_hash"] = rhash
    report.contextos["entries"] = n
    report.contextos["rule"] = chosen.rule
    report.contextos["rule_detail"] = RULES[chosen.rule]
    report.contextos["chain"] = chosen.verdict()
    report.stats["entries"] = n
    fields = list(NEVER_HASHED)
    if chosen.rule == REFERENCE:
        fields += sorted(unprotected)[:MAX_UNPROTECTED]
        if len(unprotected) >= MAX_UNPROTECTED:
            fields.append(f"... (more than {MAX_UNPROTECTED})")
    fields += [f"/{k}" for k in trace.ignored]
    report.unprotected_fields = fields
    record_entry_ok = chosen.ok
    if chosen.ok:
        report.checks.append(
            Check(
                "chain",
                True,
                f"{n - 1} entries (invoke, {len(trace.envelopes)} tool calls and results) "
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
) -> ContextosReport:
    """The chain and the record, without the pinned inputs (``verify``, ingest)."""
    report = new_report(trace.trace_id, mode)
    report.checks.append(Check("format", True, _describe(trace)))
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


def _pack_check(
    report: ContextosReport, trace: ContextosTrace, inputs: Inputs, keys: KeyRing, at: Any
) -> bool:
    pinned = trace.head["pack_version"]
    if _PINNED_PACK.match(pinned) is None:
        return _refuse(
            report,
            "pack",
            errors.MISSING_SNAPSHOT,
            f"refusing to replay: the pack {pinned!r} is unpinned (a pinned pack is "
            "name@MAJOR.MINOR.PATCH)",
        )
    pack = inputs.pack
    if pack is None:
        return _refuse(
            report,
            "pack",
            errors.MISSING_SNAPSHOT,
            f"refusing to replay: the pack {pinned} was not retained",
        )
    recomputed = pack_envelope_hash(pack.document["contextos_pack"])
    if pack.envelope_hash != recomputed:
        return _refuse(
            report,
            "pack",
            errors.INTEGRITY_FAILURE,
            f"refusing to replay: the pack {pinned}'s envelope hash differs: recorded "
            f"{pack.envelope_hash}, recomputed {recomputed}",
            expected=recomputed,
            observed=str(pack.envelope_hash),
        )
    problem, unsigned = _signed(pack.signature, recomputed.encode(), keys, at)
    if problem is not None:
        code = errors.MISSING_SNAPSHOT if unsigned else errors.INTEGRITY_FAILURE
        return _refuse(report, "pack", code, f"refusing to replay: the pack {pinned} {problem}")
    report.checks.append(
        Check("pack", True, f"pack {pinned} retained, signed, envelope hash {recomputed}")
    )
    return True


def _kg_check(
    report: ContextosReport, trace: ContextosTrace, inputs: Inputs, keys: KeyRing, at: Any
) -> bool:
    pinned = trace.head["kg_snapshot_id"]
    if _HASH.match(pinned) is None:
        return _refuse(
            report,
            "kg_snapshot",
            errors.MISSING_SNAPSHOT,
            f"refusing to replay: the KG snapshot {pinned!r} is unpinned (a pinned snapshot "
            "is its content address sha256:<64 hex>)",
        )
    kg = inputs.kg
    if kg is None:
        return _refuse(
            report,
            "kg_snapshot",
            errors.MISSING_SNAPSHOT,
            f"refusing to replay: the KG snapshot {pinned} was not retained",
        )
    recomputed = kg_snapshot_id(kg.body)
    if recomputed != pinned:
        return _refuse(
            report,
            "kg_snapshot",
            errors.INTEGRITY_FAILURE,
            f"refusing to replay: the KG snapshot {pinned}'s envelope hash differs: its "
            f"content hashes to {recomputed}",
            expected=recomputed,
            observed=pinned,
        )
    problem, unsigned = _signed(kg.signature, recomputed.encode(), keys, at)
    if problem is not None:
        code = errors.MISSING_SNAPSHOT if unsigned else errors.INTEGRITY_FAILURE
        return _refuse(
            report, "kg_snapshot", code, f"refusing to replay: the KG snapshot {pinned} {problem}"
        )
    report.checks.append(Check("kg_snapshot", True, f"KG snapshot {pinned} retained and signed"))
    return True
