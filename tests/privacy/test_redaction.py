"""Personal values are masked in every page and API response, for a native and a
non-native trace, for every role (an admin reads them only through a logged reveal)."""

from __future__ import annotations

import io
import json

import pytest

from replay.services import trace_ingest
from tests.console.personas import EVERYONE
from tests.privacy.test_erasure_everywhere import RULES, _paxman

pytestmark = pytest.mark.django_db

SECRETS = ("Ada.Lovelace@Example.org", "Ada Lovelace", "Grace Hopper", "called about invoice 7")


@pytest.fixture
def two_paxman(settings, trace_key):
    settings.PRIVACY_PATH_RULES = RULES
    other = json.loads(_paxman())
    other["metadata"]["customer"]["name"] = "Grace Hopper"
    other["metadata"]["notes"] = ["called about invoice 7 again"]
    a = trace_ingest(source=io.BytesIO(_paxman()), filename="a.json").trace
    b = trace_ingest(source=io.BytesIO(json.dumps(other).encode()), filename="b.json").trace
    return a, b


@pytest.mark.parametrize("who", ["vera", "alice", "adam", "lena"])
def test_a_paxman_comparison_masks_the_personal_paths(two_paxman, as_persona, who):
    a, b = two_paxman
    response = as_persona(who).get(f"/traces/{a.blob.sha256}/compare/{b.blob.sha256}/")
    assert response.status_code == 200
    body = response.content.decode()
    for value in SECRETS:
        assert value not in body
    assert "/metadata/customer/name" in body
    assert "[redacted]" in body


@pytest.mark.parametrize("who", [p for p in EVERYONE if p != "nora"])
def test_no_role_reads_personal_values_in_passing(two_paxman, ingest, as_persona, who):
    native = ingest("ok")
    client = as_persona(who)
    urls = [f"/traces/{t.blob.sha256}/" for t in (*two_paxman, native)]
    urls += [f"/api/traces/{t.blob.sha256}/" for t in (*two_paxman, native)]
    urls += [f"/traces/{native.blob.sha256}/events/0/", "/traces/", "/api/traces/"]
    for url in urls:
        response = client.get(url)
        body = response.content.decode()
        for value in (*SECRETS, "ada.lovelace@example.org"):
            assert value not in body, (url, value)
