"""The reports pinned by tests/replay/test_pipeline_pins.py: every ContextOS, Verist and AHD
fixture the tests use (passing, tampered, malformed, divergent), verified and replayed in
audit mode through the format's adapter (as the services call it) and through the package's
own functions (as the CLI, the bench and the tests call them), with every error code each
format declares in its ``codes``.

A case is a function of a fresh temporary directory returning the report's JSON
(``report.to_json()``), ``None`` where the operation returns no report (AHD has no replay), or
``{"raises": ..., "message": ...}`` for a usage error. :func:`outcome` runs one and writes
every path that depends on where it ran as ``<TMP>`` or ``<REPO>``, so the JSON is the same on
any machine. Pure apart from the temporary files: no Django.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import shutil
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any
from unittest import mock

from core.errors import ReplayError
from core.formats import AHD, VERIST, formats
from core.formats import ahd as ahd_pkg
from core.formats import contextos as cx
from core.formats import verist as vs
from core.formats.protocol import OptionSources, VerifyContext
from core.replay.registry import Registry
from core.replay.report import PRODUCTION, SANDBOX, Check
from core.replay.signatures import StaticKeyRing
from tests.published import AHD_CHECKOUT
from tests.replay.fixtures.contextos import make_fixtures as cx_make
from tests.replay.fixtures.make_golden import golden_key_ring

REPO = Path(__file__).resolve().parents[2]
HERE = Path(__file__).resolve().parent / "fixtures"
CONTEXTOS = HERE / "contextos"
VERIST_DIR = HERE / "verist"
PACK = CONTEXTOS / "refund-triage@1.4.0.pack.json"
KG = CONTEXTOS / "kg-snapshot.kg.json"
CONTEXTOS_FORMAT = "contextos-trace"
SWISS = "2026-04-21-swiss"
IMAGE = "2026-04-21-editorial-image"

Case = Callable[[Path], Any]


def _json(report: Any) -> Any:
    return None if report is None else report.to_json()


def _through(
    name: str, data: bytes, filename: str, ctx: VerifyContext, *, replay: bool = False
) -> Any:
    """What the services do (``replay.services._verify``): parse, then replay (or verify
    where the format has no replay), a file that does not parse the format's refusal."""
    fmt = formats().get(name)
    try:
        parsed = fmt.parse(io.BytesIO(data), filename, ctx)
    except ReplayError as exc:
        return fmt.refused(exc, filename, ctx).to_json()
    report = fmt.replay(parsed, filename, ctx) if replay else None
    if report is None:
        report = fmt.verify(parsed, filename, ctx)
    return report.to_json()


def _stored(name: str, data: bytes, filename: str, ctx: VerifyContext) -> VerifyContext:
    """The context of a governed replay of ``data`` stored as ingest stores it: verified
    with ``ctx`` (its uploaded inputs), its facts' snapshots read back by id."""
    fmt = formats().get(name)
    parsed = fmt.parse(io.BytesIO(data), filename, ctx)
    report = fmt.verify(parsed, filename, ctx)
    facts = fmt.facts(parsed, report, ctx)
    bodies = {s.snapshot_id: s.body for s in facts.snapshots}
    refs = [r for r in facts.required_snapshot_ids if r.get("path")]
    return VerifyContext(
        mode=ctx.mode,
        keys=ctx.keys,
        file_id="stored-file",
        stored_inputs=refs,
        stored_snapshot=bodies.get,
        format_options=ctx.format_options,
    )


# --- ContextOS ---------------------------------------------------------------------------------


def _cx_files(pack: Path | None = PACK, kg: Path | None = KG) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in (pack, kg) if p is not None}


def _cx_load(name: str) -> cx.ContextosTrace:
    return cx.loads((CONTEXTOS / name).read_bytes(), name)


def _cx_module(name: str, *, replay: bool, files: dict[str, bytes] | None = None, **kw: Any):
    """``cx.verify`` / ``cx.replay`` as the tests call them; a file that does not parse is
    ``refused_report``."""
    try:
        trace = _cx_load(name)
    except ReplayError as exc:
        return cx.refused_report(exc).to_json()
    inputs = cx.find_inputs(trace, _cx_files() if files is None else files)
    if replay:
        return cx.replay(trace, inputs, keys=kw.pop("keys", golden_key_ring()), **kw).to_json()
    return cx.verify(trace, **kw).to_json()


def _cx_adapter(name: str, files: dict[str, bytes], *, replay: bool, **ctx: Any) -> Any:
    context = VerifyContext(keys=golden_key_ring(), inputs=files, **ctx)
    data = (CONTEXTOS / name).read_bytes()
    return _through(CONTEXTOS_FORMAT, data, name, context, replay=replay)


def _cx_signed_pack(edit: Callable[[dict[str, Any]], None]) -> bytes:
    """The fixtures' pack with ``edit`` applied to its body, hashed and signed again."""
    pack = json.loads(json.dumps(cx_make.PACK))
    edit(pack)
    return json.dumps(cx_make.pack_file(pack)).encode()


@contextlib.contextmanager
def _loop(replacement: Callable[..., Any] | None) -> Iterator[None]:
    """``refund-triage@1`` replaced (None: unregistered) for the case."""
    held = cx.LOOPS.pop("refund-triage@1")
    if replacement is not None:
        cx.LOOPS["refund-triage@1"] = replacement
    try:
        yield
    finally:
        cx.LOOPS["refund-triage@1"] = held


def _cx_with_loop(replacement: Callable[..., Any] | None) -> Case:
    def case(_tmp: Path) -> Any:
        with _loop(replacement):
            return _cx_module("pass.trace.json", replay=True)

    return case


def _not_json_record(compiled: Any, call_tool: Any) -> dict[str, Any]:
    record = cx.refund_triage_v1(compiled, call_tool)
    record["status"] = object()  # a field the record hash covers: it cannot be written
    return record


def _failing_loop(compiled: Any, call_tool: Any) -> dict[str, Any]:
    raise TypeError("the loop cannot read this request")


def _cx_kg_with(edit: Callable[[dict[str, Any]], None]) -> bytes:
    doc = json.loads(KG.read_text())
    edit(doc)
    return json.dumps(doc).encode()


def _cx_deep_trace(_tmp: Path) -> Any:
    """A request nested deeper than the canonical writer goes: the chain cannot be hashed."""
    doc = json.loads((CONTEXTOS / "pass.trace.json").read_text())
    deep: Any = 1
    for _ in range(400):
        deep = {"kind": deep}
    doc["invoke"]["request"]["kind"] = deep
    data = json.dumps(doc).encode()
    ctx = VerifyContext(keys=golden_key_ring(), inputs=_cx_files())
    return {
        "verify": _through(CONTEXTOS_FORMAT, data, "deep.trace.json", ctx),
        "replay": _through(CONTEXTOS_FORMAT, data, "deep.trace.json", ctx, replay=True),
    }


def _cx_not_json_request(*, replay: bool) -> Case:
    """A trace whose request holds what no canonical writes, where the chain hashes it (a
    parsed file never does: the reader refuses it first)."""

    def case(_tmp: Path) -> Any:
        trace = _cx_load("pass.trace.json")
        trace.head["invoke"]["request"]["kind"] = object()
        if replay:
            inputs = cx.find_inputs(trace, _cx_files())
            return cx.replay(trace, inputs, keys=golden_key_ring()).to_json()
        return cx.verify(trace).to_json()

    return case


def _cx_stored(name: str, *, halted: dict[str, str] | None = None) -> Case:
    def case(_tmp: Path) -> Any:
        data = (CONTEXTOS / name).read_bytes()
        uploaded = VerifyContext(keys=golden_key_ring(), inputs=_cx_files())
        ctx = _stored(CONTEXTOS_FORMAT, data, name, uploaded)
        ctx.halted = halted
        return _through(CONTEXTOS_FORMAT, data, name, ctx, replay=True)

    return case


def contextos_cases() -> dict[str, Case]:
    cases: dict[str, Case] = {}
    names = sorted(p.name for p in CONTEXTOS.glob("*.trace.json"))
    for name in names:
        stem = name.removesuffix(".trace.json")
        cases[f"adapter.verify.no_inputs/{stem}"] = lambda _t, n=name: _cx_adapter(
            n, {}, replay=False
        )
        cases[f"adapter.verify.inputs/{stem}"] = lambda _t, n=name: _cx_adapter(
            n, _cx_files(), replay=False
        )
        cases[f"adapter.replay/{stem}"] = lambda _t, n=name: _cx_adapter(
            n, _cx_files(), replay=True
        )
        cases[f"module.verify/{stem}"] = lambda _t, n=name: _cx_module(n, replay=False)
    unsigned, badsig, edited = (CONTEXTOS / "inputs" / d for d in ("unsigned", "badsig", "edited"))
    stranger_kg = _cx_kg_with(lambda d: d["signature"].update(key_id="stranger"))
    zero_kg = _cx_kg_with(lambda d: d["signature"].update(value="0" * 64))
    inputs = {
        "no_pack": _cx_files(pack=None),
        "no_kg": _cx_files(kg=None),
        "no_inputs": {},
        "unsigned_pack": _cx_files(pack=unsigned / PACK.name),
        "unsigned_kg": _cx_files(kg=unsigned / KG.name),
        "badsig_pack": _cx_files(pack=badsig / PACK.name),
        "edited_pack": _cx_files(pack=edited / PACK.name),
        "edited_kg": _cx_files(kg=edited / KG.name),
        "badsig_kg": {PACK.name: PACK.read_bytes(), KG.name: zero_kg},
        "stranger_kg": {PACK.name: PACK.read_bytes(), KG.name: stranger_kg},
        "unrunnable_pack": {
            PACK.name: _cx_signed_pack(lambda p: p["body"].pop("policies")),
            KG.name: KG.read_bytes(),
        },
    }
    for label, files in inputs.items():
        cases[f"module.replay.{label}/pass"] = lambda _t, f=files: _cx_module(
            "pass.trace.json", replay=True, files=f
        )
        cases[f"adapter.replay.{label}/pass"] = lambda _t, f=files: _cx_adapter(
            "pass.trace.json", f, replay=True
        )
        cases[f"adapter.verify.{label}/pass"] = lambda _t, f=files: _cx_adapter(
            "pass.trace.json", f, replay=False
        )
    for name in ("unpinned_pack", "unpinned_kg", "unretained_pack", "unretained_kg"):
        cases[f"module.replay.no_pack/{name}"] = lambda _t, n=name: _cx_module(
            f"{n}.trace.json", replay=True, files=_cx_files(pack=None)
        )
    cases["module.replay.unknown_keys/pass"] = lambda _t: _cx_module(
        "pass.trace.json", replay=True, keys=StaticKeyRing()
    )
    cases["module.verify.unknown_keys/pass"] = lambda _t: cx.verify(
        _cx_load("pass.trace.json"),
        inputs=cx.find_inputs(_cx_load("pass.trace.json"), _cx_files()),
        keys=StaticKeyRing(),
    ).to_json()
    cases["module.verify.unknown_kg_key/pass"] = lambda _t: cx.verify(
        _cx_load("pass.trace.json"),
        inputs=cx.find_inputs(
            _cx_load("pass.trace.json"), {PACK.name: PACK.read_bytes(), KG.name: stranger_kg}
        ),
        keys=golden_key_ring(),
    ).to_json()
    cases["module.verify.known_keys/pass"] = lambda _t: cx.verify(
        _cx_load("pass.trace.json"),
        inputs=cx.find_inputs(_cx_load("pass.trace.json"), _cx_files()),
        keys=golden_key_ring(),
        inputs_present=(True, True),
    ).to_json()
    cases["module.verify.inputs_present/pass"] = lambda _t: cx.verify(
        _cx_load("pass.trace.json"), inputs_present=(True, False)
    ).to_json()
    cases["module.replay.sandbox/pass"] = lambda _t: _cx_module(
        "pass.trace.json", replay=True, mode=SANDBOX
    )
    cases["module.replay.production/tamper_result"] = lambda _t: _cx_module(
        "tamper_result.trace.json", replay=True, mode=PRODUCTION
    )
    cases["module.replay.input_checks/pass"] = lambda _t: _cx_module(
        "pass.trace.json",
        replay=True,
        input_checks=[Check("inputs", True, "given by the caller")],
    )
    cases["module.replay.loop_unregistered/pass"] = _cx_with_loop(None)
    cases["module.replay.loop_fails/pass"] = _cx_with_loop(_failing_loop)
    cases["module.replay.record_not_json/pass"] = _cx_with_loop(_not_json_record)
    cases["adapter.deep_request/deep"] = _cx_deep_trace
    cases["module.verify.not_json_request/pass"] = _cx_not_json_request(replay=False)
    cases["module.replay.not_json_request/pass"] = _cx_not_json_request(replay=True)
    halted = {"4bf92f3577b34da6a3ce929d0e0e4736": "halted by incident 7"}
    cases["adapter.verify.halted/pass"] = lambda _t: _cx_adapter(
        "pass.trace.json", _cx_files(), replay=False, halted=halted
    )
    cases["adapter.replay.halted/pass"] = lambda _t: _cx_adapter(
        "pass.trace.json", _cx_files(), replay=True, halted=halted
    )
    cases["adapter.verify.halts_clear/pass"] = lambda _t: _cx_adapter(
        "pass.trace.json", _cx_files(), replay=False, halted={}
    )
    cases["adapter.replay.halts_clear/tamper_result"] = lambda _t: _cx_adapter(
        "tamper_result.trace.json", _cx_files(), replay=True, halted={}
    )
    for name in ("pass", "tamper_evidence_refs", "tamper_result", "missing_call_resealed"):
        cases[f"adapter.replay.stored/{name}"] = _cx_stored(f"{name}.trace.json")
    cases["adapter.replay.stored.halts_clear/pass"] = _cx_stored("pass.trace.json", halted={})
    return cases


# --- Verist -----------------------------------------------------------------------------------


def _vs_registry_with(step: vs.VeristStep) -> Registry:
    registry = Registry()
    registry.register(vs.REFERENCE_STEP_NAME, step)
    return registry


def _vs_bytes(name_or_bytes: str | bytes) -> bytes:
    if isinstance(name_or_bytes, bytes):
        return name_or_bytes
    return (VERIST_DIR / name_or_bytes).read_bytes()


def _vs_module(name_or_bytes: str | bytes, **kw: Any) -> Any:
    from core.formats import default_registry

    kw.setdefault("registry", default_registry())
    return vs.verify_bytes(_vs_bytes(name_or_bytes), **kw).to_json()


def _vs_adapter(name_or_bytes: str | bytes, *, replay: bool, **ctx: Any) -> Any:
    filename = name_or_bytes if isinstance(name_or_bytes, str) else "edited.snapshot.json"
    ctx.setdefault("file_id", "sha-of-" + filename)
    return _through(VERIST, _vs_bytes(name_or_bytes), filename, VerifyContext(**ctx), replay=replay)


def _vs_doc(name: str = "pass.snapshot.json") -> dict[str, Any]:
    return json.loads((VERIST_DIR / name).read_bytes())


def _vs_edited(change: Callable[[dict[str, Any]], Any], name: str = "pass.snapshot.json") -> bytes:
    d = _vs_doc(name)
    change(d)
    return json.dumps(d).encode()


def _vs_malformed() -> dict[str, bytes]:
    baseline = "pass.baseline.json"
    return {
        "truncated": b'{"workflowId": ',
        "duplicate_key": b'{"workflowId": "a", "workflowId": "b"}',
        "array": b"[1, 2]",
        "too_deep": b'{"input": ' + b"[" * 70 + b"]" * 70 + b"}",
        "no_input_hash": _vs_edited(lambda d: d.pop("inputHash")),
        "extra_field": _vs_edited(lambda d: d.update(extra=1)),
        "step_name_number": _vs_edited(lambda d: d.update(stepName=3)),
        "input_hash_short": _vs_edited(lambda d: d.update(inputHash="abc")),
        "captured_at_float": _vs_edited(lambda d: d.update(capturedAt=1.5)),
        "artifacts_object": _vs_edited(lambda d: d.update(artifacts={})),
        "artifact_string": _vs_edited(lambda d: d["artifacts"].append("x")),
        "kind_null": _vs_edited(lambda d: d["artifacts"][0].update(kind=None)),
        "hash_upper": _vs_edited(lambda d: d["artifacts"][1].update(hash="SHA256:" + "A" * 64)),
        "artifact_extra": _vs_edited(lambda d: d["artifacts"][0].update(size=3)),
        "baseline_other": _vs_edited(lambda d: d.update(format="other@1"), baseline),
        "baseline_no_metadata": _vs_edited(lambda d: d.pop("metadata"), baseline),
        "baseline_commands_captured": _vs_edited(
            lambda d: d["metadata"].update(commandsCaptured="yes"), baseline
        ),
        "baseline_no_output": _vs_edited(lambda d: d["snapshot"]["artifacts"].pop(1), baseline),
        "baseline_two_commands": _vs_edited(
            lambda d: d["snapshot"]["artifacts"].append(d["snapshot"]["artifacts"][2]), baseline
        ),
        "not_json_utf8": b'{"workflowId": "\xff"}',
    }


def _boom(_input: Any) -> Any:
    raise KeyError("text")


def _not_json_output(step_input: Any) -> Any:
    result = vs.reference_extract(step_input)
    return {**result, "output": {**result["output"], "flagged": object()}}


def _strict_input_step() -> vs.VeristStep:
    schema = {**vs.REFERENCE_STEP.input_schema, "required": ["documentId", "text", "x"]}
    return vs.VeristStep(vs.reference_extract, input_schema=schema)


def _summary_output_step() -> vs.VeristStep:
    base = vs.REFERENCE_STEP.output_schema
    schema = {
        **base,
        "properties": {**base["properties"], "summary": {"type": "string"}},
        "required": ["summary"],
    }
    return vs.VeristStep(vs.reference_extract, output_schema=schema)


def verist_cases() -> dict[str, Case]:
    cases: dict[str, Case] = {}
    names = sorted(p.name for p in VERIST_DIR.glob("*.json") if p.name != "hash_values.json")
    for name in names:
        stem = name.removesuffix(".json")
        cases[f"adapter.verify/{stem}"] = lambda _t, n=name: _vs_adapter(n, replay=False)
        cases[f"adapter.replay/{stem}"] = lambda _t, n=name: _vs_adapter(n, replay=True)
        cases[f"adapter.replay.production/{stem}"] = lambda _t, n=name: _vs_adapter(
            n, replay=True, mode=PRODUCTION
        )
        cases[f"module.verify/{stem}"] = lambda _t, n=name: _vs_module(n)
        cases[f"module.verify.no_step/{stem}"] = lambda _t, n=name: _vs_module(
            n, registry=Registry()
        )
        cases[f"module.verify.production/{stem}"] = lambda _t, n=name: _vs_module(
            n, mode=PRODUCTION
        )
    for label, data in _vs_malformed().items():
        cases[f"module.malformed/{label}"] = lambda _t, d=data: _vs_module(d)
        cases[f"adapter.malformed/{label}"] = lambda _t, d=data: _vs_adapter(d, replay=True)
    options = {
        "validate_off": {"validate": False},
        "strict_output": {"strictOutput": True},
        "capture": {"captureArtifacts": True},
        "capture_hash_only": {"captureArtifacts": {"hashOnly": True}},
    }
    for label, given in options.items():
        for name in ("pass.snapshot.json", "empty_id.snapshot.json", "hash_only.snapshot.json"):
            stem = name.removesuffix(".json")
            cases[f"adapter.replay.{label}/{stem}"] = lambda _t, n=name, o=given: _vs_adapter(
                n, replay=True, options=o
            )
    steps = {
        "strict_input": _strict_input_step,
        "summary_output": _summary_output_step,
        "boom": lambda: vs.VeristStep(_boom),
        "events_empty": lambda: vs.VeristStep(lambda i: {**vs.reference_extract(i), "events": []}),
        "not_json_output": lambda: vs.VeristStep(_not_json_output),
    }
    for label, make in steps.items():
        for name in ("pass.snapshot.json", "hash_only.snapshot.json"):
            stem = name.removesuffix(".json")
            cases[f"module.step.{label}/{stem}"] = lambda _t, n=name, m=make: _vs_module(
                n, registry=_vs_registry_with(m())
            )
            cases[f"module.step.{label}.strict/{stem}"] = lambda _t, n=name, m=make: _vs_module(
                n,
                registry=_vs_registry_with(m()),
                options=vs.RecomputeOptions(strict_output=True, capture_artifacts=True),
            )
        cases[f"module.step.{label}.validate_off/pass.snapshot"] = lambda _t, m=make: _vs_module(
            "pass.snapshot.json",
            registry=_vs_registry_with(m()),
            options=vs.RecomputeOptions(validate=False),
        )
    cases["module.capture_not_json/pass.snapshot"] = lambda _t: _vs_module(
        "pass.snapshot.json",
        registry=_vs_registry_with(vs.VeristStep(_not_json_output)),
        options=vs.RecomputeOptions(capture_artifacts=True),
    )
    with_size = "module.size_limit/pass.snapshot"
    cases[with_size] = _vs_size_limited
    halted = {"sha-of-pass.snapshot.json": "halted by incident 7"}
    cases["adapter.verify.halted/pass.snapshot"] = lambda _t: _vs_adapter(
        "pass.snapshot.json", replay=False, halted=halted
    )
    cases["adapter.replay.halts_clear/pass.snapshot"] = lambda _t: _vs_adapter(
        "pass.snapshot.json", replay=True, halted={}
    )
    cases["adapter.replay.halts_clear/tamper_input.snapshot"] = lambda _t: _vs_adapter(
        "tamper_input.snapshot.json", replay=True, halted={}
    )
    cases["adapter.replay.sandbox/rehashed_output.snapshot"] = lambda _t: _vs_adapter(
        "rehashed_output.snapshot.json", replay=True, mode=SANDBOX
    )
    return cases


def _vs_size_limited(_tmp: Path) -> Any:
    from core.formats.verist import snapshot

    with mock.patch.object(snapshot, "MAX_SNAPSHOT_BYTES", 100):
        return _vs_module("pass.snapshot.json")


# --- AHD ----------------------------------------------------------------------------------------


def _checkout(tmp: Path) -> Path:
    """A writable copy of the published checkout."""
    dst = tmp / "ahd"
    shutil.copytree(AHD_CHECKOUT, dst, copy_function=shutil.copyfile)
    for directory, _dirs, _files in os.walk(dst):
        Path(directory).chmod(0o755)
    return dst


def _sidecar_doc(root: Path, name: str = SWISS) -> dict[str, Any]:
    return json.loads((root / "docs" / "evals" / f"{name}.replay.json").read_bytes())


def _write_sidecar(root: Path, doc: dict[str, Any], name: str = SWISS) -> Path:
    path = root / "docs" / "evals" / f"{name}.replay.json"
    path.write_text(json.dumps(doc, indent=2))
    return path


def _path_case(
    prepare: Callable[[Path], Path], *, root: Callable[[Path], Path | None] | None = None, **kw
) -> Case:
    """``ahd.verify_path`` of the file ``prepare`` leaves in a fresh copy of the checkout."""

    def case(tmp: Path) -> Any:
        copy = _checkout(tmp)
        path = prepare(copy)
        given = root(copy) if root is not None else None
        return ahd_pkg.verify_path(path, root=given, **kw).to_json()

    return case


def _evals(copy: Path, name: str) -> Path:
    return copy / "docs" / "evals" / name


def _edit_token(copy: Path) -> Path:
    token = copy / "tokens" / "swiss-editorial.yml"
    token.write_text(token.read_text().replace("base: 17", "base: 18"))
    return _evals(copy, f"{SWISS}.md")


def _edit_brief(copy: Path) -> Path:
    brief = copy / "briefs" / "landing.yml"
    brief.write_text(brief.read_text() + "extra: field\n")
    return _evals(copy, f"{SWISS}.replay.json")


def _edit_both(copy: Path) -> Path:
    _edit_token(copy)
    return _edit_brief(copy)


def _markdown_brief(edited: bool) -> Callable[[Path], Path]:
    def prepare(copy: Path) -> Path:
        import hashlib

        brief = copy / "briefs" / "landing.md"
        brief.write_bytes(b"\xef\xbb\xbf# Landing\n\nA page: for designers.\r\n")
        doc = _sidecar_doc(copy)
        digest = "sha256:" + hashlib.sha256(brief.read_bytes()).hexdigest()
        doc["brief"] = {"path": "briefs/landing.md", "hash": digest}
        path = _write_sidecar(copy, doc)
        if edited:
            brief.write_bytes(b"# Landing\n\nA page: for designers: edited.\n")
        return path

    return prepare


def _sidecar_edit(edit: Callable[[dict[str, Any], Path], Any]) -> Callable[[Path], Path]:
    def prepare(copy: Path) -> Path:
        doc = _sidecar_doc(copy)
        edit(doc, copy)
        return _write_sidecar(copy, doc)

    return prepare


def _critique(doc: dict[str, Any], _copy: Path) -> None:
    doc["kind"] = "critique"
    doc["brief"] = None


def _unlink_token(copy: Path) -> Path:
    (copy / "tokens" / "swiss-editorial.yml").unlink()
    return _evals(copy, f"{SWISS}.md")


def _token_unparsable(copy: Path) -> Path:
    (copy / "tokens" / "swiss-editorial.yml").write_text("a: 1\na: 2\n")
    return _evals(copy, f"{SWISS}.md")


def _brief_directory(copy: Path) -> Path:
    (copy / "briefs" / "landing.yml").unlink()
    (copy / "briefs" / "landing.yml").mkdir()
    return _evals(copy, f"{SWISS}.md")


def _token_link_out(copy: Path) -> Path:
    token = copy / "tokens" / "swiss-editorial.yml"
    outside = copy.parent / "outside.yml"
    outside.write_bytes(token.read_bytes())
    token.unlink()
    token.symlink_to(outside)
    return _evals(copy, f"{SWISS}.md")


def _lonely_report(copy: Path) -> Path:
    path = copy / "docs" / "evals" / "lonely.md"
    path.write_text("# report\n")
    return path


def _malformed_edits() -> dict[str, Callable[[dict[str, Any], Path], Any]]:
    return {
        "no_argv": lambda d, _c: d.pop("argv"),
        "schema_version_0": lambda d, _c: d.update(schema_version=0),
        "schema_version_string": lambda d, _c: d.update(schema_version="1"),
        "schema_version_2": lambda d, _c: d.update(schema_version=2),
        "kind_eval": lambda d, _c: d.update(kind="eval"),
        "token_hash_short": lambda d, _c: d["token"].update(hash="sha256:abc"),
        "token_null": lambda d, _c: d.update(token=None),
        "invoked_at_spaced": lambda d, _c: d.update(invoked_at="2026-04-21 21:48"),
        "sampling_n_0": lambda d, _c: d["sampling"].update(n=0),
        "request_ids_string": lambda d, _c: d["models"][0].update(provider_request_ids="req_1"),
        "commit_upper": lambda d, _c: d.update(ahd_commit="A" * 40),
        "dirty_without_commit": lambda d, _c: d.update(ahd_commit=None),
        "backfilled_string": lambda d, _c: d.update(backfilled="yes"),
    }


def _sidecar_bytes(edit: Callable[[dict[str, Any]], Any] | None = None, name: str = SWISS):
    doc = json.loads((AHD_CHECKOUT / "docs" / "evals" / f"{name}.replay.json").read_bytes())
    if edit is not None:
        edit(doc)
    return json.dumps(doc, indent=2).encode()


def _inputs_of(root: Path = AHD_CHECKOUT) -> dict[str, bytes]:
    """The swiss run's token and brief, by their recorded paths."""
    return {
        "tokens/swiss-editorial.yml": (root / "tokens" / "swiss-editorial.yml").read_bytes(),
        "briefs/landing.yml": (root / "briefs" / "landing.yml").read_bytes(),
    }


def _ahd_options(**given: Any) -> Any:
    fmt = formats().get(AHD)
    return fmt.options(OptionSources(given=given))


def _ahd_adapter(
    data: bytes,
    *,
    filename: str = f"{SWISS}.replay.json",
    replay: bool = False,
    **ctx: Any,
) -> Any:
    return _through(AHD, data, filename, VerifyContext(**ctx), replay=replay)


def _ahd_stored(
    *, drop: tuple[str, ...] = (), fallback: bool = False, halted: dict[str, str] | None = None
) -> Case:
    """A replay of the swiss sidecar stored with its uploaded inputs; ``drop``: inputs no
    longer stored; ``fallback``: the server keeps a checkout (the copy)."""

    def case(tmp: Path) -> Any:
        data = _sidecar_bytes()
        name = f"{SWISS}.replay.json"
        uploaded = VerifyContext(inputs=_inputs_of())
        ctx = _stored(AHD, data, name, uploaded)
        stored = {
            r["snapshot_id"]: ctx.stored_snapshot(r["snapshot_id"]) for r in ctx.stored_inputs
        }
        for ref in ctx.stored_inputs:
            if ref["kind"].removeprefix("ahd-") in drop:
                stored.pop(ref["snapshot_id"], None)
        ctx.stored_snapshot = stored.get
        ctx.halted = halted
        if fallback:
            ctx.format_options = _ahd_options(input_root=str(_checkout(tmp)))
        return _through(AHD, data, name, ctx, replay=True)

    return case


def _ahd_upload(**kw: Any) -> Case:
    def case(tmp: Path) -> Any:
        copy = _checkout(tmp)
        edit = kw.get("edit")
        if edit is not None:
            edit(copy)
        root = copy if kw.get("root", True) else None
        name = kw.get("name", f"{SWISS}.replay.json")
        return ahd_pkg.verify_upload(kw.get("data", _sidecar_bytes()), name, root=root).to_json()

    return case


def _ahd_server_checkout(*, named: bool, edit: Callable[[Path], Any] | None = None) -> Case:
    """The adapter with no inputs: the server's checkout (``REPLAY_AHD_ROOT``), or one the
    caller named (the CLI's ``--root``)."""

    def case(tmp: Path) -> Any:
        copy = _checkout(tmp)
        if edit is not None:
            edit(copy)
        if named:
            opts = _ahd_options(input_root=str(copy))
        else:
            fmt = formats().get(AHD)
            setting = {"REPLAY_AHD_ROOT": str(copy)}
            opts = fmt.options(OptionSources(setting=setting.get))
        return _ahd_adapter(_sidecar_bytes(), format_options=opts)

    return case


def _ahd_adapter_path(prepare: Callable[[Path], Path] | None) -> Case:
    def case(tmp: Path) -> Any:
        fmt = formats().get(AHD)
        ctx = VerifyContext()
        if prepare is None:
            return fmt.verify_path(None, "x.replay.json", ctx).to_json()
        copy = _checkout(tmp)
        path = prepare(copy)
        return fmt.verify_path(path, path.name, ctx).to_json()

    return case


def _raises(case: Case) -> Case:
    def caught(tmp: Path) -> Any:
        try:
            return case(tmp)
        except ahd_pkg.AhdRootNotFound as exc:
            return {"raises": "AhdRootNotFound", "message": str(exc)}

    return caught


def _no_root_above(tmp: Path) -> Any:
    shutil.copyfile(AHD_CHECKOUT / "docs" / "evals" / f"{SWISS}.replay.json", tmp / "x.replay.json")
    return ahd_pkg.verify_path(tmp / "x.replay.json").to_json()


def _malformed_without_root(tmp: Path) -> Any:
    (tmp / "x.replay.json").write_bytes(_sidecar_bytes(lambda d: d.pop("argv")))
    return ahd_pkg.verify_path(tmp / "x.replay.json").to_json()


def _given_root_not_a_directory(tmp: Path) -> Any:
    shutil.copyfile(AHD_CHECKOUT / "docs" / "evals" / f"{SWISS}.replay.json", tmp / "x.replay.json")
    return ahd_pkg.verify_path(tmp / "x.replay.json", root=tmp / "nothing").to_json()


def _sidecar_too_large(tmp: Path) -> Any:
    with mock.patch.object(ahd_pkg, "MAX_SIDECAR_BYTES", 100):
        copy = _checkout(tmp)
        return {
            "path": ahd_pkg.verify_path(_evals(copy, f"{SWISS}.md")).to_json(),
            "upload": ahd_pkg.verify_upload(_sidecar_bytes(), "x.replay.json", root=copy).to_json(),
            "adapter": _ahd_adapter(_sidecar_bytes(), inputs=_inputs_of()),
        }


def ahd_cases() -> dict[str, Case]:
    cases: dict[str, Case] = {}
    for name in (SWISS, IMAGE):
        for suffix in (".md", ".replay.json"):
            cases[f"path.found/{name}{suffix}"] = _path_case(
                lambda c, f=f"{name}{suffix}": _evals(c, f)
            )
        cases[f"path.given_root/{name}"] = _path_case(
            lambda c, n=name: _evals(c, f"{n}.replay.json"), root=lambda c: c
        )
    cases["path/edited_token"] = _path_case(_edit_token)
    cases["path/edited_brief"] = _path_case(_edit_brief)
    cases["path/edited_both"] = _path_case(_edit_both)
    cases["path/markdown_brief"] = _path_case(_markdown_brief(edited=False))
    cases["path/markdown_brief_edited"] = _path_case(_markdown_brief(edited=True))
    cases["path/critique"] = _path_case(_sidecar_edit(_critique))
    cases["path/missing_token"] = _path_case(_unlink_token)
    cases["path/token_unparsable"] = _path_case(_token_unparsable)
    cases["path/brief_directory"] = _path_case(_brief_directory)
    cases["path/token_link_out"] = _path_case(_token_link_out)
    cases["path/input_too_large"] = _path_case(
        lambda c: _evals(c, f"{SWISS}.md"), max_input_bytes=100
    )
    cases["path/excluded_tokens"] = _excluded_tokens
    recorded_paths = {
        "posix_ci": "/home/runner/work/ahd/ahd/tokens/swiss-editorial.yml",
        "windows_ci": "C:\\actions-runner\\_work\\ahd\\ahd\\tokens\\swiss-editorial.yml",
        "posix_gone": "/home/runner/work/ahd/ahd/tokens/gone.yml",
        "relative_out": "../outside/tokens/swiss-editorial.yml",
        "dotdot_tail": "/home/runner/../tokens/swiss-editorial.yml",
    }
    for label, recorded in recorded_paths.items():
        cases[f"path.recorded/{label}"] = _path_case(
            _sidecar_edit(lambda d, _c, r=recorded: d["token"].update(path=r))
        )
    cases["path.recorded/absolute_inside"] = _path_case(
        _sidecar_edit(
            lambda d, c: d["token"].update(path=str(c / "tokens" / "swiss-editorial.yml"))
        )
    )
    cases["path.recorded/absolute_published"] = _path_case(
        _sidecar_edit(
            lambda d, _c: d["token"].update(
                path=str(AHD_CHECKOUT / "tokens" / "swiss-editorial.yml")
            )
        )
    )
    cases["path/unknown_fields"] = _path_case(
        _sidecar_edit(
            lambda d, _c: (d.update(provenance={"runner": "ci"}), d["token"].update(size=4374))
        )
    )
    for label, edit in _malformed_edits().items():
        cases[f"path.malformed/{label}"] = _path_case(_sidecar_edit(edit))
    cases["path/lonely_report"] = _path_case(_lonely_report)
    cases["path/not_json"] = _path_case(
        lambda c: (
            _evals(c, "x.replay.json").write_bytes(b"{not json"),
            _evals(c, "x.replay.json"),
        )[1]
    )
    cases["path/no_root_above"] = _raises(_no_root_above)
    cases["path/malformed_without_root"] = _raises(_malformed_without_root)
    cases["path/given_root_not_a_directory"] = _raises(_given_root_not_a_directory)
    cases["path/sidecar_too_large"] = _sidecar_too_large
    # the console's upload without inputs: the server's checkout, or none
    cases["upload/with_root"] = _ahd_upload()
    cases["upload/with_root_edited_token"] = _ahd_upload(edit=_edit_token)
    cases["upload/with_root_missing_token"] = _ahd_upload(edit=_unlink_token)
    cases["upload/without_root"] = _ahd_upload(root=False)
    cases["upload/without_root_critique"] = _ahd_upload(
        root=False, data=_sidecar_bytes(lambda d: d.update(kind="critique", brief=None))
    )
    cases["upload/report_alone"] = _ahd_upload(name=f"{SWISS}.md", data=b"# report\n")
    cases["upload/malformed"] = _ahd_upload(data=_sidecar_bytes(lambda d: d.pop("argv")))
    # the adapter: inputs uploaded with the sidecar
    cases["adapter.uploaded/ok"] = lambda _t: _ahd_adapter(_sidecar_bytes(), inputs=_inputs_of())
    cases["adapter.uploaded/by_basename"] = lambda _t: _ahd_adapter(
        _sidecar_bytes(),
        inputs={Path(k).name: v for k, v in _inputs_of().items()},
    )
    cases["adapter.uploaded/missing_brief"] = lambda _t: _ahd_adapter(
        _sidecar_bytes(),
        inputs={"tokens/swiss-editorial.yml": _inputs_of()["tokens/swiss-editorial.yml"]},
    )
    cases["adapter.uploaded/missing_both"] = lambda _t: _ahd_adapter(
        _sidecar_bytes(), inputs={"unrelated.txt": b"x"}
    )
    cases["adapter.uploaded/edited_token"] = lambda _t: _ahd_adapter(
        _sidecar_bytes(),
        inputs={
            **_inputs_of(),
            "tokens/swiss-editorial.yml": _inputs_of()["tokens/swiss-editorial.yml"].replace(
                b"base: 17", b"base: 18"
            ),
        },
    )
    cases["adapter.uploaded/relative_out"] = lambda _t: _ahd_adapter(
        _sidecar_bytes(lambda d: d["token"].update(path="../x/tokens/swiss-editorial.yml")),
        inputs={"swiss-editorial.yml": b"x", **_inputs_of()},
    )
    cases["adapter.uploaded/critique"] = lambda _t: _ahd_adapter(
        _sidecar_bytes(lambda d: d.update(kind="critique", brief=None)), inputs=_inputs_of()
    )
    cases["adapter.uploaded/image"] = lambda _t: _ahd_adapter(
        _sidecar_bytes(name=IMAGE),
        filename=f"{IMAGE}.replay.json",
        inputs={
            "tokens/editorial-illustration.yml": (
                AHD_CHECKOUT / "tokens" / "editorial-illustration.yml"
            ).read_bytes(),
            "briefs/editorial-illustration.yml": (
                AHD_CHECKOUT / "briefs" / "editorial-illustration.yml"
            ).read_bytes(),
        },
    )
    cases["adapter.uploaded/malformed"] = lambda _t: _ahd_adapter(
        _sidecar_bytes(lambda d: d.update(kind="eval")), inputs=_inputs_of()
    )
    cases["adapter.uploaded/report_alone"] = lambda _t: _ahd_adapter(
        b"# report\n", filename=f"{SWISS}.md", inputs=_inputs_of()
    )
    cases["adapter.uploaded/halts_clear"] = lambda _t: _ahd_adapter(
        _sidecar_bytes(), inputs=_inputs_of(), halted={}
    )
    cases["adapter.uploaded/halted"] = lambda _t: _ahd_adapter(
        _sidecar_bytes(), inputs=_inputs_of(), file_id="f", halted={"f": "halted by incident 7"}
    )
    # the adapter: no inputs, the server's checkout or none
    cases["adapter.no_inputs/no_checkout"] = lambda _t: _ahd_adapter(_sidecar_bytes())
    cases["adapter.no_inputs/no_checkout_halts_clear"] = lambda _t: _ahd_adapter(
        _sidecar_bytes(), halted={}
    )
    cases["adapter.no_inputs/server_checkout"] = _ahd_server_checkout(named=False)
    cases["adapter.no_inputs/server_checkout_edited"] = _ahd_server_checkout(
        named=False, edit=_edit_token
    )
    cases["adapter.no_inputs/named_checkout"] = _ahd_server_checkout(named=True)
    cases["adapter.no_inputs/named_checkout_edited"] = _ahd_server_checkout(
        named=True, edit=_edit_brief
    )
    # the adapter: a governed replay of a stored sidecar
    cases["adapter.stored/ok"] = _ahd_stored()
    cases["adapter.stored/token_gone"] = _ahd_stored(drop=("token",))
    cases["adapter.stored/token_gone_fallback"] = _ahd_stored(drop=("token",), fallback=True)
    cases["adapter.stored/both_gone_fallback"] = _ahd_stored(drop=("token", "brief"), fallback=True)
    cases["adapter.stored/halts_clear"] = _ahd_stored(halted={})
    cases["adapter.stored/halted"] = _ahd_stored(halted={"stored-file": "halted by incident 7"})
    cases["adapter.verify_path/none"] = _ahd_adapter_path(None)
    cases["adapter.verify_path/swiss"] = _ahd_adapter_path(lambda c: _evals(c, f"{SWISS}.md"))
    cases["adapter.verify_path/edited_token"] = _ahd_adapter_path(_edit_token)
    return cases


def _excluded_tokens(tmp: Path) -> Any:
    copy = _checkout(tmp)
    return ahd_pkg.verify_path(
        _evals(copy, f"{SWISS}.md"), root=copy, excluded=(str(copy / "tokens"),)
    ).to_json()


# --- running a case -----------------------------------------------------------------------------

FORMATS: dict[str, Callable[[], dict[str, Case]]] = {
    "contextos": contextos_cases,
    "verist": verist_cases,
    "ahd": ahd_cases,
}
#: the format each pin file holds, by its registered name
REGISTERED = {"contextos": CONTEXTOS_FORMAT, "verist": VERIST, "ahd": AHD}


def _placed(value: Any, where: list[tuple[str, str]]) -> Any:
    if isinstance(value, str):
        for path, label in where:
            value = value.replace(path, label)
        return value
    if isinstance(value, dict):
        return {k: _placed(v, where) for k, v in value.items()}
    if isinstance(value, list):
        return [_placed(v, where) for v in value]
    if value is None or isinstance(value, bool | int | float):
        return value
    # what a step function returned that is not JSON stays in the report as it was given
    # (the cases whose recomputed output holds an ``object()``): named by its type
    return f"<not JSON: {type(value).__name__}>"


def outcome(case: Case) -> Any:
    """The case's JSON, run in a fresh temporary directory, every path that depends on where
    it ran written as ``<TMP>`` (the directory) or ``<REPO>`` (this checkout)."""
    with tempfile.TemporaryDirectory(prefix="pins-") as held:
        tmp = Path(held)
        value = case(tmp)
        where = [(os.path.realpath(tmp), "<TMP>"), (str(tmp), "<TMP>"), (str(REPO), "<REPO>")]
        return _placed(value, where)


def dumped(value: Any) -> str:
    """The bytes a pin is compared by."""
    return json.dumps(value, sort_keys=True)


def pin_file(name: str) -> Path:
    return HERE / "pipeline_pins" / f"{name}.json"
