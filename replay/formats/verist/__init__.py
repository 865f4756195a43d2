"""Verist snapshots ("verist-snapshot"): verify, replay, recompute and compare as Verist does.

A Verist snapshot (seed 002) is one step's execution captured for replay::

    {"workflowId": str, "workflowVersion": str, "stepName": str, "input": any,
     "inputHash": "sha256:<hex>", "artifacts": [{"hash": "sha256:<hex>", "kind": str,
     "content"?: any}], "capturedAt": int (Unix ms)}

Two spellings are read: the bare snapshot, and the Verist CLI's baseline envelope
``{"format": "verist-baseline@1", "snapshot": {...}, "metadata": {"inputPath": str,
"label"?: str, "commandsCaptured": bool, "meta"?: {str: str}}}``, which holds exactly one
``step-output`` artifact and at most one ``step-commands`` artifact. Another
``verist-baseline@N`` is refused with ``UNSUPPORTED_SCHEMA_VERSION``.

Every hash is Verist's ``hashValue``: ``"sha256:" + hex(sha256(js_sorted(value)))``
(``JSON.stringify`` after ``Object.keys().sort()``, :func:`replay.canonical.js_sorted`).

The checks run in this order; the first that fails names the report's code, and the report
keeps Verist's own word for it (``report.verist["code"]``) beside the console's status:

1. ``format``: the parse (strict JSON, bounded, every field's type) -> ``MALFORMED_TRACE``,
   or ``UNSUPPORTED_SCHEMA_VERSION`` for another baseline version;
2. ``halts`` (the adapter's, when the ledger was read);
3. ``input_hash``: ``hashValue(input) == inputHash`` -> ``INPUT_HASH_MISMATCH``
   (Verist ``input_hash_mismatch``), expected = the recorded ``inputHash``, observed = the
   recomputed one, as Verist's own message has them;
4. ``artifacts``: every artifact with content hashes to its ``hash`` -> ``HASH_MISMATCH``
   (Verist ``hash_mismatch``), ``broke_at`` = ``artifacts/<i>``; a hash-only artifact
   (no ``content``) cannot be re-hashed and is named as such;
5. ``output``: ``loadOutput``: the first ``step-output`` artifact with content (when several
   share a kind, the first emitted wins). A hash-only or absent one cannot be loaded: the
   report says so and lists it as missing; a production replay refuses it with
   ``MISSING_PERSISTED_AGENT_OUTPUT`` (Verist ``missing_output``);
6. ``recompute``: when a step function is registered under
   ``<workflowId>/<stepName>@<workflowVersion>`` (:mod:`replay.registry`), the step is run
   again on the input with Verist's options (``validate``: the input schema is a strict gate,
   ``MALFORMED_TRACE`` at ``input``, the output schema observational; ``strictOutput``: the
   full output schema instead of the partial one; ``captureArtifacts``: the recomputed
   output captured as a ``step-output`` artifact), and its output and commands are diffed
   against the recorded ones ->
   ``REPLAY_DIVERGENCE`` with every differing path (``/output/...``, ``/commands/...``);
   a step that raises is ``REPLAY_DIVERGENCE`` too (Verist ``execution_failed``). A
   hash-only step-output is checked against the hash of the recomputed ``{output, events}``
   (said in the check, not a verdict).

Fields the hashes do not protect (:data:`UNPROTECTED_FIELDS`): ``workflowId``,
``workflowVersion``, ``stepName``, ``capturedAt``, each artifact's ``kind``, and the
envelope's ``metadata``; the order of the artifacts is not bound either.

Pure: no Django.
"""

from __future__ import annotations

import hashlib
import math
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from replay import errors
from replay.canonical import CanonicalError, js_sorted
from replay.diff import MISSING, diff
from replay.errors import ReplayError
from replay.formats.jsonstrict import check_shape, loads_compact, shape_is_bounded
from replay.formats.protocol import OptionError, ReplayOption, is_boolean
from replay.report import AUDIT, PRODUCTION, TAMPER_DETECTED, Check, Divergence, ReplayReport

try:  # accelerator for hash checks; see hash_matches for why its answer is exact
    import orjson as _orjson

    _SORT = _orjson.OPT_SORT_KEYS
except ImportError:  # pragma: no cover - exercised only where orjson is absent
    _orjson = None  # type: ignore[assignment]

FORMAT = "verist-snapshot"
BASELINE_FORMAT = "verist-baseline@1"
BASELINE_PREFIX = "verist-baseline@"
SCHEMA_VERSION = 1
MAX_SNAPSHOT_BYTES = 64 * 1024**2
MAX_DEPTH = 64
MAX_STRING = 16 * 1024**2

STEP_OUTPUT = "step-output"
STEP_COMMANDS = "step-commands"

SNAPSHOT_KEYS = (
    "workflowId",
    "workflowVersion",
    "stepName",
    "input",
    "inputHash",
    "artifacts",
    "capturedAt",
)
ARTIFACT_KEYS = ("hash", "kind", "content")
ENVELOPE_KEYS = ("format", "snapshot", "metadata")
METADATA_KEYS = ("inputPath", "label", "commandsCaptured", "meta")
UNPROTECTED_FIELDS = (
    "workflowId",
    "workflowVersion",
    "stepName",
    "capturedAt",
    "artifacts[].kind",
    "metadata",
)
CHECK_ORDER = ("format", "halts", "input_hash", "artifacts", "output", "recompute")

#: Verist's own vocabulary for each console code (seed 002 and its recompute/replay errors)
VERIST_CODES = {
    errors.INPUT_HASH_MISMATCH: "input_hash_mismatch",
    errors.HASH_MISMATCH: "hash_mismatch",
    errors.MISSING_PERSISTED_AGENT_OUTPUT: "missing_output",
    errors.REPLAY_DIVERGENCE: "output_diverged",  # or commands_diverged, execution_failed
    errors.MALFORMED_TRACE: "malformed_snapshot",
    errors.UNSUPPORTED_SCHEMA_VERSION: "unsupported_baseline_format",
    errors.FORCE_HALT_ACTIVE: "halted",
}

_HASH = re.compile(r"sha256:[0-9a-f]{64}\Z")


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


@dataclass
class VeristFile:
    """A parsed file: the snapshot, the baseline envelope around it (or None), the bytes."""

    snapshot: dict[str, Any]
    envelope: dict[str, Any] | None = None
    raw: bytes | None = None

    @property
    def kind(self) -> str:
        return BASELINE_FORMAT if self.envelope is not None else "snapshot"

    @property
    def step_key(self) -> str:
        """The registry name of the step that produced it: ``workflowId/stepName@version``."""
        s = self.snapshot
        return f"{s['workflowId']}/{s['stepName']}@{s['workflowVersion']}"


@dataclass
class VeristReport(ReplayReport):
    """The console's report, plus ``verist``: the same outcome in Verist's words
    (``code``: ``null`` or e.g. ``"input_hash_mismatch"``; ``outputDiff`` and
    ``commandsDiff`` of a recompute, ``outputArtifact`` when captured)."""

    verist: dict[str, Any] = field(default_factory=dict)


# --- hashing ---------------------------------------------------------------------------------


def hash_value(value: Any) -> str:
    """Verist's ``hashValue``: ``"sha256:"`` + hex SHA-256 of the ``js-sorted`` bytes."""
    return "sha256:" + hashlib.sha256(js_sorted(value)).hexdigest()


def hash_matches(value: Any, recorded: str) -> tuple[bool, str]:
    """Whether ``hash_value(value) == recorded``, and the observed hash when it is not.

    Shortcut, proven rather than assumed: when the SHA-256 of ``orjson``'s sorted-keys
    bytes ``B`` of ``value`` is the recorded hash, then ``B`` is the very text Verist
    hashed (SHA-256 is collision resistant), i.e. a canonical ``JSON.stringify`` output;
    ``value`` is what parsing ``B`` gives back (``orjson`` writes values that read back
    unchanged, types included), and canonicalising a canonical text gives that text again,
    so ``js_sorted(value) == B``. Any other outcome (another order for integer-like or
    astral keys, another number spelling, a value ``orjson`` refuses) takes the exact path.
    """
    if _orjson is not None:
        try:
            fast = "sha256:" + hashlib.sha256(_orjson.dumps(value, option=_SORT)).hexdigest()
        except (_orjson.JSONEncodeError, TypeError):
            fast = ""
        if fast == recorded:
            return True, recorded
    observed = hash_value(value)
    return observed == recorded, observed


def capture_artifact(kind: str, content: Any, *, hash_only: bool = False) -> dict[str, Any]:
    """Verist's ``captureArtifact``: ``{hash, kind, content}``, or ``{hash, kind}``."""
    artifact: dict[str, Any] = {"hash": hash_value(content), "kind": kind}
    if not hash_only:
        artifact["content"] = content
    return artifact


# --- parsing ---------------------------------------------------------------------------------


def _type_name(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int | float):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list):
        return "array"
    return "object"


def _bad(where: str, what: str) -> ReplayError:
    return ReplayError(errors.MALFORMED_TRACE, f"{where}: {what}", broke_at=where)


def _unknown(doc: dict[str, Any], allowed: tuple[str, ...], where: str, noun: str) -> None:
    for key in doc:
        if key not in allowed:
            raise _bad(f"{where}.{key}", f"not a field of a Verist {noun}")


def parse(data: bytes, *, where: str = "snapshot") -> VeristFile:
    """Strict JSON, bounded, one snapshot or one ``verist-baseline@1`` envelope; every field
    checked. Raises ``ReplayError`` (``MALFORMED_TRACE`` or ``UNSUPPORTED_SCHEMA_VERSION``)."""
    if len(data) > MAX_SNAPSHOT_BYTES:
        raise ReplayError(
            errors.MALFORMED_TRACE, f"{where}: larger than {MAX_SNAPSHOT_BYTES} bytes"
        )
    doc = loads_compact(data, where=where)
    if not shape_is_bounded(data, max_depth=MAX_DEPTH, max_string=MAX_STRING):
        check_shape(doc, where=where, max_depth=MAX_DEPTH, max_string=MAX_STRING)
    if not isinstance(doc, dict):
        raise _bad(where, f"expected a JSON object, got {_type_name(doc)}")
    if "format" in doc:
        return VeristFile(_snapshot(_envelope(doc), "snapshot", baseline=True), doc, data)
    return VeristFile(_snapshot(doc, "snapshot", baseline=False), None, data)


def _envelope(doc: dict[str, Any]) -> dict[str, Any]:
    fmt = doc["format"]
    if not isinstance(fmt, str):
        raise _bad("format", f"expected a string, got {_type_name(fmt)}")
    if fmt != BASELINE_FORMAT:
        message = f'Unsupported baseline format "{fmt}". Expected "{BASELINE_FORMAT}".'
        code = (
            errors.UNSUPPORTED_SCHEMA_VERSION
            if fmt.startswith(BASELINE_PREFIX)
            else errors.MALFORMED_TRACE
        )
        raise ReplayError(code, message, broke_at="format", expected=BASELINE_FORMAT, observed=fmt)
    _unknown(doc, ENVELOPE_KEYS, "envelope", "baseline envelope")
    for key in ("snapshot", "metadata"):
        if key not in doc:
            raise _bad(key, "required in a verist-baseline@1 file")
        if not isinstance(doc[key], dict):
            raise _bad(key, f"expected an object, got {_type_name(doc[key])}")
    meta = doc["metadata"]
    _unknown(meta, METADATA_KEYS, "metadata", "baseline metadata")
    if not isinstance(meta.get("inputPath"), str):
        raise _bad(
            "metadata.inputPath", f"expected a string, got {_type_name(meta.get('inputPath'))}"
        )
    if not isinstance(meta.get("commandsCaptured"), bool):
        raise _bad(
            "metadata.commandsCaptured",
            f"expected a boolean, got {_type_name(meta.get('commandsCaptured'))}",
        )
    if "label" in meta and not isinstance(meta["label"], str):
        raise _bad("metadata.label", f"expected a string, got {_type_name(meta['label'])}")
    if "meta" in meta:
        if not isinstance(meta["meta"], dict):
            raise _bad("metadata.meta", f"expected an object, got {_type_name(meta['meta'])}")
        for key, value in meta["meta"].items():
            if not isinstance(value, str):
                raise _bad(f"metadata.meta.{key}", f"expected a string, got {_type_name(value)}")
    return doc["snapshot"]


def _snapshot(doc: dict[str, Any], where: str, *, baseline: bool) -> dict[str, Any]:
    _unknown(doc, SNAPSHOT_KEYS, where, "snapshot")
    for key in SNAPSHOT_KEYS:
        if key not in doc:
            raise _bad(f"{where}.{key}", "required")
    for key in ("workflowId", "workflowVersion", "stepName", "inputHash"):
        if not isinstance(doc[key], str):
            raise _bad(f"{where}.{key}", f"expected a string, got {_type_name(doc[key])}")
    for key in ("workflowId", "stepName"):
        if not doc[key]:
            raise _bad(f"{where}.{key}", "must not be empty")
    if not _HASH.match(doc["inputHash"]):
        raise _bad(
            f"{where}.inputHash",
            f"expected sha256:<64 lower-case hex>, got {doc['inputHash'][:80]!r}",
        )
    captured = doc["capturedAt"]
    if (
        isinstance(captured, bool)
        or not isinstance(captured, int | float)
        or not math.isfinite(captured)
        or captured < 0
        or captured != int(captured)
    ):
        raise _bad(f"{where}.capturedAt", f"expected Unix milliseconds, got {captured!r}")
    if not isinstance(doc["artifacts"], list):
        raise _bad(f"{where}.artifacts", f"expected an array, got {_type_name(doc['artifacts'])}")
    for i, artifact in enumerate(doc["artifacts"]):
        at = f"{where}.artifacts[{i}]"
        if not isinstance(artifact, dict):
            raise _bad(at, f"expected an artifact object, got {_type_name(artifact)}")
        _unknown(artifact, ARTIFACT_KEYS, at, "artifact")
        for key in ("hash", "kind"):
            if not isinstance(artifact.get(key), str):
                raise _bad(f"{at}.{key}", f"expected a string, got {_type_name(artifact.get(key))}")
        if not artifact["kind"]:
            raise _bad(f"{at}.kind", "must not be empty")
        if not _HASH.match(artifact["hash"]):
            raise _bad(
                f"{at}.hash", f"expected sha256:<64 lower-case hex>, got {artifact['hash'][:80]!r}"
            )
    if baseline:  # the Verist CLI's readBaseline invariants
        kinds = [a["kind"] for a in doc["artifacts"]]
        outputs, commands = kinds.count(STEP_OUTPUT), kinds.count(STEP_COMMANDS)
        if outputs != 1:
            raise _bad(
                f"{where}.artifacts",
                f"Baseline file must contain exactly one step-output artifact, got {outputs}",
            )
        if commands > 1:
            raise _bad(
                f"{where}.artifacts",
                f"Baseline file must contain at most one step-commands artifact, got {commands}",
            )
    return doc


# --- the checks ------------------------------------------------------------------------------


def _first(snapshot: Mapping[str, Any], kind: str) -> tuple[int, dict[str, Any]] | None:
    """The first artifact of a kind (the first emitted takes precedence)."""
    for i, artifact in enumerate(snapshot["artifacts"]):
        if artifact["kind"] == kind:
            return i, artifact
    return None


def load_output(snapshot: Mapping[str, Any]) -> tuple[bool, Any, str]:
    """Verist's ``loadOutput``: (ok, the step-output content, why not)."""
    found = _first(snapshot, STEP_OUTPUT)
    if found is None:
        return False, None, "the snapshot has no step-output artifact"
    i, artifact = found
    if "content" not in artifact:
        return (
            False,
            None,
            f"the step-output artifact (artifacts/{i}, {artifact['hash']}) is hash-only: "
            "hash-only artifacts cannot be loaded",
        )
    return True, artifact["content"], ""


def recorded_commands(snapshot: Mapping[str, Any]) -> tuple[Any, str]:
    """The commands a snapshot records, and where from: the ``step-commands`` artifact is
    authoritative; else the ``commands`` embedded in the step-output; else ``MISSING``."""
    found = _first(snapshot, STEP_COMMANDS)
    if found is not None and "content" in found[1]:
        return found[1]["content"], f"step-commands (artifacts/{found[0]})"
    ok, content, _ = load_output(snapshot)
    if ok and isinstance(content, dict) and "commands" in content:
        return content["commands"], "the commands embedded in step-output"
    return MISSING, ""


def _output_of(content: Any) -> Any:
    if isinstance(content, dict) and "output" in content:
        return content["output"]
    return MISSING


def _diff_result(a: Any, b: Any) -> dict[str, Any] | None:
    """Verist's ``DiffResult`` (``{equal, entries}``, paths as JSON pointers), or None for
    Verist's ``undefined`` (a side is unavailable)."""
    if a is MISSING or b is MISSING:
        return None
    entries = [e.to_json() for e in diff(a, b)]
    return {"equal": not entries, "entries": entries}


def compare_snapshots(a: VeristFile, b: VeristFile) -> dict[str, dict[str, Any] | None]:
    """Verist's ``compareSnapshots``: ``inputDiff`` always; ``outputDiff`` when both
    step-outputs can be loaded; ``commandsDiff`` when both record commands (step-commands
    first, else step-output's); ``None`` stands for Verist's ``undefined``."""
    out_a = load_output(a.snapshot)
    out_b = load_output(b.snapshot)
    return {
        "inputDiff": _diff_result(a.snapshot["input"], b.snapshot["input"]),
        "outputDiff": _diff_result(
            _output_of(out_a[1]) if out_a[0] else MISSING,
            _output_of(out_b[1]) if out_b[0] else MISSING,
        ),
        "commandsDiff": _diff_result(
            recorded_commands(a.snapshot)[0], recorded_commands(b.snapshot)[0]
        ),
    }


# --- step functions --------------------------------------------------------------------------


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


# --- verify / replay -------------------------------------------------------------------------


def _fail(report: VeristReport, code: str, message: str, **where: Any) -> VeristReport:
    report.fail(code, message, **where)
    if code in (errors.INPUT_HASH_MISMATCH, errors.HASH_MISMATCH):
        # a recorded hash no longer binds its content: the verdict is reached, and it is tamper
        report.status = TAMPER_DETECTED
        report.authoritative = True
    report.verist["code"] = VERIST_CODES.get(code, code.lower())
    return report


def new_report(trace_id: str | None, mode: str) -> VeristReport:
    report = VeristReport(trace_id=trace_id, format=FORMAT, mode=mode)
    report.unprotected_fields = list(UNPROTECTED_FIELDS)
    report.verist = {"code": None}
    return report


def refused(exc: ReplayError, mode: str = AUDIT) -> VeristReport:
    """The report of a file that did not parse."""
    report = new_report(None, mode)
    report.checks.append(Check("format", False, exc.message))
    return _fail(
        report,
        exc.code,
        exc.message,
        broke_at=exc.broke_at,
        expected=exc.expected,
        observed=exc.observed,
    )


def verify(
    parsed: VeristFile,
    *,
    mode: str = AUDIT,
    registry: Any = None,
    options: RecomputeOptions | None = None,
    trace_id: str | None = None,
    report: VeristReport | None = None,
) -> VeristReport:
    """Every check of the module docstring, in order; the first failure names the code."""
    options = options or RecomputeOptions()
    s = parsed.snapshot
    report = report or new_report(trace_id, mode)
    checks = report.checks
    what = (
        f"{BASELINE_FORMAT} envelope ({parsed.envelope['metadata']['inputPath']})"
        if parsed.envelope is not None
        else "bare snapshot"
    )
    checks.append(
        Check(
            "format",
            True,
            f"Verist {what}: step {parsed.step_key}, {len(s['artifacts'])} artifacts, "
            f"captured at {s['capturedAt']}",
        )
    )

    try:
        return _checked(report, parsed, mode, registry, options)
    except CanonicalError as exc:  # a value hashValue cannot write (the parse refuses most)
        message = f"snapshot: not a value hashValue can hash: {exc}"
        report.checks = [Check("format", False, message)]
        report.divergences = []
        return _fail(report, errors.MALFORMED_TRACE, message)


def _checked(
    report: VeristReport,
    parsed: VeristFile,
    mode: str,
    registry: Any,
    options: RecomputeOptions,
) -> VeristReport:
    s = parsed.snapshot
    checks = report.checks

    # 3. input hash (Verist's recompute checks it before anything runs)
    same, observed = hash_matches(s["input"], s["inputHash"])
    if not same:
        message = f"Input hash mismatch: expected {s['inputHash']}, got {observed}"
        checks.append(Check("input_hash", False, message))
        return _fail(
            report,
            errors.INPUT_HASH_MISMATCH,
            message,
            broke_at="inputHash",
            expected=s["inputHash"],
            observed=observed,
        )
    checks.append(Check("input_hash", True, f"hashValue(input) is the recorded {observed}"))

    # 4. artifact hashes
    hash_only = []
    for i, artifact in enumerate(s["artifacts"]):
        if "content" not in artifact:
            hash_only.append(f"artifacts/{i} ({artifact['kind']})")
            continue
        same, got = hash_matches(artifact["content"], artifact["hash"])
        if not same:
            message = (
                f"Artifact hash mismatch at artifacts/{i} ({artifact['kind']}): expected "
                f"{artifact['hash']}, got {got}"
            )
            checks.append(Check("artifacts", False, message))
            return _fail(
                report,
                errors.HASH_MISMATCH,
                message,
                broke_at=f"artifacts/{i}",
                expected=artifact["hash"],
                observed=got,
            )
    verified = len(s["artifacts"]) - len(hash_only)
    detail = f"{verified} artifacts with content hash to their recorded hash"
    if hash_only:
        detail += (
            f"; hash-only (content not kept, so not re-hashed and not loadable): "
            f"{', '.join(hash_only)}"
        )
    checks.append(Check("artifacts", True, detail))

    # 5. loadOutput
    loaded, content, why = load_output(s)
    if not loaded:
        report.missing.append(why)
        if mode == PRODUCTION:
            checks.append(Check("output", False, why))
            found = _first(s, STEP_OUTPUT)
            return _fail(
                report,
                errors.MISSING_PERSISTED_AGENT_OUTPUT,
                f"loadOutput fails: {why}; a production replay needs the step's output",
                broke_at=f"artifacts/{found[0]}" if found else "artifacts",
            )
        checks.append(Check("output", True, f"not loadable: {why}; replay cannot return it"))
    else:
        checks.append(
            Check(
                "output",
                True,
                "loadOutput returns the step-output content (what replay returns, as captured)",
            )
        )
    report.replayable = loaded

    # 6. recompute
    step = registry.function(parsed.step_key) if registry is not None else None
    if step is None:
        checks.append(
            Check(
                "recompute",
                True,
                f"no step function is registered under {parsed.step_key}: not recomputed",
            )
        )
        return report
    return _recompute(report, parsed, step, options, content if loaded else MISSING)


def _recompute(
    report: VeristReport,
    parsed: VeristFile,
    step: Any,
    options: RecomputeOptions,
    recorded: Any,
) -> VeristReport:
    s = parsed.snapshot
    checks = report.checks
    validate = options.validate
    input_schema = getattr(step, "input_schema", None)
    output_schema = getattr(step, "output_schema", None)
    if validate and input_schema is not None:
        problems = _violations(input_schema, s["input"])
        if problems:
            message = f"the input fails {parsed.step_key}'s input schema: {'; '.join(problems)}"
            checks.append(Check("recompute", False, message))
            report.verist["inputSchemaViolations"] = problems
            return _fail(report, errors.MALFORMED_TRACE, message, broke_at="input")
    try:
        result = step(s["input"], None, None)
    except Exception as exc:  # a step's own failure is Verist's EXECUTION_FAILED
        message = f"{parsed.step_key} failed: {type(exc).__name__}: {exc}"
        checks.append(Check("recompute", False, message))
        _fail(report, errors.REPLAY_DIVERGENCE, message, broke_at="recompute")
        report.verist["code"] = "execution_failed"
        return report
    new_output = result.get("output", MISSING) if isinstance(result, Mapping) else MISSING
    new_commands = result.get("commands", []) if isinstance(result, Mapping) else []
    notes = []
    if validate and output_schema is not None and new_output is not MISSING:
        schema = output_schema if options.strict_output else _partial(output_schema)
        problems = _violations(schema, new_output)
        report.verist["outputSchemaViolations"] = problems
        which = "full" if options.strict_output else "partial"
        notes.append(
            f"output schema ({which}, observational): "
            + ("; ".join(problems) if problems else "no violations")
        )
    if options.capture_artifacts:
        hash_only = isinstance(options.capture_artifacts, Mapping) and bool(
            options.capture_artifacts.get("hashOnly")
        )
        captured = {k: v for k, v in result.items() if k in ("output", "events", "commands")}
        report.verist["outputArtifact"] = capture_artifact(
            STEP_OUTPUT, captured, hash_only=hash_only
        )
    output_diff = _diff_result(
        _output_of(recorded) if recorded is not MISSING else MISSING, new_output
    )
    old_commands, source = recorded_commands(s)
    commands_diff = _diff_result(old_commands, new_commands)
    found = _first(s, STEP_OUTPUT)
    if recorded is MISSING and found is not None and isinstance(result, Mapping):
        notes.append(_hash_only_note(found[1]["hash"], result, _first(s, STEP_COMMANDS)))
    report.verist["outputDiff"] = output_diff
    report.verist["commandsDiff"] = commands_diff
    for name, d in (("output", output_diff), ("commands", commands_diff)):
        for entry in (d or {"entries": []})["entries"]:
            report.divergences.append(
                Divergence(
                    s["stepName"],
                    name,
                    f"/{name}{entry['path']}",
                    MISSING if entry.get("absent") == "before" else entry["before"],
                    MISSING if entry.get("absent") == "after" else entry["after"],
                )
            )
    compared = [f"output: {_said(output_diff, 'not compared (not loadable)')}"]
    compared.append(f"commands: {_said(commands_diff, 'not compared (none recorded)')}")
    if commands_diff is not None:
        compared[-1] += f" (from {source})"
    detail = f"{parsed.step_key} re-run on the input; " + "; ".join(compared + notes)
    if report.divergences:
        checks.append(Check("recompute", False, detail))
        first = report.divergences[0]
        _fail(
            report,
            errors.REPLAY_DIVERGENCE,
            f"the recomputed step differs from the recorded one at {first.path}",
            broke_at=first.path,
            expected=_short(first.before),
            observed=_short(first.after),
        )
        report.verist["code"] = f"{first.step_id}_diverged"
        return report
    checks.append(Check("recompute", True, detail))
    return report


def _hash_only_note(recorded: str, result: Mapping[str, Any], commands: Any) -> str:
    """Whether the recomputed step-output (``{output, events}`` as core captures it, or with
    ``commands`` when the snapshot has no step-commands artifact) hashes to a hash-only
    step-output's hash: the output cannot be loaded, but it can still be checked."""
    shapes = [{k: result[k] for k in ("output", "events") if k in result}]
    if commands is None and "commands" in result:
        shapes.append({k: result[k] for k in ("output", "events", "commands") if k in result})
    if any(hash_matches(shape, recorded)[0] for shape in shapes):
        return f"the recomputed step-output hashes to the hash-only artifact's {recorded}"
    return (
        f"the recomputed step-output does not hash to the hash-only artifact's {recorded}: "
        "the output differs from the captured one (or was captured in another shape)"
    )


def _said(d: dict[str, Any] | None, unavailable: str) -> str:
    if d is None:
        return unavailable
    return "equal" if d["equal"] else f"{len(d['entries'])} differences"


def _short(value: Any) -> str | None:
    if value is MISSING:
        return None
    return js_sorted(value).decode()[:200]


def verify_bytes(
    data: bytes,
    *,
    mode: str = AUDIT,
    registry: Any = None,
    options: RecomputeOptions | None = None,
) -> VeristReport:
    """Parse and verify; a file that does not parse is the refusal of the format check."""
    try:
        parsed = parse(data)
    except ReplayError as exc:
        return refused(exc, mode)
    return verify(parsed, mode=mode, registry=registry, options=options)
