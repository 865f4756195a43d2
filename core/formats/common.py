"""What every format package uses, in one place: formats import this module, never each
other and never the registry (``core.formats``).

- :func:`top_level_keys`: the keys a JSON object starts with, from a file's first bytes
  (detection, and a format's own ``sniff``);
- :func:`differences`: two JSON documents compared field by field (JSON pointers), the
  ``compare`` of a format that has nothing better;
- :func:`halt_refusal` / :func:`halts_clear`: the halts check every format runs first;
- :func:`snapshot_id_of`: the content address of a body kept in the snapshot store
  (``sha256:`` over its ``mace-v1`` bytes), whatever format stores it.

Pure: no Django.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Iterable, Iterator
from typing import Any

from core import errors
from core.canonical import CanonicalError, mace_v1
from core.errors import ReplayError
from core.formats.protocol import Difference, VerifyContext
from core.replay.diff import diff
from core.replay.report import Check, ReplayReport

_SPECIAL = re.compile(rb'["{}\[\]]')
_STRING_REST = re.compile(rb'[^"\\]*(?:\\.[^"\\]*)*"', re.DOTALL)
_WS = b" \t\r\n"


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


def differences(a: Any, b: Any) -> list[Difference]:
    return [
        Difference(
            e.path,
            e.kind,
            None if e.kind == "added" else e.before,
            None if e.kind == "removed" else e.after,
        )
        for e in diff(a, b)
    ]


def halt_refusal(
    name: str, trace_id: str | None, ctx: VerifyContext, snapshot_ids: Iterable[str] = ()
) -> ReplayReport | None:
    """The refusal of a halted file (its stored sha256, its id, or a snapshot it names), or
    None."""
    if ctx.halted is None:
        return None
    concerned = [i for i in (ctx.file_id, trace_id, *snapshot_ids) if i]
    why = list(dict.fromkeys(ctx.halted[i] for i in concerned if i in ctx.halted))
    if not why:
        return None
    report = ReplayReport(trace_id=trace_id, format=name, mode=ctx.mode)
    report.checks.append(Check("halts", False, "; ".join(why)))
    return report.fail(
        errors.FORCE_HALT_ACTIVE,
        f"replay is halted until a council FORCE_HALT_CLEAR: {'; '.join(why)}",
    )


HALTS_CLEAR = "no active halt on this file"


def halts_clear(report: ReplayReport, ctx: VerifyContext) -> ReplayReport:
    """The passed halts check, second as in the native order (after the format check), when
    the caller read the ledger."""
    if ctx.halted is not None:
        report.checks.insert(min(1, len(report.checks)), Check("halts", True, HALTS_CLEAR))
    return report


def snapshot_id_of(body: Any) -> str:
    """The content address of a stored body: ``sha256:`` over its ``mace-v1`` bytes. A value
    ``mace-v1`` cannot write is a malformed file (``MALFORMED_TRACE``)."""
    try:
        data = mace_v1(body)
    except CanonicalError as exc:
        raise ReplayError(errors.MALFORMED_TRACE, f"snapshot body: {exc}") from None
    except RecursionError:
        raise ReplayError(
            errors.MALFORMED_TRACE, "snapshot body: nesting is deeper than the canonicaliser allows"
        ) from None
    return "sha256:" + hashlib.sha256(data).hexdigest()
