"""The AHD replay sidecar behind the one format interface (:mod:`core.formats.protocol`).

Parse is the sidecar schema (bounded by ``MAX_SIDECAR_BYTES``); verify re-hashes the token
and brief the sidecar names, from (in this order) the inputs stored with the file, the files
uploaded with it, or an AHD checkout on disk (``REPLAY_AHD_ROOT``, or the one the CLI finds).
Uploaded and stored inputs are laid out in a fresh directory at the sidecar's recorded paths
and read through the same hardened reader as a checkout (``ahd.Checkout``: links resolved
inside the root, regular files only, size limits), so a recorded path with ``..`` is refused
exactly as it is against a checkout. AHD recomputes nothing, so there is no replay:
re-verifying re-hashes the stored inputs.

A file that is halted (its sha256 or its id in ``ctx.halted``) is refused with
``FORCE_HALT_ACTIVE`` before anything else is checked, as a native replay is.

Pure apart from the AHD temporary directory: no Django.
"""

from __future__ import annotations

import io
import ntpath
import os
import posixpath
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

from core import errors
from core.errors import ReplayError
from core.formats import ahd, archive
from core.formats.ahd import settings as ahd_settings
from core.formats.common import differences, halt_refusal, halts_clear, snapshot_id_of
from core.formats.protocol import (
    CompanionRule,
    Difference,
    FormatRegistry,
    InputLimits,
    NativeCode,
    OptionSources,
    Setting,
    StoredFacts,
    StoredSnapshot,
    VerifyContext,
)
from core.replay.report import Check, ReplayReport

AHD_KEYS = frozenset(
    {"ahd_version", "ahd_commit", "git_dirty", "node_version", "platform", "invoked_at"}
    | {"argv", "token", "brief", "sampling", "models", "conditions", "backfilled"}
)

UPLOADED = "<uploaded inputs>"
STORED = "<stored inputs>"
INPUT_KINDS = {"token": "ahd-token", "brief": "ahd-brief"}
NOT_UPLOADED_MESSAGE = (
    "{name} names inputs that were not uploaded with it: {missing}; upload the sidecar "
    "together with every file it names"
)


#: how the settings name the server's checkout, in reports
ROOT_SETTING = "REPLAY_AHD_ROOT"
NOT_ON_DISK_MESSAGE = "{name}: an AHD sidecar is verified against its checkout on disk"


@dataclass(frozen=True)
class AhdOptions:
    """What verifying one sidecar may read (:meth:`AhdFormat.options`): ``input_root``, the
    checkout its inputs are read from when none came with it (the CLI's ``root``, else
    ``REPLAY_AHD_ROOT``), named in reports as ``input_root_named``; ``given_root``, the one
    the caller named (None: the CLI finds the checkout above the sidecar); ``excluded``,
    directories no input may lead into (the server's data); ``max_input_bytes``, one input."""

    input_root: Path | None = None
    input_root_named: str = ROOT_SETTING
    given_root: Path | None = None
    excluded: tuple[str, ...] = ()
    max_input_bytes: int = ahd.MAX_INPUT_BYTES


def options_of(ctx: VerifyContext) -> AhdOptions:
    found = ctx.format_options
    return found if isinstance(found, AhdOptions) else AhdOptions()


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
    #: the files dropped with a sidecar that are not traces themselves (its token and brief,
    #: or an archive of them), and, on the server, every file the sidecar names
    companions: tuple[CompanionRule, ...] = (
        CompanionRule(
            r"\.replay\.json$",
            r"\.(tar\.gz|tgz|zip)$|^(?!.*\.(json|jsonl|gz)$)",
            beside=False,
            describes="a file the AHD sidecar names, or an archive of them",
        ),
    )
    #: every code a report of it can carry besides the console's own (protocol.CONSOLE_CODES)
    codes = frozenset(
        {
            errors.MALFORMED_TRACE,
            errors.UNSUPPORTED_SCHEMA_VERSION,
            errors.MISSING_SNAPSHOT,
            errors.INTEGRITY_FAILURE,
        }
    )
    #: a sidecar whose inputs did not come with it is not stored: re-verifying it later
    #: would depend on a server checkout
    unstorable_codes = frozenset(
        {errors.MALFORMED_TRACE, errors.UNSUPPORTED_SCHEMA_VERSION, errors.MISSING_SNAPSHOT}
    )
    #: on disk, a sidecar's inputs are read from its checkout, never from its directory
    inputs_beside = False
    replay_note = (
        "AHD recomputes nothing: re-verifying re-hashes the token and brief stored with the run"
    )
    #: no templates of its own: the console's shared panel shows it
    templates: str | None = None
    report_template: str | None = None

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

    def input_names(self, source: IO[bytes], filename: str) -> list[str]:
        """The input files a sidecar names (recorded paths and their file names); [] for a
        sidecar that does not parse (it is refused on its own), a report included."""
        try:
            sidecar = ahd.parse_sidecar(source.read(ahd.MAX_SIDECAR_BYTES + 1), where=filename)
        except ReplayError:
            return []
        entries = [sidecar.token] + ([sidecar.brief] if sidecar.brief is not None else [])
        return [n for e in entries for n in (e.path, input_basename(e.path))]

    def refused(self, exc: ReplayError, filename: str, ctx: VerifyContext) -> ReplayReport:
        report = ahd._report(ctx.mode)
        report.checks.append(Check("format", False, exc.message))
        return report.fail(exc.code, exc.message, expected=exc.expected, observed=exc.observed)

    def options(self, sources: OptionSources) -> AhdOptions:
        """The checkout and input limits of one sidecar, from ``REPLAY_AHD_ROOT``,
        ``REPLAY_AHD_MAX_INPUT_BYTES`` and the ``input_root`` a caller gave."""
        given = sources.given.get("input_root")
        given_root = Path(given) if given is not None else None
        return AhdOptions(
            input_root=given_root or ahd_settings.input_root(sources.setting),
            input_root_named=str(given_root) if given_root is not None else ROOT_SETTING,
            given_root=given_root,
            excluded=tuple(sources.server_dirs),
            max_input_bytes=ahd_settings.max_input_bytes(sources.setting),
        )

    def verify_path(self, path: Path | None, filename: str, ctx: VerifyContext) -> ReplayReport:
        """A sidecar (or its report) on disk with no inputs given: verified against the
        checkout it lies in (or the one the caller named); without a path, refused."""
        if path is None:
            report = ReplayReport(trace_id=None, format=self.name, mode=ctx.mode)
            message = NOT_ON_DISK_MESSAGE.format(name=filename)
            report.checks.append(Check("format", False, message))
            return report.fail(errors.MALFORMED_TRACE, message)
        opts = options_of(ctx)
        return ahd.verify_path(path, root=opts.given_root, mode=ctx.mode, **_limits(opts))

    def unpacks(self, filename: str) -> bool:
        """An archive given as the file itself is one AHD run handed over whole."""
        return archive.is_archive(filename)

    def unpack(
        self,
        source: IO[bytes],
        filename: str,
        inputs: dict[str, bytes],
        sources: OptionSources,
    ) -> tuple[IO[bytes], str, dict[str, bytes]]:
        """An archived run (bounded, hostile entries refused naming the entry) as its
        sidecar, the sidecar's file name and its inputs (the archive's other files; the
        ``inputs`` given beside it win)."""
        limits = ahd_settings.archive_limits(sources.setting)
        run = archive.read_run(source.read(limits.max_archive_bytes + 1), filename, limits)
        return io.BytesIO(run.sidecar), run.sidecar_name, {**run.inputs, **inputs}

    def input_limits(self, setting: Setting) -> InputLimits:
        """One token or brief (``REPLAY_AHD_MAX_INPUT_BYTES``) and one archive of them (the
        ``REPLAY_AHD_*`` archive limits)."""
        return InputLimits(
            max_input_bytes=ahd_settings.max_input_bytes(setting),
            archive=ahd_settings.archive_limits(setting),
        )

    def verdict_line(self, report: Mapping[str, Any]) -> str:
        """AHD's own last line under its per-field ok / FAIL list."""
        return ahd.verdict_line(dict(report))

    def rooted(self, filename: str) -> bool:
        """A sidecar is verified against the checkout its token and brief come from."""
        return filename.lower().endswith(ahd.SIDECAR_SUFFIX)

    def root_of(self, path: Path, given_root: str | None) -> Path | None:
        """Where a sidecar's inputs are read: the root given, else the checkout above the
        sidecar (as ``verify`` finds it); None for a file that is not a sidecar, or when no
        checkout is above it."""
        if not self.rooted(path.name):
            return None
        if given_root is not None:
            return Path(given_root)
        return ahd.find_root(path.parent)

    def _limits(self, ctx: VerifyContext) -> dict[str, Any]:
        return _limits(options_of(ctx))

    def verify(self, parsed: AhdRun, filename: str, ctx: VerifyContext) -> ReplayReport:
        refusal = halt_refusal(self.name, None, ctx)
        if refusal is not None:
            return refusal
        sidecar = parsed.sidecar
        opts = options_of(ctx)
        if not ctx.stored_inputs and not ctx.inputs:
            report = ahd.verify_upload(
                parsed.data,
                filename,
                root=opts.input_root,
                mode=ctx.mode,
                **self._limits(ctx),
            )
            if opts.input_root is not None and report.status == "ok":
                checkout = ahd.Checkout.at(
                    Path(os.path.abspath(opts.input_root)), **self._limits(ctx)
                )
                self._capture(parsed, checkout)
            if opts.input_root is not None and opts.input_root_named != ROOT_SETTING:
                hidden = str(Path(os.path.abspath(opts.input_root)))
                _hide(report, ROOT_SETTING, hidden)  # the CLI shows its own paths
            return halts_clear(report, ctx)
        label = STORED if ctx.stored_inputs else UPLOADED
        with tempfile.TemporaryDirectory(prefix="ahd-inputs-") as tmp:
            root = Path(os.path.realpath(tmp))

            def locate(_sidecar: ahd.Sidecar) -> tuple[ahd.Checkout, str] | ahd.NoCheckout:
                """The inputs laid out in ``root`` at their recorded paths: the stored ones,
                or the uploaded ones (refused when one was not uploaded)."""
                if ctx.stored_inputs:
                    how = self._lay_out_stored(root, ctx)
                else:
                    missing = self._lay_out_uploaded(root, parsed, ctx)
                    if missing:
                        message = NOT_UPLOADED_MESSAGE.format(
                            name=filename, missing="; ".join(missing)
                        )
                        return ahd.NoCheckout(message, missing[0].split()[0])
                    how = "the files uploaded with the sidecar"
                limit = self._limits(ctx)["max_input_bytes"]
                return ahd.Checkout.at(root, max_input_bytes=limit), how

            report, read_from = ahd.run_checks(filename, locate, mode=ctx.mode, sidecar=sidecar)
            if read_from is None:  # nothing was read there: no path of it to hide
                return halts_clear(report, ctx)
            if report.status == "ok":
                self._capture(parsed, read_from)
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
        opts = options_of(ctx)
        if opts.input_root is not None and Path(opts.input_root).is_dir():
            fallback = ahd.Checkout.at(Path(os.path.abspath(opts.input_root)), **_limits(opts))
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
            return f"the inputs stored with this run, and from {opts.input_root_named}"
        return "the inputs stored with this run"

    def replay(self, parsed: AhdRun, filename: str, ctx: VerifyContext) -> None:
        return None

    def facts(self, parsed: AhdRun, report: ReplayReport, ctx: VerifyContext) -> StoredFacts:
        sidecar = parsed.sidecar
        snapshots = []
        refs = []
        for entry in parsed.entries():
            text = parsed.texts.get(entry.field)
            sid = snapshot_id_of(text) if text is not None else None
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

    def native_code(self, report: Mapping[str, Any]) -> NativeCode | None:
        return None  # its reports carry the console's codes only

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

    def records(self, parsed: AhdRun) -> Any:
        """The sidecar as the trace page's records: its fields, its token and brief inputs
        and its models (:func:`.view.records`)."""
        from core.formats.ahd.view import records

        return records(parsed.sidecar)


def _limits(opts: AhdOptions) -> dict[str, Any]:
    return {"excluded": opts.excluded, "max_input_bytes": opts.max_input_bytes}


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


def register(registry: FormatRegistry) -> None:
    registry.register(AhdFormat())
