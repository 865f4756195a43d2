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


#: the loop the ledger page's template used (kept to compare: console.tables writes it now)
LEDGER_LOOP = """    {% for row in rows %}
      <tr>
        <td>{{ row.event.seq }} <a class="proof-link" id="proof-{{ row.event.seq }}" href="{% url 'api-tlog-inclusion' %}?seq={{ row.event.seq }}" title="this event's inclusion proof in the signed checkpoint (python -m tlog check-inclusion)">proof</a></td>
        <td>{{ row.event.created_at|date:"Y-m-d H:i:s" }}</td>
        <td><code>{{ row.event.code }} {{ row.event.type }}</code></td>
        <td>{% if row.event.actor_id %}{{ row.event.actor.get_username }}{% else %}{{ row.event.actor_label }}{% endif %}</td>
        <td>server <code>{{ row.event.server_key_id }}</code>{% if row.event.actor_key_id %}; actor <code>{{ row.event.actor_key_id }}</code>{% endif %}
          {% if row.status %}<span class="badge sig-{% if row.status == 'verified' %}ok{% elif row.status == 'broken' %}bad{% else %}unknown{% endif %}">{{ row.status }}</span>{% endif %}</td>
        <td>{% if row.links %}<ul class="event-links">{% for label, url in row.links %}<li><a href="{{ url }}">{{ label }}</a></li>{% endfor %}</ul>{% endif %}
          <details><summary>payload</summary><pre>{{ row.payload }}</pre></details></td>
      </tr>
    {% empty %}
      <tr><td colspan="6" class="empty">{% if filtered %}No event matches this filter.{% else %}The ledger is empty.{% endif %}</td></tr>
    {% endfor %}"""  # noqa: E501


@pytest.mark.parametrize("thousands", [False, True])
def test_the_rows_are_the_markup_the_template_loop_wrote(fc, replayed, member_key, thousands):
    """Every kind of row: an actor or a label, an actor key or none, links or none, each
    status, an escaped payload, seqs past 999 (thousands separated when the setting says)."""
    from django.template import Context, Template
    from django.test import override_settings

    from console.tables import ledger_rows_html
    from console.views.governance import _ledger_rows
    from governance.verification import ledger_verification_state

    replayed("broken_chain")
    member_key("cora")
    events = list(GovernanceEvent.objects.select_related("actor").order_by("-seq"))
    assert any(e.actor_id for e in events)
    assert any(not e.actor_id for e in events)
    events[1].actor_key_id = "cora-key <1>"  # a vote's signer (escaped)
    rows = _ledger_rows(events, ledger_verification_state())
    statuses = ["verified", "broken", "after the break", "not yet verified", ""]
    for i, row in enumerate(rows):  # each status, whatever the verification says today
        row["status"] = statuses[i % len(statuses)]
    rows[0]["payload"] = "<script>\"x\"</script> & 'y'"
    rows[0]["event"].seq = 1234567
    assert any(row["links"] for row in rows)
    with override_settings(USE_THOUSAND_SEPARATOR=thousands):
        written = ledger_rows_html(rows)
        old = Template(LEDGER_LOOP).render(Context({"rows": rows}))
    assert "    " + written == old  # the loop's text starts after the template's indent
    assert ("1,234,567" in written) is thousands
