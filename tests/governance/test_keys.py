"""Server key rotation and revocation (old events keep verifying), member key confirmation,
and a key slipped into the registry behind the ledger's back."""

from __future__ import annotations

import io
import json
from datetime import timedelta

import pytest
from django.core.management import call_command
from django.utils import timezone

from core.ledger import chain, codes, signing
from governance import keystore, ledger, services
from governance.models import GovernanceEvent, SigningKey
from tests.governance.factories import enrol, person

pytestmark = pytest.mark.django_db


def _pii(n: int = 1) -> list[GovernanceEvent]:
    return [
        services.pii_access_record(actor=None, trace_id="t", fields=["email"], reason="DSR")
        for _ in range(n)
    ]


def test_a_rotation_is_vouched_for_by_the_old_key_and_old_events_keep_verifying():
    (before,) = _pii()
    old = SigningKey.objects.get()
    out = io.StringIO()
    call_command("governance", "rotate-key", "--json", stdout=out)
    new = SigningKey.objects.get(key_id=json.loads(out.getvalue())["key_id"])
    (after,) = _pii()
    rotated = GovernanceEvent.objects.get(type=codes.KEY_ROTATED)
    old.refresh_from_db()

    assert (before.server_key_id, rotated.server_key_id, after.server_key_id) == (
        old.key_id,
        old.key_id,
        new.key_id,
    )
    assert rotated.payload["old_key_id"] == old.key_id
    assert rotated.payload["new_key_id"] == new.key_id
    assert rotated.payload["public_key"] == new.public_key
    assert old.valid_until == rotated.created_at
    assert ledger.verify().ok


def test_a_revoked_retired_key_still_verifies_what_it_signed_before():
    _pii(2)
    old = SigningKey.objects.get()
    services.signing_key_rotate()
    revoked = services.signing_key_revoke(key_id=old.key_id, reason="laptop stolen")
    _pii()
    assert revoked.revoked_at is not None
    assert GovernanceEvent.objects.filter(type=codes.KEY_REVOKED).get().payload == {
        "registry": "server",
        "key_id": old.key_id,
        "fingerprint": old.fingerprint,
        "reason": "laptop stolen",
    }
    assert ledger.verify().ok


def test_the_current_key_cannot_be_revoked_without_a_rotation():
    _pii()
    current = SigningKey.objects.get()
    with pytest.raises(codes.GovernanceError) as caught:
        services.signing_key_revoke(key_id=current.key_id, reason="r")
    assert (caught.value.code, caught.value.message) == (
        codes.KEY_STATE,
        services.SERVER_KEY_CURRENT_MESSAGE.format(key_id=current.key_id),
    )


def test_a_key_slipped_into_the_registry_is_not_trusted():
    """Someone with database access adds their own server key and appends with it: the
    ledger never introduced that key, so verification names the event."""
    _pii()
    mallory_private = keystore.generate_private_key()
    public = signing.public_key_of(mallory_private)
    mallory = SigningKey.objects.create(
        key_id=signing.key_id_for(public, "server"),
        public_key=public.hex(),
        fingerprint=signing.fingerprint(public),
        encrypted_private_key=keystore.encrypt_private_key(mallory_private),
        valid_from=timezone.now() - timedelta(days=1),
    )
    from django.db import transaction

    with transaction.atomic():
        ledger.lock()
        forged = ledger.insert(
            prev=ledger.head(),
            event_type=codes.FORCE_HALT_CLEAR,
            payload={"halt_seq": 1},
            key=mallory,
            created_at=timezone.now(),
        )
    result = ledger.verify()
    assert result.broken == chain.Break(
        forged.seq,
        codes.CHAIN_KEY_UNANNOUNCED,
        f"event {forged.seq} is signed by key {mallory.key_id}, which no earlier key event "
        "introduced",
    )


def test_a_revoked_member_key_stays_to_verify_its_old_approvals():
    carol = enrol("carol")
    services.member_key_revoke(key=carol.key, actor=person("grace"), reason="left the council")
    carol.key.refresh_from_db()
    assert carol.key.revoked_by == person("grace")
    assert GovernanceEvent.objects.order_by("-seq").first().type == codes.KEY_REVOKED
    assert ledger.verify().ok


class TestMemberKeyConfirmation:
    @pytest.fixture
    def carols_key(self):
        return enrol("carol", confirm=False).key

    def test_an_admin_confirms_someone_elses_key(self, carols_key):
        confirmed = services.member_key_confirm(key=carols_key, admin=person("grace"))
        assert confirmed.confirmed_by == person("grace")
        event = GovernanceEvent.objects.order_by("-seq").first()
        assert (event.type, event.actor_label) == (codes.KEY_CONFIRMED, "grace")

    def test_a_council_member_cannot_confirm_a_key(self, carols_key):
        with pytest.raises(codes.GovernanceError) as caught:
            services.member_key_confirm(key=carols_key, admin=person("dave"))
        assert (caught.value.code, caught.value.message) == (
            codes.APPROVAL_ROLE,
            services.KEY_CONFIRM_ROLE_MESSAGE,
        )

    def test_an_admin_cannot_confirm_their_own_key(self):
        sams_key = enrol("sam", confirm=False).key
        with pytest.raises(codes.GovernanceError) as caught:
            services.member_key_confirm(key=sams_key, admin=person("sam"))
        assert (caught.value.code, caught.value.message) == (
            codes.APPROVAL_SELF,
            services.KEY_CONFIRM_OWN_MESSAGE.format(user="sam", key_id=sams_key.key_id),
        )

    def test_a_malformed_public_key_is_refused(self):
        with pytest.raises(codes.GovernanceError) as caught:
            services.member_key_register(user=person("carol"), public_key="not a key")
        assert caught.value.code == codes.KEY_INVALID
        assert caught.value.message == services.KEY_INVALID_MESSAGE.format(
            problem="an Ed25519 public key is PEM, 64 hex digits, or base64 of raw or SPKI bytes"
        )


def _refused_as_already_revoked(call, key_id: str, revoked_at) -> None:
    before = GovernanceEvent.objects.count()
    with pytest.raises(codes.GovernanceError) as caught:
        call()
    assert (caught.value.code, caught.value.message) == (
        codes.KEY_STATE,
        f"key {key_id} was already revoked at {signing.format_time(revoked_at)}",
    )
    assert GovernanceEvent.objects.count() == before


def test_a_server_key_is_revoked_once():
    _pii()
    old = SigningKey.objects.get()
    services.signing_key_rotate()
    revoked = services.signing_key_revoke(key_id=old.key_id, reason="laptop stolen")
    _refused_as_already_revoked(
        lambda: services.signing_key_revoke(key_id=old.key_id, reason="again"),
        old.key_id,
        revoked.revoked_at,
    )


def test_a_member_key_is_revoked_once_and_a_revoked_one_is_never_confirmed():
    carols_key = enrol("carol", confirm=False).key
    grace = person("grace")
    revoked = services.member_key_revoke(key=carols_key, actor=person("carol"), reason="lost")
    _refused_as_already_revoked(
        lambda: services.member_key_revoke(key=carols_key, actor=grace, reason="x"),
        carols_key.key_id,
        revoked.revoked_at,
    )
    _refused_as_already_revoked(
        lambda: services.member_key_confirm(key=carols_key, admin=grace),
        carols_key.key_id,
        revoked.revoked_at,
    )


def test_the_first_server_key_is_added_and_each_rotation_retires_the_one_before():
    assert not SigningKey.objects.exists()
    first = services.signing_key_rotate(actor_label="installer")
    added = GovernanceEvent.objects.get()
    assert (added.type, added.server_key_id, added.actor_label) == (
        codes.KEY_ADDED,
        first.key_id,
        "installer",
    )
    assert added.payload == ledger.server_key_payload(first)
    assert first.valid_until is None
    second = services.signing_key_rotate(actor_label="installer")
    rotated = GovernanceEvent.objects.order_by("-seq").first()
    first.refresh_from_db()
    assert (rotated.type, rotated.server_key_id, rotated.actor_label) == (
        codes.KEY_ROTATED,
        first.key_id,
        "installer",
    )
    assert rotated.payload == ledger.server_key_payload(
        second, new_key_id=second.key_id, old_key_id=first.key_id
    )
    assert first.valid_until == rotated.created_at
    assert second.valid_until is None
    assert ledger.verify().ok
