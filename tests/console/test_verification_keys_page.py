"""Trace verification keys registered and retired by an admin on the keys page, as
``manage.py keys`` does: the same registry, messages and effect (a MACE log signed with the
registered secret verifies; after its key is retired, a new upload no longer does)."""

from __future__ import annotations

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile

from replay.keys import KEY_EXISTS, KEY_SECRET_TOO_SHORT, decrypt_secret, key_add_hmac
from replay.models import Trace, VerificationKey
from tests.console.formats import upload_page
from tests.console.test_format_mace_writer import WRITER
from tests.replay import mace_reference as ref

pytestmark = pytest.mark.django_db


def add(client, **form):
    return client.post("/governance/keys/verification/add/", form)


def refusal(response) -> str:
    body = response.content.decode()
    start = body.index('<p class="error" role="alert" id="refusal">')
    return body[start : body.index("</p>", start)]


def test_an_admin_registers_maces_secret_and_a_log_mace_wrote_verifies(as_persona):
    adam = as_persona("adam")
    response = add(adam, key_id=ref.KEY_ID, alg="hmac-sha256", secret=ref.SECRET.decode() + "\n")
    assert response.status_code == 303
    assert response["Location"] == "/governance/keys/#verification-keys"
    key = VerificationKey.objects.get(key_id=ref.KEY_ID)
    assert (key.alg, decrypt_secret(key.encrypted_secret)) == ("hmac-sha256", ref.SECRET)
    page = adam.get("/governance/keys/").content.decode()
    assert f'<li id="verification-key-{ref.KEY_ID}"><code>{ref.KEY_ID}</code> hmac-sha256' in page
    assert ref.SECRET.decode() not in page  # stored encrypted, never shown again
    clean = SimpleUploadedFile("clean.json", (WRITER / "clean.json").read_bytes())
    upload_page(as_persona("alice"), [clean])
    assert Trace.objects.get().last_status == "ok"


def test_a_retired_key_verifies_no_log_uploaded_after(as_persona):
    adam = as_persona("adam")
    add(adam, key_id=ref.KEY_ID, alg="hmac-sha256", secret=ref.SECRET.decode())
    response = adam.post(f"/governance/keys/verification/{ref.KEY_ID}/revoke/")
    assert response.status_code == 303
    assert VerificationKey.objects.get(key_id=ref.KEY_ID).revoked_at is not None
    page = adam.get("/governance/keys/").content.decode()
    assert f'id="retire-{ref.KEY_ID}"' not in page
    assert '<span class="badge no">retired ' in page
    clean = SimpleUploadedFile("clean.json", (WRITER / "clean.json").read_bytes())
    body = upload_page(as_persona("alice"), [clean]).content.decode()
    assert f"key {ref.KEY_ID} was revoked at" in body
    again = adam.post(f"/governance/keys/verification/{ref.KEY_ID}/revoke/")
    assert again.status_code == 400
    assert f"key &#x27;{ref.KEY_ID}&#x27; was already revoked at" in refusal(again)


@pytest.mark.parametrize(
    ("form", "message"),
    [
        ({"key_id": "k1", "alg": "hmac-sha256", "secret": "short"}, KEY_SECRET_TOO_SHORT),
        (
            {"key_id": "has space", "alg": "hmac-sha256", "secret": "x" * 32},
            "a key id is 1 to 128 printable ASCII characters without spaces, as the trace names it",
        ),
        (
            {"key_id": "", "alg": "hmac-sha256", "secret": "x" * 32},
            "a key id is 1 to 128 printable ASCII characters without spaces, as the trace names it",
        ),
        (
            {"key_id": "k1", "alg": "rsa", "secret": "x" * 32},
            "choose the key&#x27;s algorithm: hmac-sha256 or ed25519",
        ),
        (
            {"key_id": "k1", "alg": "ed25519", "public_key": "not a key"},
            "not an Ed25519 public key (expected PEM, 64 hex characters or 32 raw bytes)",
        ),
    ],
)
def test_bad_input_is_refused_with_the_registrys_message_and_stores_nothing(
    as_persona, form, message
):
    response = add(as_persona("adam"), **form)
    assert response.status_code == 400
    assert refusal(response).endswith(f'<code class="code">INVALID_INPUT</code> {message}')
    assert VerificationKey.objects.filter(key_id=form["key_id"]).count() == 0


def test_a_key_id_is_never_reused(as_persona):
    adam = as_persona("adam")
    add(adam, key_id="k1", alg="ed25519", public_key="11" * 32)
    response = add(adam, key_id="k1", alg="hmac-sha256", secret="x" * 32)
    assert response.status_code == 400
    assert refusal(response).endswith(KEY_EXISTS.format(key_id="k1").replace("'", "&#x27;"))
    assert VerificationKey.objects.get(key_id="k1").alg == "ed25519"


@pytest.mark.parametrize("name", ["vera", "alice", "oscar", "cora", "lena", "nora"])
def test_only_an_admin_may_add_or_retire_a_key(as_persona, name):
    client = as_persona(name)
    assert add(client, key_id="k1", alg="hmac-sha256", secret="x" * 32).status_code == 403
    key_add_hmac(key_id="k2", secret=b"x" * 32)
    assert client.post("/governance/keys/verification/k2/revoke/").status_code == 403
    assert VerificationKey.objects.get(key_id="k2").revoked_at is None
    assert not VerificationKey.objects.filter(key_id="k1").exists()
    page = client.get("/governance/keys/")
    if page.status_code == 200:
        assert 'id="verification-key-form"' not in page.content.decode()


def test_the_admin_sees_the_form(as_persona):
    assert (
        'id="verification-key-form"' in as_persona("adam").get("/governance/keys/").content.decode()
    )
