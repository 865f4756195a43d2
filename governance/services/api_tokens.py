"""API tokens: created and revoked in the ledger (named by id and prefix, never the token),
stored by digest, touched when used."""

from __future__ import annotations

import hashlib
import secrets
from datetime import timedelta
from typing import Any

from django.db import transaction
from django.utils import timezone

from core.ledger import codes, signing
from governance import ledger
from governance.models import ApiToken
from governance.services.actors import _system_label

# --- messages (asserted verbatim in tests) ----------------------------------------------------
API_TOKEN_ALREADY_REVOKED_MESSAGE = "API token {prefix} was already revoked at {revoked_at}"  # noqa: S105 - not a secret
API_TOKEN_NOT_OWN_MESSAGE = "{user} can revoke only their own API tokens"  # noqa: S105 - not a secret


#: every token starts with this, so a leaked one is recognisable (secret scanners)
API_TOKEN_MARK = "rac_"  # noqa: S105 - not a secret
API_TOKEN_PREFIX_LENGTH = 12


def api_token_digest(token: str) -> str:
    """The hex SHA-256 a token is stored and looked up by (it has 240 random bits)."""
    return hashlib.sha256(token.encode("utf-8")).hexdigest()


@transaction.atomic(durable=True)
def api_token_create(
    *, user: Any, name: str = "", actor: Any = None, actor_label: str | None = None
) -> tuple[ApiToken, str]:
    """A new API token for ``user``: returns the row and the token, which is not kept.

    The ledger's API_TOKEN_CREATED names the token by id and prefix, never the token.
    """
    if actor is None and actor_label is None:
        actor = user  # a person creating their own token
    token = API_TOKEN_MARK + secrets.token_urlsafe(30)
    prefix = token[:API_TOKEN_PREFIX_LENGTH]
    ledger.lock()
    row = ApiToken.objects.create(
        user=user,
        name=name,
        prefix=prefix,
        digest=api_token_digest(token),
        created_at=timezone.now(),
    )
    event = ledger.append(
        event_type=codes.API_TOKEN_CREATED,
        payload={
            "token_id": row.pk,
            "prefix": prefix,
            "name": name,
            "user_id": user.pk,
            "username": user.get_username(),
        },
        actor=actor,
        actor_label=_system_label(actor, actor_label),
    )
    row.created_at = event.created_at
    row.save(update_fields=["created_at"])
    return row, token


@transaction.atomic(durable=True)
def api_token_revoke(
    *, token: ApiToken, actor: Any = None, actor_label: str | None = None
) -> ApiToken:
    """Revoke an API token (its owner, or the command line): it authenticates no more."""
    ledger.lock()
    token = ApiToken.objects.select_for_update().get(pk=token.pk)
    if actor is not None and actor.pk != token.user_id:
        raise codes.GovernanceError(
            codes.APPROVAL_ROLE, API_TOKEN_NOT_OWN_MESSAGE.format(user=actor.get_username())
        )
    if token.revoked_at is not None:
        raise codes.GovernanceError(
            codes.KEY_STATE,
            API_TOKEN_ALREADY_REVOKED_MESSAGE.format(
                prefix=token.prefix, revoked_at=signing.format_time(token.revoked_at)
            ),
        )
    event = ledger.append(
        event_type=codes.API_TOKEN_REVOKED,
        payload={
            "token_id": token.pk,
            "prefix": token.prefix,
            "user_id": token.user_id,
            "username": token.user.get_username(),
        },
        actor=actor,
        actor_label=_system_label(actor, actor_label),
    )
    token.revoked_at = event.created_at
    token.save(update_fields=["revoked_at"])
    return token


#: how stale `last_used_at` may get before a request writes it again
API_TOKEN_TOUCH_SECONDS = 60


def api_token_touch(*, token: ApiToken) -> None:
    """Note that the token was just used (not a ledger event; at most once a minute).

    One UPDATE inside whatever request authenticated with the token, so not durable."""
    now = timezone.now()
    if token.last_used_at is None or now - token.last_used_at > timedelta(
        seconds=API_TOKEN_TOUCH_SECONDS
    ):
        ApiToken.objects.filter(pk=token.pk).update(last_used_at=now)
        token.last_used_at = now
