"""The ledger as a transparency log over the API: the verifier keys and signed checkpoint,
inclusion and consistency proofs that tlog.proof checks offline, the roles matrix and the
refusals."""

from __future__ import annotations

import pytest

from core.ledger import codes
from governance import services as gov_services
from governance import transparency
from governance.models import GovernanceEvent
from tlog import note as notes
from tlog import proof

pytestmark = pytest.mark.django_db


@pytest.fixture
def ledger_of_12(db):
    for i in range(11):
        gov_services.event_append(event_type=codes.SECURITY_INCIDENT, payload={"n": i})


def test_it_publishes_the_vkey_and_a_checkpoint_that_verifies_with_it(ledger_of_12, as_persona):
    client = as_persona("vera")  # (signing a persona in appends its role events)
    size = GovernanceEvent.objects.count()
    body = client.get("/api/governance/tlog/").json()

    assert body["origin"] == transparency.origin()
    assert body["tree_size"] == size
    verifiers = [notes.parse_verifier(v) for v in body["vkeys"]]
    cp = transparency.open_checkpoint(body["checkpoint"])
    assert cp.size == size
    notes.open_note(body["checkpoint"].encode(), verifiers)
    past = as_persona("vera").get("/api/governance/tlog/", {"size": 5}).json()
    assert transparency.open_checkpoint(past["checkpoint"]).size == 5


def test_it_serves_proofs_that_check_offline(ledger_of_12, as_persona):
    client = as_persona("vera")
    size = GovernanceEvent.objects.count()
    vkeys = [notes.parse_verifier(v) for v in client.get("/api/governance/tlog/").json()["vkeys"]]

    for seq in (1, 7, size):
        doc = client.get("/api/governance/tlog/inclusion/", {"seq": seq}).json()
        assert proof.check_inclusion(doc, vkeys, origin=transparency.origin()).size == size
    kept = client.get("/api/governance/tlog/", {"size": 5}).json()["checkpoint"]
    doc = client.get("/api/governance/tlog/consistency/", {"old": 5}).json()
    assert proof.check_consistency(doc, kept, vkeys).size == size


def test_it_refuses_a_proof_outside_the_tree_with_its_code(ledger_of_12, as_persona):
    client = as_persona("vera")
    size = GovernanceEvent.objects.count()

    response = client.get("/api/governance/tlog/inclusion/", {"seq": 999})
    assert response.status_code == 400
    assert response.json() == {
        "error_code": "PROOF_RANGE",
        "message": f"no inclusion proof for event 999 in a tree of size {size} (of {size})",
    }
    response = client.get("/api/governance/tlog/consistency/", {"old": 999})
    assert (response.status_code, response.json()["error_code"]) == (400, "PROOF_RANGE")
    assert client.get("/api/governance/tlog/", {"size": 999}).json() == {
        "error_code": "PROOF_RANGE",
        "message": f"no checkpoint at size 999: the tree has {size} leaves",
    }
    assert client.get("/api/governance/tlog/inclusion/").status_code == 400


def test_it_follows_the_roles_matrix(ledger_of_12, as_persona, client):
    for url in ("/api/governance/tlog/", "/api/governance/tlog/inclusion/?seq=1"):
        assert client.get(url).status_code == 401
        denied = as_persona("nora").get(url)
        assert (denied.status_code, denied.json()["error_code"]) == (403, "PERMISSION_DENIED")


def test_the_ledger_page_shows_the_verifier_key(ledger_of_12, as_persona):
    client = as_persona("vera")
    size = GovernanceEvent.objects.count()

    page = client.get("/governance/").content.decode()

    vkey = transparency.verifier_keys()[0]
    assert f'<ul id="tlog-vkeys"><li><code>{vkey}</code> (current)</li></ul>' in page
    assert f'<span id="tlog-size">{size}</span>' in page
    assert f'<code id="tlog-origin">{transparency.origin()}</code>' in page


def test_each_event_on_the_ledger_page_links_its_inclusion_proof(ledger_of_12, as_persona):
    client = as_persona("vera")

    page = client.get("/governance/").content.decode()

    assert 'id="proof-7" href="/api/governance/tlog/inclusion/?seq=7"' in page
    doc = client.get("/api/governance/tlog/inclusion/?seq=7").json()
    vkeys = [notes.parse_verifier(v) for v in transparency.verifier_keys()]
    assert proof.check_inclusion(doc, vkeys).origin == transparency.origin()
