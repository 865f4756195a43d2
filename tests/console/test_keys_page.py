"""The keys page: a person names the key they register, and the name is shown wherever the key
is listed (their keys, the member keys table, the signing form's key select)."""

from __future__ import annotations

import pytest

from core.ledger.signing import public_key_of
from governance import keystore
from governance.models import MemberKey

pytestmark = pytest.mark.django_db


def test_it_stores_the_label_the_person_chose_and_shows_it_in_every_list(as_persona, signers):
    public = public_key_of(keystore.generate_private_key()).hex()
    cora = as_persona("cora")
    response = cora.post(
        "/governance/keys/register/", {"public_key": public, "label": "Cora's work laptop"}
    )
    assert response.status_code == 303
    key = MemberKey.objects.get(user__username="cora")
    assert key.label == "Cora's work laptop"
    page = cora.get("/governance/keys/").content.decode()
    mine = page[page.index('<section class="card" id="my-keys">') :]
    assert (
        f'<li data-public-key="{public}"><code>{key.key_id}</code> Cora&#x27;s work laptop' in mine
    )
    row = page[page.index(f'<tr id="key-{key.key_id}" data-public-key="{public}">') :]
    row = row[: row.index("</tr>")]
    assert '<td class="key-label">Cora&#x27;s work laptop</td>' in row


def test_the_register_form_asks_for_a_label_before_either_way_of_registering(as_persona, signers):
    page = as_persona("cora").get("/governance/keys/").content.decode()
    form = page[page.index('<form method="post" action="/governance/keys/register/"') :]
    form = form[: form.index("</form>")]
    label_at = form.index('<input id="id_label" name="label"')
    assert label_at < form.index('id="generate-key"')
    assert label_at < form.index("<details>")
    assert 'placeholder="for example: work laptop"' in form
