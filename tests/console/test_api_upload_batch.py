"""Several files in one ``POST /api/traces/upload/`` are one upload, as a drop on the upload
page: each trace is grouped with its companions by the formats' own rules (the page's
service, ``trace_upload_batch``), and the explicit ``contract`` field still goes with the
trace, pinned ahead of a contract grouped by name."""

from __future__ import annotations

import json

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile

from core.errors import INVALID_CONTRACT
from replay.models import Trace
from tests.console.formats import api_client
from tests.console.test_format_traces import MONEY
from tests.console.test_paxman_contracts_history import OTHER, OTHER_MESSAGE, OWN

pytestmark = pytest.mark.django_db
URL = "/api/traces/upload/"


def part(name: str, data: bytes) -> SimpleUploadedFile:
    return SimpleUploadedFile(name, data)


def test_an_artifact_and_its_contract_by_name_are_one_upload(as_persona):
    client = api_client("alice")
    response = client.post(
        URL, {"file": [part("money.json", MONEY.read_bytes()), part("money.contract.json", OWN)]}
    )
    assert response.status_code == 201
    results = response.json()["results"]
    assert [(r["filename"], r["input_of"], r["input_as"], r["error_code"]) for r in results] == [
        ("money.json", None, None, None),
        ("money.contract.json", "money.json", "a Paxman artifact's contract", None),
    ]
    trace = Trace.objects.get()
    assert results[0]["trace"]["sha256"] == trace.blob.sha256
    assert results[0]["trace"]["created"] is True
    assert trace.ingest_report["status"] == "ok"


def test_a_wrong_contract_grouped_by_name_refuses_the_artifact_and_stores_nothing(as_persona):
    client = api_client("alice")
    response = client.post(
        URL,
        {"file": [part("money.json", MONEY.read_bytes()), part("money.contract.json", OTHER)]},
    )
    assert response.status_code == 200
    first = response.json()["results"][0]
    assert (first["filename"], first["trace"], first["error_code"], first["message"]) == (
        "money.json",
        None,
        INVALID_CONTRACT,
        OTHER_MESSAGE,
    )
    assert not Trace.objects.exists()


def test_the_explicit_contract_is_pinned_ahead_of_the_grouped_one(as_persona):
    client = api_client("alice")
    response = client.post(
        URL,
        {
            "file": [part("money.json", MONEY.read_bytes()), part("money.contract.json", OWN)],
            "contract": part("c.json", OTHER),
        },
    )
    first = response.json()["results"][0]
    assert (first["error_code"], first["message"]) == (INVALID_CONTRACT, OTHER_MESSAGE)
    assert not Trace.objects.exists()


def test_a_contract_without_its_artifact_is_refused_and_the_other_file_stored(as_persona):
    client = api_client("alice")
    response = client.post(
        URL,
        {"file": [part("money.json", MONEY.read_bytes()), part("other.contract.json", OWN)]},
    )
    assert response.status_code == 201
    by_name = {r["filename"]: r for r in response.json()["results"]}
    assert by_name["money.json"]["trace"]["format"] == "paxman-artifact"
    assert (
        by_name["other.contract.json"]["error_code"],
        by_name["other.contract.json"]["message"],
    ) == (
        INVALID_CONTRACT,
        "other.contract.json is a Paxman contract (named .contract.json); drop it together "
        "with the artifact it belongs to, other.json",
    )


def test_one_multipart_file_still_answers_its_trace_or_its_refusal(as_persona):
    client = api_client("alice")
    stored = client.post(
        URL, {"file": part("money.json", MONEY.read_bytes()), "contract": part("c.json", OWN)}
    )
    assert stored.status_code == 201
    assert stored.json()["format"] == "paxman-artifact"
    again = client.post(URL, {"file": part("money.json", MONEY.read_bytes())})
    assert (again.status_code, again.json()["created"]) == (200, False)
    refused = client.post(URL, {"file": part("b.json", b'{"contract_id": 1')})
    assert refused.status_code == 400
    assert refused.json()["error_code"] == "MALFORMED_TRACE"


def test_the_schema_says_file_may_be_several_parts(as_persona):
    schema = api_client("alice").get("/api/schema/?format=json")
    if schema.status_code != 200:
        schema = api_client("alice").get("/api/schema/", HTTP_ACCEPT="application/json")
    body = json.loads(schema.content)
    upload = body["paths"]["/api/traces/upload/"]["post"]["requestBody"]["content"]
    assert upload["multipart/form-data"]["schema"]["properties"]["file"]["type"] == "array"
    verify = body["paths"]["/api/traces/verify/"]["post"]["requestBody"]["content"]
    assert verify["multipart/form-data"]["schema"]["properties"]["file"]["type"] == "string"
