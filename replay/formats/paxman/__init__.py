"""Paxman ExecutionArtifact JSON ("paxman-artifact"): replay as ``paxman.replay`` does it.

A Paxman artifact (seed 001) records one ``paxman.normalize()`` run. Replay is pure
rehydration: nothing is re-executed, the checks run in the seed's §3 order and the first
that fails names the report's code:

1. ``type``: the document is an ExecutionArtifact (the attrs invariants of Paxman's
   ``artifact.py``, field by field) -> ``MALFORMED_TRACE`` naming the field;
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
artifact does not break its replay hash.

Pure: no Django.
"""

from __future__ import annotations

import functools
import hashlib
import re
from collections.abc import Mapping
from dataclasses import dataclass
from json.encoder import c_make_encoder as _c_make_encoder  # type: ignore[attr-defined]
from json.encoder import encode_basestring_ascii as _escape
from types import MappingProxyType
from typing import IO, Any

from replay import errors
from replay.canonical import CanonicalError, python_sorted
from replay.errors import ReplayError
from replay.formats.jsonstrict import MAX_KEYS, MAX_OBJECT_KEYS, check_key_count, loads_strict
from replay.report import AUDIT, Check, ReplayReport

try:  # accelerator for verify_bytes: a value it parses is used only once proven (see below)
    import orjson as _orjson
except ImportError:  # pragma: no cover - exercised only where orjson is absent
    _orjson = None  # type: ignore[assignment]

FORMAT = "paxman-artifact"
#: The Paxman release whose replay this console reproduces (the fixtures' version).
PAXMAN_VERSION = "1.0.2"
SUPPORTED_PLANNER_VERSIONS = frozenset({"1"})
REPLAY_VERSION = "1"  # paxman.versioning.REPLAY_VERSION, hashed as a constant
MAX_ARTIFACT_BYTES = 256 * 1024**2

#: Capability id -> version, the capabilities Paxman 1.0.2 ships (``paxman.capabilities.v1``:
#: the five V1 built-ins, each at "1.0"). Deployments add theirs (:func:`capability_registry`).
CAPABILITY_REGISTRY: Mapping[str, str] = MappingProxyType(
    {
        "inference": "1.0",
        "lookup": "1.0",
        "regex_extraction": "1.0",
        "text_extraction": "1.0",
        "validation": "1.0",
    }
)
#: Installed packages add capabilities through this entry-point group: each entry point names
#: a callable taking the :class:`CapabilityRegistry` (it calls ``register(id, version)``), or
#: a mapping of capability id -> version (or list of versions).
CAPABILITY_ENTRY_POINT_GROUP = "replay_console.paxman_capabilities"


class CapabilityRegistry:
    """The capabilities replay accepts, keyed as Paxman keys its registry: ``(id, version)``.

    An artifact's ``capability_versions`` pin each capability id at one version; replay
    checks the id is registered and then that the pinned version is one registered for it
    (Paxman's ``get(id, version)`` raises ``CAPABILITY_NOT_FOUND`` on either miss).
    """

    def __init__(self, entries: Mapping[str, Any] | None = None) -> None:
        self._versions: dict[str, set[str]] = {}
        self._sorted: dict[str, tuple[str, ...]] = {}
        for cid, versions in (entries or {}).items():
            for version in [versions] if isinstance(versions, str) else versions:
                self.register(cid, version)

    def register(self, capability_id: Any, version: Any) -> None:
        if not isinstance(capability_id, str) or not capability_id:
            raise ValueError(f"a capability id must be a non-empty string, got {capability_id!r}")
        if not isinstance(version, str) or not version:
            raise ValueError(
                f"capability {capability_id!r}: a version must be a non-empty string, "
                f"got {version!r}"
            )
        self._versions.setdefault(capability_id, set()).add(version)
        self._sorted.pop(capability_id, None)

    def versions(self, capability_id: str) -> tuple[str, ...]:
        """The versions registered for an id, in PEP 440 order where they parse."""
        found = self._sorted.get(capability_id)
        if found is None:
            found = tuple(sorted(self._versions.get(capability_id, ()), key=_version_sort_key))
            self._sorted[capability_id] = found
        return found

    def ids(self) -> list[str]:
        return sorted(self._versions)

    def as_dict(self) -> dict[str, list[str]]:
        return {cid: list(self.versions(cid)) for cid in self.ids()}


def _version_sort_key(text: str) -> tuple[int, Any, str]:
    try:
        return (1, parse_version(text).key, text)
    except ValueError:
        return (0, (), text)


def load_capability_entry_points(registry: CapabilityRegistry, eps: Any = None) -> list[str]:
    """Let installed packages register capabilities; returns the entry points loaded."""
    from importlib.metadata import entry_points

    loaded = []
    for ep in eps if eps is not None else entry_points(group=CAPABILITY_ENTRY_POINT_GROUP):
        brought = ep.load()
        if callable(brought):
            brought(registry)
        else:
            for cid, versions in dict(brought).items():
                for version in [versions] if isinstance(versions, str) else versions:
                    registry.register(cid, version)
        loaded.append(ep.name)
    return loaded


def capability_registry(
    extra: Mapping[str, Any] | None = None, *, eps: Any = None
) -> CapabilityRegistry:
    """Paxman's built-in capabilities, then ``extra`` (a deployment's setting: id -> version
    or list of versions), then what installed packages register (``eps``: the entry points,
    found in :data:`CAPABILITY_ENTRY_POINT_GROUP` when None)."""
    registry = CapabilityRegistry(CAPABILITY_REGISTRY)
    for cid, versions in (extra or {}).items():
        for version in [versions] if isinstance(versions, str) else versions:
            registry.register(cid, version)
    load_capability_entry_points(registry, eps)
    return registry


def _as_registry(registry: Any) -> CapabilityRegistry:
    if registry is None:
        return _BUILTIN
    if isinstance(registry, CapabilityRegistry):
        return registry
    return CapabilityRegistry(registry)


_BUILTIN = CapabilityRegistry(CAPABILITY_REGISTRY)  # read-only by convention: never registered to


# --- a supplied contract --------------------------------------------------------------------


@dataclass(frozen=True)
class InvalidContract:
    """A contract file that is not a contract: replay's contract check refuses it."""

    message: str


def parse_contract(data: bytes, *, where: str = "contract") -> dict[str, Any] | InvalidContract:
    """A supplied contract file: a JSON Dict DSL contract (Paxman ``dict_dsl.py``: an object
    with a non-empty string ``id``, an optional non-empty string ``version`` and a non-empty
    list ``fields`` of objects with unique non-empty ``name``). What is not one is an
    :class:`InvalidContract` saying why (replay then fails ``INVALID_CONTRACT``)."""
    try:
        doc = loads_strict(data, where=where)
    except ReplayError as exc:
        return InvalidContract(f"the supplied contract is not JSON: {exc.message}")
    if not isinstance(doc, dict):
        return InvalidContract(f"{where}: a Dict DSL contract must be an object")
    cid = doc.get("id")
    if "id" not in doc:
        return InvalidContract(f"{where}: Dict DSL contract is missing required 'id' key")
    if not isinstance(cid, str) or not cid:
        return InvalidContract(f"{where}: Dict DSL contract 'id' must be a non-empty string")
    version = doc.get("version", "1")
    if not isinstance(version, str) or not version:
        return InvalidContract(
            f"{where}: Dict DSL contract 'version' must be a non-empty string, got {version!r}"
        )
    fields = doc.get("fields")
    if not isinstance(fields, list):
        return InvalidContract(f"{where}: Dict DSL contract 'fields' must be a list")
    if not fields:
        return InvalidContract(f"{where}: contract {cid!r} has no fields")
    seen: set[str] = set()
    for i, item in enumerate(fields):
        name = item.get("name") if isinstance(item, dict) else None
        if not isinstance(name, str) or not name:
            return InvalidContract(f"{where}: fields[{i}] must be an object with a 'name'")
        if name in seen:
            return InvalidContract(f"{where}: contract {cid!r} has duplicate field name {name!r}")
        seen.add(name)
    return doc


#: In hash order (REPLAY.md §2.1).
HASHED_FIELDS = (
    "paxman_version",
    "planner_version",
    "replay_version",
    "execution_plan",
    "field_results",
    "evidence",
    "diagnostics",
    "statistics",
    "contract_id",
    "capability_versions",
)
UNPROTECTED_FIELDS = (
    "id",
    "created_at",
    "metadata",
    "normalized_data",
    "status",
    "unresolved_fields",
)
#: ExecutionArtifact's attributes in declaration order, with the type check of each.
FIELDS = (
    "status",
    "id",
    "normalized_data",
    "field_results",
    "unresolved_fields",
    "evidence",
    "diagnostics",
    "execution_plan",
    "replay_hash",
    "statistics",
    "contract_id",
    "paxman_version",
    "planner_version",
    "capability_versions",
    "metadata",
    "created_at",
)
#: Fields an artifact may leave out: ``id`` and ``created_at`` (Paxman fills in a fresh id
#: and the clock, never hashed; the published goldens leave both out) and ``metadata``
#: (caller annotations, never hashed). Every other field is required: the type check comes
#: before the hash (seed 001 §3), and Paxman's ``ExecutionArtifact(**decoded)`` would fill a
#: missing one with its default, so a deleted ``evidence`` list would fail only as a hash
#: mismatch, or verify when the list was empty. The version fields' defaults are the running
#: library's, which would verify an artifact against the wrong version.
OPTIONAL_FIELDS = frozenset({"id", "metadata", "created_at"})
#: ``"key":`` as ``stable_dumps`` writes each field name (the type check admits no other key)
_FIELD_SET = frozenset(FIELDS)
_SORTED_FIELDS = tuple(sorted(FIELDS))  # the type check admits no other key
_HASH_COVERAGE = (
    f"{', '.join(HASHED_FIELDS)}; not covered by the hash: {', '.join(UNPROTECTED_FIELDS)}"
)
_KEY_PREFIX: Mapping[str, bytes] = MappingProxyType({k: b'"' + k.encode() + b'":' for k in FIELDS})
#: ExecutionArtifact's required fields (Paxman's "Sprint 6 exit criterion #8" list, the hash
#: inputs and ``status``), in declaration order: the first one missing is named
REQUIRED = tuple(key for key in FIELDS if key not in OPTIONAL_FIELDS)
CHECK_ORDER = ("type", "version", "capabilities", "hash", "contract", "rehydration")
FIELD_RESULT_STATUSES = frozenset({"SUCCESS", "PARTIAL_SUCCESS", "UNRESOLVED", "EXECUTION_FAILED"})

_HEX64 = re.compile(r"[0-9a-f]{64}\Z")
# PEP 440 (packaging.version.VERSION_PATTERN), what Paxman's Version() parses
_PEP440 = re.compile(
    r"""v?(?:(?P<epoch>[0-9]+)!)?(?P<release>[0-9]+(?:\.[0-9]+)*)
    (?P<pre>[-_.]?(?P<pre_l>alpha|a|beta|b|preview|pre|c|rc)[-_.]?(?P<pre_n>[0-9]+)?)?
    (?P<post>(?:-(?P<post_n1>[0-9]+))|(?:[-_.]?(?P<post_l>post|rev|r)[-_.]?(?P<post_n2>[0-9]+)?))?
    (?P<dev>[-_.]?(?P<dev_l>dev)[-_.]?(?P<dev_n>[0-9]+)?)?
    (?:\+(?P<local>[a-z0-9]+(?:[-_.][a-z0-9]+)*))?""",
    re.VERBOSE | re.IGNORECASE,
)
_PRE_RANK = {"a": 0, "alpha": 0, "b": 1, "beta": 1, "c": 2, "rc": 2, "pre": 2, "preview": 2}


@dataclass(frozen=True)
class Artifact:
    """A parsed artifact: the JSON object as read, and the bytes it came from."""

    document: dict[str, Any]
    raw: bytes | None = None


@dataclass(frozen=True)
class Version:
    """A PEP 440 version, ordered as ``packaging.version.Version`` orders them."""

    text: str
    major: int
    key: tuple[Any, ...]


@functools.lru_cache(maxsize=1024)
def parse_version(text: str) -> Version:
    """Parse ``text`` as PEP 440; ``ValueError`` when it is not a version."""
    m = _PEP440.fullmatch(text.strip())
    if m is None:
        raise ValueError(f"Invalid version: {text!r}")
    release = tuple(int(p) for p in m["release"].split("."))
    trimmed = release
    while len(trimmed) > 1 and trimmed[-1] == 0:
        trimmed = trimmed[:-1]
    inf = (float("inf"),)
    if m["pre"]:
        pre: tuple[Any, ...] = (_PRE_RANK[m["pre_l"].lower()], int(m["pre_n"] or 0))
    elif not m["post"] and m["dev"]:
        pre = (-float("inf"),)  # 1.0.dev0 sorts before 1.0a0
    else:
        pre = inf
    post_n = m["post_n1"] or m["post_n2"]
    post: tuple[Any, ...] = (int(post_n or 0),) if m["post"] else (-float("inf"),)
    dev: tuple[Any, ...] = (int(m["dev_n"] or 0),) if m["dev"] else inf
    local: tuple[Any, ...] = (
        tuple(
            (int(p), "") if p.isdigit() else (-float("inf"), p.lower())
            for p in re.split(r"[-_.]", m["local"])
        )
        if m["local"]
        else ((-float("inf"), ""),)
    )
    key = (int(m["epoch"] or 0), trimmed, pre, post, dev, local)
    return Version(text, release[0], key)


_SUPPORTED = parse_version(PAXMAN_VERSION)


# --- parsing and the type check ----------------------------------------------------------


def parse(data: bytes, *, where: str = "artifact") -> Artifact:
    """Strict JSON (``loads_strict``) holding one object; field checks are replay's step 1."""
    doc = loads_strict(data, where=where)
    if not isinstance(doc, dict):
        raise ReplayError(
            errors.MALFORMED_TRACE, f"{where}: expected a JSON object, got {_type_name(doc)}"
        )
    return Artifact(doc, data)


def _type_name(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, int):
        return "int"
    if isinstance(value, float):
        return "float"
    if isinstance(value, str):
        return "str"
    if isinstance(value, list):
        return "list"
    return "dict"


def _bad(where: str, what: str) -> ReplayError:
    return ReplayError(errors.MALFORMED_TRACE, f"{where}: {what}")


def _expect(doc: dict[str, Any], key: str, kind: type, what: str) -> Any:
    value = doc[key]
    if not isinstance(value, kind):
        raise _bad(f"artifact.{key}", f"expected {what}, got {_type_name(value)}")
    return value


def type_check(doc: dict[str, Any]) -> None:
    """ExecutionArtifact's invariants (Paxman ``artifact.py``), naming the first bad field."""
    _type_check(doc)


def _type_check(doc: dict[str, Any]) -> dict[str, bytes]:
    """:func:`type_check`; returns each field's ``stable_dumps`` bytes (the proof it is
    serialisable), which the hash and the rehydration reuse."""
    unknown = [] if _FIELD_SET.issuperset(doc) else [k for k in doc if k not in _FIELD_SET]
    if unknown:
        raise _bad(
            f"artifact.{unknown[0]}",
            "not an ExecutionArtifact field (ExecutionArtifact(**decoded) refuses it)",
        )
    for key in REQUIRED:
        if key not in doc:
            raise _bad(f"artifact.{key}", "required")
    status = doc["status"]
    if not isinstance(status, str):
        _expect(doc, "status", str, "a status string")
    if not status:
        raise _bad("artifact.status", "expected a status string, got ''")
    for key in ("id", "created_at"):
        if key in doc and (not isinstance(doc[key], str) or not doc[key]):
            raise _bad(f"artifact.{key}", f"must be a non-empty string, got {doc[key]!r}")
    for key in ("normalized_data", "field_results", "capability_versions", "metadata"):
        if key in doc and not isinstance(doc[key], dict):
            _expect(doc, key, dict, "a dict")
    for key in ("unresolved_fields", "evidence", "diagnostics"):
        if key in doc and not isinstance(doc[key], list):
            _expect(doc, key, list, "a list")
    for key in ("execution_plan", "statistics"):
        if key in doc and doc[key] is not None and not isinstance(doc[key], dict):
            _expect(doc, key, dict, "an object or null")
    digest = doc["replay_hash"]
    if not isinstance(digest, str):
        _expect(doc, "replay_hash", str, "a str")
    if digest and not _HEX64.match(digest):
        raise _bad(
            "artifact.replay_hash",
            f"must be 64 lowercase hex chars (or empty), got {digest[:80]!r}",
        )
    for key in ("contract_id", "paxman_version", "planner_version"):
        if not isinstance(doc[key], str):
            _expect(doc, key, str, "a str")
    for i, item in enumerate(doc.get("unresolved_fields", [])):
        if not isinstance(item, str):
            raise _bad(
                f"artifact.unresolved_fields[{i}]", f"expected a str, got {_type_name(item)}"
            )
    for cap, version in doc.get("capability_versions", {}).items():
        if not isinstance(version, str):
            raise _bad(
                f"artifact.capability_versions[{cap!r}]",
                f"expected a version string, got {_type_name(version)}",
            )
    statuses = FIELD_RESULT_STATUSES
    for path, result in doc.get("field_results", {}).items():
        if not (  # the common case inline; _field_result words the first refusal
            type(result) is dict
            and type(fp := result.get("field_path")) is str
            and fp
            and type(status := result.get("status", "UNRESOLVED")) is str
            and status in statuses
            and type(result.get("candidates", _NO_LIST)) is list
            and type(result.get("evidence_refs", _NO_LIST)) is list
        ):
            _field_result(path, result)
    encode = _ENCODE
    try:  # e.g. a lone surrogate key: not writable by stable_dumps
        if encode is None:  # pragma: no cover - CPython always has the C encoder
            return {key: _stable(value) for key, value in doc.items()}
        return {  # _stable, inline: strings through the escaper, collections the encoder
            key: _escape(value).encode()
            if (kind := type(value)) is str
            else "".join(encode(value, 0)).encode()
            if kind is dict or kind is list
            else _stable(value)
            for key, value in doc.items()
        }
    except (CanonicalError, TypeError, ValueError, RecursionError) as exc:
        raise _bad("artifact", f"not serialisable by stable_dumps: {exc}") from None


def _not_json(value: Any) -> Any:
    raise TypeError(f"Object of type {type(value).__name__} is not JSON serializable")


# ``json.dumps(sort_keys=True, separators=(",", ":"))`` is this C encoder, built per call;
# built once here it writes the same bytes for JSON values
# (`test_stable_writes_exactly_python_sorted`). typeshed leaves ``c_make_encoder`` out of
# json.encoder (None when _json is not built): hence the import's type: ignore
_ENCODE = (
    _c_make_encoder(None, _not_json, _escape, None, ":", ",", True, False, True)
    if _c_make_encoder is not None
    else None
)


def _stable(value: Any) -> bytes:
    """``python_sorted(value)`` for a decoded JSON value, written directly for the scalars
    ``json.dumps`` writes without an encoder (a string through the same C escaper; None,
    booleans) and through one prebuilt C encoder for the rest."""
    kind = type(value)
    if kind is str:
        return _escape(value).encode()
    if value is None:
        return b"null"
    if kind is bool:
        return b"true" if value else b"false"
    if _ENCODE is None:  # pragma: no cover - CPython always has the C encoder
        return python_sorted(value)
    try:
        chunks = _ENCODE(value, 0)
        return (chunks[0] if len(chunks) == 1 else "".join(chunks)).encode()
    except (TypeError, ValueError, RecursionError) as exc:
        raise CanonicalError(str(exc)) from exc


_NO_LIST: list[Any] = []  # what an absent list reads as, for the inline check


def _field_result(path: str, result: Any) -> None:
    if not isinstance(result, dict):
        raise _bad(
            f"artifact.field_results[{path!r}]",
            f"expected a FieldResult object, got {_type_name(result)}",
        )
    fp = result.get("field_path")
    if not isinstance(fp, str) or not fp:
        raise _bad(
            f"artifact.field_results[{path!r}].field_path",
            f"must be a non-empty string, got {fp!r}",
        )
    status = result.get("status", "UNRESOLVED")
    if not isinstance(status, str) or status not in FIELD_RESULT_STATUSES:  # [] is unhashable
        raise _bad(
            f"artifact.field_results[{path!r}].status",
            f"must be one of SUCCESS/PARTIAL_SUCCESS/UNRESOLVED/EXECUTION_FAILED, got {status!r}",
        )
    for key in ("candidates", "evidence_refs"):
        if key in result and not isinstance(result[key], list):
            raise _bad(
                f"artifact.field_results[{path!r}].{key}",
                f"expected a list, got {_type_name(result[key])}",
            )


# --- the hash -------------------------------------------------------------------------------


def _value(doc: dict[str, Any], key: str) -> Any:
    if key == "replay_version":
        return REPLAY_VERSION
    return doc[key]  # every hashed field is required (the type check)


_REPLAY_VERSION_BYTES = python_sorted(REPLAY_VERSION)


def replay_hash_of(doc: dict[str, Any], serialised: Mapping[str, bytes] | None = None) -> str:
    """Paxman's ``compute_replay_hash`` over the file's values (64 lower-case hex);
    ``serialised``: the fields' ``stable_dumps`` bytes already made (``_type_check``)."""
    done = serialised or {}
    parts = [
        _REPLAY_VERSION_BYTES
        if key == "replay_version"
        else done[key]
        if key in done
        else python_sorted(_value(doc, key))
        for key in HASHED_FIELDS
    ]
    return hashlib.sha256(b"|".join(parts)).hexdigest()


def _canonical(serialised: Mapping[str, bytes]) -> bytes:
    """``stable_dumps`` of the whole artifact from its fields' bytes: the keys (field names,
    plain ASCII) sorted, ``"key":value`` joined by commas, as ``sort_keys`` writes them."""
    prefix = _KEY_PREFIX
    return (
        b"{"
        + b",".join([prefix[key] + serialised[key] for key in _SORTED_FIELDS if key in serialised])
        + b"}"
    )


# --- replay -----------------------------------------------------------------------------------


def _contract_id(contract: Any) -> str | None:
    """A contract's id: a mapping's ``"id"`` or an object's ``.id`` (CanonicalContract)."""
    cid = contract.get("id") if isinstance(contract, Mapping) else getattr(contract, "id", None)
    return cid if isinstance(cid, str) and cid else None


def rehydrate(doc: dict[str, Any]) -> dict[str, Any]:
    """The artifact ``paxman.replay`` returns, as its ``to_dict``: every field the input has.

    Replay returns the artifact unchanged; rebuilding it field by field (in Paxman's
    declaration order) and re-serialising proves the rehydrated value is the input's.
    """
    return {key: doc[key] for key in FIELDS if key in doc}


def replay(
    artifact: Artifact,
    *,
    contract: Any = None,
    registry: Mapping[str, Any] | CapabilityRegistry | None = None,
    mode: str = AUDIT,
) -> ReplayReport:
    """Replay one artifact (seed 001 §3) and report every check in order."""
    return _replay(artifact, None, contract=contract, registry=registry, mode=mode)


def _replay(
    artifact: Artifact,
    serialised: dict[str, bytes] | None,
    canonical: bytes | None = None,
    *,
    contract: Any,
    registry: Mapping[str, Any] | CapabilityRegistry | None,
    mode: str,
) -> ReplayReport:
    """:func:`replay`; `serialised`: the type check's result when it has already passed,
    `canonical`: :func:`_canonical` of it when already made."""
    caps = _as_registry(registry)
    doc = artifact.document
    trace_id = doc.get("id") if isinstance(doc.get("id"), str) else None
    report = ReplayReport(trace_id=trace_id, format=FORMAT, mode=mode)
    report.unprotected_fields = list(UNPROTECTED_FIELDS)
    checks = report.checks

    # 1. type
    if serialised is None:
        try:
            serialised = _type_check(doc)
        except ReplayError as exc:
            checks.append(Check("type", False, exc.message))
            return report.fail(exc.code, exc.message)
    checks.append(
        Check(
            "type",
            True,
            f"ExecutionArtifact, status {doc['status']}, contract {doc['contract_id']!r}, "
            f"{len(doc.get('field_results', {}))} field results",
        )
    )

    # 2. version
    problem = _version_problem(doc["paxman_version"], doc["planner_version"])
    if problem is not None:
        message, expected, observed = problem
        checks.append(Check("version", False, message))
        return report.fail(
            errors.VERSION_MISMATCH,
            message,
            broke_at="version",
            expected=expected,
            observed=observed,
        )
    checks.append(
        Check(
            "version",
            True,
            f"paxman_version {doc['paxman_version']} replays on Paxman {PAXMAN_VERSION} "
            f"(same major, not newer); planner_version {doc['planner_version']!r} is supported",
        )
    )

    # 3. capabilities
    pinned = doc.get("capability_versions", {})
    for cap, version in pinned.items():
        registered = caps.versions(cap)
        if not registered:
            message = f"Capability {cap!r} is no longer registered"
            checks.append(Check("capabilities", False, message))
            return report.fail(
                errors.CAPABILITY_NOT_FOUND,
                message,
                broke_at=f"capability_versions/{cap}",
                expected=", ".join(caps.ids()) or "(empty registry)",
                observed=cap,
            )
        if version not in registered:
            message = (
                f"no capability registered for id={cap!r}, version={version!r} "
                f"(registered: {', '.join(f'{cap}@{v}' for v in registered)})"
            )
            checks.append(Check("capabilities", False, message))
            return report.fail(
                errors.CAPABILITY_NOT_FOUND,
                message,
                broke_at=f"capability_versions/{cap}",
                expected=", ".join(registered),
                observed=version,
            )
    if pinned:
        detail = "every pinned capability is registered at its version: " + ", ".join(
            [f"{cap}@{version}" for cap, version in sorted(pinned.items())]
        )
    else:
        detail = "the artifact pins no capabilities"
    checks.append(Check("capabilities", True, detail))

    # 4. hash
    expected_hash = replay_hash_of(doc, serialised)
    recorded = doc["replay_hash"]
    if recorded != expected_hash:
        message = f"Artifact hash mismatch: expected {expected_hash}, got {recorded}"
        checks.append(Check("hash", False, message))
        return report.fail(
            errors.HASH_MISMATCH,
            message,
            broke_at="replay_hash",
            expected=expected_hash,
            observed=recorded,
        )
    checks.append(
        Check(
            "hash",
            True,
            f"replay_hash {recorded} recomputes over {_HASH_COVERAGE}",
        )
    )

    # 5. contract
    if contract is None:
        checks.append(
            Check(
                "contract",
                True,
                f"no contract supplied; contract_id {doc['contract_id']!r} is bound by the hash",
            )
        )
    elif isinstance(contract, InvalidContract):
        checks.append(Check("contract", False, contract.message))
        return report.fail(
            errors.INVALID_CONTRACT,
            contract.message,
            broke_at="contract",
            expected=doc["contract_id"],
            observed=None,
        )
    else:
        cid = _contract_id(contract)
        if cid is None:
            message = "the supplied contract has no string id"
            checks.append(Check("contract", False, message))
            return report.fail(
                errors.INVALID_CONTRACT,
                message,
                broke_at="contract_id",
                expected=doc["contract_id"],
                observed=None,
            )
        if cid != doc["contract_id"]:
            message = (
                f"the supplied contract {cid!r} is not the one the artifact was produced "
                f"from ({doc['contract_id']!r})"
            )
            checks.append(Check("contract", False, message))
            return report.fail(
                errors.INVALID_CONTRACT,
                message,
                broke_at="contract_id",
                expected=doc["contract_id"],
                observed=cid,
            )
        checks.append(Check("contract", True, f"the supplied contract is {cid!r}"))

    # 6. rehydration: stored as stable_dumps bytes, read back, byte-equal to the input
    # (a file already in that spelling was itself read back strictly from those bytes)
    if canonical is None:
        canonical = _canonical(serialised)
    spelled = artifact.raw is not None and artifact.raw.rstrip(b"\n") == canonical
    read_back = doc if spelled else loads_strict(canonical, where="rehydrated artifact")
    # read back from the canonical bytes, the value must equal the input's; a file already
    # in that spelling was read back from them (`read_back` is `doc`), and then the rebuilt
    # artifact holds the input's own values under the input's keys (all of them FIELDS, as
    # the type check proved, none NaN, as strict JSON refuses it): equal, not rebuilt
    if read_back is not doc and rehydrate(read_back) != doc:  # pragma: no cover - JSON survives
        message = "the rehydrated artifact does not re-serialise to the input's bytes"
        checks.append(Check("rehydration", False, message))
        return report.fail(errors.MALFORMED_TRACE, message)
    spelling = (
        "the file is in that canonical spelling"
        if spelled
        else "the file itself is spelt differently (whitespace or key order)"
    )
    checks.append(
        Check(
            "rehydration",
            True,
            f"the rehydrated artifact re-serialises to the input's canonical bytes "
            f"({len(canonical)} bytes, sha256 {hashlib.sha256(canonical).hexdigest()}); "
            f"{spelling}",
        )
    )
    report.replayable = True
    return report


_KEY_COUNT_SCAN = min(MAX_KEYS, MAX_OBJECT_KEYS)
#: at most this many brackets for the fast path: far below any recursion limit
_FAST_MAX_BRACKETS = 256


def _orjson_refuses_lone_surrogates() -> bool:
    """Whether this ``orjson`` refuses every lone UTF-16 surrogate escape (as
    ``loads_strict`` does) and decodes a pair as one character: then a text it parses holds
    none, and the fast path need not look for them. Asked once, at import."""
    if _orjson is None:
        return False
    for lone in (b'"\\ud800"', b'"\\udc00"', b'"\\ud800x"', b'"x\\udfff"', b'"\\ud83d\\ud83d"'):
        try:
            _orjson.loads(lone)
        except _orjson.JSONDecodeError:
            continue
        return False
    return _orjson.loads(b'"\\ud83d\\ude00"') == "\U0001f600"


_FAST_PARSE = _orjson_refuses_lone_surrogates()


def _parse_canonical(data: bytes) -> tuple[dict[str, Any], dict[str, bytes], bytes] | None:
    """The artifact, its fields' ``stable_dumps`` bytes and its canonical bytes, when `data`
    is proven to be an artifact that passes the type check, in its canonical spelling; else
    None.

    ``orjson`` parses (C, no duplicate-key check), :func:`_type_check` runs, and the fields'
    bytes joined as ``stable_dumps`` writes the whole artifact must be exactly `data` (one
    or more trailing newlines aside). ``stable_dumps`` writes each key of an object once, in
    ASCII, with floats as ``repr`` (which ``float()`` reads back to the same double), and
    never writes a byte-order mark; so such a text has no duplicate key, no NaN or Infinity,
    no invalid UTF-8, and :func:`parse` (``loads_strict``) reads the same value from it.
    What ``loads_strict`` checks beyond that is checked here first: the key counts
    (``check_key_count``) and nesting depth (bounded by the bracket count; the fast path
    simply declines); lone surrogate escapes are refused by ``orjson`` itself (the fast path
    is off with an ``orjson`` that does not, `_orjson_refuses_lone_surrogates`). Anything
    else, errors included, is None, and :func:`verify_bytes` takes the strict path, which
    decides and words every refusal.
    """
    if not _FAST_PARSE or len(data) - len(data.translate(None, b"{[")) > _FAST_MAX_BRACKETS:
        return None
    try:
        if data.count(b":") > _KEY_COUNT_SCAN:  # check_key_count's own shortcut, inline
            check_key_count(data, where="artifact")
        doc = _orjson.loads(data)
        if type(doc) is not dict:
            return None
        serialised = _type_check(doc)
    except (ReplayError, _orjson.JSONDecodeError):
        return None
    canonical = _canonical(serialised)
    if data.rstrip(b"\n") != canonical:
        return None
    return doc, serialised, canonical


@functools.lru_cache(maxsize=1024)
def _version_problem(paxman_version: str, planner_version: str) -> tuple[str, str, str] | None:
    """(message, expected, observed) when the artifact's versions do not replay here."""
    wanted = f"{_SUPPORTED.major}.x, at most {PAXMAN_VERSION}"
    try:
        version = parse_version(paxman_version)
    except ValueError as exc:
        message = (
            f"Cannot parse version: artifact={paxman_version!r}, current={PAXMAN_VERSION!r} ({exc})"
        )
        return message, wanted, paxman_version
    if version.major != _SUPPORTED.major:
        message = (
            f"Artifact produced by Paxman {paxman_version}, current version is "
            f"{PAXMAN_VERSION}: major version mismatch"
        )
        return message, wanted, paxman_version
    if version.key > _SUPPORTED.key:
        message = (
            f"Artifact produced by Paxman {paxman_version}, current version is "
            f"{PAXMAN_VERSION}: artifact is from a newer version"
        )
        return message, wanted, paxman_version
    if planner_version not in SUPPORTED_PLANNER_VERSIONS:
        supported = ", ".join(sorted(SUPPORTED_PLANNER_VERSIONS))
        message = (
            f"Artifact planner_version {planner_version!r} is not supported by Paxman "
            f"{PAXMAN_VERSION} (supported: {supported})"
        )
        return message, supported, planner_version
    return None


def verify_bytes(
    data: bytes,
    *,
    contract: Any = None,
    registry: Mapping[str, Any] | CapabilityRegistry | None = None,
    mode: str = AUDIT,
) -> ReplayReport:
    """Parse and replay; a document that does not parse fails the type check."""
    proven = _parse_canonical(data)
    if proven is not None:
        doc, serialised, canonical = proven
        return _replay(
            Artifact(doc, data),
            serialised,
            canonical,
            contract=contract,
            registry=registry,
            mode=mode,
        )
    try:
        artifact = parse(data)
    except ReplayError as exc:
        report = ReplayReport(trace_id=None, format=FORMAT, mode=mode)
        report.unprotected_fields = list(UNPROTECTED_FIELDS)
        report.checks.append(Check("type", False, exc.message))
        return report.fail(exc.code, exc.message)
    return replay(artifact, contract=contract, registry=registry, mode=mode)


def verify_stream(
    source: IO[bytes],
    *,
    contract: Any = None,
    registry: Mapping[str, Any] | CapabilityRegistry | None = None,
    mode: str = AUDIT,
) -> ReplayReport:
    """:func:`verify_bytes` over a stream, refusing artifacts beyond the size limit."""
    data = source.read(MAX_ARTIFACT_BYTES + 1)
    if len(data) > MAX_ARTIFACT_BYTES:
        data = b""
        report = ReplayReport(trace_id=None, format=FORMAT, mode=mode)
        message = f"artifact: larger than {MAX_ARTIFACT_BYTES} bytes"
        report.checks.append(Check("type", False, message))
        return report.fail(errors.MALFORMED_TRACE, message)
    return verify_bytes(data, contract=contract, registry=registry, mode=mode)
