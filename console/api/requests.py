"""One set of API endpoints for every kind of governed request (issue 19), parameterised by the
kind from the registry (``governance.requests``), as the pages are:

- ``GET /api/requests/``: the kinds, with their quorum and the roles that may sign them;
- ``GET /api/requests/<kind>/``: its open requests, with the signatures each still needs;
- ``POST /api/requests/<kind>/``: file one (``subject``, ``reason``, ``expires_in_hours``),
  for the kinds filed through the API (``console.api.filing``); 405 for the others;
- ``GET /api/requests/<kind>/<key>/``: one request: its state, the exact payload a signature
  signs (``decision``, ``role``, ``reason``), its signed votes, what it still needs, the roles
  that may sign it and whether you may, and why not;
- ``POST /api/requests/<kind>/<key>/votes/``: record one signed vote; answers with the request
  as it stands after it.

Each checks the roles matrix first (who may see a kind, ``kind.seen_by``; who may sign it in
which capacity, ``kind.signed_in``), so someone without the role gets 403 whether or not the
request exists. The per-kind endpoints (``/api/force-continue/…``, ``/api/halts/…``,
``/api/legal-requests/…/approvals/`` …) keep working as they were; their votes go through
the same :func:`console.api.votes.vote_recorded` as ``…/votes/``."""

from __future__ import annotations

from typing import Any

from django.http import Http404
from django.utils import timezone
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import exceptions, serializers, status
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from console import roles
from console.api import filing
from console.api.common import ErrorOutput
from console.api.filing import FileInput
from console.api.votes import SignedApprovalInput, vote_recorded
from core.canonical import jcs
from core.ledger import signing
from core.ledger.requests import needs_in_words
from governance import membership
from governance.requests.builtin import kinds

ERRORS = {400: ErrorOutput, 401: ErrorOutput, 403: ErrorOutput, 404: ErrorOutput, 409: ErrorOutput}
KIND_PARAMETER = OpenApiParameter(
    "kind",
    OpenApiTypes.STR,
    OpenApiParameter.PATH,
    description="force-continue, production-replay, role-grant, halt-clear, legal-release,"
    " legal-erasure, or any kind an installed package registers",
)
KEY_PARAMETER = OpenApiParameter(
    "key",
    OpenApiTypes.STR,
    OpenApiParameter.PATH,
    description="the request within its kind: its id, a halt's seq",
)


def kind_with_api(name: str) -> Any:
    """The registered kind ``name`` if it has the shared pages and API; 404 otherwise."""
    kind = kinds().get(name)
    if not getattr(kind, "has_pages", False):
        raise Http404("no such kind of request")
    return kind


class KindOutput(serializers.Serializer):
    name = serializers.CharField()
    label = serializers.CharField()  # type: ignore[assignment]  # DRF pops declared fields
    summary = serializers.CharField()
    quorum = serializers.CharField(help_text="how many signatures in which role decide it")
    signer_roles = serializers.ListField(
        child=serializers.CharField(), help_text="the roles that may sign it"
    )


class OpenRequestOutput(serializers.Serializer):
    kind = serializers.CharField()
    key = serializers.CharField()
    subject = serializers.CharField()
    filed_by = serializers.CharField()
    filed_at = serializers.DateTimeField()
    expires_at = serializers.DateTimeField(allow_null=True)
    due_date = serializers.DateField(allow_null=True)
    needed = serializers.DictField(
        child=serializers.IntegerField(), help_text="signatures still missing, by role"
    )
    needs = serializers.CharField(help_text="the same, in words")
    url = serializers.CharField(help_text="its approval page")


class VoteOutput(serializers.Serializer):
    seq = serializers.IntegerField()
    approver = serializers.CharField()
    role = serializers.CharField()
    key_id = serializers.CharField()
    decision = serializers.CharField()
    reason = serializers.CharField()


class RefusalOutput(serializers.Serializer):
    role = serializers.CharField()
    error_code = serializers.CharField()
    message = serializers.CharField()


class RequestDetailOutput(serializers.Serializer):
    kind = serializers.CharField()
    key = serializers.CharField()
    state = serializers.CharField(help_text="pending while it takes signatures")
    subject = serializers.CharField(allow_null=True, help_text="while it is open")
    votes = VoteOutput(many=True, help_text="its signed votes, per the ledger")
    needed = serializers.DictField(
        child=serializers.IntegerField(),
        help_text="signatures still missing, by role (empty once it is no longer open)",
    )
    needs = serializers.CharField()
    signer_roles = serializers.ListField(
        child=serializers.CharField(), help_text="the roles that may sign this kind"
    )
    may_sign_as = serializers.ListField(
        child=serializers.CharField(),
        help_text="the roles you may sign it in now (each still needed, nothing against it)",
    )
    refusals = RefusalOutput(
        many=True, help_text="for each role you hold that may sign it: why it refuses you"
    )
    payload = serializers.JSONField(help_text="the exact payload a signature signs")
    payload_jcs = serializers.CharField(help_text="the same as RFC 8785 canonical JSON")
    url = serializers.CharField(help_text="its approval page")


def _open_of(kind: Any, key: str, now: Any) -> Any:
    return next((o for o in kind.open_requests(now=now) if o.key == str(key)), None)


def detail_body(request: Request, kind: Any, asked: Any, key: str) -> dict[str, Any]:
    """What ``GET /api/requests/<kind>/<key>/`` answers for ``asked``."""
    user = request.user
    now = timezone.now()
    params = request.query_params
    capacities = roles.kind_capacities(user, kind)
    decision = params.get("decision", signing.APPROVE)
    allowed_decisions = kind.decisions or (signing.APPROVE,)
    role = params.get("role") or (capacities[0] if capacities else next(iter(kind.signed_in)))
    if decision not in allowed_decisions or role not in kind.signed_in:
        raise serializers.ValidationError(
            {
                "decision": [f"one of {', '.join(allowed_decisions)}"],
                "role": [f"one of {', '.join(kind.signed_in)}"],
            }
        )
    payload = kind.payload_for(asked, decision=decision, role=role, reason=params.get("reason", ""))
    open_request = _open_of(kind, key, now)
    needed: dict[str, int] = {}
    may_sign_as: list[str] = []
    refusals: list[dict[str, str]] = []
    if open_request is not None:
        needed = {r: n for r, n in kind.needed(open_request).items() if n > 0}
        history = membership.roles_history(user) if capacities else ()
        for capacity in capacities:
            refused = kind.refusal(open_request, user=user, role=capacity, now=now, history=history)
            if refused is not None:
                refusals.append(
                    {
                        "role": capacity,
                        "error_code": getattr(refused, "code", type(refused).__name__),
                        "message": getattr(refused, "message", str(refused)),
                    }
                )
            elif needed.get(capacity, 0) > 0:
                may_sign_as.append(capacity)
    return {
        "kind": kind.name,
        "key": str(key),
        "state": kind.state_of(asked),
        "subject": open_request.subject if open_request is not None else None,
        "votes": kind.votes(asked),
        "needed": needed,
        "needs": needs_in_words(needed),
        "signer_roles": sorted(kind.signer_roles()),
        "may_sign_as": may_sign_as,
        "refusals": refusals,
        "payload": payload,
        "payload_jcs": jcs(payload).decode(),
        "url": f"/requests/{kind.name}/{key}/",
    }


class KindListApi(APIView):
    """The kinds of governed request this console knows."""

    @extend_schema(
        operation_id="request_kinds_list", responses={200: KindOutput(many=True), **ERRORS}
    )
    def get(self, request: Request) -> Response:
        roles.require(request.user, roles.BROWSE)
        found = [
            {
                "name": kind.name,
                "label": kind.label,
                "summary": kind.summary,
                "quorum": kind.quorum(),
                "signer_roles": sorted(kind.signer_roles()),
            }
            for kind in kinds()
            if getattr(kind, "has_pages", False)
        ]
        return Response(KindOutput(found, many=True).data)


class RequestListApi(APIView):
    """The open requests of one kind, oldest first, with what each still needs."""

    @extend_schema(
        operation_id="requests_list",
        parameters=[KIND_PARAMETER],
        responses={200: OpenRequestOutput(many=True), **ERRORS},
    )
    def get(self, request: Request, kind: str) -> Response:
        the_kind = kind_with_api(kind)
        roles.require_kind_sight(request.user, the_kind)
        found = []
        for o in the_kind.open_requests(now=timezone.now()):
            needed = {r: n for r, n in the_kind.needed(o).items() if n > 0}
            found.append(
                {
                    "kind": o.kind,
                    "key": o.key,
                    "subject": o.subject,
                    "filed_by": o.filed_by,
                    "filed_at": o.filed_at,
                    "expires_at": o.expires_at,
                    "due_date": o.due_date,
                    "needed": needed,
                    "needs": needs_in_words(needed),
                    "url": o.url,
                }
            )
        return Response(OpenRequestOutput(found, many=True).data)


class RequestFileInput(FileInput):
    subject = serializers.CharField(
        max_length=200,
        help_text="what it is asked about: a force-continue's replay id, a production "
        "replay's stored trace (trace id or sha256)",
    )


class RequestFileApi(RequestListApi):
    """``GET``: the open requests of one kind; ``POST``: file one, for the kinds filed through
    the API (force-continue, production-replay; 405 for the others), answering with the
    request as ``GET /api/requests/<kind>/<key>/`` shows it."""

    @extend_schema(
        operation_id="requests_file",
        parameters=[KIND_PARAMETER],
        request=RequestFileInput,
        responses={201: RequestDetailOutput, 405: ErrorOutput, **ERRORS},
    )
    def post(self, request: Request, kind: str) -> Response:
        the_kind = kind_with_api(kind)
        filer = filing.FILERS.get(kind)
        if filer is None:
            raise exceptions.MethodNotAllowed(
                request.method or "POST",
                detail=f"{kind} requests are not filed through this endpoint",
            )
        roles.require(request.user, filer.action)
        named = RequestFileInput(data=request.data)
        named.is_valid(raise_exception=True)
        filed = filing.request_file(
            request.user, kind, named.validated_data["subject"], request.data
        )
        key = str(filed.id)
        body = detail_body(request, the_kind, the_kind.detail(key), key)
        return Response(RequestDetailOutput(body).data, status=status.HTTP_201_CREATED)


class RequestDetailApi(APIView):
    """One request of any kind: the payload to sign, the tally, and who may still sign."""

    @extend_schema(
        operation_id="requests_retrieve",
        parameters=[
            KIND_PARAMETER,
            KEY_PARAMETER,
            OpenApiParameter("decision", OpenApiTypes.STR, enum=list(signing.DECISIONS)),
            OpenApiParameter("role", OpenApiTypes.STR, enum=list(signing.SIGNING_ROLES)),
            OpenApiParameter("reason", OpenApiTypes.STR),
        ],
        responses={200: RequestDetailOutput, **ERRORS},
    )
    def get(self, request: Request, kind: str, key: str) -> Response:
        the_kind = kind_with_api(kind)
        asked = roles.access_governed_request(request.user, the_kind, key)
        return Response(RequestDetailOutput(detail_body(request, the_kind, asked, key)).data)


class RequestVoteApi(APIView):
    """Record one signed vote on a request of any kind; the body carries the Ed25519
    signature over the exact payload ``GET`` gave. Answers with the request after it."""

    @extend_schema(
        operation_id="requests_vote",
        parameters=[KIND_PARAMETER, KEY_PARAMETER],
        request=SignedApprovalInput,
        responses={201: RequestDetailOutput, **ERRORS},
    )
    def post(self, request: Request, kind: str, key: str) -> Response:
        the_kind = kind_with_api(kind)
        vote_recorded(request, the_kind, key)
        fresh = the_kind.detail(key)
        body = detail_body(request, the_kind, fresh, key)
        return Response(RequestDetailOutput(body).data, status=status.HTTP_201_CREATED)
