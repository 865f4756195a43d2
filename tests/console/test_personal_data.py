"""Event payloads are shown with personal data redacted by the trace's privacy policy; an
admin may reveal them, and each reveal is appended to the ledger before anything is shown."""

from __future__ import annotations

import json

import pytest

from console.redaction import REDACTED, policy_pointers, redact
from governance.models import GovernanceEvent

pytestmark = pytest.mark.django_db

NAME = "Ada Lovelace"
EMAIL = "ada.lovelace@example.org"


def test_a_viewer_reads_the_payload_with_name_and_email_redacted(as_persona, ingest):
    trace = ingest("ok")
    body = as_persona("vera").get(f"/traces/{trace.blob.sha256}/events/0/").content.decode()
    assert NAME not in body
    assert EMAIL not in body
    assert REDACTED in body
    assert "<code>/user/email</code>, <code>/user/name</code>" in body
    assert "Reveal personal data" not in body


def test_the_event_partial_over_htmx(as_persona, ingest, htmx_headers):
    trace = ingest("ok")
    body = (
        as_persona("vera")
        .get(f"/traces/{trace.blob.sha256}/events/0/", **htmx_headers)
        .content.decode()
    )
    assert body.strip().startswith('<section id="event-payload" class="card">')


def test_adam_reveals_with_a_reason_and_the_reveal_is_in_the_ledger(as_persona, ingest):
    trace = ingest("ok")
    url = f"/traces/{trace.blob.sha256}/events/0/"
    client = as_persona("adam")
    assert "Reveal personal data" in client.get(url).content.decode()
    response = client.post(url, {"reason": "DSR 2026-17 access request"})
    body = response.content.decode()
    assert NAME in body
    assert EMAIL in body
    event = GovernanceEvent.objects.get(type="PII_REVEALED")
    assert event.actor.username == "adam"
    assert event.payload == {
        "trace_id": trace.trace_id,
        "fields": ["/user/email", "/user/name"],
        "reason": "DSR 2026-17 access request",
        "context": f"event 0 of {trace.blob.sha256}",
    }


def test_a_reveal_without_a_reason_shows_nothing_and_logs_nothing(as_persona, ingest):
    trace = ingest("ok")
    response = as_persona("adam").post(f"/traces/{trace.blob.sha256}/events/0/", {"reason": " "})
    assert response.status_code == 400
    assert NAME not in response.content.decode()
    assert not GovernanceEvent.objects.filter(type="PII_REVEALED").exists()


@pytest.mark.parametrize("name", ["vera", "alice", "oscar", "cora", "lena", "nora"])
def test_only_admins_may_reveal(as_persona, ingest, name):
    trace = ingest("ok")
    response = as_persona(name).post(
        f"/traces/{trace.blob.sha256}/events/0/", {"reason": "curious"}
    )
    assert response.status_code == 403
    assert NAME not in response.content.decode()
    assert not GovernanceEvent.objects.filter(type="PII_REVEALED").exists()


def test_an_unknown_event_is_404(as_persona, ingest):
    trace = ingest("ok")
    assert as_persona("vera").get(f"/traces/{trace.blob.sha256}/events/9999/").status_code == 404


class TestRedact:
    def test_it_redacts_the_named_fields_that_exist(self):
        payload = {"user": {"name": NAME, "email": EMAIL}, "text": "hi"}
        out, fields = redact(payload, ["/user/email", "/user/name", "/user/phone"])
        assert out == {"user": {"name": REDACTED, "email": REDACTED}, "text": "hi"}
        assert fields == ["/user/email", "/user/name"]
        assert payload["user"]["name"] == NAME  # the original is untouched

    def test_without_a_policy_every_string_is_redacted(self):
        payload = {"a": ["x", 1, {"b": "y"}], "c": True}
        out, fields = redact(payload, None)
        assert out == {"a": [REDACTED, 1, {"b": REDACTED}], "c": True}
        assert fields == ["/a/0", "/a/2/b"]

    @pytest.mark.parametrize("body", [None, [], {"redact": "x"}, {"redact": [1]}, {}])
    def test_an_unusable_policy_is_none(self, body):
        assert policy_pointers(body) is None

    def test_malformed_pointers_are_skipped(self):
        assert redact({"a": "x"}, ["a", "/~2", ""]) == ({"a": "x"}, [])

    def test_json_round_trip_of_the_page_value(self):
        out, _ = redact({"user": {"name": NAME}}, ["/user/name"])
        assert json.loads(json.dumps(out)) == {"user": {"name": REDACTED}}
