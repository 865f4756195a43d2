"""Legal requests over the API (``/api/legal-requests/``), through ``dsr.services`` like the
pages and ``manage.py dsr``: list, open, read (with the exact payload an approval signs),
record the identity check, move the state on, and record a signed four-eyes approval."""

from __future__ import annotations

from typing import Any

from django.core.exceptions import PermissionDenied
from django.http import HttpResponse
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import (
    OpenApiParameter,
    extend_schema,
    extend_schema_field,
    extend_schema_serializer,
)
from rest_framework import serializers, status
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from console import roles
from console.api.governance import ERRORS
from console.api.votes import SignedApprovalInput, vote_recorded
from core.canonical import jcs
from core.ledger import signing
from dsr import access, lookup, services, subjects_port
from dsr.models import LegalRequest


class ApprovalStatusOutput(serializers.Serializer):
    purpose = serializers.CharField()
    role = serializers.CharField()
    have = serializers.IntegerField()
    needed = serializers.IntegerField()
    complete = serializers.BooleanField()
    approvers = serializers.ListField(child=serializers.CharField())


class LegalRequestOutput(serializers.Serializer):
    id = serializers.UUIDField()
    subjects = serializers.ListField(child=serializers.CharField(), source="subject_refs")
    kind = serializers.CharField()
    legal_basis = serializers.CharField()
    due_date = serializers.DateField()
    days_left = serializers.SerializerMethodField()
    state = serializers.CharField()
    refusal_reason = serializers.CharField()
    requested_by = serializers.CharField(source="requested_by.username")
    created_at = serializers.DateTimeField()
    opened_seq = serializers.IntegerField(source="opened_event_id", allow_null=True)
    identity_method = serializers.CharField()
    identity_verified_by = serializers.CharField(
        source="identity_verified_by.username", allow_null=True, default=None
    )
    identity_verified_at = serializers.DateTimeField(allow_null=True)
    identity_seq = serializers.IntegerField(source="identity_event_id", allow_null=True)
    closed_seq = serializers.IntegerField(source="closed_event_id", allow_null=True)
    approvals = serializers.SerializerMethodField()

    def get_days_left(self, legal: LegalRequest) -> int:
        return legal.days_left()

    @extend_schema_field(ApprovalStatusOutput(many=True))
    def get_approvals(self, legal: LegalRequest) -> list[dict[str, Any]]:
        out = []
        for purpose in services.purposes_of(legal):
            s = services.approval_status(request=legal, purpose=purpose)
            out.append(
                {
                    "purpose": purpose,
                    "role": s.role,
                    "have": s.have,
                    "needed": s.needed,
                    "complete": s.complete,
                    "approvers": list(s.approvers),
                }
            )
        return out


def _require_list(user: Any) -> None:
    if not lookup.may_see_legal_requests(user):
        raise PermissionDenied("your roles do not allow seeing legal requests")


def _valid(serializer: type[serializers.Serializer], request: Request) -> dict[str, Any]:
    """The request body as ``serializer`` validates it (else 400 naming every field's error)."""
    data = serializer(data=request.data)
    data.is_valid(raise_exception=True)
    return data.validated_data


def _legal_with_input(
    request: Request, request_id: str, action: str, serializer: type[serializers.Serializer]
) -> tuple[LegalRequest, dict[str, Any]]:
    """The legal request the URL names, if the caller's roles allow ``action`` on it, and the
    body as ``serializer`` validates it. Access first: a caller who may not act on the request
    learns nothing about it from a 400."""
    legal = lookup.access_legal_request_by_id(request.user, request_id, action)
    return legal, _valid(serializer, request)


class LegalRequestListApi(APIView):
    """Every legal request, soonest due first (legal, admin, and council signers); POST opens
    one (legal and admin)."""

    @extend_schema_serializer(component_name="LegalRequestCreateInput")
    class InputSerializer(serializers.Serializer):
        identifiers = serializers.ListField(
            child=serializers.CharField(max_length=500, trim_whitespace=False),
            max_length=services.SUBJECT_LIMIT,
        )
        kind = serializers.CharField(max_length=32)
        legal_basis = serializers.CharField(max_length=5000, allow_blank=True)
        due_date = serializers.CharField(required=False, allow_blank=True, max_length=32)

    @extend_schema(
        operation_id="legal_request_list",
        parameters=[OpenApiParameter("state", OpenApiTypes.STR, enum=LegalRequest.State.values)],
        responses={200: LegalRequestOutput(many=True), **ERRORS},
    )
    def get(self, request: Request) -> Response:
        _require_list(request.user)
        found = LegalRequest.objects.select_related("requested_by", "identity_verified_by")
        state = request.query_params.get("state")
        if state:
            if state not in LegalRequest.State.values:
                raise serializers.ValidationError(
                    {"state": [f"one of {', '.join(LegalRequest.State.values)}"]}
                )
            found = found.filter(state=state)
        return Response(LegalRequestOutput(found[:500], many=True).data)

    @extend_schema(
        operation_id="legal_request_create",
        request=InputSerializer,
        responses={201: LegalRequestOutput, **ERRORS},
    )
    def post(self, request: Request) -> Response:
        roles.require(request.user, roles.DSR)
        data = _valid(self.InputSerializer, request)
        legal = services.legal_request_open(
            actor=request.user,
            identifiers=data["identifiers"],
            kind=data["kind"],
            legal_basis=data["legal_basis"],
            due_date=data.get("due_date") or None,
        )
        return Response(LegalRequestOutput(legal).data, status=status.HTTP_201_CREATED)


class LegalRequestDetailApi(APIView):
    """One legal request; with ``purpose``, also the exact payload an approval of it signs."""

    @extend_schema_serializer(component_name="LegalRequestDetailOutput")
    class OutputSerializer(LegalRequestOutput):
        payload = serializers.JSONField(allow_null=True)
        payload_jcs = serializers.CharField(allow_null=True)

    @extend_schema(
        operation_id="legal_request_retrieve",
        parameters=[
            OpenApiParameter("purpose", OpenApiTypes.STR, enum=list(signing.DSR_PURPOSES)),
            OpenApiParameter("reason", OpenApiTypes.STR),
        ],
        responses={200: OutputSerializer, **ERRORS},
    )
    def get(self, request: Request, request_id: str) -> Response:
        _require_list(request.user)
        legal = lookup.access_legal_request_by_id(request.user, request_id, roles.BROWSE)
        purpose = request.query_params.get("purpose")
        legal.payload = legal.payload_jcs = None  # type: ignore[attr-defined]
        if purpose:
            payload = services.approval_payload_for(
                request=legal, purpose=purpose, reason=request.query_params.get("reason", "")
            )
            legal.payload = payload  # type: ignore[attr-defined]
            legal.payload_jcs = jcs(payload).decode()  # type: ignore[attr-defined]
        return Response(self.OutputSerializer(legal).data)


class LegalRequestIdentityApi(APIView):
    """Record how the subject's identity was verified (by the caller, now)."""

    @extend_schema_serializer(component_name="LegalRequestIdentityInput")
    class InputSerializer(serializers.Serializer):
        method = serializers.CharField(max_length=1000, allow_blank=True)

    @extend_schema(
        operation_id="legal_request_identity",
        request=InputSerializer,
        responses={200: LegalRequestOutput, **ERRORS},
    )
    def post(self, request: Request, request_id: str) -> Response:
        legal, data = _legal_with_input(request, request_id, roles.DSR, self.InputSerializer)
        legal = services.legal_request_identity_verify(
            request=legal, actor=request.user, method=data["method"]
        )
        return Response(LegalRequestOutput(legal).data)


class LegalRequestTransitionApi(APIView):
    """Move a request on: ``start`` (open -> in progress), ``fulfil``, or ``refuse`` (reason)."""

    @extend_schema_serializer(component_name="LegalRequestTransitionInput")
    class InputSerializer(serializers.Serializer):
        action = serializers.ChoiceField(choices=["start", "fulfil", "refuse"])
        reason = serializers.CharField(max_length=5000, required=False, allow_blank=True)

    @extend_schema(
        operation_id="legal_request_transition",
        request=InputSerializer,
        responses={200: LegalRequestOutput, **ERRORS},
    )
    def post(self, request: Request, request_id: str) -> Response:
        legal, data = _legal_with_input(request, request_id, roles.DSR, self.InputSerializer)
        action = data["action"]
        if action == "start":
            legal = services.legal_request_start(request=legal, actor=request.user)
        elif action == "fulfil":
            legal = services.legal_request_fulfil(request=legal, actor=request.user)
        else:
            legal = services.legal_request_refuse(
                request=legal, actor=request.user, reason=data.get("reason", "")
            )
        return Response(LegalRequestOutput(legal).data)


class DsrApprovalOutput(serializers.Serializer):
    seq = serializers.IntegerField(source="event_id")
    purpose = serializers.CharField(source="payload.purpose")
    approver = serializers.CharField(source="approver.username")
    role = serializers.CharField()
    key_id = serializers.CharField(source="key.key_id")
    created_at = serializers.DateTimeField()


def _any_legal_request(user: Any, kind: Any, key: str) -> LegalRequest:
    return lookup.access_legal_request_by_id(user, key, roles.DSR_APPROVE)


class LegalRequestApprovalApi(APIView):
    """Record one signed four-eyes approval of a request's ``release`` or ``erasure``."""

    @extend_schema_serializer(component_name="LegalRequestApprovalInput")
    class InputSerializer(SignedApprovalInput):
        purpose = serializers.ChoiceField(choices=list(signing.DSR_PURPOSES))

    @extend_schema(
        operation_id="legal_request_approve",
        request=InputSerializer,
        responses={201: DsrApprovalOutput, **ERRORS},
    )
    def post(self, request: Request, request_id: str) -> Response:
        # the purpose names the kind; an unknown one is refused by the input's validation,
        # after the same role check and lookup (both purposes are signed by the same roles).
        # Any legal request is found, so a purpose it does not have is refused by name
        # (DSR_INVALID), not a 404 as on the purpose's own page.
        asked = request.data.get("purpose") if isinstance(request.data, dict) else None
        purpose = asked if asked in signing.DSR_PURPOSES else signing.DSR_RELEASE
        _, approval = vote_recorded(
            request,
            f"legal-{purpose}",
            request_id,
            input_serializer=self.InputSerializer,
            lookup=_any_legal_request,
        )
        return Response(DsrApprovalOutput(approval).data, status=status.HTTP_201_CREATED)


class BundleStatusOutput(serializers.Serializer):
    state = serializers.CharField(source="bundle_state")
    done = serializers.IntegerField(source="bundle_done")
    total = serializers.IntegerField(source="bundle_total")
    error = serializers.CharField(source="bundle_error")
    sha256 = serializers.CharField(source="bundle_sha256")
    export_seq = serializers.IntegerField(source="export_event_id", allow_null=True)


class LegalRequestBundleApi(APIView):
    """GET: the bundle's build progress; POST: build it (a background task of audit replays)."""

    @extend_schema(
        operation_id="legal_request_bundle_status", responses={200: BundleStatusOutput, **ERRORS}
    )
    def get(self, request: Request, request_id: str) -> Response:
        legal = lookup.access_legal_request_by_id(request.user, request_id, roles.DSR)
        return Response(BundleStatusOutput(legal).data)

    @extend_schema(
        operation_id="legal_request_bundle_build",
        request=None,
        responses={202: BundleStatusOutput, **ERRORS},
    )
    def post(self, request: Request, request_id: str) -> Response:
        legal = lookup.access_legal_request_by_id(request.user, request_id, roles.DSR)
        legal = access.bundle_request(request=legal, actor=request.user)
        legal.refresh_from_db()
        return Response(BundleStatusOutput(legal).data, status=status.HTTP_202_ACCEPTED)


class LegalRequestBundleFileApi(APIView):
    """The bundle file itself, once its release is approved (four eyes)."""

    @extend_schema(
        operation_id="legal_request_bundle_file",
        responses={(200, "application/json"): OpenApiTypes.BINARY, **ERRORS},
    )
    def get(self, request: Request, request_id: str) -> HttpResponse:
        legal = lookup.access_legal_request_by_id(request.user, request_id, roles.DSR)
        response = HttpResponse(
            access.released_bundle(request=legal), content_type="application/json"
        )
        response["Content-Disposition"] = f'attachment; filename="evidence-bundle-{legal.id}.json"'
        return response


class LegalRequestReleaseApi(APIView):
    """An admin releases one field's value into the bundle: one PII_REVEALED naming the request."""

    @extend_schema_serializer(component_name="LegalRequestReleaseInput")
    class InputSerializer(serializers.Serializer):
        subject_ref = serializers.CharField(max_length=64)
        trace_pk = serializers.IntegerField()
        location = serializers.CharField(max_length=200)
        path = serializers.CharField(max_length=2000, allow_blank=True)
        reason = serializers.CharField(max_length=5000, allow_blank=True)

    @extend_schema_serializer(component_name="LegalRequestReleaseOutput")
    class OutputSerializer(serializers.Serializer):
        seq = serializers.IntegerField(source="event_id")
        subject_ref = serializers.CharField()
        trace_pk = serializers.IntegerField()
        location = serializers.CharField()
        path = serializers.CharField()

    @extend_schema(
        operation_id="legal_request_release",
        request=InputSerializer,
        responses={201: OutputSerializer, **ERRORS},
    )
    def post(self, request: Request, request_id: str) -> Response:
        legal, data = _legal_with_input(request, request_id, roles.PII_REVEAL, self.InputSerializer)
        release = access.field_release(request=legal, actor=request.user, **data)
        return Response(self.OutputSerializer(release).data, status=status.HTTP_201_CREATED)


class LegalRequestErasureApi(APIView):
    """GET: what the erasure will destroy and what stays (or, once done, its receipt);
    POST: execute the approved erasure and answer with the signed receipt."""

    @extend_schema_serializer(component_name="LegalRequestErasureOutput")
    class OutputSerializer(serializers.Serializer):
        plan = serializers.JSONField(allow_null=True)
        receipt = serializers.JSONField(allow_null=True)
        receipt_seq = serializers.IntegerField(allow_null=True)

    @extend_schema(
        operation_id="legal_request_erasure", responses={200: OutputSerializer, **ERRORS}
    )
    def get(self, request: Request, request_id: str) -> Response:
        legal = lookup.access_legal_request_by_id(request.user, request_id, roles.DSR)
        receipt = access.erasure_receipt(legal)
        plan = None if receipt else subjects_port.erasure_plan(legal.subject_refs)
        body = {"plan": plan, "receipt": receipt, "receipt_seq": legal.erasure_event_id}
        return Response(self.OutputSerializer(body).data)

    @extend_schema(
        operation_id="legal_request_erase",
        request=None,
        responses={200: OutputSerializer, **ERRORS},
    )
    def post(self, request: Request, request_id: str) -> Response:
        legal = lookup.access_legal_request_by_id(request.user, request_id, roles.DSR)
        event = access.legal_request_erase(request=legal, actor=request.user)
        body = {"plan": None, "receipt": event.payload, "receipt_seq": event.seq}
        return Response(self.OutputSerializer(body).data)
