"""Strict JSON decoding for untrusted uploads: one exact refusal per kind of bad input.

Refused, each with a message that names where: a byte-order mark, invalid UTF-8, duplicate
keys (a hash over duplicate keys is ambiguous), NaN/Infinity, a number out of range for a
double (``1e400``: its line, column and JSON pointer in the text), nesting deeper than the
parser can follow, integers too long to convert, truncated or otherwise malformed JSON.

Pure: no Django.
"""

from __future__ import annotations

import contextlib
import gc
import json
import re
from collections.abc import Callable, Iterator
from typing import Any

from core.errors import MALFORMED_TRACE, ReplayError
from core.replay.diff import pointer_join

try:  # accelerator for loads_compact; loads_strict alone decides whenever it cannot prove a line
    import orjson as _orjson
except ImportError:  # pragma: no cover - exercised only where orjson is absent
    _orjson = None  # type: ignore[assignment]

BOM = b"\xef\xbb\xbf"
#: keys one object may have, and keys one JSON text may have in all (a key costs a few hundred
#: bytes once parsed: 2 million keys in one object grew the server by ~650 MB)
MAX_OBJECT_KEYS = 100_000
MAX_KEYS = 1_000_000
#: objects and arrays one JSON text may hold: ``{}`` and ``[]`` cost ~60 bytes each once
#: parsed, whatever their three bytes (8 million ``{}`` events, 23 KB gzipped, grew the
#: server by 1.3 GB; 16 million ``[]`` by 2.2 GB)
MAX_CONTAINERS = 1_000_000


def _refuse_constant(name: str) -> Any:
    raise ValueError(f"{name} is not valid in a hashed JSON value")


def _no_duplicates(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    obj = dict(pairs)
    if len(obj) != len(pairs):
        seen: set[str] = set()
        for key, _ in pairs:
            if key in seen:
                raise ValueError(f"duplicate key {key!r}: a hash over duplicate keys is ambiguous")
            seen.add(key)
    return obj


class NumberOutOfRange(ValueError):
    """A number the text spells that no double holds (``1e400``, ``-1e400``): Python's
    ``float`` reads it as an infinity, which no hash, signature or canonical form can write
    back. Raised by the strict decoder; :func:`out_of_range` words where it is."""

    def __init__(self, literal: str) -> None:
        super().__init__(f"the number {_clip(literal)} is out of range for a double")
        self.literal = literal


def _finite_float(literal: str) -> float:
    value = float(literal)
    if value - value != 0.0:  # an infinity (NaN and Infinity are refused as constants)
        raise NumberOutOfRange(literal)
    return value


_DECODER = json.JSONDecoder(
    object_pairs_hook=_no_duplicates,
    parse_constant=_refuse_constant,
    parse_float=_finite_float,
)

#: a JSON token, enough to follow where a decoder stopped: a string, a number, punctuation
_TOKEN = re.compile(r'"(?:[^"\\]|\\.)*"|-?[0-9][0-9.eE+-]*|[{}\[\],:]')
_MAX_DOUBLE = "1.7976931348623157e+308"


def _clip(literal: str) -> str:
    return literal if len(literal) <= 40 else f"{literal[:30]}... ({len(literal)} characters)"


def locate_out_of_range(text: str, start: int = 0) -> tuple[int, str, str] | None:
    """Where the first number out of range for a double is in the JSON value that starts at
    ``start`` in ``text``: (its index in ``text``, its literal, its JSON pointer relative to
    that value); None when there is none. Reads tokens only (a decoder already read the
    text up to there), so it is asked only once a decoder refused such a number."""
    path: list[str | int | None] = []  # per open container: the current key or index
    last_string = ""
    for m in _TOKEN.finditer(text, start):
        token = m.group()
        first = token[0]
        if first == '"':
            last_string = token
        elif first == "{":
            path.append(None)
        elif first == "[":
            path.append(0)
        elif first in "}]":
            if path:
                path.pop()
            if not path:
                return None  # the value ended
        elif first == ":":
            path[-1] = json.loads(last_string)
        elif first == ",":
            if path and isinstance(path[-1], int):
                path[-1] += 1
        else:
            try:
                value = float(token)
            except ValueError:
                return None  # past where the decoder stopped
            if value - value != 0.0:
                return m.start(), token, pointer_join(p for p in path if p is not None)
            if not path:
                return None  # a number alone, in range
    return None


def out_of_range(
    text: str,
    where: str,
    *,
    start: int = 0,
    line_offset: int = 0,
    pointer: str = "",
    place: Callable[[int], tuple[int, int]] | None = None,
) -> ReplayError:
    """The refusal of the first number out of range for a double in the value at ``start``
    of ``text``, naming its place in the uploaded text: its line and column (1-based, in
    characters: counted in ``text`` plus ``line_offset`` lines, or ``place(index)`` for a
    reader holding only part of the text) and its JSON pointer (after ``pointer``, the
    value's own)."""
    found = locate_out_of_range(text, start)
    if found is None:  # pragma: no cover - only asked after the decoder raised for one
        return ReplayError(MALFORMED_TRACE, f"{where}: a number is out of range for a double")
    index, literal, inner = found
    if place is None:
        line = text.count("\n", 0, index) + 1 + line_offset
        column = index - (text.rfind("\n", 0, index) + 1) + 1
    else:
        line, column = place(index)
    pointer += inner
    at = f" ({pointer})" if pointer else ""
    return ReplayError(
        MALFORMED_TRACE,
        f"{where}: number out of range at line {line} column {column}{at}: {_clip(literal)} "
        f"is larger in magnitude than any double (at most {_MAX_DOUBLE})",
        broke_at=pointer or None,
    )


#: a string, or an opening bracket: enough to count containers outside strings
_OPEN_TOKEN = re.compile(rb'"[^"\\]*(?:\\.[^"\\]*)*"|[{\[]')


def has_many_containers(data: bytes, max_containers: int = MAX_CONTAINERS) -> bool:
    """Whether the JSON text `data` may hold more than `max_containers` objects and arrays
    (cheap: each needs its own ``{`` or ``[`` byte, and two bytes at least)."""
    return len(data) > 2 * max_containers and (data.count(b"{") + data.count(b"[") > max_containers)


def check_container_count(data: bytes, *, where: str, max_containers: int = MAX_CONTAINERS) -> None:
    """Refuse a JSON text with more than `max_containers` objects and arrays, before it is
    parsed: the brackets outside strings are counted, up to the first one past the limit."""
    if not has_many_containers(data, max_containers):
        return
    count = 0
    for m in _OPEN_TOKEN.finditer(data):
        if m.end() - m.start() == 1:
            count += 1
            if count > max_containers:
                raise ReplayError(
                    MALFORMED_TRACE,
                    f"{where}: more than {max_containers} objects and arrays; refused before "
                    "parsing it",
                )


_BRACE = re.compile(rb"[{}]")


_CHUNK = 1 << 18


def _outside_strings(data: bytes) -> bytes:
    """The JSON text without its strings: what is left is its structure, whose colons are its
    keys and whose braces are its objects. Byte operations only (no regex over the strings):
    escaped backslashes, then escaped quotes, are blanked (two bytes for two, left to right as
    a decoder reads them), so every quote left delimits a string; then the text is split at
    its quotes a chunk at a time (so a text of millions of keys never becomes millions of
    pieces at once)."""
    return _strings_out(data, measure=None)[0]


def _strings_out(data: bytes, *, measure: int | None = 0) -> tuple[bytes, int]:
    """:func:`_outside_strings` of `data`, and the bytes between the quotes of its longest
    string (escapes blanked two bytes for two: no fewer than its characters; a string across
    chunks is measured whole), or 0 when `measure` is None. With `measure` > 0 a string
    shorter than `measure` bytes may be left unmeasured: past a chunk's size, only the
    strings that cross from one chunk to the next are (a shorter one is no longer)."""
    if b"\\" in data:
        data = data.replace(b"\\\\", b"__").replace(b'\\"', b"__")
    kept: list[bytes] = []
    inside = 0
    carry = longest = 0  # bytes of a string a chunk ended in; the longest string's
    every = measure is not None and measure <= _CHUNK
    for start in range(0, len(data), _CHUNK):
        parts = data[start : start + _CHUNK].split(b'"')
        kept.append(b"".join(parts[inside::2]))
        last = len(parts) - 1
        ends_inside = (inside + last) % 2  # parts[i] is in a string when inside + i is odd
        if measure is not None and last + inside:  # a piece of a string in this chunk
            first = len(parts[1 - inside]) + (carry if inside else 0)
            end = len(parts[last if ends_inside else last - 1])
            longest = max(longest, first, end)
            if every:
                longest = max(longest, *map(len, parts[1 - inside :: 2]))
            carry = (first if last == 1 - inside else end) if ends_inside else 0
        inside = ends_inside
    return b"".join(kept), longest


#: every byte but the braces and the colon: deleted, they leave the objects and their keys
_NOT_OBJECT_OR_KEY = bytes(b for b in range(256) if b not in b"{}:")
#: an object holding no other object: its keys are the colons between its braces
_FLAT_OBJECT = re.compile(rb"\{:*\}")
#: object nesting the fast pass follows (a pass per level); deeper texts get the exact scan
_FAST_DEPTH = 64


#: the slice of the structure one substitution works on (its pieces are bounded by it)
_REDUCE_BYTES = 1 << 16


def _drop_flat_objects(structure: bytes) -> bytes:
    """`structure` without its objects that hold no other object, a slice at a time (one
    substitution over the whole would hold a piece per object at once). A slice ends just
    after a ``}``, which no such object spans."""
    kept: list[bytes] = []
    start, size = 0, len(structure)
    while start < size:
        end = structure.find(b"}", start + _REDUCE_BYTES) + 1 or size
        kept.append(_FLAT_OBJECT.sub(b"", structure[start:end]))
        start = end
    return b"".join(kept)


def _clearly_within(skeleton: bytes, max_keys: int, max_object_keys: int) -> bool:
    """Whether the structure `skeleton` (:func:`_outside_strings`) surely holds no more than
    `max_keys` keys in all and `max_object_keys` in any object; False when in doubt (the exact
    scan of :func:`check_key_count` then decides and words the refusal). C-speed passes only:
    the skeleton is reduced to its braces and colons; then, a nesting level a pass, no run of
    more than `max_object_keys` colons may be left (an object holding no other object has
    its keys as one run) and the innermost objects are dropped, until no brace is left."""
    if skeleton.count(b":") > max_keys:
        return False
    structure = skeleton.translate(None, _NOT_OBJECT_OR_KEY)
    too_many = b":" * (max_object_keys + 1)
    for _ in range(_FAST_DEPTH):
        if too_many in structure:
            return False
        if b"{" not in structure and b"}" not in structure:
            return True  # what is left are keys outside any object, few enough
        reduced = _drop_flat_objects(structure)
        if len(reduced) == len(structure):
            return False  # a brace without its pair
        structure = reduced
    return False


def check_key_count(
    data: bytes, *, where: str, max_keys: int = MAX_KEYS, max_object_keys: int = MAX_OBJECT_KEYS
) -> None:
    """Refuse a JSON text with more than `max_object_keys` keys in one object or `max_keys`
    in all, before it is parsed (a parsed key costs far more than its bytes).

    Every key needs a colon, so a text with few colons is let through without a scan. The
    scan drops the strings (byte operations); a text clearly within both limits is let
    through after a few C-speed passes (:func:`_clearly_within`); any other is scanned
    exactly, counting the colons between consecutive braces (``bytes.count``): a step per
    object, not per string, stopping at the first limit crossed and naming the one a
    key-by-key count would have crossed first.
    """
    _check_key_count(data, where, max_keys, max_object_keys, None)


def _check_key_count(
    data: bytes,
    where: str,
    max_keys: int,
    max_object_keys: int,
    skeleton: bytes | None,
    *,
    colons: int | None = None,
    max_containers: int = MAX_CONTAINERS,
) -> None:
    """:func:`check_key_count`, given the text's :func:`_outside_strings` when the caller
    has it (`skeleton`, or only its brackets and colons, in order; else None) and its
    colons when it has counted them (`colons`)."""
    # the skeleton's brackets are those outside the strings (a third of a document's bytes
    # to count); more than the limit, the exact scan of the text words the refusal
    if skeleton is None or has_many_containers(skeleton, max_containers):
        check_container_count(data, where=where, max_containers=max_containers)
    if (data.count(b":") if colons is None else colons) <= min(max_keys, max_object_keys):
        return
    if skeleton is None:
        skeleton = _outside_strings(data)
    if _clearly_within(skeleton, max_keys, max_object_keys):
        return
    total = 0
    here = 0
    outer: list[int] = []
    last = 0
    for m in _BRACE.finditer(skeleton):
        pos = m.start()
        keys = skeleton.count(b":", last, pos)
        last = pos + 1
        if keys:
            object_room = max_object_keys - here
            total_room = max_keys - total
            if keys > object_room and object_room <= total_room:
                raise ReplayError(
                    MALFORMED_TRACE,
                    f"{where}: an object has more than {max_object_keys} keys; refused before "
                    "parsing it",
                )
            if keys > total_room:
                raise ReplayError(
                    MALFORMED_TRACE,
                    f"{where}: more than {max_keys} keys in all; refused before parsing it",
                )
            here += keys
            total += keys
        if m.group() == b"{":
            outer.append(here)
            here = 0
        else:
            here = outer.pop() if outer else 0
    keys = skeleton.count(b":", last)
    if keys > max_object_keys - here and max_object_keys - here <= max_keys - total:
        raise ReplayError(
            MALFORMED_TRACE,
            f"{where}: an object has more than {max_object_keys} keys; refused before parsing it",
        )
    if keys > max_keys - total:
        raise ReplayError(
            MALFORMED_TRACE, f"{where}: more than {max_keys} keys in all; refused before parsing it"
        )


#: a JSON token, enough to follow nesting: a string, an opening or closing bracket, a colon
#: (the string before it was a key) or a comma
_NEST_TOKEN = re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*"|[{}\[\],:]')


def deeper_than(value: Any, limit: int, depth: int = 1) -> bool:
    """Whether `value` (at `depth`: 1 for a document) holds a container deeper than `limit`
    levels; iterative, so any nesting a decoder built is walked on any thread's stack."""
    if type(value) is not dict and type(value) is not list:
        return False
    stack = [(value, depth)]
    while stack:
        node, level = stack.pop()
        if level > limit:
            return True
        for child in node.values() if type(node) is dict else node:
            if type(child) is dict or type(child) is list:
                stack.append((child, level + 1))
    return False


def locate_too_deep(
    text: str, start: int, limit: int, depth: int = 1, pointer: str = ""
) -> tuple[int, str] | None:
    """Where the first container deeper than `limit` levels opens in the JSON value at
    ``text[start]`` (at `depth`, at JSON pointer `pointer`): its index in `text` and its JSON
    pointer;
    None when there is none (up to where the value, or the text, ends). Reads tokens only."""
    path: list[str | int | None] = []  # per open container: the current key or index
    last_string = ""
    for m in _NEST_TOKEN.finditer(text, start):
        token = m.group()
        first = token[0]
        if first == '"':
            last_string = token
        elif first in "{[":
            if depth + len(path) > limit:
                return m.start(), pointer + pointer_join(p for p in path if p is not None)
            path.append(None if first == "{" else 0)
        elif first in "}]":
            if path:
                path.pop()
            if not path:
                return None  # the value ended
        elif first == ":":
            if path:
                try:
                    path[-1] = json.loads(last_string)
                except ValueError:
                    return None
        elif path and isinstance(path[-1], int):
            path[-1] += 1
    return None


def _utf8_error(data: bytes, exc: UnicodeDecodeError, where: str) -> ReplayError:
    line = data.count(b"\n", 0, exc.start) + 1
    col = exc.start - (data.rfind(b"\n", 0, exc.start) + 1) + 1
    return ReplayError(
        MALFORMED_TRACE,
        f"{where}: invalid UTF-8 at line {line} column {col} (byte offset {exc.start}): "
        f"{exc.reason}",
    )


#: a JSON text at least this long is decoded with the cyclic garbage collector paused
_NO_COLLECTION_BYTES = 1 << 20


@contextlib.contextmanager
def _no_collection(size: int) -> Iterator[None]:
    """Pause the cyclic garbage collector while a large JSON text is decoded: a decoder makes
    no reference cycles, yet each of its millions of new containers counts towards the next
    collection, and the full ones walk every container made so far (a quarter of the whole
    document reader's decoding time on bench_replay's 30 MB trace). Reference counting
    frees as ever; the collector is resumed as it was found."""
    if size < _NO_COLLECTION_BYTES or not gc.isenabled():
        yield
        return
    gc.disable()
    try:
        yield
    finally:
        gc.enable()


def loads_strict(
    data: bytes,
    *,
    where: str,
    line_offset: int = 0,
    max_keys: int = MAX_KEYS,
    max_object_keys: int = MAX_OBJECT_KEYS,
) -> Any:
    """Decode one JSON text from UTF-8 bytes, refusing anything ambiguous or hostile."""
    check_key_count(data, where=where, max_keys=max_keys, max_object_keys=max_object_keys)
    return _decode_strict(data, where=where, line_offset=line_offset)


def _decode_strict(data: bytes, *, where: str, line_offset: int = 0) -> Any:
    """:func:`loads_strict` once the text's keys and containers are counted."""
    if data.startswith(BOM):
        raise ReplayError(
            MALFORMED_TRACE,
            f"{where}: starts with a UTF-8 byte-order mark; save the file as UTF-8 without BOM",
        )
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise _utf8_error(data, exc, where) from None
    try:
        with _no_collection(len(data)):
            value, end = _DECODER.raw_decode(text, _skip_ws(text, 0))
    except json.JSONDecodeError as exc:
        kind = "truncated JSON" if exc.pos >= len(text.rstrip()) else "malformed JSON"
        raise ReplayError(
            MALFORMED_TRACE,
            f"{where}: {kind} at line {exc.lineno + line_offset} column {exc.colno}: "
            + _decode_message(exc.msg),
        ) from None
    except RecursionError:
        raise ReplayError(
            MALFORMED_TRACE, f"{where}: nesting is deeper than the parser allows"
        ) from None
    except NumberOutOfRange:
        raise out_of_range(text, where, line_offset=line_offset) from None
    except ValueError as exc:  # duplicate keys, NaN/Infinity, over-long integers
        raise ReplayError(MALFORMED_TRACE, f"{where}: {exc}") from None
    rest = _skip_ws(text, end)
    if rest != len(text):
        line = text.count("\n", 0, rest) + 1 + line_offset
        raise ReplayError(
            MALFORMED_TRACE, f"{where}: unexpected data after the JSON value at line {line}"
        )
    if "\\u" in text and _SURROGATE_ESCAPE.search(text):
        _refuse_lone_surrogates(value, where)
    return value


# Only a `\u` escape can put a lone UTF-16 surrogate into a decoded string (valid UTF-8 cannot).
# Such a string is not Unicode text: hashing, signing or storing it fails far from here.
_SURROGATE_ESCAPE = re.compile(r"\\u[dD][89a-fA-F][0-9a-fA-F]{2}")
_LONE_SURROGATE = re.compile("[\ud800-\udfff]")


def _refuse_lone_surrogates(value: Any, where: str) -> None:
    stack = [value]
    while stack:
        node = stack.pop()
        if isinstance(node, dict):
            stack.extend(node.values())
            strings: Any = node.keys()
        elif isinstance(node, list):
            stack.extend(node)
            continue
        elif isinstance(node, str):
            strings = (node,)
        else:
            continue
        for string in strings:
            lone = _LONE_SURROGATE.search(string)
            if lone:
                raise ReplayError(
                    MALFORMED_TRACE,
                    f"{where}: the string {string[:40]!r} holds a lone UTF-16 surrogate "
                    f"\\u{ord(lone.group()):04x}, which is not Unicode text; escape a "
                    "character outside the BMP as a surrogate pair, or write it as UTF-8",
                )


#: what :func:`parse_compact` returns when it cannot prove a text (then ask loads_strict)
NOT_PROVEN: Any = object()

if _orjson is not None:
    _fast_loads = _orjson.loads
    _fast_dumps = _orjson.dumps
    _FAST_ERRORS: tuple[type[Exception], ...] = (
        _orjson.JSONDecodeError,
        _orjson.JSONEncodeError,
    )

    def parse_compact(data: bytes) -> Any:
        """The value of a compact JSON text, when that is quick to prove; else `NOT_PROVEN`.

        ``orjson`` parses the text, then writes the value back; when that gives exactly the
        input bytes (one trailing newline aside), the text is proven to be one that
        :func:`loads_strict` accepts, with the same value: a text ``orjson`` writes has no
        duplicate key (its objects are dicts), no NaN or Infinity, no byte-order mark and is
        valid UTF-8; its numbers are the shortest round-tripping spellings, so every correct
        decoder reads the same doubles; and ``orjson.loads`` of these bytes gives this value
        again, wherever it runs. Anything else (other spacing or escapes, ``1E5``, huge
        integers, duplicate keys, errors of any kind) is `NOT_PROVEN`.
        """
        if has_many_containers(data):
            return NOT_PROVEN  # loads_strict counts them before it parses (and refuses)
        try:
            value = _fast_loads(data)
            out = _fast_dumps(value)
        except _FAST_ERRORS:
            return NOT_PROVEN
        n = len(out)
        if (len(data) == n or (len(data) == n + 1 and data[n] == 0x0A)) and data.startswith(out):
            return value
        return NOT_PROVEN

    #: what `parse_compact` uses, for a hot loop that inlines it on texts too short for
    #: `has_many_containers` (at most `COMPACT_INLINE_MAX` bytes): loads, dumps, errors
    COMPACT_CODEC: tuple[Any, Any, tuple[type[Exception], ...]] | None = (
        _fast_loads,
        _fast_dumps,
        _FAST_ERRORS,
    )

else:  # pragma: no cover

    def parse_compact(data: bytes) -> Any:
        """Always `NOT_PROVEN` (orjson is not installed)."""
        return NOT_PROVEN

    COMPACT_CODEC = None

#: no text this long has more than MAX_CONTAINERS containers (has_many_containers)
COMPACT_INLINE_MAX = 2 * MAX_CONTAINERS


def loads_compact(data: bytes, *, where: str) -> Any:
    """:func:`loads_strict`, fast for the compact lines writers produce (JSON Lines).

    Same value, same refusals: :func:`parse_compact` answers when it can prove the text,
    :func:`loads_strict` decides (and words any refusal) otherwise.
    """
    value = parse_compact(data)
    return loads_strict(data, where=where) if value is NOT_PROVEN else value


def orjson_refuses_lone_surrogates() -> bool:
    """Whether this ``orjson`` refuses every lone UTF-16 surrogate escape (as
    :func:`loads_strict` does) and decodes a pair as one character, as ``json`` does: then a
    text it parses holds none. Asked once, at import, here and by Paxman's fast path."""
    if _orjson is None:
        return False
    for lone in (b'"\\ud800"', b'"\\udc00"', b'"\\ud800x"', b'"x\\udfff"', b'"\\ud83d\\ud83d"'):
        try:
            _orjson.loads(lone)
        except _orjson.JSONDecodeError:
            continue
        return False  # pragma: no cover - the installed orjson refuses them (a test says so)
    return bool(_orjson.loads(b'"\\ud83d\\ude00"') == "\U0001f600")


#: whether :func:`loads_document` may let ``orjson`` parse (:func:`_parse_document`)
FAST_DOCUMENT = orjson_refuses_lone_surrogates()
#: a run of 19 digits not after a point: an integer, an integer part or an exponent that
#: long (``orjson`` reads an integer outside 64 bits as a float; 18 digits never are)
_LONG_DIGITS = re.compile(rb"(?<![.0-9])[0-9]{19}")
_DIGITS_AS_ZERO = bytes.maketrans(b"123456789", b"000000000")
#: the deepest nesting :func:`loads_document` lets ``orjson`` parse: ``json`` refuses nesting
#: deeper than the interpreter's recursion limit (less the caller's stack), ``orjson`` only
#: past 1024 levels; this leaves the caller some 850 frames
_FAST_MAX_DEPTH = 128


def _parse_document(data: bytes, skeleton: bytes, colons: int | None = None) -> Any:
    """The value of the JSON text `data` (whose :func:`_outside_strings` is `skeleton`, whose
    keys and containers are counted and whose nesting is within :func:`check_shape`'s
    limit), parsed by ``orjson`` when it is then proven to be :func:`loads_strict`'s value
    of it; else `NOT_PROVEN` (then ask :func:`loads_strict`, which words any refusal).

    ``orjson`` refuses all that ``loads_strict`` refuses in such a text (a byte-order mark,
    invalid UTF-8, NaN and Infinity, a number out of range for a double, a lone surrogate
    escape (`FAST_DOCUMENT`), malformed or trailing data; tests/replay/test_document_fast.py)
    but two things, ruled out here:

    - an integer outside 64 bits, which it reads as a float: declined when a run of 19 or
      more digits stands outside the strings anywhere but after a point (no fraction is
      read as an integer, and a double's fraction parses the same: every correctly rounded
      reader gives the same double, checked against ``float`` by a Hypothesis property);
    - duplicate keys, which it keeps the last of: counted. Each key of the text has its
      colon, as has each ``:`` spelled in its strings; ``orjson`` writes the value back
      with a colon for each key it kept and each ``:`` in the strings it kept, escaping
      none. With no ``\\u003a`` in the text (declined when ``\\u003`` appears), a
      string's colons are the ones it spells; so the written value has as many colons as
      the text exactly when no key (and with it no part of the value) was dropped.
    """
    if b"0" * 19 in skeleton.translate(_DIGITS_AS_ZERO) and _LONG_DIGITS.search(skeleton):
        return NOT_PROVEN
    if b"\\" in data and b"\\u003" in data:  # (memchr first: most texts have no escape)
        return NOT_PROVEN
    try:
        with _no_collection(len(data)):
            value = _orjson.loads(data)
        written = _written_colons(value)
    except (_orjson.JSONDecodeError, _orjson.JSONEncodeError, RecursionError):
        return NOT_PROVEN
    if written != (data.count(b":") if colons is None else colons):
        return NOT_PROVEN  # a duplicate key
    return value


#: elements of a list ``orjson`` writes at once when counting colons (:func:`_written_colons`)
_SLICE = 4096
_FEW_KEYS = 64


def _written_colons(value: Any) -> int:
    """The colons in ``orjson.dumps(value)``, written a piece at a time (long lists a slice
    at a time, objects of few keys a member at a time), so a document's events are not
    written out whole at once: a list's colons are its elements', an object's are its keys',
    its values' and one per key."""
    if type(value) is list and len(value) > _SLICE:
        dumps = _orjson.dumps
        return sum(dumps(value[i : i + _SLICE]).count(b":") for i in range(0, len(value), _SLICE))
    if type(value) is dict and len(value) <= _FEW_KEYS:
        return sum(key.count(":") + 1 + _written_colons(item) for key, item in value.items())
    return _orjson.dumps(value).count(b":")


def loads_document(
    data: bytes,
    *,
    where: str,
    max_depth: int,
    max_string: int,
    max_keys: int = MAX_KEYS,
    max_object_keys: int = MAX_OBJECT_KEYS,
    max_containers: int = MAX_CONTAINERS,
) -> tuple[Any, bool]:
    """``(loads_strict(data, ...), text_shape_is_bounded(data, ...))``, for a whole JSON
    document: the same value and the same refusals, for a fraction of the cost.

    One pass drops the text's strings (:func:`_strings_out`), which both the key count and
    the shape need; a text within the shape's limits (nesting at most `_FAST_MAX_DEPTH`
    deep) is then parsed by ``orjson`` when that is proven to give the strict value
    (:func:`_parse_document`); any other, or any error, is decoded by the strict decoder,
    which words every refusal.
    """
    quick = shape_is_bounded(data, max_depth=max_depth, max_string=max_string)
    skeleton: bytes | None = None
    longest = 0
    colons = data.count(b":")  # counted once: the key count and the duplicate check ask
    if not quick or FAST_DOCUMENT or colons > min(max_keys, max_object_keys):
        skeleton, longest = _strings_out(data, measure=None if quick else max_string + 1)
    # the key count and the shape need only the brackets and colons of the skeleton: kept
    # once (a tenth of its bytes), each of their passes reads that
    structure = None if skeleton is None else skeleton.translate(None, _NOT_STRUCTURE)
    _check_key_count(
        data,
        where,
        max_keys,
        max_object_keys,
        structure,
        colons=colons,
        max_containers=max_containers,
    )
    bounded = quick or _skeleton_shape_is_bounded(structure or b"", longest, max_depth, max_string)
    value = NOT_PROVEN
    if FAST_DOCUMENT and bounded and skeleton is not None and max_depth <= _FAST_MAX_DEPTH:
        value = _parse_document(data, skeleton, colons)
    if value is NOT_PROVEN:
        value = _decode_strict(data, where=where)
    return value, bounded


def shape_is_bounded(data: bytes, *, max_depth: int, max_string: int) -> bool:
    """True when the JSON text `data` cannot break :func:`check_shape`'s limits.

    A string never has more characters than the text has bytes, and every level of nesting
    needs its own ``{`` or ``[`` byte; so a short text with few brackets needs no walk.
    """
    return len(data) <= max_string and data.count(b"{") + data.count(b"[") <= max_depth


#: every byte but the brackets: deleted, they leave a text's nesting
_NOT_BRACKET = bytes(b for b in range(256) if b not in b"{}[]")
#: every byte but the brackets and the colon: deleted from a skeleton (:func:`_strings_out`),
#: they leave what the key count and the shape read of it, in order
_NOT_STRUCTURE = bytes(b for b in range(256) if b not in b"{}[]:")


def text_shape_is_bounded(data: bytes, *, max_depth: int, max_string: int) -> bool:
    """True when the JSON text `data` surely holds no container deeper than `max_depth` and
    no string longer than `max_string` characters: what :func:`check_shape` refuses, proven
    from the bytes with C-speed passes, so the walk over the parsed value can be skipped;
    False when in doubt (walk it). Asked of a text a decoder accepted (its brackets pair up).

    A string has no more characters than bytes between its quotes (escapes blanked two bytes
    for two, as :func:`_outside_strings` does); with the strings dropped, each pass removes
    the empty ``{}`` then ``[]`` pairs, at most two levels of nesting a pass."""
    if shape_is_bounded(data, max_depth=max_depth, max_string=max_string):
        return True
    return _skeleton_shape_is_bounded(
        *_strings_out(data, measure=max_string + 1), max_depth, max_string
    )


def _skeleton_shape_is_bounded(
    skeleton: bytes, longest: int, max_depth: int, max_string: int
) -> bool:
    """:func:`text_shape_is_bounded` from a text's :func:`_strings_out`."""
    if longest > max_string:
        return False
    structure = skeleton.translate(None, _NOT_BRACKET)
    for _ in range(max_depth // 2):
        if not structure:
            return True
        structure = structure.replace(b"{}", b"").replace(b"[]", b"")
    return not structure


def _skip_ws(text: str, pos: int) -> int:
    n = len(text)
    while pos < n and text[pos] in " \t\n\r":
        pos += 1
    return pos


def check_shape(value: Any, *, where: str, max_depth: int, max_string: int) -> None:
    """Refuse nesting deeper than `max_depth` and strings longer than `max_string` chars."""
    stack: list[tuple[Any, int]] = [(value, 1)]
    while stack:
        node, depth = stack.pop()
        if isinstance(node, dict):
            if depth > max_depth:
                raise ReplayError(
                    MALFORMED_TRACE, f"{where}: nesting deeper than {max_depth} levels"
                )
            for key, child in node.items():
                if len(key) > max_string:
                    raise ReplayError(
                        MALFORMED_TRACE, f"{where}: a key is longer than {max_string} characters"
                    )
                if isinstance(child, dict | list):
                    stack.append((child, depth + 1))
                elif isinstance(child, str) and len(child) > max_string:
                    raise ReplayError(
                        MALFORMED_TRACE,
                        f"{where}: the string at key {key[:40]!r} is {len(child)} characters, "
                        f"longer than the limit of {max_string}",
                    )
        elif isinstance(node, list):
            if depth > max_depth:
                raise ReplayError(
                    MALFORMED_TRACE, f"{where}: nesting deeper than {max_depth} levels"
                )
            for child in node:
                if isinstance(child, dict | list):
                    stack.append((child, depth + 1))
                elif isinstance(child, str) and len(child) > max_string:
                    raise ReplayError(
                        MALFORMED_TRACE,
                        f"{where}: a string of {len(child)} characters is longer than the "
                        f"limit of {max_string}",
                    )
        elif isinstance(node, str) and len(node) > max_string:
            raise ReplayError(
                MALFORMED_TRACE, f"{where}: a string longer than {max_string} characters"
            )


def _decode_message(msg: str) -> str:
    """The json module's reason, whole: the ones that end "... at" (the position follows in
    its own str(), which the refusal already gave as line and column) say "here"."""
    return f"{msg[:-3]} here" if msg.endswith(" at") else msg
