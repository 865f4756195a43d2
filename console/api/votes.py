"""The one vote path of the API: how a signed vote on a governed request of any kind is read,
checked against the roles matrix and recorded (issue 19).

``POST /api/requests/<kind>/<key>/votes/`` and the old per-kind doors
(``/api/force-continue/ID/approvals/``, ``/api/production-requests/ID/approvals/``,
``/api/role-grants/ID/approvals/``, ``/api/halts/SEQ/approvals/``,
``/api/legal-requests/ID/approvals/``) all go through :func:`vote_recorded`; they differ only in
how they shape the answer."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from rest_framework import serializers
from rest_framework.request import Request

from console import roles
from core.ledger import signing
from governance.requests.builtin import kinds


class SignedApprovalInput(serializers.Serializer):
    """What `governance sign` or the browser produces: the exact payload and its signature."""

    payload = serializers.JSONField()
    key_id = serializers.CharField(max_length=128)
    alg = serializers.ChoiceField(choices=[signing.ALG], default=signing.ALG)
    signature = serializers.CharField(max_length=256)


#: the fields of the signed document a kind records (an input may carry more, e.g. a purpose)
DOCUMENT_FIELDS = tuple(SignedApprovalInput().fields)


def vote_recorded(
    request: Request,
    kind: Any,
    key: str,
    input_serializer: type[serializers.Serializer] = SignedApprovalInput,
    lookup: Callable[[Any, Any, str], Any] = roles.access_governed_request,
) -> tuple[Any, Any]:
    """Record the signed vote in ``request``'s body on ``kind``'s request ``key`` (a kind or
    its registered name): who may sign it at all (403 whether or not it exists), the request
    (404), the body (400), the capacity the payload names (403), then the kind's own record
    (its refusals as governance codes). Returns the request and what the kind recorded.

    ``lookup(user, kind, key)`` finds the request after the role check: by default the kind's
    own (404 for what the kind does not cover)."""
    the_kind: Any = kinds().get(kind) if isinstance(kind, str) else kind
    user = request.user
    roles.require_kind_signing(user, the_kind)
    asked = lookup(user, the_kind, key)
    data = input_serializer(data=request.data)
    data.is_valid(raise_exception=True)
    payload = data.validated_data["payload"]
    roles.require_kind_signing(
        user, the_kind, payload.get("role") if isinstance(payload, dict) else None
    )
    document = {name: data.validated_data[name] for name in DOCUMENT_FIELDS}
    return asked, the_kind.record(asked, approver=user, document=document)
