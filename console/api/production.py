"""Council-approved production replay over the API: ask, list, read the payload to sign, and
record one council member's signed vote (on quorum the production run is queued)."""

from __future__ import annotations

from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, extend_schema, extend_schema_serializer
from rest_framework import serializers, status
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from console import roles
from console.api.filing import FileInput, request_file
from console.api.governance import ERRORS, ApprovalOutput, BallotOutput
from console.api.votes import SignedApprovalInput, vote_recorded
from core.canonical import jcs
from core.ledger import signing
from governance import selectors as gov
from governance import services as gov_services
from governance.models import ProductionReplayRequest


class ProductionRequestOutput(serializers.Serializer):
    id = serializers.UUIDField()
    trace_id = serializers.CharField(source="trace.trace_id")
    trace_sha256 = serializers.CharField(source="trace.blob.sha256")
    reason = serializers.CharField()
    requested_by = serializers.CharField(source="requested_by.username")
    state = serializers.CharField()
    expires_at = serializers.DateTimeField()
    created_at = serializers.DateTimeField()
    decided_at = serializers.DateTimeField(allow_null=True)
    run = serializers.UUIDField(source="run_id", allow_null=True)
    remaining = serializers.SerializerMethodField()
    expired = serializers.SerializerMethodField()

    def get_remaining(self, asked: ProductionReplayRequest) -> str:
        return gov.production_tally(request=asked).missing

    def get_expired(self, asked: ProductionReplayRequest) -> bool:
        return gov.request_is_expired(request=asked)


class ProductionRequestCreateApi(APIView):
    """Ask the council to approve one production replay of this stored trace (for whoever
    holds auditor or admin but not both)."""

    @extend_schema_serializer(component_name="ProductionRequestCreateInput")
    class InputSerializer(FileInput):
        pass

    @extend_schema(
        operation_id="production_request_create",
        request=InputSerializer,
        responses={201: ProductionRequestOutput, **ERRORS},
    )
    def post(self, request: Request, trace_ref: str) -> Response:
        asked = request_file(request.user, "production-replay", trace_ref, request.data)
        return Response(ProductionRequestOutput(asked).data, status=status.HTTP_201_CREATED)


class ProductionRequestListApi(APIView):
    @extend_schema_serializer(component_name="ProductionRequestListFilter")
    class FilterSerializer(serializers.Serializer):
        state = serializers.ChoiceField(
            choices=ProductionReplayRequest.State.values, required=False
        )

    @extend_schema(
        operation_id="production_request_list",
        parameters=[FilterSerializer],
        responses={200: ProductionRequestOutput(many=True), **ERRORS},
    )
    def get(self, request: Request) -> Response:
        roles.require(request.user, roles.BROWSE)
        params = self.FilterSerializer(data=request.query_params)
        params.is_valid(raise_exception=True)
        found = gov.production_requests()
        if "state" in params.validated_data:
            found = found.filter(state=params.validated_data["state"])
        return Response(ProductionRequestOutput(found[:200], many=True).data)


class ProductionRequestDetailApi(APIView):
    """A request, its council signatures, and the exact payload to sign for a decision."""

    @extend_schema_serializer(component_name="ProductionRequestDetailOutput")
    class OutputSerializer(ProductionRequestOutput):
        approvals = BallotOutput(many=True, source="approval_list")
        payload = serializers.JSONField()
        payload_jcs = serializers.CharField()

    @extend_schema(
        operation_id="production_request_retrieve",
        parameters=[
            OpenApiParameter("decision", OpenApiTypes.STR, enum=list(signing.DECISIONS)),
            OpenApiParameter("reason", OpenApiTypes.STR),
        ],
        responses={200: OutputSerializer, **ERRORS},
    )
    def get(self, request: Request, request_id: str) -> Response:
        asked = roles.access_production_request_by_id(request.user, request_id, roles.BROWSE)
        decision = request.query_params.get("decision", signing.APPROVE)
        if decision not in signing.DECISIONS:
            raise serializers.ValidationError(
                {"decision": [f"one of {', '.join(signing.DECISIONS)}"]}
            )
        payload = gov_services.production_replay_payload_for(
            request=asked, decision=decision, reason=request.query_params.get("reason", "")
        )
        asked.approval_list = gov.production_ballots(request=asked)  # type: ignore[attr-defined]
        asked.payload = payload  # type: ignore[attr-defined]
        asked.payload_jcs = jcs(payload).decode()  # type: ignore[attr-defined]
        return Response(self.OutputSerializer(asked).data)


class ProductionApprovalCreateApi(APIView):
    """Record one council member's signed approval or denial of a production replay."""

    @extend_schema(
        operation_id="production_request_approve",
        request=SignedApprovalInput,
        responses={201: ApprovalOutput, **ERRORS},
    )
    def post(self, request: Request, request_id: str) -> Response:
        _, approval = vote_recorded(request, "production-replay", request_id)
        return Response(ApprovalOutput(approval).data, status=status.HTTP_201_CREATED)
