"""The ledger's rows read as a person expects: payloads as JSON, links from each event to the
run, request, key or halt it names, and a plain "no event matches" when a filter is empty."""

from __future__ import annotations

import json

import pytest
from django.utils.html import escape

from governance import services as gov_services
from governance.models import GovernanceEvent, Halt
from tests.console.personas import persona

pytestmark = pytest.mark.django_db


@pytest.fixture
def fc(replayed, signers):
    run = replayed("diverged", by="alice")
    return gov_services.force_continue_request_file(
        run=run, actor=persona("alice"), reason="drift in the router is known"
    )


def test_it_shows_each_payload_as_sorted_indented_json(as_persona, fc):
    body = as_persona("vera").get("/governance/").content.decode()
    event = GovernanceEvent.objects.get(type="FORCE_CONTINUE_REQUEST")
    pretty = json.dumps(event.payload, sort_keys=True, indent=2, ensure_ascii=False)
    assert f"<pre>{escape(pretty)}</pre>" in body
    assert "{&#x27;" not in body  # no Python dict syntax


def test_it_links_a_force_continue_event_to_its_run_and_request(as_persona, fc):
    body = as_persona("vera").get("/governance/").content.decode()
    assert f'<a href="/runs/{fc.run_id}/">run {fc.run_id}</a>' in body
    assert f'<a href="/requests/force-continue/{fc.id}/">request {fc.id}</a>' in body


def test_it_links_a_halt_event_to_its_halt(as_persona, replayed):
    replayed("broken_chain")
    halt = Halt.objects.get(payload__target_kind="blob")
    body = as_persona("vera").get("/governance/").content.decode()
    assert f'<a href="/requests/halt-clear/{halt.seq}/">halt {halt.seq}</a>' in body


def test_it_links_a_key_event_to_the_key_on_the_keys_page(as_persona, member_key):
    key, _ = member_key("cora")
    body = as_persona("vera").get("/governance/?range=4").content.decode()
    assert f'<a href="/governance/keys/#key-{key.key_id}">key {key.key_id}</a>' in body
    keys_page = as_persona("vera").get("/governance/keys/").content.decode()
    assert f'<tr id="key-{key.key_id}" data-public-key="{key.public_key}">' in keys_page


def test_it_says_no_event_matches_when_a_filter_is_empty(as_persona, fc):
    body = as_persona("vera").get("/governance/?range=5").content.decode()
    assert '<td colspan="6" class="empty">No event matches this filter.</td>' in body
    assert "The ledger is empty." not in body


def test_it_still_shows_the_ledger_when_a_rewritten_payload_names_no_real_page(as_persona, fc):
    from django.db import connection

    from replay.dbguards import drop_append_only_sql

    event = GovernanceEvent.objects.get(type="FORCE_CONTINUE_REQUEST")
    with connection.cursor() as cur:
        for sql in drop_append_only_sql(connection.vendor, "governance_governanceevent"):
            cur.execute(sql)
        cur.execute(
            "UPDATE governance_governanceevent SET payload = %s WHERE seq = %s",
            [json.dumps({"run_id": "a/b", "request_id": "c/d", "halt_seq": "x"}), event.seq],
        )
    response = as_persona("vera").get("/governance/")
    assert response.status_code == 200
    body = response.content.decode()
    assert 'href="/runs/a/b/"' not in body
    assert "&quot;run_id&quot;: &quot;a/b&quot;" in body
