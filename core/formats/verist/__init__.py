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
(``JSON.stringify`` after ``Object.keys().sort()``, :func:`core.canonical.js_sorted`).

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
   ``<workflowId>/<stepName>@<workflowVersion>`` (:mod:`core.replay.registry`), the step is run
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

The package by concern: :mod:`.snapshot` (the file, its keys and hashes, the parse),
:mod:`.options` (``recompute``'s options), :mod:`.steps` (the steps the console re-runs),
:mod:`.compare` (two snapshots of a step), :mod:`.checks` (verify and replay, one list of
named checks run by ``core.replay.pipeline``), :mod:`.adapter` (the console's protocol object).
"""

from core.formats.verist.checks import new_report, refused, verify, verify_bytes
from core.formats.verist.compare import compare_snapshots
from core.formats.verist.options import (
    REPLAY_OPTIONS,
    STRICT_OUTPUT_NEEDS_VALIDATE,
    RecomputeOptions,
    check_options,
    recompute_options,
)
from core.formats.verist.snapshot import (
    ARTIFACT_KEYS,
    BASELINE_FORMAT,
    BASELINE_PREFIX,
    CHECK_ORDER,
    ENVELOPE_KEYS,
    FORMAT,
    MAX_DEPTH,
    MAX_SNAPSHOT_BYTES,
    MAX_STRING,
    METADATA_KEYS,
    SCHEMA_VERSION,
    SNAPSHOT_KEYS,
    STEP_COMMANDS,
    STEP_OUTPUT,
    UNPROTECTED_FIELDS,
    VERIST_CODES,
    VeristFile,
    VeristReport,
    capture_artifact,
    hash_matches,
    hash_value,
    load_output,
    parse,
    recorded_commands,
)
from core.formats.verist.steps import (
    REFERENCE_STEP,
    REFERENCE_STEP_NAME,
    VeristStep,
    reference_extract,
    register_functions,
)
from core.replay.diff import MISSING

__all__ = [
    "ARTIFACT_KEYS",
    "BASELINE_FORMAT",
    "BASELINE_PREFIX",
    "CHECK_ORDER",
    "ENVELOPE_KEYS",
    "FORMAT",
    "MAX_DEPTH",
    "MAX_SNAPSHOT_BYTES",
    "MAX_STRING",
    "METADATA_KEYS",
    "MISSING",
    "REFERENCE_STEP",
    "REFERENCE_STEP_NAME",
    "REPLAY_OPTIONS",
    "SCHEMA_VERSION",
    "SNAPSHOT_KEYS",
    "STEP_COMMANDS",
    "STEP_OUTPUT",
    "STRICT_OUTPUT_NEEDS_VALIDATE",
    "UNPROTECTED_FIELDS",
    "VERIST_CODES",
    "RecomputeOptions",
    "VeristFile",
    "VeristReport",
    "VeristStep",
    "capture_artifact",
    "check_options",
    "compare_snapshots",
    "hash_matches",
    "hash_value",
    "load_output",
    "new_report",
    "parse",
    "recompute_options",
    "recorded_commands",
    "reference_extract",
    "refused",
    "register_functions",
    "verify",
    "verify_bytes",
]
