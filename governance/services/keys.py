"""Keys: the server's signing keys (rotated and revoked) and members' Ed25519 keys
(registered, confirmed by another admin, revoked), each change an event in the ledger."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from django.db import transaction
from django.utils import timezone

from core.ledger import chain, codes, signing
from governance import ledger
from governance.membership import user_has_role
from governance.models import MemberKey, SigningKey
from governance.services.actors import _system_label

# --- messages (asserted verbatim in tests) ----------------------------------------------------
KEY_INVALID_MESSAGE = "not an Ed25519 public key: {problem}"
KEY_DUPLICATE_MESSAGE = "key {key_id} is already registered"
KEY_CONFIRM_OWN_MESSAGE = "{user} cannot confirm their own key {key_id}"
KEY_CONFIRM_ROLE_MESSAGE = "only an admin can confirm a member key"
KEY_ALREADY_CONFIRMED_MESSAGE = "key {key_id} is already confirmed"
KEY_ALREADY_REVOKED_MESSAGE = "key {key_id} was already revoked at {revoked_at}"
KEY_UNANNOUNCED_MESSAGE = "key {key_id} was never added in the ledger"
KEY_REVOKE_ROLE_MESSAGE = "{user} can revoke only their own keys unless they are an admin"
SERVER_KEY_UNKNOWN_MESSAGE = "no server signing key {key_id}"
SERVER_KEY_CURRENT_MESSAGE = "key {key_id} is the current signing key: rotate it first"


def _already_revoked(key_id: str, revoked_at: datetime) -> codes.GovernanceError:
    return codes.GovernanceError(
        codes.KEY_STATE,
        KEY_ALREADY_REVOKED_MESSAGE.format(
            key_id=key_id, revoked_at=signing.format_time(revoked_at)
        ),
    )


@transaction.atomic(durable=True)
def signing_key_rotate(*, actor: Any = None, actor_label: str | None = None) -> SigningKey:
    """Retire the current server key and introduce a new one, vouched for by the old one.

    The KEY_ROTATED event is the old key's last signature; from the next event on, the new
    key signs. (The first key ever is introduced by the first append, self-signed.)
    """
    ledger.lock()
    prev = ledger.head()
    now = timezone.now()
    created_at = max(now, prev.created_at) if prev else now
    old = ledger.server_key_current()
    new, _ = ledger.server_key_create(valid_from=created_at)
    if old is None:  # the first key ever introduces itself
        event_type, payload, signer = codes.KEY_ADDED, ledger.server_key_payload(new), new
    else:
        event_type, signer = codes.KEY_ROTATED, old
        payload = ledger.server_key_payload(new, new_key_id=new.key_id, old_key_id=old.key_id)
    ledger.insert(
        prev=prev,
        event_type=event_type,
        payload=payload,
        key=signer,
        created_at=created_at,
        actor=actor,
        actor_label=_system_label(actor, actor_label),
    )
    if old is not None:
        old.valid_until = created_at
        old.save(update_fields=["valid_until"])
    return new


@transaction.atomic(durable=True)
def signing_key_revoke(
    *, key_id: str, reason: str, actor: Any = None, actor_label: str | None = None
) -> SigningKey:
    """Revoke a retired server key: it signs nothing more; what it signed before stays valid."""
    ledger.lock()
    key = SigningKey.objects.filter(key_id=key_id).first()
    if key is None:
        raise codes.GovernanceError(
            codes.KEY_STATE, SERVER_KEY_UNKNOWN_MESSAGE.format(key_id=key_id)
        )
    if key.revoked_at is not None:
        raise _already_revoked(key_id, key.revoked_at)
    current = ledger.server_key_current()
    if current is not None and current.pk == key.pk:
        raise codes.GovernanceError(
            codes.KEY_STATE, SERVER_KEY_CURRENT_MESSAGE.format(key_id=key_id)
        )
    event = ledger.append(
        event_type=codes.KEY_REVOKED,
        payload={
            "registry": "server",
            "key_id": key.key_id,
            "fingerprint": key.fingerprint,
            "reason": reason,
        },
        actor=actor,
        actor_label=_system_label(actor, actor_label),
    )
    key.revoked_at = event.created_at
    key.revocation_reason = reason
    key.save(update_fields=["revoked_at", "revocation_reason"])
    return key


@transaction.atomic(durable=True)
def member_key_register(*, user: Any, public_key: bytes | str, label: str = "") -> MemberKey:
    """Register a member's Ed25519 public key (PEM, hex or base64); an admin confirms it."""
    try:
        raw = signing.public_key_from_text(public_key)
    except signing.KeyFormatError as exc:
        raise codes.GovernanceError(
            codes.KEY_INVALID, KEY_INVALID_MESSAGE.format(problem=exc)
        ) from None
    ledger.lock()
    key_id = signing.key_id_for(raw, "member")
    if MemberKey.objects.filter(fingerprint=signing.fingerprint(raw)).exists():
        raise codes.GovernanceError(
            codes.KEY_DUPLICATE, KEY_DUPLICATE_MESSAGE.format(key_id=key_id)
        )
    event = ledger.append(
        event_type=codes.KEY_ADDED,
        payload={
            "registry": "member",
            "key_id": key_id,
            "user_id": user.pk,
            "username": user.get_username(),
            "public_key": raw.hex(),
            "fingerprint": signing.fingerprint(raw),
            "label": label,
        },
        actor=user,
    )
    return MemberKey.objects.create(
        key_id=key_id,
        user=user,
        public_key=raw.hex(),
        fingerprint=signing.fingerprint(raw),
        label=label,
        registered_at=event.created_at,
    )


def _key_state(key: MemberKey) -> chain.MemberKeyState:
    """A member key's state as the ledger says it (refused if the ledger never added it)."""
    state = ledger.member_key_states(key_id=key.key_id).get(key.key_id)
    if state is None or state.user_id != key.user_id:
        raise codes.GovernanceError(
            codes.KEY_STATE, KEY_UNANNOUNCED_MESSAGE.format(key_id=key.key_id)
        )
    return state


@transaction.atomic(durable=True)
def member_key_confirm(*, key: MemberKey, admin: Any) -> MemberKey:
    """An admin (not the key's owner) confirms that the key belongs to its owner."""
    ledger.lock()
    key = MemberKey.objects.select_for_update().get(pk=key.pk)
    if not user_has_role(admin, signing.ROLE_ADMIN):
        raise codes.GovernanceError(codes.APPROVAL_ROLE, KEY_CONFIRM_ROLE_MESSAGE)
    if admin.pk == key.user_id:
        raise codes.GovernanceError(
            codes.APPROVAL_SELF,
            KEY_CONFIRM_OWN_MESSAGE.format(user=admin.get_username(), key_id=key.key_id),
        )
    state = _key_state(key)
    if state.revoked_at is not None:
        raise _already_revoked(key.key_id, state.revoked_at)
    if state.confirmed_seq is not None:
        raise codes.GovernanceError(
            codes.KEY_STATE, KEY_ALREADY_CONFIRMED_MESSAGE.format(key_id=key.key_id)
        )
    event = ledger.append(
        event_type=codes.KEY_CONFIRMED,
        payload={
            "registry": "member",
            "key_id": key.key_id,
            "user_id": key.user_id,
            "fingerprint": key.fingerprint,
        },
        actor=admin,
    )
    key.confirmed_at = event.created_at
    key.confirmed_by = admin
    key.save(update_fields=["confirmed_at", "confirmed_by"])
    return key


@transaction.atomic(durable=True)
def member_key_revoke(*, key: MemberKey, actor: Any, reason: str) -> MemberKey:
    """Revoke a member key (its owner or an admin): it can sign no new approval."""
    ledger.lock()
    key = MemberKey.objects.select_for_update().get(pk=key.pk)
    if actor.pk != key.user_id and not user_has_role(actor, signing.ROLE_ADMIN):
        raise codes.GovernanceError(
            codes.APPROVAL_ROLE, KEY_REVOKE_ROLE_MESSAGE.format(user=actor.get_username())
        )
    state = _key_state(key)
    if state.revoked_at is not None:
        raise _already_revoked(key.key_id, state.revoked_at)
    event = ledger.append(
        event_type=codes.KEY_REVOKED,
        payload={
            "registry": "member",
            "key_id": key.key_id,
            "user_id": key.user_id,
            "fingerprint": key.fingerprint,
            "reason": reason,
        },
        actor=actor,
    )
    key.revoked_at = event.created_at
    key.revoked_by = actor
    key.revocation_reason = reason
    key.save(update_fields=["revoked_at", "revoked_by", "revocation_reason"])
    return key
