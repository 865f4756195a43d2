"""A Paxman ExecutionArtifact: its fields and their types, its versions, its canonical bytes
and its replay hash (Paxman's ``artifact.py`` and ``artifact/_hash.py``). Pure."""

from __future__ import annotations

import functools
import hashlib
import re
from collections.abc import Mapping
from dataclasses import dataclass
from json.encoder import c_make_encoder as _c_make_encoder  # type: ignore[attr-defined]
from json.encoder import encode_basestring_ascii as _escape
from types import MappingProxyType
from typing import Any

from core import errors
from core.canonical import CanonicalError, python_sorted
from core.errors import ReplayError
from core.formats.jsonstrict import loads_strict

FORMAT = "paxman-artifact"
#: The Paxman release whose replay this console reproduces (the fixtures' version).
PAXMAN_VERSION = "1.0.2"
SUPPORTED_PLANNER_VERSIONS = frozenset({"1"})
REPLAY_VERSION = "1"  # paxman.versioning.REPLAY_VERSION, hashed as a constant
MAX_ARTIFACT_BYTES = 256 * 1024**2

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
#: Paxman's ``Status`` enum (``paxman/types.py`` at nexusnv/paxman bc5d79bc9568, v1.0.2), in its
#: declaration order: an artifact's ``status`` is one of these, as ``Status(value)`` refuses
#: any other value before ``ExecutionArtifact`` can be built. ``status`` is not covered by
#: ``replay_hash`` (``compute_replay_hash`` leaves it out), so this check is all that holds it.
STATUSES = ("SUCCESS", "PARTIAL_SUCCESS", "UNRESOLVED", "INVALID_CONTRACT", "EXECUTION_FAILED")
_STATUS_SET = frozenset(STATUSES)
#: ``Status(value)``'s own words for a value it refuses (Python's ``Enum``), with the values it
#: takes
STATUS_REFUSED = "{value!r} is not a valid Status (Paxman's Status is one of {statuses})"
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
    if status not in _STATUS_SET:
        raise _bad(
            "artifact.status",
            STATUS_REFUSED.format(value=status[:80], statuses=", ".join(STATUSES)),
        )
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
