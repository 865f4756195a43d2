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

from privacy.spans import Path, Span, jsonl_spans, pointer, string_spans

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


def _tokens(ptr: str) -> tuple[str, ...]:
    if not ptr.startswith("/"):
        return ()
    return tuple(t.replace("~1", "/").replace("~0", "~") for t in ptr[1:].split("/"))


def _matches(pattern: tuple[str, ...], path: Path) -> bool:
    return len(pattern) == len(path) and all(
        p == "*" or p == str(t) for p, t in zip(pattern, path, strict=True)
    )


def policy_of(header: Mapping[str, Any], stored: Mapping[str, Any] | None = None) -> Any:
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
        out.extend(Found(ident, location, ptr, s.start, s.end, s.value) for s, ptr in items)
    return out


def native_found(
    data: bytes, encoding: str, policy: Any, default_subject: Sequence[str]
) -> list[Found]:
    """The personal values of a native trace's (decompressed) bytes."""
    subject, personal = native_pointers(policy, default_subject)
    if not personal:
        return []
    wanted_ptrs = set(personal)
    spans: list[tuple[str, Span, str]] = []
    if encoding.startswith("jsonl"):

        def for_line(obj: Any):
            if not (isinstance(obj, dict) and obj.get("record") == "event"):
                return None
            return lambda p: len(p) > 1 and p[0] == "payload" and pointer(p[1:]) in wanted_ptrs

        for obj, span in jsonl_spans(data, for_line):
            spans.append((f"event {obj.get('seq')}", span, pointer(span.path[1:])))
    else:
        doc = json.loads(data)
        seqs = [e.get("seq") if isinstance(e, dict) else None for e in doc.get("events", [])]

        def wanted(p: Path) -> bool:
            return (
                len(p) > 3
                and p[0] == "events"
                and p[2] == "payload"
                and pointer(p[3:]) in wanted_ptrs
            )

        for span in string_spans(data, wanted):
            index = span.path[1]
            seq = seqs[index] if isinstance(index, int) and index < len(seqs) else index
            spans.append((f"event {seq}", span, pointer(span.path[3:])))
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
    spans = [
        ("document", span, pointer(span.path))
        for span in string_spans(data, lambda p: any(_matches(q, p) for q in patterns))
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
