"""Tell the people a new governed request waits for: one e-mail each, through Django's e-mail
backend (the console backend unless the deployment names another), once the transaction that
announced the request has committed.

A request is announced by its kind's ``codes.announced_by`` event (its filing, or for a legal
request the identity check that lets it take signatures). Who is told is who the inbox would
list it for (:mod:`governance.requests.inbox`): people holding, per the ledger, a role that
may sign it, whom its kind's refusal does not refuse, in a role whose signature is still
missing. A mail that cannot be sent is logged; it never undoes the request."""

from __future__ import annotations

import logging
from typing import Any

from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.mail import send_mail
from django.db import transaction
from django.utils import timezone

from core.ledger import codes
from core.ledger import roles as matrix
from core.ledger.requests import OpenRequest, RequestKind, needs_in_words
from governance import membership
from governance.models import GovernanceEvent
from governance.requests.builtin import kinds

log = logging.getLogger(__name__)

SUBJECT = "{label} waits for your signature: {subject}"
BODY = """{label}: {subject}
Filed by {filed_by}. It needs {needs}; you may sign it as {capacities}.

Read exactly what you would sign, and sign it, at:
{url}

Everything waiting for you: {inbox}
"""


def on_event_appended(sender: Any, event: GovernanceEvent, **kwargs: Any) -> None:
    """``ledger.event_appended`` receiver: after commit, mail the signers of what it announced."""
    names = [kind.name for kind in kinds() if kind.codes.announced_by == event.type]
    if names:
        seq, payload = event.seq, event.payload
        transaction.on_commit(lambda: _notify(names, seq=seq, payload=payload))


def _notify(names: list[str], *, seq: int, payload: Any) -> None:
    try:
        for name in names:
            kind = kinds().get(name)
            if kind is not None:
                signers_notify(kind, key=kind.key_of(payload, seq))
    except Exception:  # a mail never undoes a request; the log says what failed
        log.exception("could not tell the signers of the request announced at seq %s", seq)


def _holders(roles: frozenset[str]) -> list[Any]:
    """Active people who hold, per the ledger, one of ``roles`` (two queries)."""
    latest: dict[int, frozenset[str]] = {}
    events = GovernanceEvent.objects.filter(
        code__in=[codes.code_of(n) for n in codes.ROLE_SETTING_EVENTS]
    ).order_by("seq")
    for payload in events.values_list("payload", flat=True):
        if isinstance(payload, dict) and isinstance(payload.get("user_id"), int):
            latest[payload["user_id"]] = frozenset(payload.get("roles_after") or [])
    wanted = [pk for pk, held in latest.items() if held & roles]
    return list(get_user_model().objects.filter(pk__in=wanted, is_active=True).order_by("pk"))


def signers_notify(kind: RequestKind, *, key: str) -> list[str]:
    """Mail everyone the open request ``key`` of ``kind`` waits for; returns their usernames."""
    now = timezone.now()
    found: OpenRequest | None = next((o for o in kind.open_requests(now=now) if o.key == key), None)
    if found is None:
        return []
    told = []
    for user in _holders(kind.signer_roles()):
        held = membership.roles_held(user)
        history = membership.roles_history(user)
        capacities = [
            role
            for role, action in kind.capacities(found).items()
            if role in held
            and matrix.allowed(held, action)
            and kind.refusal(found, user=user, role=role, now=now, history=history) is None
        ]
        needed = kind.needed(found) if capacities else {}
        capacities = [role for role in capacities if needed.get(role, 0) > 0]
        if not capacities or not user.email:
            continue
        base = settings.REPLAY_BASE_URL
        facts = {
            "label": kind.label,
            "subject": found.subject,
            "filed_by": found.filed_by,
            "needs": needs_in_words(needed),
            "capacities": " or ".join(capacities),
            "url": f"{base}{found.url}",
            "inbox": f"{base}/inbox/",
        }
        send_mail(
            SUBJECT.format(**facts),
            BODY.format(**facts),
            settings.DEFAULT_FROM_EMAIL,
            [user.email],
        )
        told.append(user.get_username())
    return told
