"""Trace formats, one module each. `open_trace` opens a native trace; `detect_format` tells
the formats `verify` reads apart.

Adding a format: a module here with `FORMAT`, a parser and a verify/replay function returning
`replay.engine.ReplayReport`, named in `VERIFIABLE` and recognised by `detect_format`; see
CONTRIBUTING.md.

- `SUPPORTED`: the formats a trace can be stored in (ingest, the trace list's filter): the
  native "replay-trace" only.
- `VERIFIABLE`: the formats `verify` checks offline, and the upload page and
  `POST /api/traces/verify/` check without storing (`replay.services.trace_check`): the native
  trace, a Paxman ExecutionArtifact (`paxman.py`) and an AHD replay sidecar or report
  (`ahd.py`).

`paxman` and `ahd` build `replay.engine` reports, and the engine imports this package, so
they are imported where they are used, never at the top of this module.
"""

from __future__ import annotations

import io
import json
import re
from collections.abc import Iterator
from typing import IO

from replay.errors import MALFORMED_TRACE, ReplayError
from replay.formats import native

PAXMAN = "paxman-artifact"  # paxman.FORMAT
AHD = "ahd-replay"  # ahd.FORMAT
SUPPORTED = (native.FORMAT,)
VERIFIABLE = (native.FORMAT, PAXMAN, AHD)

#: How much of a file detection reads: enough for the first top-level keys of any format.
SNIFF_BYTES = 1024**2

# Top-level keys that only one format has (the first one met decides).
_NATIVE_KEYS = frozenset(
    {"format", "trace_id", "job", "required_snapshots", "snapshots", "final_answer", "seal"}
    | {"events", "steps", "outputs", "meta"}
)
_PAXMAN_KEYS = frozenset(
    {"capability_versions", "contract_id", "diagnostics", "evidence", "execution_plan"}
    | {"field_results", "normalized_data", "paxman_version", "planner_version"}
    | {"replay_hash", "statistics", "unresolved_fields"}
)
_AHD_KEYS = frozenset(
    {"ahd_version", "ahd_commit", "git_dirty", "node_version", "platform", "invoked_at"}
    | {"argv", "token", "brief", "sampling", "models", "conditions", "backfilled"}
)
_SPECIAL = re.compile(rb'["{}\[\]]')
_STRING_REST = re.compile(rb'[^"\\]*(?:\\.[^"\\]*)*"', re.DOTALL)
_WS = b" \t\r\n"


def open_trace(
    source: IO[bytes],
    filename: str,
    *,
    declared_format: str | None = None,
    limits: native.Limits = native.DEFAULT_LIMITS,
) -> native.NativeTrace:
    """Open `source` as the declared format, or detect it (only the native format today)."""
    if declared_format is not None and declared_format not in SUPPORTED:
        raise ReplayError(
            MALFORMED_TRACE,
            f"unknown format {declared_format!r}; supported: {', '.join(SUPPORTED)}",
        )
    return native.open_native(source, filename, limits)


def top_level_keys(head: bytes) -> Iterator[str]:
    """The keys of the JSON object `head` starts with, as far as `head` reaches.

    A scan, not a parse: nested values are skipped by counting brackets outside strings, so
    a prefix of a large document is enough and nothing is built. Stops quietly at anything
    that is not a JSON object or at the end of `head`.
    """
    pos = 0
    n = len(head)
    if head.startswith(b"\xef\xbb\xbf"):
        pos = 3
    while pos < n and head[pos] in _WS:
        pos += 1
    if pos >= n or head[pos : pos + 1] != b"{":
        return
    depth = 0
    while True:
        m = _SPECIAL.search(head, pos)
        if m is None:
            return
        ch = m.group()
        if ch == b'"':
            end = _STRING_REST.match(head, m.end())
            if end is None:
                return
            pos = end.end()
            if depth == 1:
                after = pos
                while after < n and head[after] in _WS:
                    after += 1
                if head[after : after + 1] == b":":
                    try:
                        key = json.loads(head[m.start() : pos])
                    except ValueError:
                        return
                    yield key
        elif ch in b"{[":
            depth += 1
            pos = m.end()
        else:
            depth -= 1
            pos = m.end()
            if depth <= 0:
                return


def detect_format(head: bytes, filename: str) -> str:
    """Which of `VERIFIABLE` a file is, from its name and its first bytes.

    - `*.replay.json` or `*.md`: an AHD sidecar or report;
    - gzip, or `*.jsonl`: a native trace (no other format is compressed or line-delimited);
    - otherwise the first top-level key that only one format has decides: `format`, `job`,
      `events`... native; `contract_id`, `paxman_version`, `replay_hash`... Paxman;
      `ahd_version`, `token`, `invoked_at`... AHD;
    - nothing telling (not JSON, an empty object): native, whose parser names the problem.
    """
    name = filename.lower()
    if name.endswith((".replay.json", ".md", ".markdown")):
        return AHD
    if head.startswith(native.GZIP_MAGIC) or name.removesuffix(".gz").endswith(".jsonl"):
        return native.FORMAT
    for key in top_level_keys(head):
        if key in _NATIVE_KEYS:
            return native.FORMAT
        if key in _PAXMAN_KEYS:
            return PAXMAN
        if key in _AHD_KEYS:
            return AHD
    return native.FORMAT


class _Replayed(io.RawIOBase):
    """A stream that gives back the sniffed bytes before the rest of the source."""

    def __init__(self, head: bytes, rest: IO[bytes]) -> None:
        self._head = head
        self._rest = rest

    def readable(self) -> bool:
        return True

    def readinto(self, b: bytearray | memoryview) -> int:  # type: ignore[override]
        if self._head:
            n = min(len(b), len(self._head))
            b[:n] = self._head[:n]
            self._head = self._head[n:]
            return n
        data = self._rest.read(len(b))
        b[: len(data)] = data
        return len(data)


def sniff(source: IO[bytes], filename: str) -> tuple[str, IO[bytes]]:
    """Detect the format of `source`; returns it with a stream positioned where it started."""
    try:
        seekable = source.seekable()
    except (AttributeError, ValueError):
        seekable = False
    if seekable:
        start = source.tell()
        head = _read_up_to(source, SNIFF_BYTES)
        source.seek(start)
        return detect_format(head, filename), source
    head = _read_up_to(source, SNIFF_BYTES)
    stream = io.BufferedReader(_Replayed(head, source), buffer_size=1 << 20)
    return detect_format(head, filename), stream


def _read_up_to(source: IO[bytes], size: int) -> bytes:
    """`size` bytes, or fewer at the end: a raw stream may return short reads."""
    chunks: list[bytes] = []
    left = size
    while left > 0:
        chunk = source.read(left)
        if not chunk:
            break
        chunks.append(chunk)
        left -= len(chunk)
    return b"".join(chunks)
