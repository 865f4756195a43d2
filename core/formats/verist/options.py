"""Verist's ``recompute`` options (``--strict-output`` ...), as the console takes them. Pure."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from core.formats.protocol import OptionError, ReplayOption, is_boolean


@dataclass(frozen=True)
class RecomputeOptions:
    """Verist's ``recompute`` options, with its defaults.

    ``capture_artifacts``: ``False``, ``True`` (full content) or ``{"hashOnly": True}``.
    """

    validate: bool = True
    strict_output: bool = False
    capture_artifacts: bool | Mapping[str, Any] = False


def _is_capture(value: Any) -> bool:
    """``captureArtifacts``: a boolean, or CaptureOptions ``{"hashOnly"?: boolean}``."""
    if isinstance(value, bool):
        return True
    return (
        isinstance(value, Mapping)
        and set(value) <= {"hashOnly"}
        and all(isinstance(v, bool) for v in value.values())
    )


#: the recompute options a replay takes, per request, in Verist's spelling and defaults
REPLAY_OPTIONS = (
    ReplayOption(
        "validate",
        True,
        "a boolean",
        "schema validation: the input schema is a strict gate (MALFORMED_TRACE at input), "
        "the output schema observational",
        is_boolean,
    ),
    ReplayOption(
        "strictOutput",
        False,
        "a boolean",
        "the output checked against the full output schema instead of the partial one "
        "(observational; requires validate)",
        is_boolean,
    ),
    ReplayOption(
        "captureArtifacts",
        False,
        'a boolean or {"hashOnly": boolean}',
        "the recomputed output captured as a step-output artifact in the report (true: with "
        'its content; {"hashOnly": true}: its hash only)',
        _is_capture,
        schema={
            "oneOf": [
                {"type": "boolean"},
                {
                    "type": "object",
                    "properties": {"hashOnly": {"type": "boolean"}},
                    "additionalProperties": False,
                },
            ]
        },
    ),
)
STRICT_OUTPUT_NEEDS_VALIDATE = (
    "strictOutput requires validate: the output schema is checked only when validate is true"
)


def check_options(values: Mapping[str, Any]) -> None:
    """Refuse what Verist's options do not allow together (``strictOutput`` needs
    ``validate``)."""
    if values.get("strictOutput") and not values.get("validate", True):
        raise OptionError(STRICT_OUTPUT_NEEDS_VALIDATE, option="strictOutput")


def recompute_options(values: Mapping[str, Any]) -> RecomputeOptions:
    """The :class:`RecomputeOptions` of a run's stored options (Verist's names); an option
    not stored (a run from before options were chosen) is Verist's default."""
    return RecomputeOptions(
        validate=values.get("validate", True),
        strict_output=values.get("strictOutput", False),
        capture_artifacts=values.get("captureArtifacts", False),
    )
