"""Retention in the console: the operations page says what expires next, and an expired
trace's page is its tombstone (when, by which rule, the ledger event, the hashes)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from core.ledger import codes
from governance import retention
from governance.models import GovernanceEvent

pytestmark = pytest.mark.django_db

LATER = datetime(2026, 1, 1, tzinfo=UTC) + timedelta(days=31)


@pytest.fixture
def policy(settings):
    settings.REPLAY_RETENTION = {"default": 30, "verdict": {"diverged": None}}
    settings.REPLAY_RETENTION_HOLDS = []


def _section(body: str) -> str:
    return body[body.index('id="retention"') :]


@pytest.mark.parametrize("name", ["vera", "alice", "oscar", "adam", "cora", "lena"])
def test_the_operations_page_shows_what_expires_next_to_every_role_that_browses(
    as_persona, ingest, policy, name
):
    ok = ingest("ok")
    ingest("diverged")  # kept forever by its verdict's rule

    section = _section(as_persona(name).get("/ops/").content.decode())

    assert f'href="/traces/{ok.blob.sha256}/"' in section
    assert "<td>default (30 days)</td><td>2026-01-31 00:00 UTC</td>" in section
    rows = section[: section.index("</table>")].count("<tr>")
    assert rows == 2, section  # the header and the one trace


def test_someone_without_a_role_gets_403_from_the_operations_page(as_persona, policy):
    assert as_persona("nora").get("/ops/").status_code == 403


def test_a_trace_the_ledger_names_is_not_listed(as_persona, replayed, policy):
    replayed("ok")

    section = _section(as_persona("oscar").get("/ops/").content.decode())

    assert "Nothing is due to expire" in section


def test_without_a_policy_the_page_says_nothing_expires(as_persona, ingest, settings):
    settings.REPLAY_RETENTION = None
    ingest("ok")

    section = _section(as_persona("oscar").get("/ops/").content.decode())

    assert "No retention policy is set (<code>REPLAY_RETENTION_JSON</code>): nothing expires." in (
        section
    )


@pytest.fixture
def expired(ingest, policy):
    trace = ingest("ok")
    retention.retention_run(now=LATER)
    trace.refresh_from_db()
    return trace


@pytest.mark.parametrize("name", ["vera", "alice", "oscar", "adam", "cora", "lena"])
def test_an_expired_traces_page_is_its_tombstone(as_persona, expired, name):
    event = GovernanceEvent.objects.get(code=codes.code_of(codes.TRACE_EXPIRED))

    response = as_persona(name).get(f"/traces/{expired.blob.sha256}/")
    body = response.content.decode()

    assert response.status_code == 200
    assert "This trace expired on <strong>2026-02-01 00:00:00 UTC</strong>" in body
    assert "<strong>default (30 days)</strong>" in body
    assert (
        f'href="/governance/?before={event.seq + 1}">ledger event {event.seq} (TRACE_EXPIRED)'
        in (body)
    )
    assert f"<code>sha256:{expired.blob.sha256}</code> ({expired.blob.size} bytes, removed)" in body
    for ref in expired.required_snapshot_ids:
        assert f"<code>{ref['snapshot_id']}</code>" in body
    assert 'id="events"' not in body  # no content is read or shown


def test_an_expired_trace_still_takes_a_note_and_its_tombstone_lists_it(as_persona, expired):
    client = as_persona("alice")
    response = client.post(f"/traces/{expired.blob.sha256}/notes/", {"text": "after expiry"})
    note = GovernanceEvent.objects.get(code=codes.code_of(codes.TRACE_NOTE))

    assert response.status_code == 303
    body = client.get(f"/traces/{expired.blob.sha256}/").content.decode()
    assert "This trace expired on" in body
    assert f'<li id="note-{note.seq}">' in body
    assert "after expiry" in body
    assert 'id="note-form"' in body


def test_an_expired_traces_event_page_answers_410(as_persona, expired):
    response = as_persona("adam").get(f"/traces/{expired.blob.sha256}/events/1/")

    assert response.status_code == 410
    assert "This trace expired on" in response.content.decode()


def test_someone_without_a_role_gets_403_from_a_tombstone(as_persona, expired):
    assert as_persona("nora").get(f"/traces/{expired.blob.sha256}/").status_code == 403


def test_the_api_says_when_and_by_which_rule_a_trace_expired(as_persona, expired):
    data = as_persona("lena").get(f"/api/traces/{expired.blob.sha256}/").json()

    assert (data["expired_at"], data["expiry_rule"]) == (
        "2026-02-01T00:00:00Z",
        "default (30 days)",
    )
    assert data["ingest_report"]["expired"] is True


def test_the_trace_list_marks_an_expired_trace(as_persona, expired):
    body = as_persona("vera").get("/traces/").content.decode()

    assert (
        '<span class="badge no" title="expired by retention: default (30 days)">expired</span>'
        in body
    )


def test_an_expired_traces_personal_values_go_with_its_content(ingest, policy):
    from privacy import subjects, values
    from privacy.models import PersonalValue

    trace = ingest("ok")
    ref = subjects.lookup("ada.lovelace@example.org")
    assert [v for _h, v in values.subject_values([ref], reveal=True)] == [
        "Ada Lovelace",
        "ada.lovelace@example.org",
    ]

    retention.retention_run(now=LATER)

    assert not PersonalValue.objects.filter(trace=trace, ciphertext__isnull=False).exists()
    assert [v for _h, v in values.subject_values([ref], reveal=True)] == [
        "[erased]",
        "[erased]",
    ]
