"""Paxman's capability registry (built-ins, a deployment's setting, installed packages' entry
points), checked by capability id AND version, and a supplied contract file
(``paxman.parse_contract``) making ``INVALID_CONTRACT`` reachable.

Generated artifacts are the published golden with fields edited and the replay_hash
recomputed by the format's own hashing rule (``replay_hash_of``, checked against Paxman's
reference code in test_format_paxman), so the check under test is the one that fails."""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest

from core.canonical import python_sorted
from core.errors import CAPABILITY_NOT_FOUND, INVALID_CONTRACT
from core.formats import paxman as px
from tests.published import PUBLISHED

FIXTURES = PUBLISHED
MONEY = FIXTURES / "paxman" / "money_unresolved.json"


def pinned(**caps: str) -> bytes:
    doc = json.loads(MONEY.read_bytes())
    doc["capability_versions"] = caps
    doc = copy.deepcopy(doc)
    doc["replay_hash"] = px.replay_hash_of(doc)
    return python_sorted(doc)


def verify(data: bytes, **kwargs: Any) -> dict[str, Any]:
    return px.verify_bytes(data, **kwargs).to_json()


class EntryPoint:
    """What ``importlib.metadata`` gives for an entry point: a name and ``load()``."""

    def __init__(self, name: str, target: Any) -> None:
        self.name = name
        self._target = target

    def load(self) -> Any:
        return self._target


# --- by id and version ---------------------------------------------------------------------------


def test_a_registered_capability_pinned_at_an_unregistered_version_is_capability_not_found():
    report = verify(pinned(lookup="1.0", inference="2.0"))

    assert (report["status"], report["error_code"]) == ("refused", CAPABILITY_NOT_FOUND)
    assert report["message"] == (
        "no capability registered for id='inference', version='2.0' (registered: inference@1.0)"
    )
    assert report["broke_at"] == "capability_versions/inference"
    assert (report["expected"], report["observed"]) == ("1.0", "2.0")
    assert [(c["name"], c["ok"]) for c in report["checks"]] == [
        ("type", True),
        ("version", True),
        ("capabilities", False),
    ]


def test_every_pinned_capability_at_its_version_passes():
    report = verify(pinned(lookup="1.0", inference="1.0"))
    assert report["status"] == "ok"
    assert report["checks"][2]["detail"] == (
        "every pinned capability is registered at its version: inference@1.0, lookup@1.0"
    )


def test_a_deployment_adds_capabilities_and_versions():
    registry = px.capability_registry({"ocr": ["2.1", "2.0"], "inference": "2.0"})

    assert registry.versions("inference") == ("1.0", "2.0")
    assert registry.versions("ocr") == ("2.0", "2.1")
    assert verify(pinned(inference="2.0", ocr="2.1"), registry=registry)["status"] == "ok"
    report = verify(pinned(ocr="3.0"), registry=registry)
    assert (report["error_code"], report["message"], report["expected"]) == (
        CAPABILITY_NOT_FOUND,
        "no capability registered for id='ocr', version='3.0' (registered: ocr@2.0, ocr@2.1)",
        "2.0, 2.1",
    )


def test_installed_packages_register_capabilities_through_entry_points():
    def register(registry: px.CapabilityRegistry) -> None:
        registry.register("table_extraction", "0.9")

    eps = [EntryPoint("tables", register), EntryPoint("ocr", {"ocr": ["1.0", "1.1"]})]
    registry = px.capability_registry(eps=eps)

    assert registry.as_dict() == {
        "inference": ["1.0"],
        "lookup": ["1.0"],
        "ocr": ["1.0", "1.1"],
        "regex_extraction": ["1.0"],
        "table_extraction": ["0.9"],
        "text_extraction": ["1.0"],
        "validation": ["1.0"],
    }
    assert verify(pinned(table_extraction="0.9", ocr="1.1"), registry=registry)["status"] == "ok"
    assert px.CAPABILITY_ENTRY_POINT_GROUP == "replay_console.paxman_capabilities"


@pytest.mark.parametrize(
    ("cid", "version", "message"),
    [
        ("", "1.0", "a capability id must be a non-empty string, got ''"),
        ("ocr", "", "capability 'ocr': a version must be a non-empty string, got ''"),
        ("ocr", 2, "capability 'ocr': a version must be a non-empty string, got 2"),
    ],
)
def test_a_malformed_registration_is_refused(cid, version, message):
    with pytest.raises(ValueError, match="^" + message.replace("(", r"\(") + "$"):
        px.CapabilityRegistry().register(cid, version)


# --- a supplied contract --------------------------------------------------------------------------

CONTRACT = {"id": "with-money-v1", "fields": [{"name": "total", "type": "MONEY"}]}


@pytest.mark.parametrize(
    ("data", "message"),
    [
        (
            b"{nope",
            "the supplied contract is not JSON: c.contract.json: malformed JSON at line 1 "
            "column 2: Expecting property name enclosed in double quotes",
        ),
        (b"[]", "c.contract.json: a Dict DSL contract must be an object"),
        (
            json.dumps({"fields": []}).encode(),
            "c.contract.json: Dict DSL contract is missing required 'id' key",
        ),
        (
            json.dumps({"id": "", "fields": []}).encode(),
            "c.contract.json: Dict DSL contract 'id' must be a non-empty string",
        ),
        (
            json.dumps({"id": "with-money-v1", "version": 1, "fields": []}).encode(),
            "c.contract.json: Dict DSL contract 'version' must be a non-empty string, got 1",
        ),
        (
            json.dumps({"id": "with-money-v1"}).encode(),
            "c.contract.json: Dict DSL contract 'fields' must be a list",
        ),
        (
            json.dumps({"id": "with-money-v1", "fields": []}).encode(),
            "c.contract.json: contract 'with-money-v1' has no fields",
        ),
        (
            json.dumps({"id": "with-money-v1", "fields": [{"type": "MONEY"}]}).encode(),
            "c.contract.json: fields[0] must be an object with a 'name'",
        ),
        (
            json.dumps({"id": "with-money-v1", "fields": [{"name": "a"}, {"name": "a"}]}).encode(),
            "c.contract.json: contract 'with-money-v1' has duplicate field name 'a'",
        ),
    ],
    ids=[
        "not-json",
        "not-object",
        "no-id",
        "empty-id",
        "bad-version",
        "no-fields",
        "empty-fields",
        "nameless-field",
        "duplicate-field",
    ],
)
def test_a_contract_file_that_is_no_contract_is_invalid_contract(data, message):
    contract = px.parse_contract(data, where="c.contract.json")
    assert contract == px.InvalidContract(message)

    report = verify(MONEY.read_bytes(), contract=contract)

    assert (report["status"], report["error_code"], report["message"]) == (
        "refused",
        INVALID_CONTRACT,
        message,
    )
    assert (report["broke_at"], report["expected"], report["observed"]) == (
        "contract",
        "with-money-v1",
        None,
    )
    assert [c["name"] for c in report["checks"]][-1] == "contract"


def test_the_artifacts_own_contract_passes_and_another_is_invalid():
    contract = px.parse_contract(json.dumps(CONTRACT).encode())
    assert verify(MONEY.read_bytes(), contract=contract)["status"] == "ok"

    other = px.parse_contract(json.dumps({**CONTRACT, "id": "invoice-v1"}).encode())
    report = verify(MONEY.read_bytes(), contract=other)
    assert (report["error_code"], report["broke_at"], report["expected"], report["observed"]) == (
        INVALID_CONTRACT,
        "contract_id",
        "with-money-v1",
        "invoice-v1",
    )
