"""Per-format fields are not in ``VerifyContext``: each format builds its own options
(``options(sources)``) from its settings accessors and what the request gave, and the
services carry them as ``VerifyContext.format_options`` without knowing what they hold; a
file verified where it lies (``verify_path``) and a run handed over as one archive
(``unpacks``/``unpack``) go through the protocol, so the services name no format."""

from __future__ import annotations

import ast
import dataclasses
import io
import json
from pathlib import Path
from types import SimpleNamespace

import pytest
from django.core.exceptions import ImproperlyConfigured

from core import errors
from core.formats import archive, protocol
from core.formats import paxman as px
from core.formats.ahd import MAX_INPUT_BYTES
from core.formats.ahd.adapter import AhdFormat, AhdOptions
from core.formats.paxman.adapter import PaxmanFormat, PaxmanOptions
from core.formats.protocol import OptionSources, SettingError, VerifyContext
from core.replay.report import Check, ReplayReport
from replay import services
from tests.console.test_format_traces import MONEY
from tests.toyformat import adapter as toy

SOURCE = Path(services.__file__).read_text()


def getter(values):
    return values.get


def test_the_context_holds_no_field_of_one_format():
    names = {f.name for f in dataclasses.fields(VerifyContext)}
    gone = {"input_root", "input_root_named", "excluded", "max_input_bytes", "contract"}
    assert not names & (gone | {"capabilities"})
    assert "format_options" in names


def test_verify_check_ingest_and_the_context_special_case_no_format():
    entry = ("trace_verify_file", "trace_check", "trace_ingest", "_ingest", "_checked")
    functions = [
        n
        for n in ast.walk(ast.parse(SOURCE))
        if isinstance(n, ast.FunctionDef) and n.name in (*entry, "_context", "_sources")
    ]
    assert len(functions) == len(entry) + 2
    names = set()
    for fn in functions:
        for n in ast.walk(fn):
            if isinstance(n, ast.Name):
                names.add(n.id)
            elif isinstance(n, ast.Attribute):
                names.add(n.attr)
            elif isinstance(n, ast.Constant) and isinstance(n.value, str) and fn.body[0] is not n:
                names.add(n.value)
    special = {"AHD", "PAXMAN", "ahd", "paxman", "archive", "is_archive", "read_run"}
    assert not names & (special | {"REPLAY_AHD_ROOT", "parse_contract", "capabilities"})


def test_ahd_builds_its_options_from_its_settings():
    sources = OptionSources(
        setting=getter({"REPLAY_AHD_ROOT": "/srv/ahd", "REPLAY_AHD_MAX_INPUT_BYTES": 5}),
        server_dirs=("/var/replay",),
    )
    assert AhdFormat().options(sources) == AhdOptions(
        input_root=Path("/srv/ahd"),
        input_root_named="REPLAY_AHD_ROOT",
        given_root=None,
        excluded=("/var/replay",),
        max_input_bytes=5,
    )
    assert AhdFormat().options(OptionSources()) == AhdOptions(
        input_root=None, max_input_bytes=MAX_INPUT_BYTES
    )


def test_a_root_the_caller_gives_wins_over_the_setting_and_is_named_as_given():
    sources = OptionSources(
        setting=getter({"REPLAY_AHD_ROOT": "/srv/ahd"}), given={"input_root": "/home/me/ahd"}
    )
    options = AhdFormat().options(sources)
    assert (options.input_root, options.input_root_named, options.given_root) == (
        Path("/home/me/ahd"),
        "/home/me/ahd",
        Path("/home/me/ahd"),
    )


def test_paxman_builds_its_contract_and_capabilities():
    contract = json.dumps({"id": "c-1", "fields": [{"name": "total"}]}).encode()
    options = PaxmanFormat().options(
        OptionSources(
            setting=getter({"REPLAY_PAXMAN_CAPABILITIES": {"ocr": "2.0"}}),
            given={"contract": ("c.json", contract)},
        )
    )
    assert options.contract == {"id": "c-1", "fields": [{"name": "total"}]}
    assert options.capabilities is not None
    assert options.capabilities.as_dict()["ocr"] == ["2.0"]
    assert PaxmanFormat().options(OptionSources()).contract is None
    bad = PaxmanFormat().options(OptionSources(given={"contract": ("c.json", b"[]")}))
    assert isinstance(bad.contract, px.InvalidContract)


def test_a_malformed_paxman_setting_is_a_setting_error_naming_it():
    with pytest.raises(SettingError, match=r"^REPLAY_PAXMAN_CAPABILITIES: capability 'ocr'"):
        PaxmanFormat().options(
            OptionSources(setting=getter({"REPLAY_PAXMAN_CAPABILITIES": {"ocr": [""]}}))
        )


def test_without_options_a_format_reads_its_defaults():
    assert PaxmanFormat().options is not None
    ctx = VerifyContext()
    assert ctx.format_options is None
    from core.formats.ahd.adapter import options_of

    assert options_of(ctx) == AhdOptions()
    assert PaxmanOptions() == PaxmanOptions(contract=None, capabilities=None)


@pytest.mark.django_db
def test_a_malformed_paxman_setting_concerns_paxman_files_only(settings):
    settings.REPLAY_PAXMAN_CAPABILITIES = {"ocr": [""]}
    with pytest.raises(ImproperlyConfigured) as err:
        services.trace_check(source=io.BytesIO(MONEY.read_bytes()), filename=MONEY.name)
    assert str(err.value).startswith("REPLAY_PAXMAN_CAPABILITIES: capability 'ocr'")
    checked = services.trace_check(
        source=io.BytesIO(toy_bytes()), filename="a.toy.json"
    )  # no toy registered: detected as native, which reads no Paxman setting
    assert checked.format == "replay-trace"


def toy_bytes() -> bytes:
    return json.dumps({"toy": "a", "job": "j", "values": [1, 2], "sum": 3}).encode()


class WholeToy(toy.ToyFormat):
    """The toy, read whole from a ``*.toyz`` (``name<NUL>note``) and verified where it lies
    on disk when no note came with it: the services know neither."""

    def unpacks(self, filename: str) -> bool:
        return filename.endswith(".toyz")

    def unpack(self, source, filename, inputs, sources):
        data, _, note = source.read().partition(b"\0")
        if not note:
            raise errors.ReplayError(errors.MALFORMED_TRACE, f"{filename}: no note inside")
        stem = filename.removesuffix(".toyz")
        return io.BytesIO(data), f"{stem}.toy.json", {f"{stem}.note.txt": note, **inputs}

    def verify_path(self, path, filename, ctx):
        report = ReplayReport(trace_id=None, format=self.name, mode=ctx.mode)
        report.checks.append(Check("disk", True, f"read at {path}"))
        return report

    def options(self, sources):
        return {"given": dict(sources.given), "dirs": sources.server_dirs}


@pytest.fixture
def whole_toy(monkeypatch):
    fmt = WholeToy()
    ep = SimpleNamespace(name="toy", load=lambda: lambda registry: registry.register(fmt))

    def entry_points(group):
        return [ep] if group == protocol.ENTRY_POINT_GROUP else []

    monkeypatch.setattr(protocol, "entry_points", entry_points)
    monkeypatch.setattr(protocol, "_default", None)
    return fmt


@pytest.mark.django_db
def test_a_whole_run_is_unpacked_by_its_format_on_every_path(whole_toy):
    data = toy_bytes() + b"\0seven b"
    verified = services.trace_verify_file(source=io.BytesIO(data), filename="a.toyz")
    assert (verified["format"], verified["status"], verified["trace_id"]) == ("toy-log", "ok", "a")
    checked = services.trace_check(source=io.BytesIO(data), filename="a.toyz")
    assert (checked.format, checked.report["status"]) == ("toy-log", "ok")
    stored = services.trace_ingest(source=io.BytesIO(data), filename="a.toyz")
    assert (stored.trace.format, stored.trace.filename) == ("toy-log", "a.toy.json")


@pytest.mark.django_db
def test_a_whole_run_refused_is_its_formats_refusal(whole_toy):
    refused = services.trace_check(source=io.BytesIO(toy_bytes()), filename="a.toyz")
    assert (refused.format, refused.report["error_code"], refused.report["message"]) == (
        "toy-log",
        errors.MALFORMED_TRACE,
        "a.toyz: no note inside",
    )


@pytest.mark.django_db
def test_a_file_on_disk_is_verified_where_it_lies_when_nothing_came_with_it(whole_toy, tmp_path):
    path = tmp_path / "a.toy.json"
    path.write_bytes(toy_bytes())
    report = services.trace_verify_file(
        source=io.BytesIO(toy_bytes()), filename=path.name, path=path, root="/r"
    )
    assert report["checks"] == [{"name": "disk", "ok": True, "detail": f"read at {path}"}]
    with_note = services.trace_verify_file(
        source=io.BytesIO(toy_bytes()), filename=path.name, inputs={"a.note.txt": b"n"}
    )
    assert [c["name"] for c in with_note["checks"]] == ["sum"]


def test_the_archive_rule_is_ahds():
    assert AhdFormat().unpacks("run.tar.gz")
    assert AhdFormat().unpacks("RUN.zip")
    assert not AhdFormat().unpacks("run.replay.json")
    assert archive.is_archive("run.tgz") == AhdFormat().unpacks("run.tgz")
