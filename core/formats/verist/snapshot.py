"""A Verist snapshot or baseline file: its keys, its hashes (Verist's ``hashValue``), the
parse with every field's type, and what a step recorded (output, commands). Pure."""

from __future__ import annotations

import hashlib
import math
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from core import errors
from core.canonical import js_sorted
from core.errors import ReplayError
from core.formats.jsonstrict import check_shape, loads_compact, shape_is_bounded
from core.replay.diff import MISSING
from core.replay.report import ReplayReport

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
