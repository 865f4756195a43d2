"""Which values of a stored file are personal data, and whose.

A native trace says it in its `privacy` snapshot: ``redact`` names the pointers of an event
payload that hold personal data (``console.redaction``), and ``subject`` (a pointer or a
list of them, this console's extension) names the one that holds the subject's identifier
(an e-mail address, a customer number). Every redacted value of an event belongs to the
subject its event names. A policy without ``subject`` falls back to the configured default
pointers (``PRIVACY_SUBJECT_POINTERS``, ``["/user/email"]``).

Any other format is covered by path rules (``PRIVACY_PATH_RULES``): per format name,
``{"subject": [pointer, ...], "personal": [pointer, ...]}`` over the whole document, where
a token ``*`` matches any key or index; the file's values at ``personal`` (and at
``subject``) belong to the subject named at the first ``subject`` pointer present.

Pure: no Django.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from core.privacy.spans import Path, Span, jsonl_lines, pointer, string_spans

NATIVE = "replay-trace"


@dataclass(frozen=True)
class Found:
    """One personal value of a file: whose, where (for people and for the byte store)."""

    identifier: str  # the subject's identifier, as found
    location: str  # "event 12", "document"
    path: str  # JSON pointer inside the location (the payload for an event)
    start: int  # byte span of the value's contents in the (decompressed) file
    end: int
    value: str
    raw: bytes = b""  # the value's bytes as the file holds them


def _tokens(ptr: str) -> tuple[str, ...]:
    if not ptr.startswith("/"):
        return ()
    return tuple(t.replace("~1", "/").replace("~0", "~") for t in ptr[1:].split("/"))


def _under(path: Path, pointers: Sequence[tuple[str, ...]]) -> bool:
    """Whether a value at `path` can hold one of `pointers` (a proper prefix of one)."""
    n = len(path)
    return any(
        len(q) > n and all(a == str(b) for a, b in zip(q, path, strict=False)) for q in pointers
    )


def _has_string(value: Any, tokens: tuple[str, ...]) -> bool:
    for token in tokens:
        if isinstance(value, dict) and token in value:
            value = value[token]
        elif isinstance(value, list) and token.isdigit() and int(token) < len(value):
            value = value[int(token)]
        else:
            return False
    return isinstance(value, str)


def _matches(pattern: tuple[str, ...], path: Path) -> bool:
    return len(pattern) == len(path) and all(
        p == "*" or p == str(t) for p, t in zip(pattern, path, strict=True)
    )


def policy_of(header: Mapping[str, Any], stored: Any = None) -> Any:
    """The native header's privacy snapshot body (inline, else `stored` by snapshot id)."""
    for snap in header.get("snapshots", []) if isinstance(header, Mapping) else []:
        if isinstance(snap, Mapping) and snap.get("kind") == "privacy":
            if "body" in snap:
                return snap["body"]
            return (stored or {}).get(snap.get("snapshot_id"))
    return None


def native_pointers(policy: Any, default_subject: Sequence[str]) -> tuple[list[str], list[str]]:
    """(subject pointers, personal pointers) of a native privacy policy; ([], []) without
    a usable one."""
    if not isinstance(policy, Mapping):
        return [], []
    redact = policy.get("redact")
    if not isinstance(redact, list) or not all(isinstance(p, str) for p in redact):
        return [], []
    subject = policy.get("subject", list(default_subject))
    if isinstance(subject, str):
        subject = [subject]
    if not isinstance(subject, list) or not all(isinstance(p, str) for p in subject):
        return [], []
    personal = list(dict.fromkeys([*subject, *redact]))
    return subject, personal


def _group(spans: Sequence[tuple[str, Span, str]], subject: Sequence[str]) -> list[Found]:
    """spans as (location, span, pointer inside the location): each location's values go to
    the identifier at its first subject pointer present; a location without one is skipped."""
    by_location: dict[str, list[tuple[Span, str]]] = {}
    for location, span, ptr in spans:
        by_location.setdefault(location, []).append((span, ptr))
    out: list[Found] = []
    for location, items in by_location.items():
        ident = None
        for want in subject:
            pattern = _tokens(want)
            values = [s.value for s, ptr in items if _matches(pattern, _tokens(ptr))]
            ident = next((v for v in values if v.strip()), None)
            if ident is not None:
                break
        if ident is None:
            continue
        out.extend(Found(ident, location, ptr, s.start, s.end, s.value, s.raw) for s, ptr in items)
    return out


def native_found(
    data: bytes,
    encoding: str,
    policy: Any,
    default_subject: Sequence[str],
    doc: Mapping[str, Any] | None = None,
) -> list[Found]:
    """The personal values of a native trace's (decompressed) bytes (`doc`: the document
    already parsed, when the caller has it)."""
    subject, personal = native_pointers(policy, default_subject)
    if not personal:
        return []
    if encoding.startswith("jsonl"):
        return [
            f
            for offset, line in jsonl_lines(data)
            for f in native_line_found(line, offset, subject, personal)
        ]
    wanted_ptrs = set(personal)
    spans: list[tuple[str, Span, str]] = []
    if doc is None:
        doc = json.loads(data)
    seqs = [e.get("seq") if isinstance(e, dict) else None for e in doc.get("events", [])]

    def wanted(p: Path) -> bool:
        return (
            len(p) > 3 and p[0] == "events" and p[2] == "payload" and pointer(p[3:]) in wanted_ptrs
        )

    prefixes = [_tokens(ptr) for ptr in personal]
    events = doc.get("events", []) if isinstance(doc, Mapping) else []
    holds = [
        isinstance(e, Mapping) and any(_has_string(e.get("payload"), q) for q in prefixes)
        for e in events
    ]

    def descend(p: Path) -> bool:
        if len(p) == 2:  # an event: walked only when its payload holds a personal value
            return p[0] == "events" and isinstance(p[1], int) and p[1] < len(holds) and holds[p[1]]
        if len(p) < 3:
            return p[:1] in ((), ("events",))
        return p[0] == "events" and p[2] == "payload" and _under(p[3:], prefixes)

    for span in string_spans(data, wanted, descend=descend):
        index = span.path[1]
        seq = seqs[index] if isinstance(index, int) and index < len(seqs) else index
        spans.append((f"event {seq}", span, pointer(span.path[3:])))
    return _group(spans, subject)


def native_line_found(
    line: bytes, offset: int, subject: Sequence[str], personal: Sequence[str]
) -> list[Found]:
    """The personal values of one JSON Lines record of a native trace (its offset in the
    file given): an event's payload values at the `personal` pointers, else none."""
    obj = json.loads(line)
    if not (isinstance(obj, dict) and obj.get("record") == "event"):
        return []
    if not any(_has_string(obj.get("payload"), _tokens(p)) for p in personal):
        return []  # nothing to find: the line is not walked
    wanted_ptrs = set(personal)
    prefixes = [_tokens(ptr) for ptr in personal]
    spans = [
        (f"event {obj.get('seq')}", span, pointer(span.path[1:]))
        for span in string_spans(
            line,
            lambda p: len(p) > 1 and p[0] == "payload" and pointer(p[1:]) in wanted_ptrs,
            base=offset,
            descend=lambda p: not p or (p[0] == "payload" and _under(p[1:], prefixes)),
        )
    ]
    return _group(spans, subject)


def rule_of(rules: Mapping[str, Any], fmt: str) -> tuple[list[str], list[str]]:
    """(subject pointers, personal pointers) the path rules name for a format."""
    rule = rules.get(fmt) if isinstance(rules, Mapping) else None
    if not isinstance(rule, Mapping):
        return [], []
    subject = [p for p in rule.get("subject", []) if isinstance(p, str)]
    personal = [p for p in rule.get("personal", []) if isinstance(p, str)]
    return subject, list(dict.fromkeys([*subject, *personal]))


def ruled_found(data: bytes, subject: Sequence[str], personal: Sequence[str]) -> list[Found]:
    """The personal values of a JSON document by path rules (location "document")."""
    wanted = list(dict.fromkeys([*subject, *personal]))
    if not wanted:
        return []
    patterns = [_tokens(p) for p in wanted]

    def descend(path: Path) -> bool:
        return any(len(q) > len(path) and _matches(q[: len(path)], path) for q in patterns)

    spans = [
        ("document", span, pointer(span.path))
        for span in string_spans(
            data, lambda p: any(_matches(q, p) for q in patterns), descend=descend
        )
    ]
    return _group(spans, subject)


def mask(value: Any, base: Path, patterns: Sequence[tuple[str, ...]], mark: str) -> Any:
    """A copy of `value` (found at `base` in its document) with every string at a path
    one of `patterns` matches replaced by `mark`."""
    if isinstance(value, dict):
        return {k: mask(v, (*base, k), patterns, mark) for k, v in value.items()}
    if isinstance(value, list):
        return [mask(v, (*base, i), patterns, mark) for i, v in enumerate(value)]
    if isinstance(value, str) and any(_matches(p, base) for p in patterns):
        return mark
    return value


def patterns_of(pointers: Sequence[str]) -> list[tuple[str, ...]]:
    return [_tokens(p) for p in pointers]


def path_of(ptr: str) -> Path:
    """A JSON pointer as a path (tokens that are digits compare as indexes either way)."""
    return _tokens(ptr) if ptr else ()
