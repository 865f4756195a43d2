"""JSON Lines records read one at a time, in this process: a line strictly parsed and
bounded (:func:`_parse_line`), and the records of a stream after its header, validated, in
file order (:func:`_serial_rows`).

Pure: no Django.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import IO, Any

from core.errors import ReplayError
from core.formats.jsonstrict import (
    NOT_PROVEN,
    check_key_count,
    check_shape,
    loads_strict,
    parse_compact,
)
from core.formats.native.schema import (
    _expect,
    _malformed,
    _type_name,
    validate_event,
    validate_output,
    validate_step,
)
from core.formats.native.trace import Limits, Row

_WHITESPACE = frozenset(b" \t\n\r\x0b\x0c")  # what bytes.strip() removes


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


def _long_line(lineno: int, limit: int) -> ReplayError:
    return _malformed(f"line {lineno}: longer than {limit} bytes; refused before reading it")


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
            raise _long_line(lineno, max_line)
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
