"""Where a string value sits in the bytes of a JSON document: its exact byte span.

`string_spans(data, wanted)` walks one JSON text and returns, for every string value whose
path `wanted(path)` accepts, the byte range of its contents (between the quotes, escapes
as written) and its decoded value. Cutting those bytes out of a stored file and putting
them back gives the same bytes, so the file's SHA-256 still holds after reassembly.

`jsonl_spans` does the same for each line of a JSON Lines text (paths start at the line's
own object; the line's parsed value is handed to `wanted_for_line` to choose a predicate).

Pure: no Django.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

Path = tuple[str | int, ...]

_WS = re.compile(rb"[ \t\n\r]*")
_STRING = re.compile(rb'"((?:[^"\\]|\\.)*)"', re.DOTALL)
_SCALAR = re.compile(rb"-?(?:0|[1-9][0-9]*)(?:\.[0-9]+)?(?:[eE][+-]?[0-9]+)?|true|false|null")


class SpanError(ValueError):
    """The text is not the JSON the scanner expects."""


@dataclass(frozen=True)
class Span:
    path: Path
    start: int  # first byte of the contents (after the opening quote)
    end: int  # the closing quote's offset
    value: str
    raw: bytes = b""  # the contents as written (escapes and all)


def pointer(path: Path) -> str:
    """The JSON Pointer (RFC 6901) of a path."""
    return "".join("/" + str(t).replace("~", "~0").replace("/", "~1") for t in path)


def _decode(raw: bytes) -> str:
    if b"\\" not in raw:
        try:
            return raw.decode("utf-8")
        except UnicodeDecodeError:
            raise SpanError("a string is not UTF-8") from None
    return json.loads(b'"' + raw + b'"')


_DECODER = json.JSONDecoder()


def _reason(exc: ValueError) -> str:
    """A decoding error's message: JSON's own without its position, else the error's text
    (bytes that are not UTF-8 raise ``UnicodeDecodeError``, which has no ``msg``)."""
    return exc.msg if isinstance(exc, json.JSONDecodeError) else str(exc)


class _Scanner:
    def __init__(
        self,
        data: bytes,
        wanted: Callable[[Path], bool],
        base: int,
        descend: Callable[[Path], bool] | None,
    ) -> None:
        self.data = data
        self.wanted = wanted
        self.base = base
        self.descend = descend
        # latin-1 maps byte i to character i: the C decoder skips a subtree and its end is
        # the byte offset (a UTF-8 sequence reads as characters a JSON string allows)
        self.text = data.decode("latin-1") if descend is not None else ""
        self.found: list[Span] = []

    def skip(self, i: int) -> int:
        try:
            return _DECODER.raw_decode(self.text, i)[1]
        except ValueError as exc:
            raise SpanError(f"byte {self.base + i}: {_reason(exc)}") from None

    def ws(self, i: int) -> int:
        return _WS.match(self.data, i).end()  # type: ignore[union-attr]

    def string(self, i: int) -> tuple[int, int, int]:
        m = _STRING.match(self.data, i)
        if m is None:
            raise SpanError(f"byte {self.base + i}: expected a string")
        return m.start(1), m.end(1), m.end()

    def value(self, i: int, path: Path) -> int:
        data = self.data
        i = self.ws(i)
        if i >= len(data):
            raise SpanError("unexpected end of the text")
        c = data[i]
        if c in (0x7B, 0x5B) and self.descend is not None and not self.descend(path):
            return self.skip(i)
        if c == 0x7B:  # {
            i = self.ws(i + 1)
            if data[i : i + 1] == b"}":
                return i + 1
            while True:
                i = self.ws(i)
                ks, ke, i = self.string(i)
                key = _decode(data[ks:ke])
                i = self.ws(i)
                if data[i : i + 1] != b":":
                    raise SpanError(f"byte {self.base + i}: expected ':'")
                i = self.value(i + 1, (*path, key))
                i = self.ws(i)
                if data[i : i + 1] == b",":
                    i += 1
                    continue
                if data[i : i + 1] == b"}":
                    return i + 1
                raise SpanError(f"byte {self.base + i}: expected ',' or '}}'")
        if c == 0x5B:  # [
            i = self.ws(i + 1)
            if data[i : i + 1] == b"]":
                return i + 1
            index = 0
            while True:
                i = self.value(i, (*path, index))
                index += 1
                i = self.ws(i)
                if data[i : i + 1] == b",":
                    i += 1
                    continue
                if data[i : i + 1] == b"]":
                    return i + 1
                raise SpanError(f"byte {self.base + i}: expected ',' or ']'")
        if c == 0x22:  # "
            s, e, after = self.string(i)
            if self.wanted(path):
                raw = data[s:e]
                self.found.append(Span(path, self.base + s, self.base + e, _decode(raw), raw))
            return after
        m = _SCALAR.match(data, i)
        if m is None:
            raise SpanError(f"byte {self.base + i}: unexpected {data[i : i + 1]!r}")
        return m.end()


def string_spans(
    data: bytes,
    wanted: Callable[[Path], bool],
    *,
    base: int = 0,
    descend: Callable[[Path], bool] | None = None,
) -> list[Span]:
    """Every wanted string value of one JSON text, in file order. ``descend(path)``, when
    given, says whether an object or array at `path` can hold a wanted value; one that
    cannot is skipped by the C decoder (checked as JSON, not walked here)."""
    scanner = _Scanner(data, wanted, base, descend)
    end = scanner.ws(scanner.value(0, ()))
    if end != len(data):
        raise SpanError(f"byte {base + end}: trailing data after the JSON value")
    return scanner.found


def jsonl_lines(data: bytes) -> Iterator[tuple[int, bytes]]:
    """(offset, line without its newline) for each non-blank line."""
    offset = 0
    for line in data.splitlines(keepends=True):
        stripped = line.rstrip(b"\r\n")
        if stripped.strip():
            yield offset, stripped
        offset += len(line)


def jsonl_spans(
    data: bytes, wanted_for_line: Callable[[Any], Callable[[Path], bool] | None]
) -> list[tuple[Any, Span]]:
    """(the line's parsed value, span) for every wanted string of every line."""
    out: list[tuple[Any, Span]] = []
    for offset, line in jsonl_lines(data):
        try:
            parsed = json.loads(line)
        except ValueError as exc:
            raise SpanError(f"byte {offset}: a line is not JSON ({_reason(exc)})") from None
        wanted = wanted_for_line(parsed)
        if wanted is None:
            continue
        out.extend((parsed, s) for s in string_spans(line, wanted, base=offset))
    return out
