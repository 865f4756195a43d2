"""Paxman ExecutionArtifacts: the published goldens replay clean, every refusal has its exact
code and message, and `verify` detects the format and exits 0, 1 or 2.

The goldens are read from tests/fixtures/published/paxman (nexusnv/paxman at bc5d79bc9568,
MIT); tampered copies are written to tmp_path.
"""

from __future__ import annotations

import copy
import hashlib
import io
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from django.conf import settings
from django.core.management import CommandError, call_command

from core.canonical import python_sorted
from core.errors import (
    CAPABILITY_NOT_FOUND,
    HASH_MISMATCH,
    INVALID_CONTRACT,
    MALFORMED_TRACE,
    VERSION_MISMATCH,
)
from core.formats import PAXMAN, detect_format, format_names, sniff, top_level_keys
from core.formats import paxman as px
from core.formats.paxman import verify as px_verify
from replay.services import trace_verify_file
from tests.published import PUBLISHED

FIXTURES = PUBLISHED
GOLDENS = sorted((FIXTURES / "paxman").glob("*.json"))
MONEY = FIXTURES / "paxman" / "money_unresolved.json"
UNPROTECTED = ["id", "created_at", "metadata", "normalized_data", "status", "unresolved_fields"]


def load(path: Path = MONEY) -> dict[str, Any]:
    return json.loads(path.read_bytes())


def stable(doc: dict[str, Any]) -> bytes:
    """The golden spelling: Paxman's stable_dumps plus a newline."""
    return python_sorted(doc) + b"\n"


def rehashed(doc: dict[str, Any]) -> dict[str, Any]:
    """A copy whose replay_hash is recomputed, so a later check is what fails."""
    out = copy.deepcopy(doc)
    out["replay_hash"] = px.replay_hash_of(out)
    return out


def verify(doc: dict[str, Any] | bytes, **kwargs: Any) -> dict[str, Any]:
    data = doc if isinstance(doc, bytes) else stable(doc)
    return px.verify_bytes(data, **kwargs).to_json()


# --- the published goldens ---------------------------------------------------------------


def test_the_fixtures_are_there():
    assert [p.name for p in GOLDENS] == [
        "empty_input_unresolved.json",
        "invoice_unresolved_dict_dsl.json",
        "money_unresolved.json",
    ]


@pytest.mark.parametrize("path", GOLDENS, ids=lambda p: p.stem)
def test_each_golden_replays_clean(path):
    report = px.verify_bytes(path.read_bytes()).to_json()

    assert report["status"] == "ok"
    assert report["error_code"] is None
    assert report["format"] == "paxman-artifact"
    assert report["authoritative"] is True
    assert [c["name"] for c in report["checks"]] == list(px.CHECK_ORDER)
    assert all(c["ok"] for c in report["checks"])
    assert report["unprotected_fields"] == UNPROTECTED
    assert "the file is in that canonical spelling" in report["checks"][-1]["detail"]


@pytest.mark.parametrize(
    ("name", "recorded"),
    [
        (
            "empty_input_unresolved",
            "952e9d578a16d483bb6d41ea5d37f06f197fb42990786d9f4ef0edbfcc89ac27",
        ),
        (
            "invoice_unresolved_dict_dsl",
            "9383912e00abf9b4a16130c69c932050c312e69c2819868ff46c54987ddbefdf",
        ),
        ("money_unresolved", "17c578809578e26be0bf851fb2d6d9ea0ac88f7ad8af747d830736a55d52f6a4"),
    ],
)
def test_the_replay_hash_recomputes_from_the_files_values(name, recorded):
    doc = load(FIXTURES / "paxman" / f"{name}.json")

    assert doc["replay_hash"] == recorded
    assert px.replay_hash_of(doc) == recorded


def test_the_hash_is_the_piped_stable_dumps_of_the_ten_fields():
    doc = load()
    parts = [
        doc["paxman_version"],
        doc["planner_version"],
        "1",
        doc["execution_plan"],
        doc["field_results"],
        doc["evidence"],
        doc["diagnostics"],
        doc["statistics"],
        doc["contract_id"],
        doc["capability_versions"],
    ]
    joined = b"|".join(json.dumps(p, sort_keys=True, separators=(",", ":")).encode() for p in parts)
    assert hashlib.sha256(joined).hexdigest() == doc["replay_hash"]


def test_a_pretty_printed_copy_replays_and_says_it_is_spelt_differently():
    data = json.dumps(load(), indent=2).encode()

    report = verify(data)

    assert report["status"] == "ok"
    assert report["checks"][-1]["detail"].endswith(
        "the file itself is spelt differently (whitespace or key order)"
    )


def test_non_ascii_values_hash_with_ensure_ascii():
    doc = load()
    doc["field_results"]["notes"]["value"] = "日本語 €£¥"
    doc = rehashed(doc)
    assert b"\\u65e5\\u672c\\u8a9e" in python_sorted(doc)

    assert verify(doc)["status"] == "ok"
    assert verify(json.dumps(doc, ensure_ascii=False).encode())["status"] == "ok"


# --- HASH_MISMATCH ----------------------------------------------------------------------------


def test_a_tampered_statistic_is_a_hash_mismatch_naming_expected_and_observed(tmp_path):
    doc = load()
    doc["statistics"]["total_fields"] = 3
    path = tmp_path / "money_unresolved.json"
    path.write_bytes(stable(doc))

    report = px.verify_bytes(path.read_bytes()).to_json()

    expected = "d0feaeba3f9255326b5878057234a98dd438ecb31e58655938273f20289e7477"
    recorded = "17c578809578e26be0bf851fb2d6d9ea0ac88f7ad8af747d830736a55d52f6a4"
    assert report["status"] == "refused"
    assert report["error_code"] == HASH_MISMATCH
    assert report["message"] == f"Artifact hash mismatch: expected {expected}, got {recorded}"
    assert report["expected"] == expected
    assert report["observed"] == recorded
    assert report["broke_at"] == "replay_hash"
    assert [(c["name"], c["ok"]) for c in report["checks"]] == [
        ("type", True),
        ("version", True),
        ("capabilities", True),
        ("hash", False),
    ]


@pytest.mark.parametrize(
    "edit",
    [
        lambda d: d["field_results"]["amount"].update(value="12.00"),
        lambda d: d["diagnostics"].pop(),
        lambda d: d["evidence"].append({"capability_id": "lookup"}),
        lambda d: d["execution_plan"].update(planner_version="2"),
        lambda d: d.update(contract_id="other-v1"),
        lambda d: d["statistics"].update(total_cost_usd="0.01"),
    ],
    ids=["value", "diagnostic", "evidence", "plan", "contract_id", "cost"],
)
def test_every_hashed_field_is_protected(edit):
    doc = load()
    edit(doc)

    report = verify(doc)

    assert report["error_code"] == HASH_MISMATCH
    assert report["observed"] == load()["replay_hash"]


@pytest.mark.parametrize(
    "edit",
    [
        lambda d: d["normalized_data"].update(amount="999.00"),
        lambda d: d.update(status="SUCCESS"),
        lambda d: d["unresolved_fields"].clear(),
        lambda d: d["metadata"].update(note="edited"),
        lambda d: d.update(id="art_0123456789ab", created_at="2026-01-01T00:00:00+00:00"),
    ],
    ids=["normalized_data", "status", "unresolved_fields", "metadata", "id-created_at"],
)
def test_the_fields_the_hash_does_not_protect_can_change_and_the_report_says_so(edit):
    doc = load()
    edit(doc)

    report = verify(doc)

    assert report["status"] == "ok"
    assert report["unprotected_fields"] == UNPROTECTED
    assert report["checks"][3]["detail"].endswith(
        "not covered by the hash: id, created_at, metadata, normalized_data, status, "
        "unresolved_fields"
    )


REQUIRED_FIELDS = [
    "status",
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
]


def test_the_required_fields_are_every_field_but_id_metadata_and_created_at():
    assert list(px.REQUIRED) == REQUIRED_FIELDS
    assert set(px.FIELDS) - set(px.REQUIRED) == {"id", "metadata", "created_at"}


@pytest.mark.parametrize("field", REQUIRED_FIELDS)
def test_a_missing_field_is_refused_by_the_type_check_naming_it(field):
    """Seed 001 §3: the type check runs before the hash. Deleting an empty evidence list
    used to verify ok (Paxman would hash its default []), a non-empty one was a
    HASH_MISMATCH; both are now the field named as missing."""
    doc = load()
    del doc[field]

    report = verify(doc)

    message = f"artifact.{field}: required"
    assert (report["status"], report["error_code"]) == ("refused", MALFORMED_TRACE)
    assert report["message"] == message
    assert report["authoritative"] is False
    assert report["checks"] == [{"name": "type", "ok": False, "detail": message}]


def test_a_deleted_evidence_list_is_named_whether_it_was_empty_or_not():
    empty = load()
    assert empty["evidence"] == []
    del empty["evidence"]
    # the goldens record no evidence: one that does, its replay hash made by the same code
    evidence = {"source": "text_extraction", "locator": {"start": 0, "end": 4}}
    full = rehashed({**load(), "evidence": [evidence]})
    assert verify(full)["status"] == "ok"
    del full["evidence"]

    for doc in (empty, full):
        report = verify(doc)
        assert (report["error_code"], report["message"]) == (
            MALFORMED_TRACE,
            "artifact.evidence: required",
        )


@pytest.mark.parametrize("field", ["id", "metadata", "created_at"])
def test_the_unhashed_optional_fields_may_be_left_out(field):
    doc = load()
    doc.pop(field, None)

    assert verify(doc)["status"] == "ok"


# --- VERSION_MISMATCH -----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("version", "message"),
    [
        (
            "2.0.0",
            "Artifact produced by Paxman 2.0.0, current version is 1.0.2: major version mismatch",
        ),
        (
            "0.9.0",
            "Artifact produced by Paxman 0.9.0, current version is 1.0.2: major version mismatch",
        ),
        (
            "1.0.3",
            "Artifact produced by Paxman 1.0.3, current version is 1.0.2: artifact is from a "
            "newer version",
        ),
        (
            "1.1.0",
            "Artifact produced by Paxman 1.1.0, current version is 1.0.2: artifact is from a "
            "newer version",
        ),
        (
            "one",
            "Cannot parse version: artifact='one', current='1.0.2' (Invalid version: 'one')",
        ),
    ],
)
def test_a_version_this_console_cannot_replay_is_refused(version, message):
    doc = rehashed({**load(), "paxman_version": version})

    report = verify(doc)

    assert report["status"] == "refused"
    assert report["error_code"] == VERSION_MISMATCH
    assert report["message"] == message
    assert report["expected"] == "1.x, at most 1.0.2"
    assert report["observed"] == version
    assert [c["name"] for c in report["checks"]] == ["type", "version"]


def test_the_version_is_checked_before_the_hash():
    report = verify({**load(), "paxman_version": "2.0.0"})  # hash not recomputed

    assert report["error_code"] == VERSION_MISMATCH


@pytest.mark.parametrize("version", ["1.0.2", "1.0.1", "1.0.0", "1.0", "1.0.2rc1", "1.0.2.dev3"])
def test_older_or_equal_versions_of_the_same_major_replay(version):
    assert verify(rehashed({**load(), "paxman_version": version}))["status"] == "ok"


def test_an_unsupported_planner_version_is_a_version_mismatch():
    report = verify(rehashed({**load(), "planner_version": "2"}))

    assert report["error_code"] == VERSION_MISMATCH
    assert report["message"] == (
        "Artifact planner_version '2' is not supported by Paxman 1.0.2 (supported: 1)"
    )
    assert (report["expected"], report["observed"]) == ("1", "2")


@pytest.mark.parametrize(
    ("older", "newer"),
    [
        ("1.0.1", "1.0.2"),
        ("1.0.2rc1", "1.0.2"),
        ("1.0.2.dev1", "1.0.2a1"),
        ("1.0.2", "1.0.2.post1"),
        ("1.0", "1.0.1"),
        ("1.9.0", "1.10.0"),
        ("1!0.1", "1!0.2"),
        ("2.0", "1!0.1"),
    ],
)
def test_versions_order_as_pep_440(older, newer):
    assert px.parse_version(older).key < px.parse_version(newer).key
    assert px.parse_version("1.0").key == px.parse_version("1.0.0").key


# --- CAPABILITY_NOT_FOUND ----------------------------------------------------------------------


def test_an_unknown_capability_is_capability_not_found():
    doc = rehashed({**load(), "capability_versions": {"lookup": "1.0", "ocr": "2.1"}})

    report = verify(doc)

    assert report["status"] == "refused"
    assert report["error_code"] == CAPABILITY_NOT_FOUND
    assert report["message"] == "Capability 'ocr' is no longer registered"
    assert report["broke_at"] == "capability_versions/ocr"
    assert report["observed"] == "ocr"
    assert [(c["name"], c["ok"]) for c in report["checks"]][-1] == ("capabilities", False)


def test_paxmans_v1_capabilities_are_registered():
    pins = dict.fromkeys(("inference", "text_extraction", "validation"), "1.0")
    doc = rehashed({**load(), "capability_versions": pins})

    report = verify(doc)

    assert report["status"] == "ok"
    assert report["checks"][2]["detail"] == (
        "every pinned capability is registered at its version: inference@1.0, "
        "text_extraction@1.0, validation@1.0"
    )


def test_a_caller_supplies_its_own_registry():
    doc = rehashed({**load(), "capability_versions": {"ocr": "2.1"}})

    assert verify(doc, registry={"ocr": "2.1"})["status"] == "ok"
    assert verify(doc, registry={})["error_code"] == CAPABILITY_NOT_FOUND


# --- INVALID_CONTRACT ----------------------------------------------------------------------------


def test_a_contract_with_another_id_is_invalid():
    report = verify(load(), contract={"id": "invoice-v1"})

    assert report["status"] == "refused"
    assert report["error_code"] == INVALID_CONTRACT
    assert report["message"] == (
        "the supplied contract 'invoice-v1' is not the one the artifact was produced from "
        "('with-money-v1')"
    )
    assert (report["expected"], report["observed"]) == ("with-money-v1", "invoice-v1")
    assert [c["name"] for c in report["checks"]][-1] == "contract"


def test_a_contract_without_an_id_is_invalid():
    report = verify(load(), contract={"fields": []})

    assert report["error_code"] == INVALID_CONTRACT
    assert report["message"] == "the supplied contract has no string id"


def test_the_right_contract_passes_as_a_mapping_or_an_object():
    class CanonicalContract:
        id = "with-money-v1"

    for contract in ({"id": "with-money-v1"}, CanonicalContract()):
        report = verify(load(), contract=contract)
        assert report["status"] == "ok"
        assert report["checks"][4]["detail"] == "the supplied contract is 'with-money-v1'"


# --- MALFORMED_TRACE ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("data", "message"),
    [
        (b'{"status": ', "artifact: truncated JSON at line 1 column 12: Expecting value"),
        (b"[1, 2]", "artifact: expected a JSON object, got list"),
        (
            b'{"status": "OK", "status": "OK"}',
            "artifact: duplicate key 'status': a hash over duplicate keys is ambiguous",
        ),
    ],
)
def test_input_that_is_not_an_artifact_object_is_malformed(data, message):
    report = verify(data)

    assert report["error_code"] == MALFORMED_TRACE
    assert report["message"] == message
    assert report["checks"] == [{"name": "type", "ok": False, "detail": message}]


@pytest.mark.parametrize(
    ("edit", "message"),
    [
        (lambda d: d.pop("replay_hash"), "artifact.replay_hash: required"),
        (lambda d: d.pop("status"), "artifact.status: required"),
        (
            lambda d: d.update(extra=1),
            "artifact.extra: not an ExecutionArtifact field (ExecutionArtifact(**decoded) "
            "refuses it)",
        ),
        (
            lambda d: d.update(capability_versions={"lookup": 1}),
            "artifact.capability_versions['lookup']: expected a version string, got int",
        ),
        (
            lambda d: d.update(replay_hash="ABC"),
            "artifact.replay_hash: must be 64 lowercase hex chars (or empty), got 'ABC'",
        ),
        (lambda d: d.update(evidence={}), "artifact.evidence: expected a list, got dict"),
        (lambda d: d.update(paxman_version=1), "artifact.paxman_version: expected a str, got int"),
        (
            lambda d: d.update(execution_plan=[]),
            "artifact.execution_plan: expected an object or null, got list",
        ),
        (
            lambda d: d["field_results"]["amount"].update(status="DONE"),
            "artifact.field_results['amount'].status: must be one of SUCCESS/PARTIAL_SUCCESS/"
            "UNRESOLVED/EXECUTION_FAILED, got 'DONE'",
        ),
        (
            lambda d: d["unresolved_fields"].append(3),
            "artifact.unresolved_fields[2]: expected a str, got int",
        ),
        (lambda d: d.update(id=""), "artifact.id: must be a non-empty string, got ''"),
    ],
)
def test_a_bad_field_is_malformed_and_named(edit, message):
    doc = load()
    edit(doc)

    report = verify(doc)

    assert report["status"] == "refused"
    assert report["error_code"] == MALFORMED_TRACE
    assert report["message"] == message


# --- status: Paxman's Status enum (paxman/types.py at nexusnv/paxman bc5d79bc9568) -------------

#: Paxman 1.0.2's ``Status`` values, as its enum declares them
PAXMAN_STATUSES = [
    "SUCCESS",
    "PARTIAL_SUCCESS",
    "UNRESOLVED",
    "INVALID_CONTRACT",
    "EXECUTION_FAILED",
]
STATUS_WORDS = (
    "is not a valid Status (Paxman's Status is one of SUCCESS, PARTIAL_SUCCESS, UNRESOLVED, "
    "INVALID_CONTRACT, EXECUTION_FAILED)"
)


def test_the_statuses_are_paxmans_enum():
    assert list(px.STATUSES) == PAXMAN_STATUSES


@pytest.mark.parametrize("status", PAXMAN_STATUSES)
def test_every_status_of_paxmans_enum_verifies_as_the_hash_leaves_it_out(status):
    report = verify({**load(), "status": status})

    assert (report["status"], report["error_code"]) == ("ok", None)
    assert report["checks"][0]["detail"].startswith(f"ExecutionArtifact, status {status}, ")


@pytest.mark.parametrize("status", ["bogus", "success", "OK", "RESOLVED", "", " SUCCESS"], ids=repr)
@pytest.mark.parametrize("spelling", ["canonical", "indented"])
def test_a_status_paxmans_enum_refuses_is_malformed_in_its_words(status, spelling):
    """``Status("bogus")`` raises ``ValueError: 'bogus' is not a valid Status``: Paxman cannot
    build the artifact, so it never reaches its replay. The hash does not cover ``status``, so
    without this check the edited file verified ok."""
    doc = {**load(), "status": status}
    data = stable(doc) if spelling == "canonical" else json.dumps(doc, indent=2).encode()

    report = verify(data)

    message = f"artifact.status: {status!r} {STATUS_WORDS}"
    assert (report["status"], report["error_code"]) == ("refused", MALFORMED_TRACE)
    assert report["message"] == message
    assert report["checks"] == [{"name": "type", "ok": False, "detail": message}]
    assert report["authoritative"] is False


def test_a_long_refused_status_is_quoted_to_80_characters():
    report = verify({**load(), "status": "X" * 500})

    assert report["message"] == f"artifact.status: {'X' * 80!r} {STATUS_WORDS}"


@pytest.mark.parametrize(
    ("status", "kind"), [(None, "null"), (1, "int"), (["SUCCESS"], "list"), (True, "bool")]
)
def test_a_status_that_is_not_a_string_is_malformed(status, kind):
    report = verify({**load(), "status": status})

    assert (report["error_code"], report["message"]) == (
        MALFORMED_TRACE,
        f"artifact.status: expected a status string, got {kind}",
    )


def test_a_bogus_status_is_refused_by_the_command_and_stores_nothing(tmp_path, db):
    from replay.models import Trace

    path = tmp_path / "bogus.json"
    path.write_bytes(stable({**load(), "status": "bogus"}))
    out, err = io.StringIO(), io.StringIO()

    with pytest.raises(SystemExit) as exited:
        call_command("verify", str(path), "--json", stdout=out)
    assert exited.value.code == 1
    assert json.loads(out.getvalue())["message"] == f"artifact.status: 'bogus' {STATUS_WORDS}"

    with pytest.raises(CommandError) as refused:
        call_command("ingest", str(path), stdout=out, stderr=err)
    assert refused.value.returncode == 1
    assert err.getvalue() == (
        f"{path}: refused MALFORMED_TRACE: artifact.status: 'bogus' {STATUS_WORDS}\n"
    )
    assert Trace.objects.count() == 0


def test_parse_refuses_with_replay_error():
    from core.errors import ReplayError

    with pytest.raises(ReplayError) as refused:
        px.parse(b"null")
    assert refused.value.code == MALFORMED_TRACE
    assert refused.value.message == "artifact: expected a JSON object, got null"


def test_an_oversized_stream_is_refused_before_parsing(monkeypatch):
    monkeypatch.setattr(px_verify, "MAX_ARTIFACT_BYTES", 100)  # where verify_stream reads it

    report = px.verify_stream(io.BytesIO(MONEY.read_bytes())).to_json()

    assert report["error_code"] == MALFORMED_TRACE
    assert report["message"] == "artifact: larger than 100 bytes"


# --- detection ---------------------------------------------------------------------------------


def test_the_format_names_match_the_modules():
    assert px.FORMAT == PAXMAN
    assert px.FORMAT in format_names()


@pytest.mark.parametrize("path", GOLDENS, ids=lambda p: p.stem)
def test_goldens_are_detected_by_their_keys(path):
    assert detect_format(path.read_bytes(), path.name) == "paxman-artifact"
    assert detect_format(path.read_bytes(), "artifact.bin") == "paxman-artifact"


def test_detection_reads_only_top_level_keys():
    head = b'{"meta": {"contract_id": 1, "s": "\\"{"}, "replay_hash": "x"}'
    assert list(top_level_keys(head)) == ["meta", "replay_hash"]
    assert detect_format(head, "x.json") == "replay-trace"  # "meta" is native's
    nested = b'{"status": "OK", "x": [{"format": 1}], "paxman_version": "1.0.2"}'
    assert detect_format(nested, "x.json") == "paxman-artifact"


def test_a_prefix_is_enough_to_detect():
    data = json.dumps({"status": "OK", "field_results": {"a": "x" * 5000}}).encode()
    assert detect_format(data[:100], "big.json") == "paxman-artifact"


def test_sniff_hands_back_every_byte():
    data = MONEY.read_bytes()

    class Pipe(io.RawIOBase):
        def __init__(self) -> None:
            self.inner = io.BytesIO(data)

        def readable(self) -> bool:
            return True

        def seekable(self) -> bool:
            return False

        def readinto(self, b):  # type: ignore[override]
            chunk = self.inner.read(min(len(b), 7))
            b[: len(chunk)] = chunk
            return len(chunk)

    fmt, stream = sniff(Pipe(), "money.json")
    assert fmt == "paxman-artifact"
    assert stream.read() == data

    seekable = io.BytesIO(data)
    fmt, stream = sniff(seekable, "money.json")
    assert (fmt, stream) == ("paxman-artifact", seekable)
    assert stream.read() == data


# --- the verify command and the service ---------------------------------------------------------


def test_the_service_detects_and_verifies_an_artifact():
    with MONEY.open("rb") as fh:
        report = trace_verify_file(source=fh, filename=MONEY.name)

    assert report["format"] == "paxman-artifact"
    assert report["status"] == "ok"


def test_verify_prints_the_checks_and_exits_0():
    out = io.StringIO()

    call_command("verify", str(MONEY), stdout=out)

    lines = out.getvalue().splitlines()
    assert lines[0] == "ok"
    assert [line.split(":")[0] for line in lines[1:]] == [
        "  ok   type",
        "  ok   version",
        "  ok   capabilities",
        "  ok   hash",
        "  ok   contract",
        "  ok   rehydration",
    ]


def test_verify_json_prints_the_report_and_exits_1_on_a_tampered_copy(tmp_path):
    doc = load()
    doc["field_results"]["amount"]["value"] = "1.00"
    path = tmp_path / "tampered.json"
    path.write_bytes(stable(doc))
    out = io.StringIO()

    with pytest.raises(SystemExit) as exited:
        call_command("verify", str(path), "--json", stdout=out)

    assert exited.value.code == 1
    report = json.loads(out.getvalue())
    assert report["error_code"] == HASH_MISMATCH
    assert report["expected"] == px.replay_hash_of(doc)


def test_verify_a_missing_file_is_a_usage_error(tmp_path):
    with pytest.raises(CommandError) as failed:
        call_command("verify", str(tmp_path / "nope.json"))

    assert failed.value.returncode == 2
    assert str(failed.value) == f"{tmp_path / 'nope.json'}: no such file"


def test_the_command_line_exits_0_and_1(tmp_path):
    doc = rehashed({**load(), "paxman_version": "9.0.0"})
    bad = tmp_path / "newer.json"
    bad.write_bytes(stable(doc))
    env = {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "config.settings",
        "REPLAY_VAR_DIR": str(tmp_path / "var"),
        "DATABASE_URL": f"sqlite:///{tmp_path / 'cli.sqlite3'}",
    }
    manage = str(Path(settings.BASE_DIR) / "manage.py")
    procs = [
        subprocess.Popen(
            [sys.executable, manage, "verify", str(path), "--json"],
            cwd=settings.BASE_DIR,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for path in (MONEY, bad)
    ]
    (ok_out, ok_err), (bad_out, bad_err) = (p.communicate(timeout=120) for p in procs)

    assert procs[0].returncode == 0, ok_err
    assert json.loads(ok_out)["status"] == "ok"
    assert procs[1].returncode == 1, bad_err
    assert json.loads(bad_out)["error_code"] == VERSION_MISMATCH
