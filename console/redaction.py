"""Redacting personal data out of an event payload by a trace's privacy policy.

The policy is the trace's `privacy` snapshot: `{"redact": [JSON Pointer, ...]}` naming the
fields of an event payload that hold personal data. Pure: no Django.

Fail closed: without a readable policy every string in the payload is treated as personal.
"""

from __future__ import annotations

import copy
from typing import Any

from core.replay.diff import PointerError, pointer_join, pointer_split

REDACTED = "[redacted]"


def policy_pointers(privacy_body: Any) -> list[str] | None:
    """The pointers the policy names, or None when there is no usable policy."""
    if not isinstance(privacy_body, dict):
        return None
    pointers = privacy_body.get("redact")
    if not isinstance(pointers, list) or not all(isinstance(p, str) for p in pointers):
        return None
    return pointers


def _string_leaves(value: Any, path: list[str | int]) -> list[str]:
    if isinstance(value, dict):
        return [p for k, v in value.items() for p in _string_leaves(v, [*path, k])]
    if isinstance(value, list):
        return [p for i, v in enumerate(value) for p in _string_leaves(v, [*path, i])]
    return [pointer_join(path)] if isinstance(value, str) else []


def redact(payload: Any, pointers: list[str] | None) -> tuple[Any, list[str]]:
    """(a redacted copy of `payload`, the pointers that were present and redacted)."""
    if pointers is None:
        pointers = _string_leaves(payload, [])
    out = copy.deepcopy(payload)
    done = []
    for pointer in pointers:
        try:
            tokens = pointer_split(pointer)
        except PointerError:
            continue
        if not tokens:
            continue
        node = out
        try:
            for token in tokens[:-1]:
                node = node[int(token)] if isinstance(node, list) else node[token]
            last: Any = int(tokens[-1]) if isinstance(node, list) else tokens[-1]
            node[last]
        except (KeyError, IndexError, ValueError, TypeError):
            continue
        node[last] = REDACTED
        done.append(pointer)
    return out, done
