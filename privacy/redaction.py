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

from privacy import rules

REDACTED = "[redacted]"


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
