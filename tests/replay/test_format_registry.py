"""One registry of formats: the built-in three are entries like any other, and an installed
package adds a format through the entry-point group `replay_console.formats`."""

from __future__ import annotations

import ast
import io
from pathlib import Path
from types import SimpleNamespace

import pytest

from core.errors import MALFORMED_TRACE, ReplayError
from core.formats import (
    AHD,
    PAXMAN,
    VERIST,
    detect_format,
    format_names,
    formats,
    mace,
    native,
)
from core.formats.common import differences
from core.formats.protocol import (
    ENTRY_POINT_GROUP,
    Difference,
    FormatRegistry,
    NativeCode,
    StoredFacts,
    VerifyContext,
    load_entry_points,
    register_builtin,
)


class ToyFormat:
    """A third-party format: a JSON object whose first key is "toy"."""

    name = "toy-log"
    label = "a toy log"
    keys = frozenset({"toy"})
    replay_note = "nothing to replay"
    codes = frozenset({MALFORMED_TRACE})
    unstorable_codes = frozenset({MALFORMED_TRACE})

    def sniff(self, head, filename):
        return filename.endswith(".toy")

    def parse(self, source, filename, ctx):
        return source.read()

    def refused(self, exc, filename, ctx):
        raise AssertionError("never refused")

    def verify(self, parsed, filename, ctx):
        from core.formats.native.engine import ReplayReport

        return ReplayReport(trace_id="toy", format=self.name, mode=ctx.mode)

    def replay(self, parsed, filename, ctx):
        return None

    def facts(self, parsed, report, ctx):
        return StoredFacts(trace_id="toy", schema_version=1)

    def panel(self, parsed):
        return {"bytes": str(len(parsed))}

    def compare(self, a, b):
        return differences(a, b)


def register_toy(registry):
    registry.register(ToyFormat())


def toy_registry():
    registry = FormatRegistry()
    register_builtin(registry)
    ep = SimpleNamespace(name="toy", group=ENTRY_POINT_GROUP, load=lambda: register_toy)
    assert load_entry_points(registry, [ep]) == ["toy"]
    return registry


def test_the_native_format_is_one_entry_among_the_built_in_ones():
    assert format_names() == [
        AHD,
        "contextos-trace",
        "otel-genai",
        native.FORMAT,
        PAXMAN,
        VERIST,
        mace.FORMAT,
    ]
    assert [type(f).__name__ for f in formats()] == [
        "AhdFormat",
        "ContextosFormat",
        "OtelFormat",
        "NativeFormat",
        "PaxmanFormat",
        "VeristFormat",
        "MaceFormat",
    ]


def test_a_format_registered_through_the_entry_point_group_is_detected():
    registry = toy_registry()
    assert registry.names() == [
        AHD,
        "contextos-trace",
        "otel-genai",
        native.FORMAT,
        PAXMAN,
        VERIST,
        mace.FORMAT,
        "toy-log",
    ]
    assert registry.detect(b"{}", "run.toy", top_keys=[]) == "toy-log"
    assert registry.detect(b'{"toy": 1}', "x.json", top_keys=["toy"]) == "toy-log"
    assert registry.detect(b'{"job": 1}', "x.json", top_keys=["job"]) == native.FORMAT


def test_it_refuses_to_register_a_format_name_twice():
    registry = toy_registry()
    with pytest.raises(ValueError, match=r"^format 'toy-log' is already registered$"):
        register_toy(registry)


def test_detection_goes_through_the_registry():
    assert detect_format(b'{"contract_id": "x"}', "a.json") == PAXMAN
    assert detect_format(b"{}", "a.replay.json") == AHD
    assert detect_format(b"not json", "a.json") == native.FORMAT


def test_compare_gives_field_level_differences_as_json_pointers():
    fmt = formats().get(PAXMAN)
    a = fmt.parse(io.BytesIO(b'{"status": "OK", "statistics": {"n": 1}}'), "a", VerifyContext())
    b = fmt.parse(io.BytesIO(b'{"status": "OK", "statistics": {"n": 2}}'), "b", VerifyContext())
    assert fmt.compare(a, b) == [Difference("/statistics/n", "changed", 1, 2)]


def test_a_format_without_a_replay_says_what_re_verifying_does_instead():
    fmt = formats().get(AHD)
    assert fmt.replay(None, "x.replay.json", VerifyContext()) is None
    assert fmt.replay_note == (
        "AHD recomputes nothing: re-verifying re-hashes the token and brief stored with the run"
    )


def test_an_eval_report_alone_is_refused_by_the_ahd_parse():
    fmt = formats().get(AHD)
    with pytest.raises(ReplayError) as refused:
        fmt.parse(io.BytesIO(b"# report"), "2026-04-21-swiss.md", VerifyContext())
    assert refused.value.code == MALFORMED_TRACE
    assert refused.value.message == (
        "2026-04-21-swiss.md is an AHD eval report: upload its replay sidecar "
        "(2026-04-21-swiss.replay.json), which records the hashes to check"
    )


FORMATS_DIR = Path(__file__).resolve().parents[2] / "core" / "formats"
#: the modules every format may use: none of them is a format
SHARED = {"common", "protocol", "jsonstrict", "yaml12", "memory_ids", "archive"}


def _formats_imported(path: Path) -> set[str]:
    """The `core.formats.<x>` each import of `path` reaches (`<x>` only)."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            parts = node.module.split(".")
            if parts[:2] != ["core", "formats"]:
                continue
            if len(parts) > 2:
                found.add(parts[2])
            else:
                # a module of core.formats, not a name its __init__ defines (default_registry)
                found.update(
                    alias.name
                    for alias in node.names
                    if (FORMATS_DIR / alias.name).is_dir()
                    or (FORMATS_DIR / f"{alias.name}.py").is_file()
                )
        elif isinstance(node, ast.Import):
            for alias in node.names:
                parts = alias.name.split(".")
                if parts[:2] == ["core", "formats"] and len(parts) > 2:
                    found.add(parts[2])
    return found


def test_each_format_is_one_package_that_imports_no_other_format():
    packages = sorted(p.parent.name for p in FORMATS_DIR.glob("*/__init__.py"))
    assert packages == ["ahd", "contextos", "mace", "native", "otel", "paxman", "verist"]
    crossing = {
        f"{path.relative_to(FORMATS_DIR)} imports {other}"
        for package in packages
        for path in (FORMATS_DIR / package).rglob("*.py")
        for other in _formats_imported(path) - SHARED - {package}
    }
    assert crossing == set()


def test_the_shared_modules_import_no_format():
    packages = {p.parent.name for p in FORMATS_DIR.glob("*/__init__.py")}
    for name in sorted(SHARED):
        assert _formats_imported(FORMATS_DIR / f"{name}.py") & packages == set(), name


def test_only_verist_keeps_a_code_of_its_own_beside_the_console_s():
    stored = {"error_code": "HASH_MISMATCH", "verist": {"code": "hash_mismatch"}}
    words = {fmt.name: fmt.native_code(stored) for fmt in formats()}
    assert words.pop("verist-snapshot") == NativeCode("Verist", "hash_mismatch")
    assert set(words.values()) == {None}
    verist = formats().get("verist-snapshot")
    assert verist.native_code({"status": "ok", "verist": {"code": None}}) is None
    assert verist.native_code({"verist": "not an object"}) is None
    assert verist.native_code({}) is None


def test_a_stored_snapshot_is_checked_by_the_format_owning_its_kind(monkeypatch):
    from core import formats as formats_module

    asked: list[tuple[str, str]] = []
    for name in ("replay-trace", "mace-reflective-log"):
        fmt = formats().get(name)
        monkeypatch.setattr(
            fmt, "snapshot_tampered", lambda body, sid, name=name: asked.append((name, sid)) or True
        )
    assert formats_module.snapshot_tampered("mace-selfrep", {}, "s1") is True
    assert formats_module.snapshot_tampered("privacy", {}, "s2") is True
    assert asked == [("mace-reflective-log", "s1"), ("replay-trace", "s2")]


def test_the_snapshot_a_failure_names_is_read_by_the_report_s_format():
    from core.formats import failed_snapshot

    native_report = {
        "format": "replay-trace",
        "checks": [{"name": "snapshots", "ok": False}],
        "snapshot_ids": ["a", "b"],
        "broke_at": 1,
    }
    assert failed_snapshot(native_report) == "b"
    assert failed_snapshot({**native_report, "broke_at": 2}) is None
    assert failed_snapshot({**native_report, "format": "paxman-artifact"}) is None
    assert failed_snapshot({**native_report, "format": "no-such-format"}) is None
