"""YAML 1.2 (core schema) as npm `yaml` v2's ``parse()`` reads it: the parser AHD hashes with.

PyYAML implements YAML 1.1. Its grammar is reused here (reader, scanner, parser), but the
meaning of the document is rebuilt from the composed nodes the way ``yaml`` v2 builds a JS
value with its defaults (``version: "1.2"``, ``schema: "core"``, ``uniqueKeys: true``,
``merge: false``, ``maxAliasCount: 100``, ``mapAsMap: false``). What differs from PyYAML's
``safe_load`` (each difference has a test vector in ``tests/replay/test_format_ahd.py``):

==========================  ==================================  ===========================
input                       YAML 1.1 (PyYAML)                   YAML 1.2 core (here)
==========================  ==================================  ===========================
``yes no on off y n``       booleans                            strings
``true True TRUE`` ...      booleans                            booleans (only these six)
``~ null Null NULL`` empty  null                                null
``0o17`` / ``017``          string / 15 (octal)                 15 / 17 (decimal)
``0x1F`` ``+12``            31, 12                              31, 12
``0b101`` ``1_000``         5, 1000                             strings
``190:20:30``               685230 (sexagesimal)                string
``1e3`` ``.5`` ``1.``       string, 0.5, 1.0                    1000, 0.5, 1
``.inf -.Inf .NaN``         floats                              floats (JSON writes null)
``2001-12-14``              ``datetime.date``                   string
``<<: *base``               merged into the map                 an ordinary key ``"<<"``
``=``                       error (``!!value``)                 string
``! 12``                    12                                  string ``"12"``
duplicate keys              last one wins                       error (``uniqueKeys``)
``&a`` defined twice        error                               allowed, alias takes latest
aliases                     unlimited                           error past ``maxAliasCount``
non-string keys             Python keys                         ``String(key)``: ``1`` ->
                                                                ``"1"``, null -> ``""``
==========================  ==================================  ===========================

Beyond ``yaml`` v2, a document whose aliases would add more than ``MAX_ALIAS_EXPANSION``
nodes and scalar characters once written out is refused: the alias count alone lets 99
aliases of a large anchor through, and hashing writes every alias out in full.

Explicit tags follow ``yaml`` v2 too: a core tag resolves only when its pattern matches
(``!!int 0x10`` is 16, ``!!float 1`` stays the string ``"1"``), an unknown tag keeps the
string (or the plain map / sequence) with a warning in ``yaml``. The YAML 1.1 types ``yaml``
still builds by explicit tag (``!!timestamp``, ``!!set``, ``!!omap``, ``!!pairs``) become a
Date, a Set or a Map, which AHD's canonicalizeJson hashes as ``{}`` or as index-keyed objects
under rules of their own: refused here. ``!!binary`` is read as yaml v2 reads it under Node,
``Buffer.from(text, "base64")`` (lenient: see :func:`_node_base64`), to ``bytes``, which
``js_sorted`` writes as canonicalizeJson rebuilds a Uint8Array: ``{"0":104,"1":105}``. At
most ``MAX_BINARY_BYTES`` decoded per document; a ``!!binary`` mapping key is refused like a
collection key.

Three places where PyYAML's 1.1 grammar differs are patched: a tab separates tokens inside
a line (``a:<TAB>b``), a tab is whitespace inside a plain scalar (``x<TAB>y``), and U+0085,
U+2028 and U+2029 are content, not line breaks. Every vector in the tests was checked
against ``yaml`` 2.9.1 under Node. Known limits: PyYAML refuses a few control characters
(U+007F, C1 controls) that ``yaml`` accepts, and a mapping key that is itself a collection
(``yaml`` writes it as YAML flow text) is refused.

Pure: no Django, no I/O.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, cast

import yaml
from yaml.composer import Composer
from yaml.events import AliasEvent, MappingStartEvent, ScalarEvent, SequenceStartEvent
from yaml.nodes import MappingNode, Node, ScalarNode, SequenceNode
from yaml.parser import Parser
from yaml.reader import Reader
from yaml.resolver import BaseResolver
from yaml.scanner import Scanner

from core.canonical import es_number_to_string

try:  # libyaml's parser (C), for the texts :func:`_fast_eligible` admits; PyYAML decides the rest
    from yaml._yaml import CParser as _CParser
except ImportError:  # pragma: no cover - exercised only where PyYAML lacks libyaml
    _CParser = None  # type: ignore[misc,assignment]

__all__ = ["MAX_ALIAS_COUNT", "MAX_ALIAS_EXPANSION", "YAML12Error", "load"]

MAX_ALIAS_COUNT = 100  # yaml v2 ToJSOptions.maxAliasCount default
#: What aliases may add to a document once expanded (hashing writes every alias out in
#: full), in nodes plus scalar characters. yaml v2's alias count alone lets 99 aliases of a
#: large anchor through: 1 GB of canonical JSON from a small file.
MAX_ALIAS_EXPANSION = 4_000_000

_T = "tag:yaml.org,2002:"
_PLAIN = "?plain"  # an untagged plain scalar: resolved by the core schema
_STR = _T + "str"
_NULL = re.compile(r"(?:~|[Nn]ull|NULL)?", re.ASCII)
_BOOL = frozenset({"true", "True", "TRUE", "false", "False", "FALSE"})
_INT_OCT = re.compile(r"0o[0-7]+", re.ASCII)
_INT = re.compile(r"[-+]?[0-9]+", re.ASCII)
_INT_HEX = re.compile(r"0x[0-9a-fA-F]+", re.ASCII)
_FLOAT_NAN = frozenset(
    {".nan", ".NaN", ".NAN"} | {s + v for s in ("", "+", "-") for v in (".inf", ".Inf", ".INF")}
)
_FLOAT_EXP = re.compile(r"[-+]?(?:\.[0-9]+|[0-9]+(?:\.[0-9]*)?)[eE][-+]?[0-9]+", re.ASCII)
_FLOAT = re.compile(r"[-+]?(?:\.[0-9]+|[0-9]+\.[0-9]*)", re.ASCII)
_MAX_INT_DIGITS = 4000  # beyond this Python refuses str->int; a double is Infinity anyway

# Tags yaml v2 knows only by explicit tag (its YAML 1.1 "knownTags"): JS Dates, Sets and
# Maps, which JSON.stringify writes in ways nobody means to hash. Refused. (``!!binary``,
# a Uint8Array, is read: see :func:`_node_base64`.)
_UNSUPPORTED_SCALAR_TAGS = frozenset({_T + "timestamp"})
_BINARY = _T + "binary"
#: The bytes every ``!!binary`` value of one document may decode to, together. Hashing
#: writes each byte as ``"index":value`` (up to 13 characters): the cap keeps a token's
#: canonical JSON within tens of megabytes whatever its size.
MAX_BINARY_BYTES = 4 * 1024**2
_UNSUPPORTED_COLLECTION_TAGS = {_T + "set": "map", _T + "omap": "seq", _T + "pairs": "seq"}


class YAML12Error(ValueError):
    """The text is not a YAML 1.2 document ``yaml`` v2 would parse to a JSON-able value."""


def _null(_s: str) -> None:
    return None


def _bool(s: str) -> bool:
    return s[0] in "tT"


def _int_dec(s: str) -> int | float:
    # parseInt(s, 10): leading zeros and a sign are fine; a huge number is a double
    if len(s) > _MAX_INT_DIGITS:
        return float(s)
    return int(s)


def _int_oct(s: str) -> int:
    return int(s[2:], 8)


def _int_hex(s: str) -> int:
    return int(s[2:], 16)


def _float_nan(s: str) -> float:
    if s[-3:].lower() == "nan":
        return math.nan
    return -math.inf if s[0] == "-" else math.inf


def _is_float_nan(s: str) -> bool:
    return s in _FLOAT_NAN


def _is_bool(s: str) -> bool:
    return s in _BOOL


# The core schema's scalar tags, in yaml v2's schema order: (tag, test, resolve).
_CORE = (
    (_T + "null", _NULL.fullmatch, _null),
    (_T + "bool", _is_bool, _bool),
    (_T + "int", _INT_OCT.fullmatch, _int_oct),
    (_T + "int", _INT.fullmatch, _int_dec),
    (_T + "int", _INT_HEX.fullmatch, _int_hex),
    (_T + "float", _is_float_nan, _float_nan),
    (_T + "float", _FLOAT_EXP.fullmatch, float),
    (_T + "float", _FLOAT.fullmatch, float),
)
_CORE_TAGS = frozenset(tag for tag, _, _ in _CORE)


def _resolve_plain(value: str) -> Any:
    for _tag, test, resolve in _CORE:
        if test(value):
            return resolve(value)
    return value


def _resolve_tagged(tag: str, value: str, where: str) -> Any:
    if tag == _STR:
        return value
    if tag in _CORE_TAGS:
        for t, test, resolve in _CORE:
            if t == tag and test(value):
                return resolve(value)
        return value  # yaml v2: "Unresolved tag" warning, the string is kept
    if tag in _UNSUPPORTED_SCALAR_TAGS:
        raise YAML12Error(f"{where}: the explicit tag {_short(tag)} is not supported")
    return value  # unknown tag: warning in yaml v2, the string is kept


# Node's base64 alphabet: the standard one and the URL-safe one at once; 255 elsewhere
_ALPHABET = {c: i for i, c in enumerate(b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz")}
_ALPHABET.update({c: 52 + i for i, c in enumerate(b"0123456789+/")})
_ALPHABET.update({ord("-"): 62, ord("_"): 63})
_UNBASE64 = bytes(_ALPHABET.get(b, 255) for b in range(256))


def _node_base64(text: str) -> bytes:
    """``Buffer.from(text, "base64")`` under Node, what yaml v2's ``!!binary`` resolves to.

    Node's decoder (``src/base64-inl.h``) is lenient: characters outside both alphabets
    (whitespace included) are skipped, decoding stops at the first ``=`` met inside a
    group, a trailing lone character is dropped, and each UTF-16 code unit is read by its
    low byte. Written from that code: groups of four are decoded at once while they are
    clean; a group holding anything else is read character by character (the slow group)
    and the group boundary realigned; after the loop one last slow group reads the tail.
    """
    utf16 = text.encode("utf-16-le", "surrogatepass")
    units = utf16[::2]  # each code unit's low byte
    srclen = len(units)
    size = srclen  # base64_decoded_size: trailing "=" (whole code units) do not count
    if size >= 2 and utf16[2 * size - 2 : 2 * size] == b"=\0":
        size -= 1
        if utf16[2 * size - 2 : 2 * size] == b"=\0":
            size -= 1
    decoded_size = (size // 4) * 3 + (size % 4 + 1) // 2 if srclen >= 2 else 0
    max_k = decoded_size // 3 * 3
    table = _UNBASE64
    out = bytearray()
    i = 0

    def slow_group() -> bool:
        nonlocal i
        hi = 0
        for n in range(4):
            while True:
                c = units[i]
                lo = table[c]
                i += 1
                if lo < 64:
                    break
                if c == 0x3D or i >= srclen:  # "=" or the end: stop decoding
                    return False
            if n == 1:
                out.append(((hi & 0x3F) << 2) | ((lo & 0x30) >> 4))
            elif n == 2:
                out.append(((hi & 0x0F) << 4) | ((lo & 0x3C) >> 2))
            elif n == 3:
                out.append(((hi & 0x03) << 6) | (lo & 0x3F))
            if i >= srclen:
                return False
            hi = lo
        return True

    max_i = srclen // 4 * 4
    while i < max_i and len(out) < max_k:
        a, b, c, d = (table[x] for x in units[i : i + 4])
        if (a | b | c | d) & 0x80:
            if not slow_group():
                return bytes(out)
            max_i = i + (srclen - i) // 4 * 4  # realign
        else:
            out += bytes(
                (((a << 2) | (b >> 4)) & 0xFF, ((b << 4) | (c >> 2)) & 0xFF, ((c << 6) | d) & 0xFF)
            )
            i += 4
    if i < srclen:
        slow_group()
    return bytes(out)


def _short(tag: str) -> str:
    return "!!" + tag[len(_T) :] if tag.startswith(_T) else tag


def _where(node: Node | None) -> str:
    mark = getattr(node, "start_mark", None)
    if mark is None:
        return "document"
    return f"line {mark.line + 1} column {mark.column + 1}"


class _Alias(Node):
    """An alias occurrence (PyYAML returns the anchored node itself; yaml v2 counts them)."""

    id = "alias"

    def __init__(self, name: str, target: Node, start_mark: Any, end_mark: Any) -> None:
        super().__init__(None, target, start_mark, end_mark)  # type: ignore[arg-type]
        self.name = name
        self.target = target


class _Loader(Reader, Scanner, Parser, Composer, BaseResolver):
    """PyYAML's reader, scanner and parser; the composer keeps what yaml v2 needs."""

    def __init__(self, text: str) -> None:
        Reader.__init__(self, text)
        Scanner.__init__(self)
        Parser.__init__(self)
        Composer.__init__(self)
        BaseResolver.__init__(self)
        self.anchored: dict[int, str] = {}

    def scan_to_next_token(self) -> None:
        """PyYAML's, plus YAML 1.2's tabs as separation inside a line (``a:<TAB>b``).

        A tab in a line's indentation stays an error (in block context), as in YAML 1.2.
        """
        if self.index == 0 and self.peek() == "\ufeff":
            self.forward()
        found = False
        while not found:
            while self.peek() == " " or (self.peek() == "\t" and not self._indenting()):
                self.forward()
            if self.peek() == "#":
                while self.peek() not in "\0\r\n\x85\u2028\u2029":
                    self.forward()
            if self.scan_line_break():
                if not self.flow_level:
                    self.allow_simple_key = True
            else:
                found = True

    def scan_plain_spaces(self, indent: int, start_mark: Any) -> list[str] | None:
        """PyYAML's, with tabs as in-line whitespace inside a plain scalar (``x<TAB>y``)."""
        chunks: list[str] = []
        length = 0
        while self.peek(length) in " \t":
            length += 1
        whitespaces = self.prefix(length)
        self.forward(length)
        if self.peek() in "\r\n":
            line_break = self.scan_line_break()
            self.allow_simple_key = True
            if self._document_marker():
                return None
            breaks = []
            while self.peek() in " \r\n":
                if self.peek() == " ":
                    self.forward()
                else:
                    breaks.append(self.scan_line_break())
                    if self._document_marker():
                        return None
            if line_break != "\n":
                chunks.append(line_break)
            elif not breaks:
                chunks.append(" ")
            chunks.extend(breaks)
        elif whitespaces:
            chunks.append(whitespaces)
        return chunks

    def _document_marker(self) -> bool:
        return self.prefix(3) in ("---", "...") and self.peek(3) in "\0 \t\r\n"

    def _indenting(self) -> bool:
        if self.flow_level:
            return False
        line = self.buffer[self.pointer - self.column : self.pointer]
        return line.strip(" \t") == ""

    def compose_node(self, parent: Node | None, index: Any) -> Node:
        if self.check_event(AliasEvent):
            event = self.get_event()
            if event.anchor not in self.anchors:
                raise YAML12Error(
                    f"line {event.start_mark.line + 1} column {event.start_mark.column + 1}: "
                    f"unresolved alias (the anchor must be set before the alias): "
                    f"{event.anchor}"
                )
            return _Alias(
                event.anchor, self.anchors[event.anchor], event.start_mark, event.end_mark
            )
        event = self.peek_event()
        anchor = event.anchor  # a redefined anchor is allowed: later aliases take the latest
        node: Node
        if self.check_event(ScalarEvent):
            node = self.compose_scalar_node(anchor)
        elif self.check_event(SequenceStartEvent):
            node = self.compose_sequence_node(anchor)
        elif self.check_event(MappingStartEvent):
            node = self.compose_mapping_node(anchor)
        else:  # pragma: no cover - the parser emits nothing else here
            raise YAML12Error(f"unexpected event {event!r}")
        if anchor is not None:
            self.anchored[id(node)] = anchor
        return node

    def compose_scalar_node(self, anchor: str | None) -> ScalarNode:  # type: ignore[override]
        event = self.get_event()
        tag = event.tag
        if tag is None:  # plain: style None from PyYAML's parser, "" from libyaml's
            tag = _PLAIN if not event.style else _STR
        elif tag == "!":  # the non-specific tag: a string, whatever it looks like
            tag = _STR
        node = ScalarNode(tag, event.value, event.start_mark, event.end_mark, style=event.style)
        if anchor is not None:
            self.anchors[anchor] = node
        return node


@dataclass
class _Anchor:
    count: int = 1
    alias_count: int = 0
    res: Any = None
    done: bool = False


@dataclass
class _ToJS:
    """yaml v2's ``toJS`` over the composed nodes, in document order."""

    anchored: dict[int, str]
    max_alias_count: int = MAX_ALIAS_COUNT
    anchors: dict[int, _Anchor] = field(default_factory=dict)
    active: set[int] = field(default_factory=set)
    #: puts back the line breaks :func:`_protect_breaks` hid, in a scalar's raw text
    unprotect: Callable[[str], str] = field(default=lambda text: text)
    binary_bytes: int = 0

    def value(self, node: Node) -> Any:
        if isinstance(node, _Alias):
            return self.alias(node)
        data = None
        if id(node) in self.anchored:
            data = self.anchors[id(node)] = _Anchor()
        if isinstance(node, ScalarNode):
            out = self.scalar(node)
            if data is not None:
                data.res, data.done = out, True
            return out
        self.collection_tag(node)
        self.active.add(id(node))
        try:
            if isinstance(node, SequenceNode):
                seq: list[Any] = []
                if data is not None:
                    data.res, data.done = seq, True
                for item in node.value:
                    seq.append(self.value(item))
                return seq
            obj: dict[str, Any] = {}
            if data is not None:
                data.res, data.done = obj, True
            self.mapping(cast(MappingNode, node), obj)
            return obj
        finally:
            self.active.discard(id(node))

    def scalar(self, node: ScalarNode) -> Any:
        if node.tag == _PLAIN:
            return _resolve_plain(node.value)
        if node.tag == _BINARY:
            return self.binary(node)
        return _resolve_tagged(node.tag, node.value, _where(node))

    def binary(self, node: ScalarNode) -> bytes:
        """A ``!!binary`` scalar: the bytes ``Buffer.from(text, "base64")`` gives (a
        Uint8Array in yaml v2), which hashing writes as AHD's canonicalizeJson rebuilds it."""
        data = _node_base64(self.unprotect(node.value))
        self.binary_bytes += len(data)
        if self.binary_bytes > MAX_BINARY_BYTES:
            raise YAML12Error(
                f"{_where(node)}: the !!binary values decode to more than {MAX_BINARY_BYTES} "
                "bytes; refused (hashing writes every byte out as an object entry)"
            )
        return data

    def collection_tag(self, node: Node) -> None:
        kind = "seq" if isinstance(node, SequenceNode) else "map"
        if _UNSUPPORTED_COLLECTION_TAGS.get(node.tag) == kind:
            raise YAML12Error(
                f"{_where(node)}: the explicit tag {_short(node.tag)} is not supported"
            )

    def alias(self, node: _Alias) -> Any:
        target = node.target
        data = self.anchors.get(id(target))
        if data is None:
            self.value(target)
            data = self.anchors[id(target)]
        if id(target) in self.active:
            raise YAML12Error(
                f"{_where(node)}: the alias *{node.name} refers to a node that contains it; "
                "JSON cannot represent a circular structure"
            )
        if self.max_alias_count >= 0:
            data.count += 1
            if data.alias_count == 0:
                data.alias_count = self.alias_count(target)
            if data.count * data.alias_count > self.max_alias_count:
                raise YAML12Error(
                    f"{_where(node)}: Excessive alias count indicates a resource exhaustion "
                    f"attack (more than {self.max_alias_count} alias resolutions)"
                )
        return data.res

    def alias_count(self, node: Node) -> int:
        if isinstance(node, _Alias):
            data = self.anchors.get(id(node.target))
            return data.count * data.alias_count if data is not None else 0
        if isinstance(node, SequenceNode):
            return max((self.alias_count(item) for item in node.value), default=0)
        if isinstance(node, MappingNode):
            return max(
                (max(self.alias_count(k), self.alias_count(v)) for k, v in node.value),
                default=0,
            )
        return 1

    def mapping(self, node: MappingNode, obj: dict[str, Any]) -> None:
        seen: set[tuple[str, Any]] = set()
        for key_node, value_node in node.value:
            key = self.value(key_node)
            if isinstance(key_node, ScalarNode):  # yaml v2 compares scalar keys by value
                ident = _key_identity(key)
                if ident is not None:
                    if ident in seen:
                        raise YAML12Error(f"{_where(key_node)}: Map keys must be unique")
                    seen.add(ident)
            name = _js_key(key, key_node)
            obj[name] = self.value(value_node)  # a later equal JS key overwrites, as in JS


def _key_identity(key: Any) -> tuple[str, Any] | None:
    """What ``a.value === b.value`` compares: JS numbers by value, NaN never equal."""
    if key is None:
        return ("null", None)
    if isinstance(key, bool):
        return ("bool", key)
    if isinstance(key, int | float):
        f = _as_double(key)
        return None if math.isnan(f) else ("num", f)
    if isinstance(key, str):
        return ("str", key)
    return None


def _as_double(n: int | float) -> float:
    try:
        return float(n)
    except OverflowError:
        return math.inf if n > 0 else -math.inf


def _js_key(key: Any, node: Node) -> str:
    """``String(jsKey)`` as yaml v2's ``stringifyKey`` writes a plain-object key."""
    if key is None:
        return ""
    if isinstance(key, str):
        return key
    if isinstance(key, bool):
        return "true" if key else "false"
    if isinstance(key, int | float):
        f = _as_double(key)
        if math.isnan(f):
            return "NaN"
        if math.isinf(f):
            return "Infinity" if f > 0 else "-Infinity"
        return es_number_to_string(f)
    if isinstance(key, bytes):
        raise YAML12Error(
            f"{_where(node)}: a mapping key is a !!binary value; yaml v2 would write it as "
            "YAML flow text, which this verifier does not reproduce"
        )
    raise YAML12Error(
        f"{_where(node)}: a mapping key is a collection; yaml v2 would write it as YAML flow "
        "text, which this verifier does not reproduce"
    )


class _FastLoader(_Loader):
    """:class:`_Loader`'s composer over the events of libyaml's parser (C): the same nodes,
    from the same YAML 1.1 grammar, for the texts :func:`_fast_eligible` admits."""

    def __init__(self, text: str) -> None:  # no Reader/Scanner/Parser state
        Composer.__init__(self)
        BaseResolver.__init__(self)
        self.anchored = {}
        self._events = events = _CParser(text)
        self.check_event = events.check_event  # type: ignore[method-assign]
        self.peek_event = events.peek_event  # type: ignore[method-assign]
        self.get_event = events.get_event  # type: ignore[method-assign]

    def dispose(self) -> None:
        self._events.dispose()


# Where libyaml and PyYAML might read a text differently, or where this module patches
# PyYAML, the fast path declines: tabs, CR and the YAML 1.1 line breaks, a BOM, escapes,
# block scalars, directives, tags, anchors and aliases, complex keys, reserved indicators,
# document markers, characters PyYAML's reader refuses, and lines long enough to reach the
# 1024-character simple-key limit (counted in characters by one, bytes by the other).
_FAST_TEXT = re.compile(
    r"[\n \"#$'()+,\-./0-9:;<=A-Z\[\]^_a-z{}~\xa0-\u2027\u202a-\ud7ff\ue000-\ufefe\uff00-\ufffd]*"
)
_DOCUMENT_MARKER = re.compile(r"^(?:---|\.\.\.)", re.MULTILINE)
_FAST_MAX_LINE = 1000


def _fast_eligible(text: str) -> bool:
    """Whether :func:`load` may parse `text` with libyaml (see ``_FAST_TEXT``)."""
    return (
        _CParser is not None
        and _FAST_TEXT.fullmatch(text) is not None
        and _DOCUMENT_MARKER.search(text) is None
        and (len(text) < _FAST_MAX_LINE or max(map(len, text.split("\n"))) < _FAST_MAX_LINE)
    )


def _load_fast(text: str) -> Any:
    """:func:`load` by libyaml, for an eligible text (no aliases: no expansion to check);
    any error at all is the strict path's to word: then `_NOT_FAST`."""
    loader = None
    try:
        loader = _FastLoader(text)
        node = loader.get_single_node()
        if node is None:
            return None
        return _ToJS(loader.anchored).value(node)
    except Exception:  # any failure: PyYAML's own reading decides and words it
        return _NOT_FAST
    finally:
        if loader is not None:
            loader.dispose()


_NOT_FAST: Any = object()


def load(text: str) -> Any:
    """Parse one YAML 1.2 document to the JSON-shaped value ``yaml.parse(text)`` returns.

    An empty document (or one holding only comments) is ``None``, as ``yaml`` v2 returns
    ``null``. Raises :class:`YAML12Error` for every document ``yaml`` v2 refuses (syntax
    errors, more than one document, duplicate keys, unresolved aliases, alias bombs) and
    for the few constructs this verifier does not reproduce (see the module docstring).
    Aliases share the value of their anchor, as in JavaScript.

    A text in the plain subset ``_fast_eligible`` admits is read by libyaml's parser (C)
    through the same composer; when that fails in any way, PyYAML's reader decides.
    """
    if _fast_eligible(text):
        value = _load_fast(text)
        if value is not _NOT_FAST:
            return value
    return _load_strict(text)


def _load_strict(text: str) -> Any:
    """:func:`load` by PyYAML's pure-Python reader, scanner and parser."""
    text, restore, unprotect = _protect_breaks(text)
    loader = None
    try:
        loader = _Loader(text)
        node = loader.get_single_node()
        if node is None:
            return None
        # refuses circular aliases first
        value = _ToJS(loader.anchored, unprotect=unprotect).value(node)
        _check_expansion(node)
        return restore(value)
    except yaml.MarkedYAMLError as exc:
        raise YAML12Error(_marked_message(exc)) from None
    except yaml.YAMLError as exc:
        raise YAML12Error(str(exc)) from None
    except RecursionError:
        raise YAML12Error("the document nests too deeply") from None
    finally:
        if loader is not None:
            loader.dispose()


def _check_expansion(root: Node) -> None:
    """Refuse a document whose aliases, written out, add more than MAX_ALIAS_EXPANSION
    nodes and characters to it (each anchor's size is worked out once: linear time)."""
    expanded: dict[int, int] = {}

    def size(node: Node, follow: bool) -> int:
        if isinstance(node, _Alias):
            return size(node.target, True) if follow else 1
        if follow and id(node) in expanded:
            return expanded[id(node)]
        if isinstance(node, ScalarNode):
            # a !!binary scalar is written out as up to 13 characters per byte decoded
            weight = 1 + len(node.value) * (10 if node.tag == _BINARY else 1)
        elif isinstance(node, SequenceNode):
            weight = 1 + sum(size(item, follow) for item in node.value)
        else:
            weight = 1 + sum(size(k, follow) + size(v, follow) for k, v in node.value)
        if follow:
            expanded[id(node)] = weight
        return weight

    if size(root, True) - size(root, False) > MAX_ALIAS_EXPANSION:
        raise YAML12Error(
            f"aliases expand the document by more than {MAX_ALIAS_EXPANSION} nodes and "
            "characters (a billion-laughs attack); refused"
        )


_BREAKS_1_1 = "\x85\u2028\u2029"  # line breaks to YAML 1.1 (PyYAML), content in YAML 1.2


def _protect_breaks(
    text: str,
) -> tuple[str, Callable[[Any], Any], Callable[[str], str]]:
    """Hide U+0085/U+2028/U+2029 from PyYAML's 1.1 scanner behind unused private-use
    characters, a function putting them back into the loaded value, and one putting them
    back into a scalar's raw text (a ``!!binary`` is decoded from what the file says)."""
    present = [c for c in _BREAKS_1_1 if c in text]
    if not present:
        return text, _same, _same
    spare = (chr(cp) for cp in range(0xF0000, 0xFFFFE) if chr(cp) not in text)
    there = {c: next(spare) for c in present}
    back = {v: k for k, v in there.items()}
    table = str.maketrans(there)
    inverse = str.maketrans(back)
    memo: dict[int, Any] = {}

    def restore(value: Any) -> Any:
        if isinstance(value, str):
            return value.translate(inverse)
        if isinstance(value, dict | list):
            if id(value) in memo:  # aliases share one value, as in JavaScript
                return memo[id(value)]
            if isinstance(value, list):
                out_list: list[Any] = []
                memo[id(value)] = out_list
                out_list.extend(restore(v) for v in value)
                return out_list
            out: dict[str, Any] = {}
            memo[id(value)] = out
            for k, v in value.items():
                out[k.translate(inverse)] = restore(v)
            return out
        return value

    return text.translate(table), restore, lambda raw: raw.translate(inverse)


def _same(value: Any) -> Any:
    return value


def _marked_message(exc: yaml.MarkedYAMLError) -> str:
    mark = exc.problem_mark or exc.context_mark
    what = "; ".join(p for p in (exc.context, exc.problem) if p)
    if mark is None:
        return what
    return f"line {mark.line + 1} column {mark.column + 1}: {what}"
