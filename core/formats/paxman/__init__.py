"""Paxman ExecutionArtifact JSON ("paxman-artifact"): replay as ``paxman.replay`` does it.

A Paxman artifact (seed 001) records one ``paxman.normalize()`` run. Replay is pure
rehydration: nothing is re-executed, the checks run in the seed's §3 order and the first
that fails names the report's code:

1. ``type``: the document is an ExecutionArtifact (the attrs invariants of Paxman's
   ``artifact.py``, field by field; ``status`` one of Paxman's ``Status`` enum,
   :data:`STATUSES`, refused in ``Status(value)``'s words) -> ``MALFORMED_TRACE`` naming the
   field;
2. ``version``: ``paxman_version`` has the same major as the supported Paxman
   (:data:`PAXMAN_VERSION`) and is not newer; ``planner_version`` is one this console
   supports -> ``VERSION_MISMATCH``;
3. ``capabilities``: every id in ``capability_versions`` is in the capability registry,
   at the version pinned (Paxman keys its registry on ``(id, version)``): built-ins plus a
   deployment's (:func:`capability_registry`) -> ``CAPABILITY_NOT_FOUND`` naming the
   capability, the pinned version and the registered ones;
4. ``hash``: ``replay_hash`` recomputes -> ``HASH_MISMATCH`` with expected and observed;
5. ``contract``: when a contract is supplied, it is a Dict DSL contract
   (:func:`parse_contract`) and its id equals ``contract_id`` -> ``INVALID_CONTRACT``
   (Paxman V1 does not look at the contract; its id is hashed);
6. ``rehydration``: the rehydrated artifact re-serialises to the input's canonical bytes.

The replay hash (``paxman/artifact/_hash.py``), hashed from the file's values::

    sha256("|".join(python_sorted(x) for x in (paxman_version, planner_version, "1",
        execution_plan, field_results, evidence, diagnostics, statistics, contract_id,
        capability_versions)).encode()).hexdigest()

``python-sorted`` is Paxman's ``stable_dumps``; ``field_results`` and
``capability_versions`` are sorted by key, which ``sort_keys`` does anyway. Every hashed
field is required by the type check (:data:`REQUIRED`): one the file omits is refused as
``MALFORMED_TRACE`` naming it (``artifact.evidence: required``) before any hash is computed,
where ``ExecutionArtifact(**decoded)`` would hash its default in its place.

Fields the hash does not protect (:data:`UNPROTECTED_FIELDS`): ``id``, ``created_at`` and
``metadata`` as Paxman documents, and also ``normalized_data``, ``status`` and
``unresolved_fields``, which its hash leaves out too: editing the normalised output of an
artifact does not break its replay hash. ``status`` is held to the enum by the type check
alone: another of its values verifies, ``"bogus"`` does not.

The package by concern: :mod:`.artifact` (fields, types, versions, canonical bytes, the
replay hash), :mod:`.capabilities` (the registry), :mod:`.contract` (a supplied contract),
:mod:`.checks` (the six checks, run by ``core.replay.pipeline``), :mod:`.verify` (from bytes:
the fast parse proven against the strict one, then the checks), :mod:`.adapter` (the
console's protocol object) and :mod:`.settings` (its settings accessors).

Pure: no Django.
"""

from core.formats.paxman.artifact import (
    CHECK_ORDER,
    FIELD_RESULT_STATUSES,
    FIELDS,
    FORMAT,
    HASHED_FIELDS,
    MAX_ARTIFACT_BYTES,
    OPTIONAL_FIELDS,
    PAXMAN_VERSION,
    REPLAY_VERSION,
    REQUIRED,
    STATUSES,
    SUPPORTED_PLANNER_VERSIONS,
    UNPROTECTED_FIELDS,
    Artifact,
    Version,
    parse,
    parse_version,
    rehydrate,
    replay_hash_of,
    type_check,
)
from core.formats.paxman.capabilities import (
    CAPABILITY_ENTRY_POINT_GROUP,
    CAPABILITY_REGISTRY,
    CapabilityRegistry,
    capability_registry,
    load_capability_entry_points,
)
from core.formats.paxman.checks import replay
from core.formats.paxman.contract import InvalidContract, parse_contract
from core.formats.paxman.verify import verify_bytes, verify_stream

__all__ = [
    "CAPABILITY_ENTRY_POINT_GROUP",
    "CAPABILITY_REGISTRY",
    "CHECK_ORDER",
    "FIELDS",
    "FIELD_RESULT_STATUSES",
    "FORMAT",
    "HASHED_FIELDS",
    "MAX_ARTIFACT_BYTES",
    "OPTIONAL_FIELDS",
    "PAXMAN_VERSION",
    "REPLAY_VERSION",
    "REQUIRED",
    "STATUSES",
    "SUPPORTED_PLANNER_VERSIONS",
    "UNPROTECTED_FIELDS",
    "Artifact",
    "CapabilityRegistry",
    "InvalidContract",
    "Version",
    "capability_registry",
    "load_capability_entry_points",
    "parse",
    "parse_contract",
    "parse_version",
    "rehydrate",
    "replay",
    "replay_hash_of",
    "type_check",
    "verify_bytes",
    "verify_stream",
]
