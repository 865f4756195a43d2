"""The strict, bounded read of a ContextOS trace (:func:`parse`, :func:`loads`).

The document is read as a stream: the top-level object by hand, each value by the strict
decoder (duplicate keys, NaN and lone surrogates refused, the refusal naming where); tool
envelopes are kept in memory up to :data:`SPOOL_AFTER_BYTES` and spilled to a temporary file
beyond (:class:`Envelopes`). ``orjson`` reads a value only where writing it back proves the
text: one value (:meth:`_Reader._proven_value`), a run of envelopes
(:meth:`_Reader.proven_batch`), a small document whole (:func:`_parse_small`,
:func:`_parse_indented`); else the strict decoder reads it and words any refusal.

Pure: no Django.
"""

from __future__ import annotations

import codecs
import functools
import json
import re
import tempfile
import weakref
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import IO, Any

from core import errors
from core.errors import ReplayError
from core.formats.jsonstrict import (
    _DECODER,
    _NEST_TOKEN,
    _SURROGATE_ESCAPE,
    BOM,
    MAX_CONTAINERS,
    NOT_PROVEN,
    NumberOutOfRange,
    _refuse_lone_surrogates,
    deeper_than,
    locate_too_deep,
    out_of_range,
    parse_compact,
)
from core.replay.diff import pointer_join

try:
    import orjson as _orjson
except ImportError:  # pragma: no cover - orjson is a dependency; the exact writers remain
    _orjson = None  # type: ignore[assignment]
else:
    _indented = functools.partial(_orjson.dumps, option=_orjson.OPT_INDENT_2)

try:  # the nesting walk, compiled (built at install); else jsonstrict's, in Python
    from core.formats.contextos._compiled import deeper_than as _compiled_deeper_than
except ImportError:  # pragma: no cover - a source tree without `pip install`
    _compiled_deeper_than = None  # type: ignore[assignment]

FORMAT = "contextos-trace"
SCHEMA_VERSION = 1

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

MAX_DOCUMENT_BYTES = 4 * 1024**3
#: characters of one tool envelope's text, and of the other top-level values' texts together
#: (the head, held while the trace is verified). Seed 004 (a blog post, ContextOS's own code
#: is not published) sets no limit of its own. A character costs CPython up to 4 bytes once
#: decoded (a string holding one character past U+FFFF stores each in 4), and reading and
#: verifying a value holds about five copies of it at its peak (the buffer, its growth, the
#: decoded value, its spooled or hashed bytes): 8 Mi characters of 4-byte text peak at
#: +159 MiB in a gunicorn worker (`bench/bench_bombs.py --server --wide`; 64 Mi characters
#: of 1-byte text peaked at +259 MiB), under the 256 MiB one upload may cost
MAX_VALUE_CHARS = 8 * 1024**2
#: levels of nesting, the document's own object being the first (a tool envelope is the
#: third): refused past it with its line, column and pointer, before any recursive code
#: (a decoder, a writer, a spooled envelope read back) sees it, so that what is accepted
#: does not depend on the server's thread, stack or recursion limit
MAX_DEPTH = 64
SPOOL_AFTER_BYTES = 1024**2
SMALL_DOCUMENT_BYTES = 256 * 1024
_CHUNK = 1 << 20
_FIRST_PIECE = 16 * 1024

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


def _too_deep(value: Any, depth: int) -> bool:
    """Whether ``value``, at level ``depth``, holds a container deeper than ``MAX_DEPTH``."""
    if _compiled_deeper_than is not None:
        return _compiled_deeper_than(value, MAX_DEPTH, depth)
    return deeper_than(value, MAX_DEPTH, depth)


def _malformed(message: str) -> ReplayError:
    return ReplayError(errors.MALFORMED_TRACE, message)


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
            # typeshed's match() may return None; this pattern matches the empty string
            pos = self.pos = _BLANKS.match(buf, self.pos).end()  # type: ignore[union-attr]
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

    def refuse_deep(self, start: int, pointer: str, depth: int) -> None:
        """Refuse the value at ``buf[start]`` (at ``pointer``, ``depth``) if it nests deeper
        than ``MAX_DEPTH``: the refusal names where the first container too deep opens."""
        found = locate_too_deep(self.buf, start, MAX_DEPTH, depth, pointer)
        if found is not None:
            index, where = found
            line, column = self.place(index)
            raise _malformed(
                f"{self.where}: nesting deeper than {MAX_DEPTH} levels at line {line} column "
                f"{column} ({where})"
            )

    def check_depth(self, value: Any, start: int, end: int, pointer: str, depth: int) -> None:
        """Refuse a value read from ``buf[start:end]`` that nests deeper than ``MAX_DEPTH``
        (quick when its text has too few brackets to)."""
        brackets = self.buf.count("{", start, end) + self.buf.count("[", start, end)
        if brackets > MAX_DEPTH - depth + 1 and _too_deep(value, depth):
            self.refuse_deep(start, pointer, depth)

    def check_containers(self, what: str) -> None:
        """Refuse the value at ``pos`` once its text holds more than ``MAX_CONTAINERS``
        objects and arrays, before a decoder builds them (quick while the buffer has too
        few brackets to)."""
        buf, pos = self.buf, self.pos
        if len(buf) - pos <= 2 * MAX_CONTAINERS or buf[pos] not in "{[":
            return
        if buf.count("{", pos) + buf.count("[", pos) <= MAX_CONTAINERS:
            return
        count = 0
        depth = 0
        for m in _NEST_TOKEN.finditer(buf, pos):
            part = m.group()
            if part in "{[":
                count += 1
                depth += 1
                if count > MAX_CONTAINERS:
                    raise _malformed(
                        f"{self.where}: {what} holds more than {MAX_CONTAINERS} objects and "
                        "arrays; refused before parsing it"
                    )
            elif part in "}]":
                depth -= 1
                if depth <= 0:
                    return  # the value ended

    def value(
        self,
        what: str,
        pointer: str = "",
        depth: int = 2,
        *,
        limit: int = MAX_VALUE_CHARS,
        head: bool = False,
    ) -> tuple[Any, int]:
        """The next JSON value and how many characters it took (``pointer``: where the value
        is in the document, for a refusal; ``depth``: its level, the document being 1;
        ``limit``: the characters it may take, refused past them while it is read; ``head``:
        a top-level value, whose limit is what the others left)."""
        self.skip_ws()
        self.check_containers(what)
        if _orjson is not None:
            start = self.pos
            fast = self._proven_value()
            if fast is not None:
                if fast[1] > limit:
                    raise _malformed(self.too_long(what, head=head))
                self.check_depth(fast[0], start, self.pos, pointer, depth)
                return fast
        while True:
            self.check_containers(what)
            try:
                value, end = _DECODER.raw_decode(self.buf, self.pos)
            except RecursionError:
                self.refuse_deep(self.pos, pointer, depth)
                raise _malformed(f"{self.where}: {what} nests too deeply") from None
            except NumberOutOfRange:
                raise out_of_range(
                    self.buf, self.where, start=self.pos, pointer=pointer, place=self.place
                ) from None
            except json.JSONDecodeError as exc:
                # cut off by the end of the buffer (an unterminated string names its start;
                # a \uXXXX escape, or a surrogate pair's two, near the end names its "u":
                # read on, and an escape that is really wrong is refused with more text)
                cut = (
                    exc.pos >= len(self.buf) - 1
                    or exc.msg.startswith("Unterminated")
                    or (exc.msg.startswith("Invalid \\u") and exc.pos + 12 > len(self.buf))
                )
                if cut and not self.eof:
                    if len(self.buf) - self.pos > limit:
                        raise _malformed(self.too_long(what, head=head)) from None
                    self.fill()
                    continue
                if cut:
                    raise _malformed(f"{self.where}: truncated in {what}") from None
                raise _malformed(f"{self.where}: {what}: {exc.msg}") from None
            except ValueError as exc:  # a duplicate key, NaN or Infinity
                raise _malformed(f"{self.where}: {what}: {exc}") from None
            if end < len(self.buf) or self.eof or not self.fill():
                size = end - self.pos
                if size > limit:  # ended in the chunk read after the last check
                    raise _malformed(self.too_long(what, head=head))
                # only a \u escape can make a lone surrogate (not Unicode text: refused)
                if self.buf.find("\\u", self.pos, end) != -1 and _SURROGATE_ESCAPE.search(
                    self.buf, self.pos, end
                ):
                    _refuse_lone_surrogates(value, self.where)
                self.check_depth(value, self.pos, end, pointer, depth)
                self.pos = end
                return value, size
            # a number may go on in the next chunk: parse it again

    def too_long(self, what: str, *, head: bool = False) -> str:
        """The refusal of a value past its characters (``head``: a top-level value other than
        ``tool_envelopes``, bounded with the others together)."""
        if head:
            return (
                f"{self.where}: the top-level values but tool_envelopes are longer than "
                f"{MAX_VALUE_CHARS} characters together (at {what})"
            )
        return f"{self.where}: {what} is longer than {MAX_VALUE_CHARS} characters"

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
            if text.count("{") + text.count("[") > MAX_DEPTH - 2 and _too_deep(items, 2):
                break  # read value by value: the one too deep is refused, naming where
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

    @classmethod
    def held(cls, items: list[dict[str, Any]]) -> Envelopes:
        """The checked envelopes of a small document, held as they are (never spooled)."""
        envelopes = cls()
        envelopes._items = items
        envelopes.count = len(items)
        return envelopes

    def in_memory(self) -> list[dict[str, Any]] | None:
        """The envelopes as the list they are held in; None once spooled."""
        return self._items if self._spool is None else None

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
    get = head.get
    trace_id, invoke, record, audit = (
        get("trace_id"),
        get("invoke"),
        get("decision_record"),
        get("audit"),
    )
    if not (
        type(version) is int
        and 1 <= version <= SCHEMA_VERSION
        and type(trace_id) is str
        and 0 < len(trace_id) <= 128
        and type(get("pack_version")) is str
        and type(get("kg_snapshot_id")) is str
        and type(invoke) is dict
        and type(invoke.get("run_context")) is dict
        and type(invoke.get("request")) is dict
        and type(invoke.get("envelope_hash")) is str
        and type(record) is dict
        and type(audit) is dict
        and type(audit.get("chain_prev_hash")) is str
    ):
        return False
    if None in map(record.get, RECORD_FIELDS):
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
    if data.count(b"{") + data.count(b"[") > MAX_DEPTH and _too_deep(doc, 1):
        return None  # the streaming read refuses it, naming where
    items = doc.pop("tool_envelopes")  # what is left is the head (the document is ours)
    for index, item in enumerate(items):
        _check_envelope(item, index)
    _check_head(doc, filename)
    ignored = [] if doc.keys() <= TOP_KEYS else sorted(k for k in doc if k not in TOP_KEYS)
    return ContextosTrace(doc, Envelopes.held(items), ignored)


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
    head_chars = 0  # of the top-level values but tool_envelopes, together
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
                    left = MAX_VALUE_CHARS - head_chars
                    head[key], size = reader.value(key, pointer_join([key]), limit=left, head=True)
                    head_chars += size
                    if head_chars > MAX_VALUE_CHARS:
                        raise _malformed(reader.too_long(key, head=True))
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
            item, size = reader.value(
                f"tool_envelopes[{index}]", f"/tool_envelopes/{index}", depth=3
            )
            envelopes.append(_check_envelope(item, index), size)
        if reader.expect(",]", "',' or ']' in tool_envelopes") == "]":
            return


def loads(data: bytes, filename: str = "trace") -> ContextosTrace:
    import io

    return parse(io.BytesIO(data), filename)
