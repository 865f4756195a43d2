"""Verify and replay one Verist file: one ordered list of named checks over one state
(`_CHECKS`, run by :func:`core.replay.pipeline.run`: ``format``, ``input_hash``,
``artifacts``, ``output``, ``recompute``), the first refusal naming the code, then Verist's own
word for it (``report.verist["code"]``). Pure."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from core import errors
from core.canonical import CanonicalError, js_sorted
from core.errors import ReplayError
from core.formats.verist.compare import _diff_result, _output_of
from core.formats.verist.options import RecomputeOptions
from core.formats.verist.snapshot import (
    BASELINE_FORMAT,
    FORMAT,
    STEP_COMMANDS,
    STEP_OUTPUT,
    UNPROTECTED_FIELDS,
    VERIST_CODES,
    VeristFile,
    VeristReport,
    _first,
    capture_artifact,
    hash_matches,
    load_output,
    parse,
    recorded_commands,
)
from core.formats.verist.steps import _partial, _violations
from core.replay import pipeline
from core.replay.diff import MISSING
from core.replay.pipeline import Refusal
from core.replay.report import AUDIT, PRODUCTION, TAMPER_DETECTED, Check, Divergence

# --- verify / replay -------------------------------------------------------------------------


def _in_verists_words(report: VeristReport, own: str | None = None) -> VeristReport:
    """A failed report as Verist says it: a recorded hash that no longer binds its content
    is tamper (a verdict reached), and Verist's word for the code (``own``, else
    :data:`VERIST_CODES`')."""
    code = report.error_code
    assert code is not None
    if code in (errors.INPUT_HASH_MISMATCH, errors.HASH_MISMATCH):
        report.status = TAMPER_DETECTED
        report.authoritative = True
    report.verist["code"] = own or VERIST_CODES.get(code, code.lower())
    return report


def _fail(report: VeristReport, code: str, message: str, **where: Any) -> VeristReport:
    report.fail(code, message, **where)
    return _in_verists_words(report)


def new_report(trace_id: str | None, mode: str) -> VeristReport:
    report = VeristReport(trace_id, FORMAT, mode)  # positional: made once a file
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


@dataclass(slots=True)
class _Run:
    """The state one file's checks share (`pipeline.run` over `_CHECKS`)."""

    parsed: VeristFile
    report: VeristReport
    mode: str
    registry: Any
    options: RecomputeOptions
    #: what ``loadOutput`` gave: the step-output's content, or MISSING
    recorded: Any = MISSING
    #: Verist's word for the refusal, once a check refused
    refused: str | None = None

    def failed(
        self,
        check: str,
        code: str,
        message: str,
        *,
        detail: str | None = None,
        own: str | None = None,
        **where: Any,
    ) -> Refusal:
        """The failed `check` appended (its ``detail``, else the message); ``own``: Verist's
        word for the refusal when it is not the code's."""
        self.report.checks.append(Check(check, False, message if detail is None else detail))
        self.refused = own or VERIST_CODES.get(code, code.lower())
        return Refusal(code, message, where)


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
    report = report or new_report(trace_id, mode)
    run = _Run(parsed, report, mode, registry, options or RecomputeOptions())
    try:
        pipeline.run(_CHECKS, run)
    except CanonicalError as exc:  # a value hashValue cannot write (the parse refuses most)
        message = f"snapshot: not a value hashValue can hash: {exc}"
        report.checks = [Check("format", False, message)]
        report.divergences = []
        return _fail(report, errors.MALFORMED_TRACE, message)
    if run.refused is not None:
        _in_verists_words(report, run.refused)
    return report


# --- the checks, in order --------------------------------------------------------------------


def _format(run: _Run) -> None:
    """What the file is (the parse, before the pipeline, refused what is not a file)."""
    parsed = run.parsed
    s = parsed.snapshot
    what = (
        f"{BASELINE_FORMAT} envelope ({parsed.envelope['metadata']['inputPath']})"
        if parsed.envelope is not None
        else "bare snapshot"
    )
    run.report.checks.append(
        Check(
            "format",
            True,
            f"Verist {what}: step {parsed.step_key}, {len(s['artifacts'])} artifacts, "
            f"captured at {s['capturedAt']}",
        )
    )


def _input_hash(run: _Run) -> Refusal | None:
    """``hashValue(input)`` is the recorded ``inputHash`` (Verist's recompute checks it
    before anything runs)."""
    s = run.parsed.snapshot
    same, observed = hash_matches(s["input"], s["inputHash"])
    if not same:
        return run.failed(
            "input_hash",
            errors.INPUT_HASH_MISMATCH,
            f"Input hash mismatch: expected {s['inputHash']}, got {observed}",
            broke_at="inputHash",
            expected=s["inputHash"],
            observed=observed,
        )
    run.report.checks.append(
        Check("input_hash", True, f"hashValue(input) is the recorded {observed}")
    )
    return None


def _artifacts(run: _Run) -> Refusal | None:
    """Every artifact with content hashes to its ``hash``; a hash-only one is named."""
    s = run.parsed.snapshot
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
            return run.failed(
                "artifacts",
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
    run.report.checks.append(Check("artifacts", True, detail))
    return None


def _output(run: _Run) -> Refusal | None:
    """``loadOutput``: the step-output a replay returns; a production replay refuses
    without it."""
    s = run.parsed.snapshot
    report = run.report
    loaded, content, why = load_output(s)
    if not loaded:
        report.missing.append(why)
        if run.mode == PRODUCTION:
            found = _first(s, STEP_OUTPUT)
            return run.failed(
                "output",
                errors.MISSING_PERSISTED_AGENT_OUTPUT,
                f"loadOutput fails: {why}; a production replay needs the step's output",
                detail=why,
                broke_at=f"artifacts/{found[0]}" if found else "artifacts",
            )
        report.checks.append(Check("output", True, f"not loadable: {why}; replay cannot return it"))
    else:
        report.checks.append(
            Check(
                "output",
                True,
                "loadOutput returns the step-output content (what replay returns, as captured)",
            )
        )
        run.recorded = content
    report.replayable = loaded
    return None


def _recompute(run: _Run) -> Refusal | None:
    """The step registered under the file's step key, re-run on the input with Verist's
    options, its output and commands diffed against the recorded ones."""
    parsed, report, options = run.parsed, run.report, run.options
    step = run.registry.function(parsed.step_key) if run.registry is not None else None
    if step is None:
        report.checks.append(
            Check(
                "recompute",
                True,
                f"no step function is registered under {parsed.step_key}: not recomputed",
            )
        )
        return None
    s = parsed.snapshot
    validate = options.validate
    input_schema = getattr(step, "input_schema", None)
    output_schema = getattr(step, "output_schema", None)
    if validate and input_schema is not None:
        problems = _violations(input_schema, s["input"])
        if problems:
            message = f"the input fails {parsed.step_key}'s input schema: {'; '.join(problems)}"
            refusal = run.failed("recompute", errors.MALFORMED_TRACE, message, broke_at="input")
            report.verist["inputSchemaViolations"] = problems
            return refusal
    try:
        result = step(s["input"], None, None)
    except Exception as exc:  # a step's own failure is Verist's EXECUTION_FAILED
        message = f"{parsed.step_key} failed: {type(exc).__name__}: {exc}"
        return run.failed(
            "recompute",
            errors.REPLAY_DIVERGENCE,
            message,
            own="execution_failed",
            broke_at="recompute",
        )
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
    recorded = run.recorded
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
        first = report.divergences[0]
        expected, observed = _short(first.before), _short(first.after)
        return run.failed(
            "recompute",
            errors.REPLAY_DIVERGENCE,
            f"the recomputed step differs from the recorded one at {first.path}",
            detail=detail,
            own=f"{first.step_id}_diverged",
            broke_at=first.path,
            expected=expected,
            observed=observed,
        )
    report.checks.append(Check("recompute", True, detail))
    return None


#: one file's verify (and replay: the same checks), in the module docstring's order; the
#: first refusal ends it
_CHECKS: tuple[pipeline.Check[_Run], ...] = (
    pipeline.Check("format", _format),
    pipeline.Check("input_hash", _input_hash),
    pipeline.Check("artifacts", _artifacts),
    pipeline.Check("output", _output),
    pipeline.Check("recompute", _recompute),
)


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
