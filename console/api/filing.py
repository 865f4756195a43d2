"""Filing a governed request through the API, shared by ``POST /api/requests/<kind>/`` and
the per-kind endpoints (``POST /api/replays/<run>/force-continue/``,
``POST /api/traces/<trace>/production-requests/``): the roles matrix and the subject first
(who may file this kind, on what), then the body, then the kind's own filing service.

Only the kinds filed by someone through the API are here: a role grant is filed by changing
someone's roles (``/api/users/<id>/roles/``), a halt by an incident, and a legal request's
approvals by opening the legal request."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from django.utils import timezone
from rest_framework import serializers

from console import roles
from governance import conf
from governance import services as gov_services


class FileInput(serializers.Serializer):
    reason = serializers.CharField(max_length=5000)
    expires_in_hours = serializers.IntegerField(required=False, min_value=1, max_value=10_000)


@dataclass(frozen=True)
class Filer:
    """How one kind is filed: the roles-matrix action filing it needs, what its subject
    reference names (checked for the filer), and its filing service."""

    action: str
    subject: str
    access: Callable[[Any, str], Any]
    file: Callable[..., Any]


FILERS: dict[str, Filer] = {
    "force-continue": Filer(
        roles.FORCE_CONTINUE_REQUEST,
        "the replay that stopped at a divergence (its id)",
        lambda user, ref: roles.access_run_by_id(user, ref, roles.FORCE_CONTINUE_REQUEST),
        lambda target, **asked: gov_services.force_continue_request_file(run=target, **asked),
    ),
    "production-replay": Filer(
        roles.REPLAY_PRODUCTION_REQUEST,
        "the stored trace to replay (its trace id or sha256)",
        lambda user, ref: roles.access_trace_to_replay(user, ref, roles.REPLAY_PRODUCTION_REQUEST),
        lambda target, **asked: gov_services.production_replay_request_file(trace=target, **asked),
    ),
}


def _expiry(hours: int | None) -> datetime:
    return timezone.now() + timedelta(hours=hours or conf.force_continue_hours())


def request_file(user: Any, kind: str, subject: str, data: Any) -> Any:
    """File a ``kind`` request on ``subject`` for ``user`` with the ``data`` posted (its
    reason and, optionally, its lifetime in hours): the filed row, or the refusal its
    service raises (403 before the body is read for someone who may not file it)."""
    filer = FILERS[kind]
    target = filer.access(user, subject)
    body = FileInput(data=data)
    body.is_valid(raise_exception=True)
    return filer.file(
        target,
        actor=user,
        reason=body.validated_data["reason"],
        expires_at=_expiry(body.validated_data.get("expires_in_hours")),
    )
