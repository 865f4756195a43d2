"""Masking personal data out of what a page or an API response shows of a stored file.

Native traces show event payloads through ``console.redaction`` (the privacy snapshot);
every other format is masked by the path rules (``PRIVACY_PATH_RULES``): a comparison of
two files, field by field, shows ``[redacted]`` at every personal path, for every role (an
admin reads values through a logged reveal, never in passing).
"""

from __future__ import annotations

import dataclasses
from typing import Any

from django.conf import settings

from core.privacy import rules

REDACTED = "[redacted]"
ERASED = "[erased]"


def personal_patterns(fmt: str) -> list[tuple[str, ...]]:
    """The personal paths of a (non-native) format's documents, as patterns."""
    _subject, personal = rules.rule_of(settings.PRIVACY_PATH_RULES, fmt)
    return rules.patterns_of(personal)


def mask_differences(fmt: str, differences: list[Any]) -> list[Any]:
    """Differences (``path``, ``before``, ``after``) with personal values masked."""
    patterns = personal_patterns(fmt)
    if not patterns:
        return differences
    out = []
    for diff in differences:
        base = rules.path_of(diff.path)
        out.append(
            dataclasses.replace(
                diff,
                before=rules.mask(diff.before, base, patterns, REDACTED),
                after=rules.mask(diff.after, base, patterns, REDACTED),
            )
        )
    return out


def mark_erased(sha256: str, location: str, value: Any) -> Any:
    """`value` (what a page shows of one location of a stored file, e.g. an event payload)
    with every erased field reading ``[erased]``, so nothing looks as if it were still held."""
    from privacy.models import values_of_file

    paths = list(
        values_of_file(sha256)
        .filter(location=location, subject__erased_at__isnull=False)
        .values_list("path", flat=True)
    )
    if not paths:
        return value
    return rules.mask(value, (), rules.patterns_of(paths), ERASED)


def trace_personal_texts(trace_pk: int) -> list[str]:
    """The personal values one stored file holds, decrypted (never shown: used to mask what
    else a page derives from the file); erased ones are already gone from it."""
    from privacy.models import PersonalValue
    from privacy.subjects import subject_key
    from privacy.values import _decoded, raw_value

    texts: list[str] = []
    keys: dict[int, bytes | None] = {}
    rows = PersonalValue.objects.filter(
        trace_id=trace_pk, subject__erased_at__isnull=True, ciphertext__isnull=False
    ).select_related("subject__key")
    for value in rows:
        if value.subject_id not in keys:
            keys[value.subject_id] = subject_key(value.subject)
        key = keys[value.subject_id]
        if key is not None:
            text = _decoded(raw_value(value, key))
            if text:
                texts.append(text)
    return sorted(set(texts), key=len, reverse=True)


def mask_deep(value: Any, texts: list[str]) -> Any:
    """Any JSON-shaped value (a format's page: messages, arguments) with every personal value
    masked in every string it holds, keys included."""
    if not texts:
        return value
    if isinstance(value, str):
        for text in texts:
            value = value.replace(text, REDACTED)
        return value
    if isinstance(value, dict):
        return {mask_deep(k, texts): mask_deep(v, texts) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [mask_deep(v, texts) for v in value]
    return value


def mask_texts(facts: dict[str, Any], texts: list[str]) -> dict[str, Any]:
    """Header facts (a format panel: name -> text) with every personal value in them masked,
    wherever the format put it (the panel is the format's own summary, not a document path)."""
    if not texts:
        return facts
    out: dict[str, Any] = {}
    for name, fact in facts.items():
        shown = fact
        if isinstance(shown, str):
            for text in texts:
                shown = shown.replace(text, REDACTED)
        out[name] = shown
    return out
