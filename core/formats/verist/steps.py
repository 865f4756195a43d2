"""The Verist steps the console can re-run: the reference step and its schema checks. Pure."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class VeristStep:
    """A Verist step the registry can run: ``run(input) -> {output, commands?, events?}``,
    with its JSON Schemas (``input_schema`` strict, ``output_schema`` observational)."""

    run: Callable[[Any], Mapping[str, Any]]
    input_schema: Mapping[str, Any] | None = None
    output_schema: Mapping[str, Any] | None = None

    def __call__(self, step_input: Any, state: Any = None, rng: Any = None) -> Mapping[str, Any]:
        return self.run(step_input)


_PARTIALS: dict[int, tuple[Mapping[str, Any], dict[str, Any]]] = {}


def _partial(schema: Mapping[str, Any]) -> dict[str, Any]:
    """A schema with nothing required at the top level (zod's ``.partial()``), made once per
    schema object."""
    held = _PARTIALS.get(id(schema))
    if held is None or held[0] is not schema:
        held = (schema, {k: v for k, v in schema.items() if k != "required"})
        if len(_PARTIALS) < 1024:
            _PARTIALS[id(schema)] = held
    return held[1]


_VALIDATORS: dict[int, tuple[Mapping[str, Any], Any, Any]] = {}


def _validators(schema: Mapping[str, Any]) -> tuple[Any, Any]:
    """(a compiled check, the explaining validator) per schema object, made once; the schema
    is kept with them, so its id stays its own. Schemas are JSON Schema draft-07."""
    held = _VALIDATORS.get(id(schema))
    if held is None or held[0] is not schema:
        import fastjsonschema
        from jsonschema import Draft7Validator

        held = (schema, fastjsonschema.compile(dict(schema)), Draft7Validator(schema))
        if len(_VALIDATORS) < 1024:
            _VALIDATORS[id(schema)] = held
    return held[1], held[2]


def _violations(schema: Mapping[str, Any], value: Any) -> list[str]:
    """Every violation of ``schema`` by ``value`` (none: ``[]``). ``fastjsonschema`` decides
    quickly; ``jsonschema`` words every violation when there are some."""
    import fastjsonschema

    check, validator = _validators(schema)
    try:
        check(value)
    except fastjsonschema.JsonSchemaValueException:
        pass
    else:
        return []
    found = sorted(validator.iter_errors(value), key=lambda e: list(e.absolute_path))
    return [
        f"{'/' + '/'.join(str(p) for p in e.absolute_path) if e.absolute_path else '/'}: "
        f"{e.message}"
        for e in found
    ]


def _utf16(s: str) -> bytes:
    return s.encode("utf-16-be", "surrogatepass")


def reference_extract(step_input: Mapping[str, Any]) -> dict[str, Any]:
    """The reference step ``verify-doc/extract@1.0.0`` (the golden fixtures' step; the same
    rules as ``extract`` in ``tests/replay/fixtures/verist/verist_ref.mjs``)."""
    words = [w for w in step_input["text"].split(" ") if w]
    flagged = any(w in ("refund", "Refund") for w in words)
    output = {
        "documentId": step_input["documentId"],
        "wordCount": len(words),
        "title": " ".join(words[:3]),
        "flagged": flagged,
        "tags": sorted(step_input.get("tags", []), key=_utf16),
    }
    commands = (
        [
            {
                "type": "emit",
                "event": "review.requested",
                "payload": {"documentId": step_input["documentId"]},
            }
        ]
        if flagged
        else [{"type": "complete"}]
    )
    return {
        "output": output,
        "commands": commands,
        "events": [{"type": "extracted", "wordCount": len(words)}],
    }


REFERENCE_STEP = VeristStep(
    reference_extract,
    input_schema={
        "type": "object",
        "properties": {
            "documentId": {"type": "string", "minLength": 1},
            "text": {"type": "string"},
            "tags": {"type": "array", "items": {"type": "string"}},
        },
        "required": ["documentId", "text"],
    },
    output_schema={
        "type": "object",
        "properties": {
            "documentId": {"type": "string"},
            "wordCount": {"type": "integer", "minimum": 0},
            "title": {"type": "string"},
            "flagged": {"type": "boolean"},
            "tags": {"type": "array", "items": {"type": "string"}},
        },
        "required": ["documentId", "wordCount", "title", "flagged", "tags"],
        "additionalProperties": False,
    },
)
REFERENCE_STEP_NAME = "verify-doc/extract@1.0.0"


def register_functions(registry: Any) -> None:
    """Register the reference Verist step (the golden sample replays with it)."""
    registry.register(REFERENCE_STEP_NAME, REFERENCE_STEP)
