"""Verify an artifact from its bytes: a fast parse proven equal to the strict one, then the
checks. Pure."""

from __future__ import annotations

from collections.abc import Mapping
from typing import IO, Any

from core import errors
from core.errors import ReplayError
from core.formats.jsonstrict import (
    FAST_DOCUMENT,
    MAX_KEYS,
    MAX_OBJECT_KEYS,
    check_key_count,
)
from core.formats.paxman.artifact import (
    FORMAT,
    MAX_ARTIFACT_BYTES,
    UNPROTECTED_FIELDS,
    Artifact,
    _canonical,
    _type_check,
    parse,
)
from core.formats.paxman.capabilities import CapabilityRegistry
from core.formats.paxman.checks import _replay, replay
from core.replay.report import AUDIT, Check, ReplayReport

try:  # accelerator for verify_bytes: a value it parses is used only once proven (see below)
    import orjson as _orjson
except ImportError:  # pragma: no cover - exercised only where orjson is absent
    _orjson = None  # type: ignore[assignment]

_KEY_COUNT_SCAN = min(MAX_KEYS, MAX_OBJECT_KEYS)
#: at most this many brackets for the fast path: far below any recursion limit
_FAST_MAX_BRACKETS = 256


#: orjson refuses lone surrogates as loads_strict does (jsonstrict asked it once, at import)
_FAST_PARSE = FAST_DOCUMENT


def _parse_canonical(data: bytes) -> tuple[dict[str, Any], dict[str, bytes], bytes] | None:
    """The artifact, its fields' ``stable_dumps`` bytes and its canonical bytes, when `data`
    is proven to be an artifact that passes the type check, in its canonical spelling; else
    None.

    ``orjson`` parses (C, no duplicate-key check), :func:`_type_check` runs, and the fields'
    bytes joined as ``stable_dumps`` writes the whole artifact must be exactly `data` (one
    or more trailing newlines aside). ``stable_dumps`` writes each key of an object once, in
    ASCII, with floats as ``repr`` (which ``float()`` reads back to the same double), and
    never writes a byte-order mark; so such a text has no duplicate key, no NaN or Infinity,
    no invalid UTF-8, and :func:`parse` (``loads_strict``) reads the same value from it.
    What ``loads_strict`` checks beyond that is checked here first: the key counts
    (``check_key_count``) and nesting depth (bounded by the bracket count; the fast path
    simply declines); lone surrogate escapes are refused by ``orjson`` itself (the fast path
    is off with an ``orjson`` that does not, `jsonstrict.orjson_refuses_lone_surrogates`). Anything
    else, errors included, is None, and :func:`verify_bytes` takes the strict path, which
    decides and words every refusal.
    """
    if not _FAST_PARSE or len(data) - len(data.translate(None, b"{[")) > _FAST_MAX_BRACKETS:
        return None
    try:
        if data.count(b":") > _KEY_COUNT_SCAN:  # check_key_count's own shortcut, inline
            check_key_count(data, where="artifact")
        doc = _orjson.loads(data)
        if type(doc) is not dict:
            return None
        serialised = _type_check(doc)
    except (ReplayError, _orjson.JSONDecodeError):
        return None
    canonical = _canonical(serialised)
    if data.rstrip(b"\n") != canonical:
        return None
    return doc, serialised, canonical


def verify_bytes(
    data: bytes,
    *,
    contract: Any = None,
    registry: Mapping[str, Any] | CapabilityRegistry | None = None,
    mode: str = AUDIT,
) -> ReplayReport:
    """Parse and replay; a document that does not parse fails the type check."""
    proven = _parse_canonical(data)
    if proven is not None:
        doc, serialised, canonical = proven
        return _replay(
            Artifact(doc, data),
            serialised,
            canonical,
            contract=contract,
            registry=registry,
            mode=mode,
        )
    try:
        artifact = parse(data)
    except ReplayError as exc:
        report = ReplayReport(trace_id=None, format=FORMAT, mode=mode)
        report.unprotected_fields = list(UNPROTECTED_FIELDS)
        report.checks.append(Check("type", False, exc.message))
        return report.fail(exc.code, exc.message)
    return replay(artifact, contract=contract, registry=registry, mode=mode)


def verify_stream(
    source: IO[bytes],
    *,
    contract: Any = None,
    registry: Mapping[str, Any] | CapabilityRegistry | None = None,
    mode: str = AUDIT,
) -> ReplayReport:
    """:func:`verify_bytes` over a stream, refusing artifacts beyond the size limit."""
    data = source.read(MAX_ARTIFACT_BYTES + 1)
    if len(data) > MAX_ARTIFACT_BYTES:
        data = b""
        report = ReplayReport(trace_id=None, format=FORMAT, mode=mode)
        message = f"artifact: larger than {MAX_ARTIFACT_BYTES} bytes"
        report.checks.append(Check("type", False, message))
        return report.fail(errors.MALFORMED_TRACE, message)
    return verify_bytes(data, contract=contract, registry=registry, mode=mode)
