"""Users and roles over the API: list who holds what (per the ledger), change someone's roles,
and the council's signed votes on grants of admin or council.

A role change goes through ``governance.services.user_roles_change``: never one's own
(ROLE_SELF), a signed ROLES_CHANGED event for what takes effect at once, and a role grant
request for admin or council that a council quorum signs (ROLE_GRANT_APPROVED).
"""

from __future__ import annotations

from typing import Any

from django.contrib.auth import get_user_model
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, extend_schema, extend_schema_serializer
from rest_framework import serializers, status
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from console import roles
from console.api.governance import ERRORS, ApprovalOutput, BallotOutput
from console.api.votes import SignedApprovalInput, vote_recorded
from core.canonical import jcs
from core.ledger import signing
from governance import membership
from governance import selectors as gov
from governance import services as gov_services
from governance.models import RoleGrantRequest


class UserOutput(serializers.Serializer):
    id = serializers.IntegerField(source="pk")
    username = serializers.CharField()
    is_active = serializers.BooleanField()
    roles = serializers.SerializerMethodField()

    def get_roles(self, user: Any) -> list[str]:
        return sorted(membership.roles_held(user))


class RoleGrantOutput(serializers.Serializer):
    id = serializers.UUIDField()
    user = serializers.CharField(source="user.username")
    roles = serializers.ListField(child=serializers.CharField())
    reason = serializers.CharField()
    requested_by = serializers.CharField(source="requested_by.username")
    state = serializers.CharField()
    expires_at = serializers.DateTimeField()
    created_at = serializers.DateTimeField()
    decided_at = serializers.DateTimeField(allow_null=True)
    remaining = serializers.SerializerMethodField()

    def get_remaining(self, grant: RoleGrantRequest) -> str:
        return gov.role_grant_tally(request=grant).missing


class UserListApi(APIView):
    @extend_schema(operation_id="users_list", responses={200: UserOutput(many=True), **ERRORS})
    def get(self, request: Request) -> Response:
        roles.require(request.user, roles.MANAGE)
        users = get_user_model().objects.order_by("username")[:500]
        return Response(UserOutput(users, many=True).data)


class UserRolesApi(APIView):
    """Set someone else's roles: the others at once (a signed ROLES_CHANGED event), admin and
    council through the council (``grant``, pending until a quorum signs)."""

    @extend_schema_serializer(component_name="UserRolesInput")
    class InputSerializer(serializers.Serializer):
        roles = serializers.ListField(child=serializers.CharField(max_length=32), max_length=16)
        reason = serializers.CharField(max_length=5000, required=False, default="")

    @extend_schema_serializer(component_name="UserRolesOutput")
    class OutputSerializer(serializers.Serializer):
        user = UserOutput()
        event_seq = serializers.IntegerField(allow_null=True)
        grant = RoleGrantOutput(allow_null=True)

    @extend_schema(
        operation_id="users_roles_set",
        request=InputSerializer,
        responses={200: OutputSerializer, **ERRORS},
    )
    def post(self, request: Request, user_id: str) -> Response:
        subject = roles.access_user_by_id(request.user, user_id, roles.MANAGE)
        data = self.InputSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        change = gov_services.user_roles_change(
            actor=request.user,
            user=subject,
            roles=data.validated_data["roles"],
            reason=data.validated_data["reason"],
        )
        membership.forget(subject)
        body = {
            "user": subject,
            "event_seq": change.event.seq if change.event is not None else None,
            "grant": change.grant,
        }
        return Response(self.OutputSerializer(body).data)


class RoleGrantListApi(APIView):
    @extend_schema(
        operation_id="role_grants_list", responses={200: RoleGrantOutput(many=True), **ERRORS}
    )
    def get(self, request: Request) -> Response:
        if not roles.may_see_role_grants(request.user):
            roles.require(request.user, roles.MANAGE)
        return Response(RoleGrantOutput(gov.role_grants()[:200], many=True).data)


class RoleGrantDetailApi(APIView):
    """A role grant, its council signatures, and the exact payload to sign for a decision."""

    @extend_schema_serializer(component_name="RoleGrantDetailOutput")
    class OutputSerializer(RoleGrantOutput):
        approvals = BallotOutput(many=True, source="approval_list")
        payload = serializers.JSONField()
        payload_jcs = serializers.CharField()

    @extend_schema(
        operation_id="role_grants_retrieve",
        parameters=[
            OpenApiParameter("decision", OpenApiTypes.STR, enum=list(signing.DECISIONS)),
            OpenApiParameter("reason", OpenApiTypes.STR),
        ],
        responses={200: OutputSerializer, **ERRORS},
    )
    def get(self, request: Request, request_id: str) -> Response:
        grant = roles.access_role_grant_by_id(request.user, request_id)
        decision = request.query_params.get("decision", signing.APPROVE)
        if decision not in signing.DECISIONS:
            raise serializers.ValidationError(
                {"decision": [f"one of {', '.join(signing.DECISIONS)}"]}
            )
        payload = gov_services.role_grant_payload_for(
            request=grant, decision=decision, reason=request.query_params.get("reason", "")
        )
        grant.approval_list = gov.role_grant_ballots(request=grant)  # type: ignore[attr-defined]
        grant.payload = payload  # type: ignore[attr-defined]
        grant.payload_jcs = jcs(payload).decode()  # type: ignore[attr-defined]
        return Response(self.OutputSerializer(grant).data)


class RoleGrantApprovalCreateApi(APIView):
    """Record one council member's signed approval or denial of a role grant."""

    @extend_schema(
        operation_id="role_grants_approve",
        request=SignedApprovalInput,
        responses={201: ApprovalOutput, **ERRORS},
    )
    def post(self, request: Request, request_id: str) -> Response:
        _, approval = vote_recorded(request, "role-grant", request_id)
        return Response(ApprovalOutput(approval).data, status=status.HTTP_201_CREATED)
