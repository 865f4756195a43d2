"""People's own API tokens: created in the console (shown once), listed, revoked; kept as a
SHA-256 only; every creation and revocation a signed ledger event."""

from __future__ import annotations

import hashlib
import io
import re

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError
from django.db import connection
from django.test import Client

from core.canonical import jcs
from core.ledger import codes
from governance.models import ApiToken, GovernanceEvent
from governance.selectors import ledger_verify
from governance.services import api_token_create
from tests.console.personas import BY_ROLE, persona

pytestmark = pytest.mark.django_db

TOKEN_SHOWN = re.compile(r'<code id="new-token-value">(rac_[A-Za-z0-9_-]{40})</code>')


def create(client: Client, name: str = "ci") -> tuple[object, str]:
    response = client.post("/tokens/", {"name": name})
    match = TOKEN_SHOWN.search(response.content.decode())
    return response, match[1] if match else ""


def api(token: str, path: str = "/api/traces/"):
    return Client().get(path, HTTP_AUTHORIZATION=f"Token {token}")


@pytest.mark.parametrize("name", sorted(BY_ROLE.values()))
def test_every_role_creates_lists_and_revokes_its_own_tokens(as_persona, name):
    client = as_persona(name)
    response, token = create(client, "laptop")
    assert response.status_code == 201
    assert token
    row = ApiToken.objects.get(user__username=name)
    listed = client.get("/tokens/")
    body = listed.content.decode()
    assert listed.status_code == 200
    assert f"<code>{row.prefix}…</code>" in body
    assert "laptop" in body
    assert token not in body  # shown once, never again
    revoked = client.post(f"/tokens/{row.pk}/revoke/")
    assert revoked.status_code == 303
    assert revoked["Location"] == "/tokens/"
    row.refresh_from_db()
    assert row.revoked_at is not None
    assert "revoked" in client.get("/tokens/").content.decode()


def test_a_person_without_a_role_may_not_hold_tokens(as_persona):
    client = as_persona("nora")
    assert client.get("/tokens/").status_code == 403
    assert client.post("/tokens/", {"name": "x"}).status_code == 403
    assert not ApiToken.objects.exists()


def test_an_anonymous_visitor_is_sent_to_sign_in(client):
    response = client.get("/tokens/")
    assert response.status_code == 302
    assert response["Location"] == "/accounts/login/?next=/tokens/"


def test_the_page_that_shows_the_token_is_never_stored(as_persona):
    response, _ = create(as_persona("alice"))
    assert "no-store" in response["Cache-Control"]


def test_the_database_holds_only_the_tokens_hash_and_prefix(as_persona):
    _, token = create(as_persona("alice"))
    row = ApiToken.objects.get()
    assert row.digest == hashlib.sha256(token.encode()).hexdigest()
    assert row.prefix == token[:12]
    with connection.cursor() as cur:
        cur.execute("SELECT * FROM governance_apitoken")
        stored = [str(value) for value in cur.fetchone()]
    assert not any(token in value for value in stored)


def test_the_token_authenticates_and_a_revoked_one_gets_401(as_persona, ingest):
    ingest("ok")
    client = as_persona("alice")
    _, token = create(client)
    assert api(token).status_code == 200
    row = ApiToken.objects.get()
    assert row.last_used_at is not None
    assert row.last_used_at.strftime("%Y-%m-%d %H:%M") in client.get("/tokens/").content.decode()
    client.post(f"/tokens/{row.pk}/revoke/")
    refused = api(token)
    assert refused.status_code == 401
    assert refused.json() == {"error_code": "NOT_AUTHENTICATED", "message": "Invalid token."}


def test_a_token_of_a_deactivated_person_gets_401(as_persona):
    _, token = create(as_persona("alice"))
    persona("alice").__class__.objects.filter(username="alice").update(is_active=False)
    assert api(token).status_code == 401


def test_nobody_revokes_someone_elses_token_and_it_looks_missing(as_persona):
    _, token = create(as_persona("alice"))
    row = ApiToken.objects.get()
    lena = as_persona("lena")
    refused = lena.post(f"/tokens/{row.pk}/revoke/")
    missing = lena.post("/tokens/999999/revoke/")
    assert refused.status_code == missing.status_code == 404
    assert as_persona("adam").post(f"/tokens/{row.pk}/revoke/").status_code == 404
    row.refresh_from_db()
    assert row.revoked_at is None
    assert api(token).status_code == 200
    assert row.prefix not in lena.get("/tokens/").content.decode()


def test_revoking_twice_is_refused_with_the_exact_code(as_persona):
    client = as_persona("alice")
    create(client)
    row = ApiToken.objects.get()
    client.post(f"/tokens/{row.pk}/revoke/")
    again = client.post(f"/tokens/{row.pk}/revoke/")
    assert again.status_code == 409
    row.refresh_from_db()
    body = again.content.decode()
    assert "KEY_STATE" in body
    assert f"API token {row.prefix} was already revoked at" in body


def test_a_name_too_long_is_refused_with_the_exact_message(as_persona):
    from console.views.tokens import MESSAGE_NAME_TOO_LONG

    response = as_persona("alice").post("/tokens/", {"name": "x" * 101})
    assert response.status_code == 400
    assert MESSAGE_NAME_TOO_LONG in response.content.decode()
    assert not ApiToken.objects.exists()


def test_creation_and_revocation_are_signed_ledger_events_without_the_token(as_persona):
    client = as_persona("alice")
    _, token = create(client, "ci")
    row = ApiToken.objects.get()
    client.post(f"/tokens/{row.pk}/revoke/")
    alice = persona("alice")
    created = GovernanceEvent.objects.get(type=codes.API_TOKEN_CREATED)
    revoked = GovernanceEvent.objects.get(type=codes.API_TOKEN_REVOKED)
    assert (created.code, created.actor_id) == (410, alice.pk)
    assert (revoked.code, revoked.actor_id) == (411, alice.pk)
    assert created.payload == {
        "token_id": row.pk,
        "prefix": row.prefix,
        "name": "ci",
        "user_id": alice.pk,
        "username": "alice",
    }
    assert jcs(revoked.payload) == jcs(
        {"token_id": row.pk, "prefix": row.prefix, "user_id": alice.pk, "username": "alice"}
    )
    for event in (created, revoked):
        assert token not in jcs(event.payload).decode()
        assert row.digest not in jcs(event.payload).decode()
    assert ledger_verify().ok


class TestCommand:
    def test_it_creates_a_token_printed_once_that_authenticates(self):
        persona("alice")
        out, err = io.StringIO(), io.StringIO()
        call_command("api_token", "create", "alice", "--name", "ci", stdout=out, stderr=err)
        token = out.getvalue().strip()
        assert re.fullmatch(r"rac_[A-Za-z0-9_-]{40}", token)
        row = ApiToken.objects.get()
        assert err.getvalue() == f"API token {row.pk} for alice (shown once, keep it safe):\n"
        assert api(token).status_code == 200
        event = GovernanceEvent.objects.get(type=codes.API_TOKEN_CREATED)
        assert (event.actor_id, event.actor_label) == (None, "manage.py api_token")

    def test_it_lists_and_revokes_by_prefix(self):
        row, token = api_token_create(user=persona("alice"), name="ci")
        out = io.StringIO()
        call_command("api_token", "list", "alice", stdout=out)
        assert out.getvalue().startswith(f"{row.pk}\t{row.prefix}\tci\tcreated ")
        assert out.getvalue().rstrip().endswith("last used never\tactive")
        out = io.StringIO()
        call_command("api_token", "revoke", "alice", row.prefix, stdout=out)
        assert out.getvalue() == f"revoked API token {row.pk} ({row.prefix}) of alice\n"
        assert api(token).status_code == 401

    def test_it_refuses_an_unknown_user_or_token(self):
        with pytest.raises(CommandError, match="no user 'ghost'"):
            call_command("api_token", "create", "ghost")
        persona("alice")
        with pytest.raises(CommandError, match="alice has no API token 'rac_nope'"):
            call_command("api_token", "revoke", "alice", "rac_nope")


def test_a_plaintext_drf_token_is_kept_as_its_hash_and_goes_on_working():
    import importlib
    from types import SimpleNamespace

    from django.apps import apps

    migration = importlib.import_module("governance.migrations.0004_api_tokens")
    alice = persona("alice")
    persona("vera")
    old_key = "0123456789abcdef0123456789abcdef01234567"
    with connection.cursor() as cur:
        cur.execute(
            "CREATE TABLE authtoken_token (key varchar(40) PRIMARY KEY, "
            "created timestamp NOT NULL, user_id integer NOT NULL)"
        )
        cur.execute(
            "INSERT INTO authtoken_token VALUES (%s, %s, %s)",
            [old_key, "2026-01-02 03:04:05", alice.pk],
        )
    # the migration reads only the editor's connection (a schema editor cannot open inside
    # the test's transaction on SQLite)
    migration.adopt_plaintext_tokens(apps, SimpleNamespace(connection=connection))
    with connection.cursor() as cur:
        cur.execute("SELECT count(*) FROM authtoken_token")
        assert cur.fetchone()[0] == 0
        cur.execute("DROP TABLE authtoken_token")
    row = ApiToken.objects.get()
    assert (row.user_id, row.prefix, row.name) == (alice.pk, "01234567", "from drf_create_token")
    assert row.digest == hashlib.sha256(old_key.encode()).hexdigest()
    assert row.created_at.isoformat() == "2026-01-02T03:04:05+00:00"
    assert api(old_key).status_code == 200


def test_the_api_docs_curl_example_authenticates_as_written(as_persona, ingest):
    import html
    import shlex
    from urllib.parse import urlsplit

    ingest("ok")
    page = as_persona("vera", HTTP_HOST="127.0.0.1:8123").get("/api/docs/")
    assert page.status_code == 200
    match = re.search(r'<code id="api-curl-example">(.*?)</code>', page.content.decode(), re.S)
    assert match
    example = html.unescape(match[1])
    # the page names the address it was served from (make run PORT=8123), not the default
    assert example == (
        'curl -H "Authorization: Token $TOKEN" '
        '"http://127.0.0.1:8123/api/traces/?format=replay-trace"'
    )
    schema = as_persona("vera").get("/api/schema/?format=json").json()
    assert example.replace(":8123", ":8000") in schema["info"]["description"]
    _, _, header, url = shlex.split(example)
    _, token = api_token_create(user=persona("alice"))
    name, value = header.replace("$TOKEN", token).split(": ", 1)
    target = urlsplit(url)
    response = Client().get(f"{target.path}?{target.query}", **{f"HTTP_{name.upper()}": value})
    assert response.status_code == 200
    assert [t["format"] for t in response.json()["results"]] == ["replay-trace"]
