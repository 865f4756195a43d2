"""Replay of one artifact: seed 001 §3's six checks in order, run by ``core.replay.pipeline``.
Pure."""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from core import errors
from core.errors import ReplayError
from core.formats.jsonstrict import loads_strict
from core.formats.paxman.artifact import (
    _HASH_COVERAGE,
    FORMAT,
    PAXMAN_VERSION,
    UNPROTECTED_FIELDS,
    Artifact,
    _canonical,
    _contract_id,
    _type_check,
    _version_problem,
    rehydrate,
    replay_hash_of,
)
from core.formats.paxman.capabilities import CapabilityRegistry, _as_registry
from core.formats.paxman.contract import InvalidContract
from core.replay import pipeline
from core.replay.pipeline import Refusal
from core.replay.report import AUDIT, Check, ReplayReport


def replay(
    artifact: Artifact,
    *,
    contract: Any = None,
    registry: Mapping[str, Any] | CapabilityRegistry | None = None,
    mode: str = AUDIT,
) -> ReplayReport:
    """Replay one artifact (seed 001 §3) and report every check in order."""
    return _replay(artifact, None, contract=contract, registry=registry, mode=mode)


@dataclass
class _Run:
    """The state one artifact's checks share (`pipeline.run` over `_CHECKS`)."""

    artifact: Artifact
    serialised: Any
    canonical: bytes | None
    contract: Any
    caps: Any
    report: ReplayReport

    @property
    def doc(self) -> dict[str, Any]:
        return self.artifact.document

    def failed(self, check: str, code: str, message: str, **where: Any) -> Refusal:
        self.report.checks.append(Check(check, False, message))
        return Refusal(code, message, where)


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
    `canonical`: :func:`_canonical` of it when already made. The checks are `_CHECKS`, in
    order (seed 001 §3), to the first refusal."""
    caps = _as_registry(registry)
    doc = artifact.document
    trace_id = doc.get("id") if isinstance(doc.get("id"), str) else None
    report = ReplayReport(trace_id=trace_id, format=FORMAT, mode=mode)
    report.unprotected_fields = list(UNPROTECTED_FIELDS)
    state = _Run(artifact, serialised, canonical, contract, caps, report)
    done: ReplayReport = pipeline.run(_CHECKS, state)
    return done


def _type(run: _Run) -> Refusal | None:
    doc = run.doc
    if run.serialised is None:
        try:
            run.serialised = _type_check(doc)
        except ReplayError as exc:
            return run.failed("type", exc.code, exc.message)
    run.report.checks.append(
        Check(
            "type",
            True,
            f"ExecutionArtifact, status {doc['status']}, contract {doc['contract_id']!r}, "
            f"{len(doc.get('field_results', {}))} field results",
        )
    )
    return None


def _version(run: _Run) -> Refusal | None:
    doc = run.doc
    problem = _version_problem(doc["paxman_version"], doc["planner_version"])
    if problem is not None:
        message, expected, observed = problem
        return run.failed(
            "version",
            errors.VERSION_MISMATCH,
            message,
            broke_at="version",
            expected=expected,
            observed=observed,
        )
    run.report.checks.append(
        Check(
            "version",
            True,
            f"paxman_version {doc['paxman_version']} replays on Paxman {PAXMAN_VERSION} "
            f"(same major, not newer); planner_version {doc['planner_version']!r} is supported",
        )
    )
    return None


def _capabilities(run: _Run) -> Refusal | None:
    caps = run.caps
    pinned = run.doc.get("capability_versions", {})
    for cap, version in pinned.items():
        registered = caps.versions(cap)
        if not registered:
            return run.failed(
                "capabilities",
                errors.CAPABILITY_NOT_FOUND,
                f"Capability {cap!r} is no longer registered",
                broke_at=f"capability_versions/{cap}",
                expected=", ".join(caps.ids()) or "(empty registry)",
                observed=cap,
            )
        if version not in registered:
            message = (
                f"no capability registered for id={cap!r}, version={version!r} "
                f"(registered: {', '.join(f'{cap}@{v}' for v in registered)})"
            )
            return run.failed(
                "capabilities",
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
    run.report.checks.append(Check("capabilities", True, detail))
    return None


def _hash(run: _Run) -> Refusal | None:
    doc = run.doc
    expected_hash = replay_hash_of(doc, run.serialised)
    recorded = doc["replay_hash"]
    if recorded != expected_hash:
        return run.failed(
            "hash",
            errors.HASH_MISMATCH,
            f"Artifact hash mismatch: expected {expected_hash}, got {recorded}",
            broke_at="replay_hash",
            expected=expected_hash,
            observed=recorded,
        )
    run.report.checks.append(
        Check("hash", True, f"replay_hash {recorded} recomputes over {_HASH_COVERAGE}")
    )
    return None


def _contract(run: _Run) -> Refusal | None:
    doc, contract = run.doc, run.contract
    if contract is None:
        run.report.checks.append(
            Check(
                "contract",
                True,
                f"no contract supplied; contract_id {doc['contract_id']!r} is bound by the hash",
            )
        )
        return None
    if isinstance(contract, InvalidContract):
        return run.failed(
            "contract",
            errors.INVALID_CONTRACT,
            contract.message,
            broke_at="contract",
            expected=doc["contract_id"],
            observed=None,
        )
    cid = _contract_id(contract)
    if cid is None:
        return run.failed(
            "contract",
            errors.INVALID_CONTRACT,
            "the supplied contract has no string id",
            broke_at="contract_id",
            expected=doc["contract_id"],
            observed=None,
        )
    if cid != doc["contract_id"]:
        message = (
            f"the supplied contract {cid!r} is not the one the artifact was produced "
            f"from ({doc['contract_id']!r})"
        )
        return run.failed(
            "contract",
            errors.INVALID_CONTRACT,
            message,
            broke_at="contract_id",
            expected=doc["contract_id"],
            observed=cid,
        )
    run.report.checks.append(Check("contract", True, f"the supplied contract is {cid!r}"))
    return None


def _rehydration(run: _Run) -> Refusal | None:
    """Stored as stable_dumps bytes, read back, byte-equal to the input (a file already in
    that spelling was itself read back strictly from those bytes)."""
    doc, artifact = run.doc, run.artifact
    canonical = run.canonical
    if canonical is None:
        canonical = _canonical(run.serialised)
    spelled = artifact.raw is not None and artifact.raw.rstrip(b"\n") == canonical
    read_back = doc if spelled else loads_strict(canonical, where="rehydrated artifact")
    # read back from the canonical bytes, the value must equal the input's; a file already
    # in that spelling was read back from them (`read_back` is `doc`), and then the rebuilt
    # artifact holds the input's own values under the input's keys (all of them FIELDS, as
    # the type check proved, none NaN, as strict JSON refuses it): equal, not rebuilt
    if read_back is not doc and rehydrate(read_back) != doc:  # pragma: no cover - JSON survives
        message = "the rehydrated artifact does not re-serialise to the input's bytes"
        return run.failed("rehydration", errors.MALFORMED_TRACE, message)
    spelling = (
        "the file is in that canonical spelling"
        if spelled
        else "the file itself is spelt differently (whitespace or key order)"
    )
    run.report.checks.append(
        Check(
            "rehydration",
            True,
            f"the rehydrated artifact re-serialises to the input's canonical bytes "
            f"({len(canonical)} bytes, sha256 {hashlib.sha256(canonical).hexdigest()}); "
            f"{spelling}",
        )
    )
    run.report.replayable = True
    return None


#: one artifact's replay, in seed 001 §3's order; the first refusal ends it
_CHECKS: tuple[pipeline.Check[_Run], ...] = (
    pipeline.Check("type", _type),
    pipeline.Check("version", _version),
    pipeline.Check("capabilities", _capabilities),
    pipeline.Check("hash", _hash),
    pipeline.Check("contract", _contract),
    pipeline.Check("rehydration", _rehydration),
)
