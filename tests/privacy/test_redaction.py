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


@pytest.mark.parametrize("who", ["vera", "lena", "adam"])
def test_an_erased_field_reads_erased_on_the_event_page(ingest, as_persona, who):
    from privacy import erasure, subjects

    trace = ingest("ok")
    erasure.shred([subjects.lookup("ada.lovelace@example.org")])
    client = as_persona(who)
    url = f"/traces/{trace.blob.sha256}/events/0/"
    response = client.post(url, {"reason": "DSR 17"}) if who == "adam" else client.get(url)
    body = response.content.decode()
    assert response.status_code == 200
    # both erased fields read [erased] once in the JSON tree and once in the plain JSON
    tree = body[body.index('<div class="json-tree">') : body.index('<details class="plain-json">')]
    plain = body[body.index('<details class="plain-json">') :]
    assert tree.count('"[erased]"') == 2
    assert plain.count("[erased]") == 2
    assert "[erased]_" not in body
    assert "Ada" not in body


@pytest.mark.parametrize("who", ["vera", "lena", "adam"])
def test_a_format_panel_masks_a_personal_value_wherever_it_shows_it(
    settings, trace_key, as_persona, who
):
    """The panel is the format's own summary of the file (here Paxman's "unresolved fields"):
    a personal value it happens to show is masked there too, for every role."""
    settings.PRIVACY_PATH_RULES = {
        "paxman-artifact": {
            "subject": ["/metadata/customer/email"],
            "personal": ["/unresolved_fields/*"],
        }
    }
    doc = json.loads(_paxman())
    doc["unresolved_fields"] = ["Ada Lovelace's callback number"]
    trace = trace_ingest(source=io.BytesIO(json.dumps(doc).encode()), filename="p.json").trace

    body = as_persona(who).get(f"/traces/{trace.blob.sha256}/").content.decode()

    assert "callback number" not in body
    assert "unresolved fields" in body
    assert "[redacted]" in body


def test_mask_texts_replaces_every_personal_value_longest_first():
    from privacy.redaction import mask_texts

    facts = {"argv": "run --user ada@example.org --name ada", "count": 3}
    masked = mask_texts(facts, ["ada@example.org", "ada"])
    assert masked == {"argv": "run --user [redacted] --name [redacted]", "count": 3}
