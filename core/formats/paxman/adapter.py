"""The Paxman ExecutionArtifact behind the one format interface
(:mod:`core.formats.protocol`): parse is the strict JSON read (bounded by
``MAX_ARTIFACT_BYTES``); verify and replay are ``paxman.replay`` (Paxman's replay is
rehydration, nothing re-executed).

Pure: no Django.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import IO, Any

from core import errors
from core.errors import ReplayError
from core.formats import paxman
from core.formats.common import differences, halt_refusal, halts_clear
from core.formats.paxman import settings as paxman_settings
from core.formats.protocol import (
    ArtifactVersions,
    CompanionRule,
    Difference,
    FormatRegistry,
    NativeCode,
    OptionSources,
    StoredFacts,
    VerifyContext,
)
from core.replay.report import Check, ReplayReport

#: the name rule of a contract dropped beside its artifact: ``x.json`` -> ``x.contract.json``
CONTRACT_SUFFIX = ".contract.json"


@dataclass(frozen=True)
class PaxmanOptions:
    """What checking one artifact takes (:meth:`PaxmanFormat.options`): the contract supplied
    with it (parsed: a ``paxman.InvalidContract`` when it is none; None: no contract) and the
    capabilities replay accepts (None: the built-ins)."""

    contract: Any = None
    capabilities: paxman.CapabilityRegistry | None = None


PAXMAN_KEYS = frozenset(
    {"capability_versions", "contract_id", "diagnostics", "evidence", "execution_plan"}
    | {"field_results", "normalized_data", "paxman_version", "planner_version"}
    | {"replay_hash", "statistics", "unresolved_fields"}
)


class PaxmanFormat:
    name = paxman.FORMAT
    label = "a Paxman execution artifact"
    keys = PAXMAN_KEYS
    #: ``x.contract.json`` dropped with the artifact ``x.json`` is its contract
    companions: tuple[CompanionRule, ...] = (
        CompanionRule(
            r"\.json$",
            r"^{stem}\.contract\.json$",
            role="contract",
            needs_owner=True,
            describes="a Paxman artifact's contract",
        ),
    )
    #: every code a report of it can carry besides the console's own (protocol.CONSOLE_CODES)
    codes = frozenset(
        {
            errors.MALFORMED_TRACE,
            errors.VERSION_MISMATCH,
            errors.CAPABILITY_NOT_FOUND,
            errors.HASH_MISMATCH,
            errors.INVALID_CONTRACT,
        }
    )
    #: a contract supplied with the artifact that is not its contract is the caller's error:
    #: the artifact is refused (nothing stored), as a file that does not parse is
    unstorable_codes = frozenset({errors.MALFORMED_TRACE, errors.INVALID_CONTRACT})
    replay_note = "rehydrates the artifact and checks it in the seed's order (seed 001 §3)"
    #: an artifact issued again under its ``id`` is stored as another version of it (an
    #: artifact that records no id is stored under its file's sha256: no versions)
    versions = ArtifactVersions(
        title="Other versions of this artifact",
        started="Artifact created_at",
        version="paxman_version",
    )
    #: no templates of its own: the console's shared panel shows it
    templates: str | None = None
    report_template: str | None = None

    def sniff(self, head: bytes, filename: str) -> bool:
        return False

    def companion_alone(self, name: str) -> ReplayError:
        """A contract dropped without the artifact it belongs to."""
        artifact = name[: -len(CONTRACT_SUFFIX)] + ".json"
        message = (
            f"{name} is a Paxman contract (named {CONTRACT_SUFFIX}); drop it together "
            f"with the artifact it belongs to, {artifact}"
        )
        return ReplayError(errors.INVALID_CONTRACT, message)

    def parse(self, source: IO[bytes], filename: str, ctx: VerifyContext) -> paxman.Artifact:
        data = source.read(paxman.MAX_ARTIFACT_BYTES + 1)
        if len(data) > paxman.MAX_ARTIFACT_BYTES:
            raise ReplayError(
                errors.MALFORMED_TRACE, f"artifact: larger than {paxman.MAX_ARTIFACT_BYTES} bytes"
            )
        return paxman.parse(data)

    def refused(self, exc: ReplayError, filename: str, ctx: VerifyContext) -> ReplayReport:
        report = ReplayReport(trace_id=None, format=self.name, mode=ctx.mode)
        report.unprotected_fields = list(paxman.UNPROTECTED_FIELDS)
        report.checks.append(Check("type", False, exc.message))
        return report.fail(exc.code, exc.message)

    @staticmethod
    def _id(parsed: paxman.Artifact) -> str | None:
        value = parsed.document.get("id")
        return value if isinstance(value, str) and value else None

    def options(self, sources: OptionSources) -> PaxmanOptions:
        """The contract the request gave (``contract``: its name and bytes) and the
        capabilities: built-ins, installed packages' and ``REPLAY_PAXMAN_CAPABILITIES``."""
        given = sources.given.get("contract")
        return PaxmanOptions(
            contract=paxman.parse_contract(given[1], where=given[0]) if given else None,
            capabilities=paxman_settings.capabilities(
                sources.setting, paxman_settings.installed_capabilities()
            ),
        )

    def verify(self, parsed: paxman.Artifact, filename: str, ctx: VerifyContext) -> ReplayReport:
        refusal = halt_refusal(self.name, self._id(parsed), ctx)
        if refusal is not None:
            return refusal
        opts = ctx.format_options
        if not isinstance(opts, PaxmanOptions):
            opts = PaxmanOptions()
        report = paxman.replay(
            parsed, contract=opts.contract, registry=opts.capabilities, mode=ctx.mode
        )
        return halts_clear(report, ctx)

    replay = verify

    def facts(
        self, parsed: paxman.Artifact, report: ReplayReport, ctx: VerifyContext
    ) -> StoredFacts:
        doc = parsed.document
        created = doc.get("created_at")
        return StoredFacts(
            trace_id=(self._id(parsed) or ctx.file_id or "paxman-artifact")[:64],
            schema_version=int(paxman.REPLAY_VERSION),
            job_id=str(doc.get("contract_id", "")),
            runtime_name="paxman",
            runtime_version=str(doc.get("paxman_version", "")),
            started_at=created if isinstance(created, str) else None,
            step_count=len(doc.get("field_results") or {}),
        )

    def native_code(self, report: Mapping[str, Any]) -> NativeCode | None:
        return None  # its reports carry the console's codes only

    def panel(self, parsed: paxman.Artifact) -> dict[str, str]:
        doc = parsed.document
        caps = doc.get("capability_versions") or {}
        unresolved = doc.get("unresolved_fields") or []
        return {
            "artifact id": str(doc.get("id") or "(none recorded)"),
            "status": str(doc.get("status", "")),
            "contract_id": str(doc.get("contract_id", "")),
            "paxman_version": str(doc.get("paxman_version", "")),
            "planner_version": str(doc.get("planner_version", "")),
            "replay_hash": str(doc.get("replay_hash", "")),
            "capabilities": ", ".join(f"{k}@{v}" for k, v in sorted(caps.items())) or "none",
            "field results": str(len(doc.get("field_results") or {})),
            "unresolved fields": ", ".join(map(str, unresolved)) or "none",
        }

    def compare(self, a: paxman.Artifact, b: paxman.Artifact) -> list[Difference]:
        return differences(a.document, b.document)

    def records(self, parsed: paxman.Artifact) -> Any:
        """The artifact as the trace page's records: its fields, each followed by its field
        results, evidence items, diagnostics or field plans (:func:`.view.records`)."""
        from core.formats.paxman.view import records

        return records(parsed)


def register(registry: FormatRegistry) -> None:
    registry.register(PaxmanFormat())
