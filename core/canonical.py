"""Canonical JSON profiles: one pure function per profile, each returning bytes.

This module is deliberately pure: standard library only (plus ``orjson`` when it is
installed, used solely as an accelerator whose output is proven identical), no Django, no
I/O, no global state. Every hash in a trace format is computed with that format's profile,
byte for byte as its reference implementation does it, quirks included (contracts.md §1).

==================  =======================================================================
profile             rules
==================  =======================================================================
``mace-v1``         MACE reference serializer: string values NFKD, floats rounded to 9
                    decimals then Python ``repr``, keys sorted by code point, ``(",", ":")``,
                    raw UTF-8; NaN/Infinity refused.
``python-sorted``   Paxman ``stable_dumps``: ``json.dumps(sort_keys=True, separators=(",",
                    ":"))`` with Python's defaults plus Paxman's conversions for non-JSON
                    types.
``js-sorted``       ``JSON.stringify`` after a recursive ``Object.keys().sort()`` (AHD
                    ``canonicalizeJson``, Verist ``hashValue``), including the key order a JS
                    object really has (array-index keys first).
``contextos``       ``JSON.stringify(obj, Object.keys(obj).sort())`` literally, with the
                    array-replacer allow-list quirk.
``jcs``             RFC 8785 JSON Canonicalization Scheme.
==================  =======================================================================

Inputs are JSON-shaped Python values: ``dict`` (``str`` keys), ``list``/``tuple``, ``str``,
``int``, ``float``, ``bool`` and ``None``. Anything a profile cannot represent raises
:class:`CanonicalError` (a ``ValueError``).
"""

from __future__ import annotations

import dataclasses
import datetime as _dt
import decimal
import enum
import hashlib
import json
import math
import re
import unicodedata
import uuid
from collections.abc import Callable, Iterable
from typing import Any

try:  # optional accelerator for mace-v1; every byte it writes is proven equal (see tests)
    import orjson as _orjson
except ImportError:  # pragma: no cover - exercised only where orjson is absent
    _orjson = None  # type: ignore[assignment]

__all__ = [
    "NUMERIC_EPSILON",
    "PROFILES",
    "CanonicalError",
    "contextos",
    "es_number_to_string",
    "jcs",
    "js_sorted",
    "mace_v1",
    "mace_v1_hash",
    "mace_v1_reference",
    "python_sorted",
    "sha256_prefixed",
]


#: Seed 003 §4: floats are written with NUMERIC_PRECISION = 9 decimals (mace-v1), and two
#: numbers whose canonical values differ by at most NUMERIC_EPSILON are equal *within
#: epsilon*. Hashing never uses it (mace-v1 bytes are exact); replay uses it to compare a
#: recomputed value with the recorded one (`core.formats.native.engine`), and says when it did.
NUMERIC_EPSILON = 1e-9


class CanonicalError(ValueError):
    """A value cannot be written in the requested canonical profile.

    Raised for NaN/Infinity where a profile refuses them (``mace-v1``, ``jcs``), integers
    outside the I-JSON range (``jcs``), lone surrogates where the output must be valid UTF-8,
    non-string object keys, unsupported Python types, and ``contextos(None)`` (JavaScript's
    ``Object.keys(null)`` throws a ``TypeError``).
    """


def sha256_prefixed(data: bytes) -> str:
    """Return ``"sha256:" + <64 lower-case hex>`` of ``data``."""
    return "sha256:" + hashlib.sha256(data).hexdigest()


# ---------------------------------------------------------------------------------------------
# ECMAScript Number::toString and JSON.stringify string quoting
# ---------------------------------------------------------------------------------------------

_isfinite = math.isfinite
_MAX_SAFE = 2**53  # |n| <= 2**53: every integer is exactly a double, str(n) is its ES form


def es_number_to_string(x: float) -> str:
    """Format a finite double exactly as ECMAScript ``Number::toString(x)`` (radix 10).

    Python's ``repr`` already yields the shortest digit string that round-trips (and the
    closest one among ties, as ECMA-262 §6.1.6.1.20 recommends and V8 does), so only the
    layout differs. With ``k`` significant digits ``s`` and decimal exponent ``n`` (value =
    ``s`` × 10^(n−k)): ``k ≤ n ≤ 21`` → digits then ``n−k`` zeros; ``0 < n ≤ 21`` → decimal
    point inside the digits; ``−6 < n ≤ 0`` → ``"0."``, ``−n`` zeros, digits; otherwise
    exponent form ``d[.ddd]e±(n−1)``. ``-0`` is ``"0"``. NaN and ±Infinity are not handled
    here (``"NaN"``/``"Infinity"`` in ES, but JSON writes them as ``null``): raises
    :class:`CanonicalError`.
    """
    if not _isfinite(x):
        raise CanonicalError(f"{x!r} has no JSON number form")
    if x == 0:
        return "0"
    r = repr(float(x))
    if "e" not in r:
        # repr's fixed notation (1e-4 <= |x| < 1e16) lies inside ES's (1e-7 <= |x| < 1e21)
        # and has the same digits and point; ES just never writes a trailing ".0".
        return r[:-2] if r.endswith(".0") else r
    neg = r[0] == "-"
    if neg:
        r = r[1:]
    mant, _, exp = r.partition("e")
    whole, _, frac = mant.partition(".")
    digits = whole + frac
    n = len(whole) + (int(exp) if exp else 0)
    stripped = digits.lstrip("0")
    n -= len(digits) - len(stripped)
    s = stripped.rstrip("0")
    k = len(s)
    if k <= n <= 21:
        out = s + "0" * (n - k)
    elif 0 < n <= 21:
        out = s[:n] + "." + s[n:]
    elif -6 < n <= 0:
        out = "0." + "0" * (-n) + s
    else:
        e = n - 1
        out = (s if k == 1 else s[0] + "." + s[1:]) + ("e+" if e >= 0 else "e-") + str(abs(e))
    return "-" + out if neg else out


# json's own string quoting (ensure_ascii=False) escapes exactly what JSON.stringify
# escapes: '"', '\\', \b \f \n \r \t by name, every other code point < 0x20 as \u00xx with
# lower-case hex, nothing else. They differ only on surrogates, handled below.
_quote_plain: Callable[[str], str] = json.encoder.encode_basestring  # type: ignore[attr-defined]
_SURROGATE = re.compile("[\ud800-\udfff]")


def _pair_surrogates(s: str) -> str:
    """View ``s`` as UTF-16 code units, as JS would: adjacent high+low surrogates pair up."""
    return s.encode("utf-16-le", "surrogatepass").decode("utf-16-le", "surrogatepass")


def _js_quote(s: str) -> str:
    """``JSON.stringify(s)`` (ES2019 well-formed): lone surrogates become ``\\udxxx``."""
    if s.isascii() or _SURROGATE.search(s) is None:
        return _quote_plain(s)
    s = _pair_surrogates(s)
    return _SURROGATE.sub(lambda m: f"\\u{ord(m.group()):04x}", _quote_plain(s))


def _jcs_quote(s: str) -> str:
    """RFC 8785 §3.2.2.2 string: as JSON.stringify, but lone surrogates are refused."""
    if s.isascii() or _SURROGATE.search(s) is None:
        return _quote_plain(s)
    s = _pair_surrogates(s)
    if _SURROGATE.search(s) is not None:
        raise CanonicalError("string contains a lone surrogate (not valid Unicode, RFC 8785)")
    return _quote_plain(s)


def _utf16_key(s: str) -> bytes:
    # UTF-16BE bytes compare exactly like sequences of UTF-16 code units.
    return s.encode("utf-16-be", "surrogatepass")


def _utf16_sorted(keys: Iterable[str]) -> list[str]:
    """Sort like ``Array.prototype.sort()`` on strings: by UTF-16 code units."""
    keys = list(keys)
    if all(k.isascii() for k in keys):  # code point order == code unit order
        keys.sort()
    else:
        keys.sort(key=_utf16_key)
    return keys


def _js_object(o: dict[Any, Any]) -> dict[str, Any]:
    """``o`` as a JS object sees it: string keys only, surrogate pairs spelt as one character.

    A Python key holding a high+low surrogate pair as two code points is the same UTF-16
    string, hence the same JS property, as the astral character: it is re-spelt, and two
    keys that become one raise :class:`CanonicalError`.
    """
    respell = False
    for k in o:
        if not isinstance(k, str):
            raise CanonicalError(f"object key {k!r} is not a string")
        if not k.isascii() and _SURROGATE.search(k) is not None:
            respell = True
    if not respell:
        return o
    out = {_pair_surrogates(k): v for k, v in o.items()}
    if len(out) != len(o):
        raise CanonicalError("two keys are the same UTF-16 string (a surrogate pair spelt twice)")
    return out


_MAX_ARRAY_INDEX = 2**32 - 2


def _is_array_index(key: str) -> bool:
    """True when ``key`` is an array index (ECMA-262 §6.1.7): CanonicalNumericString of an
    integer in 0 .. 2**32-2. Such keys are an object's first own keys, in numeric order."""
    return (
        0 < len(key) <= 10
        and key.isascii()
        and key.isdigit()
        and (key == "0" or key[0] != "0")
        and int(key) <= _MAX_ARRAY_INDEX
    )


def _js_own_key_order(sorted_keys: list[str]) -> list[str]:
    """OrdinaryOwnPropertyKeys of an object built by inserting ``sorted_keys`` in order."""
    index = [k for k in sorted_keys if _is_array_index(k)]
    if not index:
        return sorted_keys
    index.sort(key=int)
    return index + [k for k in sorted_keys if not _is_array_index(k)]


def _js_number(v: int | float) -> str:
    """A JSON number as JSON.stringify writes it after JSON.parse read it (NaN/±Inf → null)."""
    if type(v) is int and -_MAX_SAFE <= v <= _MAX_SAFE:
        return str(v)
    if isinstance(v, float):
        f = float(v)
    else:
        n = int(v)
        if -_MAX_SAFE <= n <= _MAX_SAFE:
            return str(n)
        try:
            f = float(n)  # what JSON.parse makes of it: the nearest double
        except OverflowError:
            return "null"  # beyond the double range JSON.parse gives ±Infinity
    if not _isfinite(f):
        return "null"
    return es_number_to_string(f)


# ---------------------------------------------------------------------------------------------
# js-sorted
# ---------------------------------------------------------------------------------------------


def _js_sorted_write(o: Any, out: list[str]) -> None:
    if isinstance(o, str):
        out.append(_js_quote(o))
    elif o is None:
        out.append("null")
    elif o is True:
        out.append("true")
    elif o is False:
        out.append("false")
    elif isinstance(o, (int, float)):
        out.append(_js_number(o))
    elif isinstance(o, dict):
        o = _js_object(o)
        keys = _js_own_key_order(_utf16_sorted(k for k in o if k != "__proto__"))
        out.append("{")
        first = True
        for k in keys:
            if not first:
                out.append(",")
            first = False
            out.append(_js_quote(k))
            out.append(":")
            _js_sorted_write(o[k], out)
        out.append("}")
    elif isinstance(o, (list, tuple)):
        out.append("[")
        for i, v in enumerate(o):
            if i:
                out.append(",")
            _js_sorted_write(v, out)
        out.append("]")
    elif isinstance(o, bytes):
        # a Uint8Array (npm yaml's !!binary): the sort rebuilds it as a plain object of its
        # indices (Object.keys), which JS lists in index order
        out.append("{" + ",".join([f'"{i}":{b}' for i, b in enumerate(o)]) + "}")
    else:
        raise CanonicalError(f"{type(o).__name__} is not a JSON value")


def js_sorted(obj: Any) -> bytes:
    """``JSON.stringify`` of ``obj`` after recursively sorting object keys (AHD, Verist).

    Reproduces, byte for byte, what Node does for::

        const sort = (v) => Array.isArray(v) ? v.map(sort)
          : v && typeof v === "object"
            ? Object.keys(v).sort().reduce((o, k) => { o[k] = sort(v[k]); return o }, {})
            : v;
        Buffer.from(JSON.stringify(sort(JSON.parse(text))), "utf8")

    - keys are sorted by UTF-16 code units (``Array.prototype.sort``), not code points;
    - but the rebuilt object lists array-index keys (``"0"`` .. ``"4294967294"`` in canonical
      decimal) first, in numeric order, then the other keys in insertion (= sorted) order,
      because that is the own-key order of every JS object: ``{"b","10","2","a"}`` is written
      ``{"2","10","a","b"}``; ``"01"`` and ``"4294967295"`` are ordinary keys;
    - a ``"__proto__"`` key disappears: ``o["__proto__"] = x`` runs the inherited setter
      instead of creating a property, so JSON.stringify never sees it;
    - numbers use ECMAScript ``Number::toString``; an ``int`` is first converted to the
      nearest double as ``JSON.parse`` would (``2**53 + 1`` → ``9007199254740992``), one too
      large for a double becomes ``null`` (Infinity); NaN and ±Infinity are written ``null``,
      as ``JSON.stringify(NaN)`` does;
    - strings are escaped as JSON.stringify does (``\\" \\\\ \\b \\f \\n \\r \\t``, other
      controls ``\\u00xx``, lone surrogates ``\\udxxx``), everything else raw UTF-8; a Python
      string holding a high+low surrogate pair is one astral character, as in UTF-16;
    - ``bytes`` stand for a Uint8Array (npm ``yaml``'s ``!!binary``): the sort rebuilds it
      from ``Object.keys``, so it is written as an object of its indices, in index order:
      ``b"hi"`` is ``{"0":104,"1":105}``.
    """
    out: list[str] = []
    try:
        _js_sorted_write(obj, out)
    except RecursionError as exc:
        raise CanonicalError("value nests too deeply") from exc
    return "".join(out).encode()


# ---------------------------------------------------------------------------------------------
# contextos
# ---------------------------------------------------------------------------------------------

_PROTO = "__proto__"


def _contextos_write(o: Any, plist: list[str], out: list[str]) -> None:
    if isinstance(o, dict):
        o = _js_object(o)
        out.append("{")
        first = True
        for k in plist:
            if k in o:
                v = o[k]
            elif k == _PROTO:
                # Get(obj, "__proto__") on an object without that own key reaches the
                # Object.prototype accessor and returns Object.prototype itself, which the
                # same allow-list serialises as {"__proto__": null} (its own prototype).
                v = {_PROTO: None}
            else:
                continue  # Get() gives undefined: the property is skipped
            if not first:
                out.append(",")
            first = False
            out.append(_js_quote(k))
            out.append(":")
            _contextos_write(v, plist, out)
        out.append("}")
    elif isinstance(o, (list, tuple)):
        out.append("[")
        for i, v in enumerate(o):
            if i:
                out.append(",")
            _contextos_write(v, plist, out)
        out.append("]")
    else:
        _js_primitive_write(o, out)  # primitives: same as JSON.stringify


def _js_primitive_write(o: Any, out: list[str]) -> None:
    """A primitive as ``JSON.stringify`` writes it, for the profiles of JSON documents: the
    ``bytes`` that :func:`js_sorted` takes for npm yaml's ``!!binary`` are no JSON value."""
    if isinstance(o, bytes):
        raise CanonicalError("bytes is not a JSON value")
    _js_sorted_write(o, out)


def contextos(obj: Any) -> bytes:
    """``JSON.stringify(obj, Object.keys(obj).sort())``, exactly as ContextOS calls it.

    An *array* replacer is an allow-list (ECMA-262 §25.5.2.1): its strings, deduplicated,
    become the PropertyList used for **every** object at **every** depth, and they also fix
    the member order (the list's order, i.e. sorted by UTF-16 code units; array-index keys
    get no special treatment here, unlike :func:`js_sorted`). So:

    - nested objects keep only keys that also occur among the top-level keys:
      ``{"b": {"x": 1, "a": 2}, "a": 1}`` → ``{"a":1,"b":{"a":2}}``;
    - arrays are written whole, objects inside them are filtered the same way;
    - a top-level array's list is its indices ``"0", "1", ...`` sorted as strings, so the
      objects in it keep only such keys; a string, number or boolean is written as
      ``JSON.stringify`` writes it (the list does not matter for primitives);
    - ``None`` raises :class:`CanonicalError`: ``Object.keys(null)`` throws a TypeError;
    - if ``"__proto__"`` is in the list, a nested object lacking it gets
      ``"__proto__":{"__proto__":null}`` (``Get`` reaches ``Object.prototype``).

    Numbers and strings are written as in :func:`js_sorted` (NaN/Infinity → ``null``).
    """
    if obj is None:
        raise CanonicalError("Object.keys(null) throws TypeError in JavaScript")
    if isinstance(obj, dict):
        plist = _utf16_sorted(_js_object(obj))
    elif isinstance(obj, (list, tuple)):
        plist = _utf16_sorted(str(i) for i in range(len(obj)))
    else:
        plist = []  # Object.keys of a primitive: irrelevant to how a primitive is written
    out: list[str] = []
    try:
        _contextos_write(obj, plist, out)
    except RecursionError as exc:
        raise CanonicalError("value nests too deeply") from exc
    return "".join(out).encode()


# ---------------------------------------------------------------------------------------------
# jcs (RFC 8785)
# ---------------------------------------------------------------------------------------------


def _jcs_write(o: Any, out: list[str]) -> None:
    if isinstance(o, str):
        out.append(_jcs_quote(o))
    elif o is None:
        out.append("null")
    elif o is True:
        out.append("true")
    elif o is False:
        out.append("false")
    elif isinstance(o, float):
        out.append(es_number_to_string(o))  # refuses NaN and ±Infinity
    elif isinstance(o, int):
        v = int(o)
        if not -_MAX_SAFE <= v <= _MAX_SAFE:
            raise CanonicalError(f"integer {v} is outside ±2**53 (I-JSON, RFC 8785 §3.2.2.3)")
        out.append(str(v))
    elif isinstance(o, dict):
        o = _js_object(o)
        out.append("{")
        first = True
        for k in _utf16_sorted(o):
            if not first:
                out.append(",")
            first = False
            out.append(_jcs_quote(k))
            out.append(":")
            _jcs_write(o[k], out)
        out.append("}")
    elif isinstance(o, (list, tuple)):
        out.append("[")
        for i, v in enumerate(o):
            if i:
                out.append(",")
            _jcs_write(v, out)
        out.append("]")
    else:
        raise CanonicalError(f"{type(o).__name__} is not a JSON value")


def jcs(obj: Any) -> bytes:
    """RFC 8785 JSON Canonicalization Scheme, UTF-8 bytes.

    Members sorted by UTF-16 code units (§3.2.3), no whitespace, ECMAScript number
    serialisation (§3.2.2.3; ``-0`` → ``0``), JSON.stringify string escaping (§3.2.2.2),
    non-ASCII raw. Refused with :class:`CanonicalError`: NaN and ±Infinity; Python integers
    with ``|n| > 2**53`` (I-JSON: beyond that not every integer is a double; ``2**53``
    itself is exact and allowed, floats of any finite magnitude are allowed); lone
    surrogates; non-string keys; non-JSON types.
    """
    out: list[str] = []
    try:
        _jcs_write(obj, out)
    except RecursionError as exc:
        raise CanonicalError("value nests too deeply") from exc
    return "".join(out).encode()


# ---------------------------------------------------------------------------------------------
# python-sorted (Paxman stable_dumps)
# ---------------------------------------------------------------------------------------------


def _paxman_default(o: Any) -> Any:
    if isinstance(o, enum.Enum):
        return o.value
    if isinstance(o, decimal.Decimal):
        return str(o)
    if isinstance(o, (_dt.datetime, _dt.date, _dt.time)):
        return o.isoformat()
    if isinstance(o, uuid.UUID):
        return str(o)
    if isinstance(o, (set, frozenset)):
        try:
            return sorted(o)
        except TypeError:  # mixed types: order by each element's own canonical bytes
            return sorted(o, key=python_sorted)
    if dataclasses.is_dataclass(o) and not isinstance(o, type):
        return dataclasses.asdict(o)
    if isinstance(o, (bytes, bytearray, memoryview)):
        return bytes(o).hex()
    raise TypeError(f"Object of type {type(o).__name__} is not JSON serializable")


def python_sorted(obj: Any) -> bytes:
    """Paxman ``stable_dumps``: ``json.dumps(obj, sort_keys=True, separators=(",", ":"))``.

    Python's defaults are kept: ``ensure_ascii=True`` (non-ASCII and lone surrogates as
    ``\\uXXXX``), floats as ``float.__repr__`` (``1e-07``, ``1e+16``, ``1.0``), NaN and
    ±Infinity allowed and written ``NaN``/``Infinity``/``-Infinity``, keys sorted by code
    point. Non-JSON values are converted (applied recursively, in this order):

    - ``Enum`` → its ``.value`` (``IntEnum``/``StrEnum`` are already ints/strings to json);
    - ``Decimal`` → ``str(d)`` (``Decimal("1.10")`` → ``"1.10"``, a JSON string);
    - ``datetime``/``date``/``time`` → ``.isoformat()``;
    - ``UUID`` → ``str(u)`` (lower-case, hyphenated);
    - ``set``/``frozenset`` → sorted list (elements of mixed types are ordered by their own
      ``python_sorted`` bytes);
    - dataclass instance → ``dataclasses.asdict``;
    - ``bytes``/``bytearray``/``memoryview`` → lower-case hex string.

    Anything else, non-string keys of mixed types, and circular references raise
    :class:`CanonicalError`.
    """
    try:
        return json.dumps(
            obj, sort_keys=True, separators=(",", ":"), default=_paxman_default
        ).encode()
    except (TypeError, ValueError, RecursionError) as exc:
        raise CanonicalError(str(exc)) from exc


# ---------------------------------------------------------------------------------------------
# mace-v1
# ---------------------------------------------------------------------------------------------


def _mace_transform(obj: Any) -> Any:
    """The MACE reference transform: NFKD on string values, floats rounded to 9 decimals."""
    if isinstance(obj, dict):
        return {k: _mace_transform(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_mace_transform(v) for v in obj]
    if isinstance(obj, str):
        return unicodedata.normalize("NFKD", obj)
    if isinstance(obj, float):
        return float(f"{obj:.9f}")
    return obj


def mace_v1_reference(obj: Any) -> bytes:
    """The ``mace-v1`` definition, literally (slow; :func:`mace_v1` must equal it)::

        json.dumps(transform(obj), sort_keys=True, separators=(",", ":"),
                   ensure_ascii=False, allow_nan=False).encode()

    where ``transform`` NFKD-normalises every string *value* (keys untouched) and replaces
    every float ``x`` (not bools, not ints) by ``float(f"{x:.9f}")``. Any error the
    definition raises (NaN/Infinity, lone surrogates that UTF-8 cannot encode, non-JSON
    types, unsortable keys) surfaces as :class:`CanonicalError`.
    """
    try:
        return json.dumps(
            _mace_transform(obj),
            sort_keys=True,
            separators=(",", ":"),
            ensure_ascii=False,
            allow_nan=False,
        ).encode()
    except (TypeError, ValueError, RecursionError) as exc:
        raise CanonicalError(f"mace-v1 cannot serialise this value: {exc}") from exc


class _NotFast(Exception):
    """The value holds something the fast path does not handle; use the reference."""


_normalize = unicodedata.normalize

if _orjson is not None:
    _Fragment = _orjson.Fragment
    _orjson_dumps = _orjson.dumps
    _OPT_SORT_KEYS = _orjson.OPT_SORT_KEYS
    _OrjsonError: type[Exception] = _orjson.JSONEncodeError

    def _mace_float(x: float) -> Any:
        # round(x, 9) and float(f"{x:.9f}") are both CPython's correctly rounded
        # dtoa(mode 3, 9 digits) + strtod: the same double, bit for bit (tested). The result
        # goes to orjson pre-rendered by float.__repr__ (what json.dumps writes), so orjson
        # never formats a float itself (it would write 1e-7 where json writes 1e-07).
        r = round(x, 9)
        if not _isfinite(r):
            raise CanonicalError(f"mace-v1 refuses {x!r} (NaN and Infinity)")
        return _Fragment(repr(r))

    def _mace_prep_value(v: Any) -> Any:
        """The transformed value, or ``v`` itself when the transform leaves it unchanged."""
        t = type(v)
        if t is str:
            # ASCII is NFKD-stable; normalize() returns its argument when already NFKD.
            return v if v.isascii() else _normalize("NFKD", v)
        if t is int or t is bool or v is None:
            return v
        if t is float:
            return _mace_float(v)
        if t is dict:
            return _mace_prep_dict(v)
        if t is list or t is tuple:
            return _mace_prep_list(v)
        raise _NotFast

    def _mace_prep_dict(d: dict[Any, Any]) -> dict[Any, Any]:
        # Copy-on-write walk; scalars are dispatched inline (no call per leaf).
        out: dict[Any, Any] | None = None
        nv: Any
        for k, v in d.items():
            t = type(v)
            if t is str:
                if v.isascii():
                    continue
                nv = _normalize("NFKD", v)
                if nv is v:
                    continue
            elif t is int:
                continue
            elif t is float:  # inlined _mace_float (the hot path's commonest change)
                r = round(v, 9)
                if r - r != 0.0:  # NaN or ±Infinity
                    raise CanonicalError(f"mace-v1 refuses {v!r} (NaN and Infinity)")
                nv = _Fragment(repr(r))
            elif t is dict:
                nv = _mace_prep_dict(v)
                if nv is v:
                    continue
            elif t is list or t is tuple:
                nv = _mace_prep_list(v)
                if nv is v:
                    continue
            elif t is bool or v is None:
                continue
            else:
                raise _NotFast
            if out is None:
                out = dict(d)
            out[k] = nv
        return d if out is None else out

    def _mace_prep_list(seq: list[Any] | tuple[Any, ...]) -> list[Any] | tuple[Any, ...]:
        out: list[Any] | None = None
        nv: Any
        for i, v in enumerate(seq):
            t = type(v)
            if t is str:
                if v.isascii():
                    continue
                nv = _normalize("NFKD", v)
                if nv is v:
                    continue
            elif t is int:
                continue
            elif t is float:  # inlined _mace_float (the hot path's commonest change)
                r = round(v, 9)
                if r - r != 0.0:  # NaN or ±Infinity
                    raise CanonicalError(f"mace-v1 refuses {v!r} (NaN and Infinity)")
                nv = _Fragment(repr(r))
            elif t is dict:
                nv = _mace_prep_dict(v)
                if nv is v:
                    continue
            elif t is list or t is tuple:
                nv = _mace_prep_list(v)
                if nv is v:
                    continue
            elif t is bool or v is None:
                continue
            else:
                raise _NotFast
            if out is None:
                out = list(seq)
            out[i] = nv
        return seq if out is None else out

    def mace_v1(obj: Any) -> bytes:
        """Canonical ``mace-v1`` bytes of ``obj`` — byte-identical to :func:`mace_v1_reference`.

        String values are NFKD-normalised (keys are not), every float is rounded to 9
        decimals (``float(f"{x:.9f}")``) and written as Python's shortest ``repr``
        (``1e-07``, ``1e+16``, ``0.3``, ``-0.0``), keys sorted by code point, separators
        ``(",", ":")``, non-ASCII written raw as UTF-8. NaN and ±Infinity raise
        :class:`CanonicalError` (the console reports ``MALFORMED_TRACE``), as do lone
        surrogates and non-JSON types.

        Fast path: one walk over exact ``dict``/``list``/``tuple``/``str``/``int``/
        ``float``/``bool``/``None`` values, then ``orjson`` with sorted keys. It is equal to
        the reference because (1) floats reach orjson as pre-rendered ``repr`` fragments,
        (2) orjson escapes every non-surrogate code point exactly as
        ``json.dumps(ensure_ascii=False)`` does (checked exhaustively in the tests),
        (3) orjson's key sort (UTF-8 bytes) equals code point order for valid strings, and
        (4) anything else — subclasses, non-``str`` keys, integers beyond 64 bits, lone
        surrogates, deep nesting — makes the fast path bail out to the reference.
        """
        try:
            return _orjson_dumps(_mace_prep_value(obj), option=_OPT_SORT_KEYS)
        except (_NotFast, _OrjsonError, RecursionError):
            return mace_v1_reference(obj)

else:  # pragma: no cover - without orjson the reference is the implementation

    def mace_v1(obj: Any) -> bytes:
        """Canonical ``mace-v1`` bytes of ``obj`` (see :func:`mace_v1_reference`)."""
        return mace_v1_reference(obj)


def mace_v1_hash(obj: Any) -> str:
    """``"sha256:" + hex(sha256(mace_v1(obj)))``."""
    return "sha256:" + hashlib.sha256(mace_v1(obj)).hexdigest()


PROFILES: dict[str, Callable[[Any], bytes]] = {
    "mace-v1": mace_v1,
    "python-sorted": python_sorted,
    "js-sorted": js_sorted,
    "contextos": contextos,
    "jcs": jcs,
}
