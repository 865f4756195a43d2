"""The built-in formats behind the one interface (:mod:`replay.formats.protocol`): the native
``replay-trace``, the Paxman ExecutionArtifact and the AHD replay sidecar.

Each adapter calls its format's own module; nothing here changes what a format checks.

- Native: parse is ``open_native``; verify and replay are ``engine.replay``.
- Paxman: parse is the strict JSON read (bounded by ``MAX_ARTIFACT_BYTES``); verify and
  replay are ``paxman.replay`` (Paxman's replay is rehydration, nothing re-executed).
- AHD: parse is the sidecar schema (bounded by ``MAX_SIDECAR_BYTES``); verify re-hashes the
  token and brief the sidecar names, from (in this order) the inputs stored with the file,
  the files uploaded with it, or an AHD checkout on disk (``REPLAY_AHD_ROOT``, or the one the
  CLI finds). Uploaded and stored inputs are laid out in a fresh directory at the sidecar's
  recorded paths and read through the same hardened reader as a checkout (``ahd.Checkout``:
  links resolved inside the root, regular files only, size limits), so a recorded path with
  ``..`` is refused exactly as it is against a checkout. AHD recomputes nothing, so there is
  no replay: re-verifying re-hashes the stored inputs.

A file that is halted (its sha256 or its id in ``ctx.halted``) is refused with
``FORCE_HALT_ACTIVE`` before anything else is checked, as a native replay is.

Pure apart from the AHD temporary directory: no Django.
"""

from __future__ import annotations

import datetime
import ntpath
import os
import posixpath
import re
import tempfile
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

from replay import errors
from replay.diff import diff
from replay.errors import ReplayError
from replay.formats import ahd, mace, native, paxman, verist
from replay.formats.protocol import (
    Difference,
    FormatRegistry,
    StoredFacts,
    StoredSnapshot,
    VerifyContext,
)
from replay.report import Check, ReplayReport

# Top-level keys only one format has (the first one met decides).
NATIVE_KEYS = frozenset(
    {"format", "trace_id", "job", "required_snapshots", "snapshots", "final_answer", "seal"}
    | {"events", "steps", "outputs", "meta"}
)
PAXMAN_KEYS = frozenset(
    {"capability_versions", "contract_id", "diagnostics", "evidence", "execution_plan"}
    | {"field_results", "normalized_data", "paxman_version", "planner_version"}
    | {"replay_hash", "statistics", "unresolved_fields"}
)
AHD_KEYS = frozenset(
    {"ahd_version", "ahd_commit", "git_dirty", "node_version", "platform", "invoked_at"}
    | {"argv", "token", "brief", "sampling", "models", "conditions", "backfilled"}
)


MACE_KEYS = frozenset(
    {"log_id", "percept", "router_decision", "iteration_trace", "immutable_subpayload"}
    | {"signature_key_id", "REPLAYABLE", "council_votes", "brainstate_before"}
    | {"brainstate_after", "final_output", "config_hash", "seed_namespace"}
    | set(mace.SNAPSHOT_FIELDS.values())
)


def differences(a: Any, b: Any) -> list[Difference]:
    return [
        Difference(
            e.path,
            e.kind,
            None if e.kind == "added" else e.before,
            None if e.kind == "removed" else e.after,
        )
        for e in diff(a, b)
    ]


def halt_refusal(
    name: str, trace_id: str | None, ctx: VerifyContext, snapshot_ids: Iterable[str] = ()
) -> ReplayReport | None:
    """The refusal of a halted file (its stored sha256, its id, or a snapshot it names), or
    None."""
    if ctx.halted is None:
        return None
    concerned = [i for i in (ctx.file_id, trace_id, *snapshot_ids) if i]
    why = list(dict.fromkeys(ctx.halted[i] for i in concerned if i in ctx.halted))
    if not why:
        return None
    report = ReplayReport(trace_id=trace_id, format=name, mode=ctx.mode)
    report.checks.append(Check("halts", False, "; ".join(why)))
    return report.fail(
        errors.FORCE_HALT_ACTIVE,
        f"replay is halted until a council FORCE_HALT_CLEAR: {'; '.join(why)}",
    )


HALTS_CLEAR = "no active halt on this file"


def halts_clear(report: ReplayReport, ctx: VerifyContext) -> ReplayReport:
    """The passed halts check, second as in the native order (after the format check), when
    the caller read the ledger."""
    if ctx.halted is not None:
        report.checks.insert(min(1, len(report.checks)), Check("halts", True, HALTS_CLEAR))
    return report


# --- native ------------------------------------------------------------------------------


class NativeFormat:
    name = native.FORMAT
    label = "a native replay-trace"
    keys = NATIVE_KEYS
    unstorable_codes = frozenset({errors.MALFORMED_TRACE, errors.UNSUPPORTED_SCHEMA_VERSION})
    replay_note = "replays every step with the registered step functions (seed 003 §6)"

    def sniff(self, head: bytes, filename: str) -> bool:
        name = filename.lower()
        return head.startswith(native.GZIP_MAGIC) or name.removesuffix(".gz").endswith(".jsonl")

    def parse(self, source: IO[bytes], filename: str, ctx: VerifyContext) -> native.NativeTrace:
        trace = native.open_native(source, filename, ctx.limits or native.DEFAULT_LIMITS)
        if ctx.retained_only:
            _use_retained_snapshots(trace)
        return trace

    def refused(self, exc: ReplayError, filename: str, ctx: VerifyContext) -> ReplayReport:
        report = ReplayReport(trace_id=None, format=self.name, mode=ctx.mode)
        report.checks.append(Check("format", False, exc.message))
        return report.fail(exc.code, exc.message)

    def verify(self, parsed: native.NativeTrace, filename: str, ctx: VerifyContext) -> ReplayReport:
        from replay import engine
        from replay.registry import default_registry

        return engine.replay(
            parsed,
            mode=ctx.mode,
            registry=ctx.registry or default_registry(),
            keys=ctx.keys,
            stored_snapshot=ctx.stored_snapshot,
            halted=ctx.halted,
            at=ctx.at,
            limits=ctx.replay_limits or engine.ReplayLimits(),
            continue_past=frozenset(ctx.continue_past),
            clock=ctx.clock,
            progress=ctx.progress,
            workers=ctx.workers,
            file_id=ctx.file_id,
            erased=ctx.erased,
        )

    replay = verify

    def facts(
        self, parsed: native.NativeTrace, report: ReplayReport, ctx: VerifyContext
    ) -> StoredFacts:
        header = parsed.header
        job = header["job"]
        snapshots = [
            StoredSnapshot(
                snap["snapshot_id"],
                snap["kind"],
                snap["body"],
                snap["schema_version"],
                snap["signature"],
            )
            for snap in header["snapshots"]
            # the store is content-addressed: only a body that hashes to its id goes in
            if snap.get("body") is not None
            and native.snapshot_id_of(snap["body"]) == snap["snapshot_id"]
        ]
        by_kind = {s["kind"]: s["snapshot_id"] for s in header["snapshots"]}
        return StoredFacts(
            trace_id=header["trace_id"],
            schema_version=header["schema_version"],
            encoding=parsed.encoding + (".gz" if parsed.compressed else ""),
            job_id=job["job_id"],
            job_seed=job["job_seed"],
            runtime_name=job["runtime"]["name"],
            runtime_version=job["runtime"]["version"],
            started_at=job.get("started_at"),
            event_count=report.stats.get("events", 0),
            step_count=report.stats.get("steps", 0),
            required_snapshot_ids=[
                {"kind": kind, "snapshot_id": by_kind.get(kind)}
                for kind in header["required_snapshots"]
            ],
            missing_outputs=[
                m.split(" ")[0].removeprefix("output:")
                for m in report.missing
                if m.startswith("output:")
            ],
            snapshots=snapshots,
        )

    def panel(self, parsed: native.NativeTrace) -> dict[str, str]:
        header = parsed.header
        job = header.get("job", {})
        return {
            "trace_id": str(header.get("trace_id", "")),
            "job_id": str(job.get("job_id", "")),
            "runtime": f"{job.get('runtime', {}).get('name', '')} "
            f"{job.get('runtime', {}).get('version', '')}".strip(),
            "snapshots": str(len(header.get("snapshots", []))),
        }

    def compare(self, a: native.NativeTrace, b: native.NativeTrace) -> list[Difference]:
        def head(t: native.NativeTrace) -> dict[str, Any]:
            return {k: v for k, v in t.header.items() if k not in ("events", "steps", "outputs")}

        return differences(head(a), head(b))


def _use_retained_snapshots(trace: native.NativeTrace) -> None:
    """For a stored trace, snapshot bodies come from the retained store, not from the file.

    Retention decides: once a body is removed from the store, every stored trace that needs
    it is MISSING_SNAPSHOT, even one whose original file still carries a copy. A body in the
    file that does not hash to its snapshot_id is kept, so the replay reports the tampering.
    (The seal never covers bodies, so dropping them changes no other check.)
    """
    for snap in trace.header["snapshots"]:
        body = snap.get("body")
        if body is not None and native.snapshot_id_of(body) == snap["snapshot_id"]:
            del snap["body"]


# --- Paxman ------------------------------------------------------------------------------


class PaxmanFormat:
    name = paxman.FORMAT
    label = "a Paxman execution artifact"
    keys = PAXMAN_KEYS
    #: a contract supplied with the artifact that is not its contract is the caller's error:
    #: the artifact is refused (nothing stored), as a file that does not parse is
    unstorable_codes = frozenset(
        {errors.MALFORMED_TRACE, errors.UNSUPPORTED_SCHEMA_VERSION, errors.INVALID_CONTRACT}
    )
    replay_note = "rehydrates the artifact and checks it in the seed's order (seed 001 §3)"

    def sniff(self, head: bytes, filename: str) -> bool:
        return False

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

    def verify(self, parsed: paxman.Artifact, filename: str, ctx: VerifyContext) -> ReplayReport:
        refusal = halt_refusal(self.name, self._id(parsed), ctx)
        if refusal is not None:
            return refusal
        report = paxman.replay(
            parsed, contract=ctx.contract, registry=ctx.capabilities, mode=ctx.mode
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


# --- AHD ---------------------------------------------------------------------------------

UPLOADED = "<uploaded inputs>"
STORED = "<stored inputs>"
INPUT_KINDS = {"token": "ahd-token", "brief": "ahd-brief"}
NOT_UPLOADED_MESSAGE = (
    "{name} names inputs that were not uploaded with it: {missing}; upload the sidecar "
    "together with every file it names"
)


@dataclass
class AhdRun:
    """A parsed sidecar, and the inputs read when it was verified (field -> text)."""

    sidecar: ahd.Sidecar
    data: bytes
    filename: str = ""
    texts: dict[str, str] = field(default_factory=dict)

    def entries(self) -> list[ahd.Input]:
        return [self.sidecar.token] + ([self.sidecar.brief] if self.sidecar.brief else [])


def input_basename(recorded: str) -> str:
    """The file name of a recorded input path (POSIX or Windows): what an upload matches."""
    if ahd._WINDOWS_ABS.match(recorded) or "\\" in recorded:
        return ntpath.basename(recorded)
    return posixpath.basename(recorded)


def _layout(root: Path, recorded: str) -> Path | None:
    """Where a recorded path is laid out under ``root`` so ``ahd.resolve_input`` finds it: a
    relative path at itself, an absolute one by its file name (its shortest trailing part).
    None for a relative path leading out of ``root`` (nothing is written; the reader refuses
    the recorded path as it would in a checkout)."""
    if ahd._is_absolute(recorded):
        name = input_basename(recorded)
        return root / name if name not in ("", ".", "..") else None
    target = os.path.normpath(os.path.join(root, recorded))
    if os.path.commonpath([target, str(root)]) != str(root) or target == str(root):
        return None
    return Path(target)


class AhdFormat:
    name = ahd.FORMAT
    label = "an AHD replay sidecar"
    keys = AHD_KEYS
    #: a sidecar whose inputs did not come with it is not stored: re-verifying it later
    #: would depend on a server checkout
    unstorable_codes = frozenset(
        {errors.MALFORMED_TRACE, errors.UNSUPPORTED_SCHEMA_VERSION, errors.MISSING_SNAPSHOT}
    )
    replay_note = (
        "AHD recomputes nothing: re-verifying re-hashes the token and brief stored with the run"
    )

    def sniff(self, head: bytes, filename: str) -> bool:
        return filename.lower().endswith((ahd.SIDECAR_SUFFIX, ".md", ".markdown"))

    def parse(self, source: IO[bytes], filename: str, ctx: VerifyContext) -> AhdRun:
        lower = filename.lower()
        if not lower.endswith(ahd.SIDECAR_SUFFIX) and lower.endswith((".md", ".markdown")):
            message = ahd.REPORT_ALONE_MESSAGE.format(
                name=filename, sidecar=ahd.sidecar_path_for(Path(filename)).name
            )
            raise ReplayError(errors.MALFORMED_TRACE, message)
        data = source.read(ahd.MAX_SIDECAR_BYTES + 1)
        if len(data) > ahd.MAX_SIDECAR_BYTES:
            raise ReplayError(
                errors.MALFORMED_TRACE, f"{filename}: larger than {ahd.MAX_SIDECAR_BYTES} bytes"
            )
        return AhdRun(ahd.parse_sidecar(data, where=filename), data, filename)

    def refused(self, exc: ReplayError, filename: str, ctx: VerifyContext) -> ReplayReport:
        report = ahd._report(ctx.mode)
        report.checks.append(Check("format", False, exc.message))
        return report.fail(exc.code, exc.message, expected=exc.expected, observed=exc.observed)

    def _limits(self, ctx: VerifyContext) -> dict[str, Any]:
        return {
            "excluded": ctx.excluded,
            "max_input_bytes": ctx.max_input_bytes or ahd.MAX_INPUT_BYTES,
        }

    def verify(self, parsed: AhdRun, filename: str, ctx: VerifyContext) -> ReplayReport:
        refusal = halt_refusal(self.name, None, ctx)
        if refusal is not None:
            return refusal
        sidecar = parsed.sidecar
        if not ctx.stored_inputs and not ctx.inputs:
            report = ahd.verify_upload(
                parsed.data,
                filename,
                root=ctx.input_root,
                mode=ctx.mode,
                **self._limits(ctx),
            )
            if ctx.input_root is not None and report.status == "ok":
                checkout = ahd.Checkout.at(
                    Path(os.path.abspath(ctx.input_root)), **self._limits(ctx)
                )
                self._capture(parsed, checkout)
            if ctx.input_root is not None and ctx.input_root_named != "REPLAY_AHD_ROOT":
                hidden = str(Path(os.path.abspath(ctx.input_root)))
                _hide(report, "REPLAY_AHD_ROOT", hidden)  # the CLI shows its own paths
            return halts_clear(report, ctx)
        report = ahd._report(ctx.mode)
        report.checks.append(Check("format", True, ahd._describe(sidecar, Path(filename))))
        report.unprotected_fields += [f for f in sidecar.ignored if "." not in f]
        label = STORED if ctx.stored_inputs else UPLOADED
        with tempfile.TemporaryDirectory(prefix="ahd-inputs-") as tmp:
            root = Path(os.path.realpath(tmp))
            if ctx.stored_inputs:
                how = self._lay_out_stored(root, ctx)
            else:
                missing = self._lay_out_uploaded(root, parsed, ctx)
                if missing:
                    message = NOT_UPLOADED_MESSAGE.format(name=filename, missing="; ".join(missing))
                    report.checks.append(Check("root", False, message))
                    report.fail(errors.MISSING_SNAPSHOT, message, broke_at=missing[0].split()[0])
                    return halts_clear(report, ctx)
                how = "the files uploaded with the sidecar"
            checkout = ahd.Checkout.at(root, max_input_bytes=self._limits(ctx)["max_input_bytes"])
            ahd._inputs_verified(report, sidecar, checkout, how)
            if report.status == "ok":
                self._capture(parsed, checkout)
            _hide(report, label, str(root))
        return halts_clear(report, ctx)

    def _capture(self, parsed: AhdRun, checkout: ahd.Checkout) -> None:
        """Keep the inputs as they were verified, read by the same hardened reader."""
        for entry in parsed.entries():
            read = ahd._input_text(entry, checkout)
            if not isinstance(read, ahd.FieldResult):
                parsed.texts[entry.field] = read[0]

    def _lay_out_uploaded(self, root: Path, parsed: AhdRun, ctx: VerifyContext) -> list[str]:
        """Write each uploaded input at its recorded path; what is missing, in words."""
        missing = []
        for entry in parsed.entries():
            data = ctx.inputs.get(entry.path)
            if data is None:
                data = ctx.inputs.get(input_basename(entry.path))
            if data is None:
                missing.append(f"{entry.field} {entry.path}")
                continue
            _write(root, entry.path, data)
        return missing

    def _lay_out_stored(self, root: Path, ctx: VerifyContext) -> str:
        """Write each stored input at its recorded path; one no longer stored is read from
        the server's checkout (``ctx.input_root``, through the hardened reader) when there is
        one. Says where the inputs came from."""
        fallback = None
        if ctx.input_root is not None and Path(ctx.input_root).is_dir():
            fallback = ahd.Checkout.at(Path(os.path.abspath(ctx.input_root)), **self._limits(ctx))
        used_fallback = False
        for ref in ctx.stored_inputs:
            sid = ref.get("snapshot_id")
            body = ctx.stored_snapshot(sid) if sid else None
            if not isinstance(body, str) and fallback is not None:
                entry = ahd.Input(ref["kind"].removeprefix("ahd-"), ref["path"], "")
                read = ahd._input_text(entry, fallback)
                if not isinstance(read, ahd.FieldResult):
                    body = read[0]
                    used_fallback = True
            if isinstance(body, str):
                _write(root, ref["path"], body.encode("utf-8", "surrogatepass"))
        if used_fallback:
            return f"the inputs stored with this run, and from {ctx.input_root_named}"
        return "the inputs stored with this run"

    def replay(self, parsed: AhdRun, filename: str, ctx: VerifyContext) -> None:
        return None

    def facts(self, parsed: AhdRun, report: ReplayReport, ctx: VerifyContext) -> StoredFacts:
        sidecar = parsed.sidecar
        snapshots = []
        refs = []
        for entry in parsed.entries():
            text = parsed.texts.get(entry.field)
            sid = native.snapshot_id_of(text) if text is not None else None
            kind = INPUT_KINDS[entry.field]
            refs.append({"kind": kind, "snapshot_id": sid, "path": entry.path})
            if text is not None and sid is not None:
                snapshots.append(StoredSnapshot(sid, kind, text))
        seed = sidecar.document.get("sampling", {}).get("seed")
        job = sidecar.brief.path if sidecar.brief is not None else sidecar.token.path
        return StoredFacts(
            trace_id=ctx_name(ctx, parsed),
            schema_version=ahd.SCHEMA_VERSION,
            job_id=job,
            job_seed="" if seed is None else str(seed),
            runtime_name="ahd",
            runtime_version=sidecar.ahd_version,
            started_at=sidecar.invoked_at,
            required_snapshot_ids=refs,
            snapshots=snapshots,
        )

    def panel(self, parsed: AhdRun) -> dict[str, str]:
        s = parsed.sidecar
        doc = s.document
        sampling = doc.get("sampling", {})
        commit = s.ahd_commit or "not recorded"
        if s.ahd_commit and s.git_dirty:
            commit += " (dirty)"
        return {
            "kind": s.kind,
            "ahd_version": s.ahd_version,
            "ahd_commit": commit,
            "node_version": str(doc.get("node_version", "")),
            "platform": str(doc.get("platform", "")),
            "invoked_at": s.invoked_at,
            "argv": " ".join(doc.get("argv", [])),
            "token": f"{s.token.path} ({s.token.hash})",
            "brief": f"{s.brief.path} ({s.brief.hash})" if s.brief else "none (critique run)",
            "sampling": f"n={sampling.get('n')}, temperature={sampling.get('temperature')}, "
            f"seed={sampling.get('seed')}",
            "models": ", ".join(m.get("id", "") for m in doc.get("models", [])) or "none",
            "conditions": ", ".join(doc.get("conditions", {}).get("effective", [])) or "none",
            "backfilled": "yes" if s.backfilled else "no",
        }

    def compare(self, a: AhdRun, b: AhdRun) -> list[Difference]:
        return differences(a.sidecar.document, b.sidecar.document)


def ctx_name(ctx: VerifyContext, parsed: AhdRun) -> str:
    """An AHD run's id: the sidecar's name without ``.replay.json`` (a sidecar records no id
    of its own; AHD names a run's report and sidecar after it)."""
    name = parsed.filename
    if name.lower().endswith(ahd.SIDECAR_SUFFIX):
        name = name[: -len(ahd.SIDECAR_SUFFIX)]
    return name[:64] or "ahd-run"


def _write(root: Path, recorded: str, data: bytes) -> None:
    target = _layout(root, recorded)
    if target is None:
        return
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_bytes(data)


def _hide(report: ReplayReport, label: str, where: str) -> None:
    def hide(text: str) -> str:
        return text.replace(where, label)

    report.checks = [Check(c.name, c.ok, hide(c.detail)) for c in report.checks]
    report.message = hide(report.message)


# --- Verist ------------------------------------------------------------------------------

#: Top-level keys of a bare Verist snapshot, and the baseline envelope's own (``format`` is
#: native's too: a ``verist-baseline@`` file is claimed by ``sniff`` before keys are asked)
VERIST_KEYS = frozenset(
    {"workflowId", "workflowVersion", "stepName", "inputHash", "artifacts", "capturedAt"}
    | {"snapshot"}
)
_VERIST_HEAD = re.compile(rb'\A(?:\xef\xbb\xbf)?\s*\{\s*"format"\s*:\s*"verist-baseline@')


class VeristFormat:
    name = verist.FORMAT
    label = "a Verist snapshot"
    keys = VERIST_KEYS
    unstorable_codes = frozenset({errors.MALFORMED_TRACE, errors.UNSUPPORTED_SCHEMA_VERSION})
    replay_note = (
        "re-hashes the input and artifacts (hashValue, js-sorted), loads the step-output and "
        "recomputes the step with its registered function (seed 002)"
    )
    replay_options = verist.REPLAY_OPTIONS
    check_options = staticmethod(verist.check_options)

    def sniff(self, head: bytes, filename: str) -> bool:
        return _VERIST_HEAD.match(head) is not None

    def storable(self, report: ReplayReport) -> bool:
        """Refused only for the file's own faults: the recompute's input-schema gate
        (MALFORMED_TRACE at ``input``, the last check) judges a well-formed snapshot, which
        is stored with that verdict and replays with ``validate`` off."""
        if report.error_code not in self.unstorable_codes:
            return True
        return bool(report.checks) and report.checks[-1].name == "recompute"

    def parse(self, source: IO[bytes], filename: str, ctx: VerifyContext) -> verist.VeristFile:
        data = source.read(verist.MAX_SNAPSHOT_BYTES + 1)
        return verist.parse(data)

    def refused(self, exc: ReplayError, filename: str, ctx: VerifyContext) -> ReplayReport:
        return verist.refused(exc, ctx.mode)

    def verify(self, parsed: verist.VeristFile, filename: str, ctx: VerifyContext) -> ReplayReport:
        from replay.registry import default_registry

        refusal = halt_refusal(self.name, ctx.file_id, ctx)
        if refusal is not None:
            report = verist.new_report(refusal.trace_id, ctx.mode)
            report.checks = refusal.checks
            report.fail(refusal.error_code or errors.FORCE_HALT_ACTIVE, refusal.message)
            report.verist["code"] = verist.VERIST_CODES[errors.FORCE_HALT_ACTIVE]
            return report
        report = verist.verify(
            parsed,
            mode=ctx.mode,
            registry=ctx.registry or default_registry(),
            options=verist.recompute_options(ctx.options),
            trace_id=ctx.file_id,
        )
        return halts_clear(report, ctx)

    replay = verify

    def facts(
        self, parsed: verist.VeristFile, report: ReplayReport, ctx: VerifyContext
    ) -> StoredFacts:
        s = parsed.snapshot
        return StoredFacts(
            trace_id=(ctx.file_id or s["inputHash"])[:64],
            schema_version=verist.SCHEMA_VERSION,
            job_id=f"{s['workflowId']}/{s['stepName']}"[:200],
            job_seed=s["inputHash"],
            runtime_name="verist",
            runtime_version=str(s["workflowVersion"])[:64],
            started_at=_iso_ms(s["capturedAt"]),
            event_count=len(s["artifacts"]),
            step_count=1,
            missing_outputs=["step-output"] if not report.replayable else [],
        )

    def panel(self, parsed: verist.VeristFile) -> dict[str, str]:
        s = parsed.snapshot
        facts = {
            "file": parsed.kind,
            "workflowId": s["workflowId"],
            "workflowVersion": s["workflowVersion"],
            "stepName": s["stepName"],
            "inputHash": s["inputHash"],
            "capturedAt": f"{s['capturedAt']} ({_iso_ms(s['capturedAt']) or 'out of range'})",
            "artifacts": ", ".join(
                f"{a['kind']}{'' if 'content' in a else ' (hash-only)'}" for a in s["artifacts"]
            )
            or "none",
            "step function": f"{parsed.step_key}",
        }
        if parsed.envelope is not None:
            meta = parsed.envelope["metadata"]
            facts["inputPath"] = meta["inputPath"]
            facts["label"] = meta.get("label", "") or "none"
            facts["commandsCaptured"] = "yes" if meta["commandsCaptured"] else "no"
        return facts

    def compare(self, a: verist.VeristFile, b: verist.VeristFile) -> list[Difference]:
        """``compareSnapshots``: ``/input/...`` (inputDiff), ``/output/...`` (outputDiff),
        ``/commands/...`` (commandsDiff); a diff Verist leaves undefined is one row saying so."""
        result = verist.compare_snapshots(a, b)
        rows: list[Difference] = []
        for key, prefix in (
            ("inputDiff", "/input"),
            ("outputDiff", "/output"),
            ("commandsDiff", "/commands"),
        ):
            d = result[key]
            if d is None:
                rows.append(Difference(prefix, "not comparable", None, f"{key} is undefined"))
                continue
            for e in d["entries"]:
                absent = e.get("absent")
                kind = (
                    "added" if absent == "before" else "removed" if absent == "after" else "changed"
                )
                rows.append(
                    Difference(
                        prefix + e["path"],
                        kind,
                        None if absent == "before" else e["before"],
                        None if absent == "after" else e["after"],
                    )
                )
        return rows


def _iso_ms(ms: int | float) -> str | None:
    try:
        when = datetime.datetime.fromtimestamp(ms / 1000, tz=datetime.UTC)
    except (OverflowError, OSError, ValueError):
        return None
    return when.isoformat(timespec="milliseconds").replace("+00:00", "Z")


# --- MACE ---------------------------------------------------------------------------------


class MaceFormat:
    """MACE reflective logs (:mod:`replay.formats.mace`); the snapshot files uploaded with a
    log (``<snapshot_id>.json``) that verify are stored as its snapshots (kinds
    ``mace-selfrep``...)."""

    name = mace.FORMAT
    label = "a MACE reflective log"
    keys = MACE_KEYS
    #: a log whose snapshots did not come with it is not stored (nothing to re-verify it by),
    #: nor one whose key is not registered (its snapshots' signatures could not be checked,
    #: so none could be stored): register the key and upload it again
    unstorable_codes = frozenset(
        {errors.MALFORMED_TRACE, errors.UNSUPPORTED_SCHEMA_VERSION, errors.MISSING_SNAPSHOT}
        | {errors.UNKNOWN_KEY}
    )
    replay_note = (
        "MACE's router and agents are not in the log, so nothing is re-executed: re-verifying "
        "checks the signature over the immutable sub-payload and, for a log with seed 003's "
        "replay fields, the stored snapshots' ids and signatures, the event ids, REPLAYABLE "
        "and, in production mode, the persisted agent outputs; a log as MACE's writer "
        "persists it is not replayable (no job seed, no snapshots)"
    )

    def sniff(self, head: bytes, filename: str) -> bool:
        return False

    def parse(self, source: IO[bytes], filename: str, ctx: VerifyContext) -> mace.Log:
        data = source.read(mace.MAX_LOG_BYTES + 1)
        return mace.parse_log(data, where=filename)

    def input_names(self, source: IO[bytes], filename: str) -> list[str]:
        """The snapshot files a log names ([] for a file that does not parse)."""
        try:
            log = mace.parse_log(source.read(mace.MAX_LOG_BYTES + 1), where=filename)
            return mace.snapshot_file_names(log.document)
        except ReplayError:
            return []

    def refused(self, exc: ReplayError, filename: str, ctx: VerifyContext) -> ReplayReport:
        return mace.refused(exc, mode=ctx.mode)

    def verify(self, parsed: mace.Log, filename: str, ctx: VerifyContext) -> ReplayReport:
        log_id = str(parsed.document["log_id"])[:64]
        named = [sid for sid in parsed.snapshot_ids.values() if isinstance(sid, str)]
        refusal = halt_refusal(self.name, log_id, ctx, named)
        if refusal is not None:
            return refusal
        stored = {r.get("snapshot_id") for r in ctx.stored_inputs}

        def source(kind: str, sid: str) -> Any:
            if ctx.stored_inputs:  # a stored log: only what is stored with it
                return ctx.stored_snapshot(sid) if sid in stored else None
            return ctx.inputs.get(f"{sid}.json")

        report = mace.verify(
            parsed,
            snapshot_source=source,
            keys=ctx.keys,
            mode=ctx.mode,
            at=ctx.at,
            continue_past=frozenset(ctx.continue_past),
        )
        return halts_clear(report, ctx)

    replay = verify

    def facts(self, parsed: mace.Log, report: ReplayReport, ctx: VerifyContext) -> StoredFacts:
        return mace.stored_facts(parsed, report)

    def panel(self, parsed: mace.Log) -> dict[str, str]:
        return mace.panel(parsed)

    def compare(self, a: mace.Log, b: mace.Log) -> list[Difference]:
        return differences(a.document, b.document)


def register(registry: FormatRegistry) -> None:
    """The built-in formats, in the order detection asks them (a sidecar's name first; a
    ContextOS trace's keys before the native format's, since both have a ``trace_id``)."""
    from replay.formats.contextos_adapter import ContextosFormat

    registry.register(AhdFormat())
    registry.register(ContextosFormat())
    registry.register(NativeFormat())
    registry.register(PaxmanFormat())
    registry.register(VeristFormat())
    registry.register(MaceFormat())
