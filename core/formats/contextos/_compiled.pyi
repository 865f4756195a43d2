# The types of _compiled.c's module (mypy reads no C): each function's docstring there says
# what it does. Every argument is positional (METH_FASTCALL).
from collections.abc import Callable
from typing import Any

class Slow(Exception): ...

def write_kept(
    value: Any,
    plist: tuple[str, ...],
    allowed: frozenset[str],
    at: str | None,
    sink: set[str] | None,
    cache: dict[Any, Any] | None,
    /,
) -> bytes: ...
def deeper_than(value: Any, limit: int, depth: int, /) -> bool: ...
def hash_kept(value: Any, plist: tuple[str, ...], allowed: frozenset[str], /) -> str: ...
def chain(
    run_context: Any,
    request: Any,
    envelope_hash: Any,
    envelopes: list[Any],
    record: Any,
    chain_prev_hash: Any,
    start: int,
    stop: int,
    prev: bytes,
    sink: set[str] | None,
    limit: int,
    cache: dict[Any, Any] | None,
    /,
) -> tuple[int, int, bytes, int, str | None, str | None]: ...
def configure(
    js_number: Callable[[Any], str],
    pointer_part: Callable[[str], str],
    sha256: Callable[[bytes], Any],
    kinds: tuple[tuple[tuple[str, ...], frozenset[str], tuple[tuple[bytes, str | None], ...]], ...],
    /,
) -> None: ...
