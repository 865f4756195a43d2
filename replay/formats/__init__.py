"""Trace formats, one module each. `open_trace` detects the format and opens the file.

Adding a format: a module here with `FORMAT`, a `sniff(head: bytes, filename: str) -> bool`
and an `open_*` function, registered in `_FORMATS`; see CONTRIBUTING.md.
"""

from __future__ import annotations

from typing import IO

from replay.errors import MALFORMED_TRACE, ReplayError
from replay.formats import native

SUPPORTED = (native.FORMAT,)


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
