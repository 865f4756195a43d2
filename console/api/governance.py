"""Governance over the API: force-continue requests and signed approvals, halts, keys, and the
read-only ledger with its verification status."""

from __future__ import annotations

from typing import Any

from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, extend_schema, extend_schema_serializer
from rest_framework import serializers, status
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from console import roles
from console.api.common import ErrorOutput
from console.api.filing import FileInput, request_file
from console.api.votes import SignedApprovalInput, vote_recorded
from core.canonical import jcs
from core.ledger import codes, signing
from governance import selectors as gov
from governance import services as gov_services
from governance import transparency, witnessing
from governance.models import ForceContinueRequest, Halt
from governance.verification import ledger_verification_read

ERRORS = {400: ErrorOutput, 401: ErrorOutput, 403: ErrorOutput, 404: ErrorOutput, 409: ErrorOutput}


class ForceContinueOutput(serializers.Serializer):
    id = serializers.UUIDField()
    run_id = serializers.UUIDField()
    trace_id = serializers.CharField(source="run.trace.trace_id")
    step = serializers.IntegerField()
    divergence_digest = serializers.CharField()
    reason = serializers.CharField()
    requested_by = serializers.CharField(source="requested_by.username")
    state = serializers.CharField()
    expires_at = serializers.DateTimeField()
    created_at = serializers.DateTimeField()
    decided_at = serializers.DateTimeField(allow_null=True)
    resumed_run = serializers.UUIDField(source="resumed_run_id", allow_null=True)
    remaining = serializers.SerializerMethodField()
    expired = serializers.SerializerMethodField()

    def get_remaining(self, fc: ForceContinueRequest) -> str:
        return gov.force_continue_tally(request=fc).missing

    def get_expired(self, fc: ForceContinueRequest) -> bool:
        return gov.request_is_expired(request=fc)


class ApprovalOutput(serializers.Serializer):
    seq = serializers.IntegerField(source="event_id")
    approver = serializers.CharField(source="approver.username")
    role = serializers.CharField()
    key_id = serializers.CharField(source="key.key_id")
    decision = serializers.CharField()
    reason = serializers.CharField()
    created_at = serializers.DateTimeField()


class BallotOutput(serializers.Serializer):
    """A signed vote as the ledger has it (``governance.selectors.Ballot``)."""

    seq = serializers.IntegerField()
    approver = serializers.CharField(source="approver.username")
    role = serializers.CharField()
    key_id = serializers.CharField()
    decision = serializers.CharField()
    reason = serializers.CharField()
    created_at = serializers.DateTimeField()


class ForceContinueRequestCreateApi(APIView):
    """File a force-continue request for a replay that stopped at a divergence."""

    @extend_schema_serializer(component_name="ForceContinueRequestCreateInput")
    class InputSerializer(FileInput):
        pass

    @extend_schema(
        operation_id="force_continue_create",
        request=InputSerializer,
        responses={201: ForceContinueOutput, **ERRORS},
    )
    def post(self, request: Request, run_id: str) -> Response:
        fc = request_file(request.user, "force-continue", run_id, request.data)
        return Response(ForceContinueOutput(fc).data, status=status.HTTP_201_CREATED)


class ForceContinueListApi(APIView):
    @extend_schema_serializer(component_name="ForceContinueListFilter")
    class FilterSerializer(serializers.Serializer):
        state = serializers.ChoiceField(choices=ForceContinueRequest.State.values, required=False)

    @extend_schema(
        operation_id="force_continue_list",
        parameters=[FilterSerializer],
        responses={200: ForceContinueOutput(many=True), **ERRORS},
    )
    def get(self, request: Request) -> Response:
        roles.require(request.user, roles.BROWSE)
        params = self.FilterSerializer(data=request.query_params)
        params.is_valid(raise_exception=True)
        found = gov.force_continue_requests()
        if "state" in params.validated_data:
            found = found.filter(state=params.validated_data["state"])
        return Response(ForceContinueOutput(found[:200], many=True).data)


class ForceContinueDetailApi(APIView):
    """A request, its approvals, and the exact payload to sign for a decision and role."""

    @extend_schema_serializer(component_name="ForceContinueDetailOutput")
    class OutputSerializer(ForceContinueOutput):
        approvals = BallotOutput(many=True, source="approval_list")
        payload = serializers.JSONField()
        payload_jcs = serializers.CharField()

    @extend_schema(
        operation_id="force_continue_retrieve",
        parameters=[
            OpenApiParameter("decision", OpenApiTypes.STR, enum=list(signing.DECISIONS)),
            OpenApiParameter("role", OpenApiTypes.STR, enum=list(signing.SIGNING_ROLES)),
            OpenApiParameter("reason", OpenApiTypes.STR),
        ],
        responses={200: OutputSerializer, **ERRORS},
    )
    def get(self, request: Request, request_id: str) -> Response:
        fc = roles.access_force_continue_by_id(request.user, request_id, roles.BROWSE)
        decision = request.query_params.get("decision", signing.APPROVE)
        role = request.query_params.get("role", signing.ROLE_COUNCIL)
        if decision not in signing.DECISIONS or role not in signing.SIGNING_ROLES:
            raise serializers.ValidationError(
                {
                    "decision": [f"one of {', '.join(signing.DECISIONS)}"],
                    "role": [f"one of {', '.join(signing.SIGNING_ROLES)}"],
                }
            )
        payload = gov_services.force_continue_payload_for(
            request=fc, decision=decision, role=role, reason=request.query_params.get("reason", "")
        )
        fc.approval_list = gov.force_continue_ballots(request=fc)  # type: ignore[attr-defined]
        fc.payload = payload  # type: ignore[attr-defined]
        fc.payload_jcs = jcs(payload).decode()  # type: ignore[attr-defined]
        return Response(self.OutputSerializer(fc).data)


class ApprovalCreateApi(APIView):
    """Record one signed approval or denial; the body carries the Ed25519 signature."""

    @extend_schema(
        operation_id="force_continue_approve",
        request=SignedApprovalInput,
        responses={201: ApprovalOutput, **ERRORS},
    )
    def post(self, request: Request, request_id: str) -> Response:
        _, approval = vote_recorded(request, "force-continue", request_id)
        return Response(ApprovalOutput(approval).data, status=status.HTTP_201_CREATED)


class HaltOutput(serializers.Serializer):
    seq = serializers.IntegerField()
    target_kind = serializers.CharField()
    target_id = serializers.CharField()
    reason = serializers.CharField()
    created_at = serializers.DateTimeField()
    active = serializers.BooleanField()
    signatures = serializers.IntegerField()
    clear_payload = serializers.JSONField()


class HaltListApi(APIView):
    @extend_schema(operation_id="halts_list", responses={200: HaltOutput(many=True), **ERRORS})
    def get(self, request: Request) -> Response:
        roles.require(request.user, roles.BROWSE)
        active = {h.seq for h in gov.halts_active()}
        halts = list(Halt.objects.order_by("-seq")[:200])
        for halt in halts:
            halt.active = halt.seq in active  # type: ignore[attr-defined]
            halt.signatures = len(gov.halt_ballots(halt_seq=halt.seq))  # type: ignore[attr-defined]
            halt.clear_payload = gov_services.halt_clear_payload_for(halt=halt)  # type: ignore[attr-defined]
        return Response(HaltOutput(halts, many=True).data)


class HaltClearApprovalApi(APIView):
    """One council signature toward clearing a halt (FORCE_HALT_CLEAR on quorum)."""

    @extend_schema(
        operation_id="halts_clear_approve",
        request=SignedApprovalInput,
        responses={201: ApprovalOutput, **ERRORS},
    )
    def post(self, request: Request, halt_seq: int) -> Response:
        _, approval = vote_recorded(request, "halt-clear", str(halt_seq))
        return Response(ApprovalOutput(approval).data, status=status.HTTP_201_CREATED)


class IncidentDeclareApi(APIView):
    """An admin declares a SECURITY_INCIDENT against one target: ``trace`` (a trace id halts
    every stored copy, a stored file's sha256 that file) or ``snapshot`` (a snapshot id halts
    every trace using it). Its halt refuses replays until a council quorum clears it."""

    @extend_schema_serializer(component_name="IncidentDeclareInput")
    class InputSerializer(serializers.Serializer):
        trace = serializers.CharField(max_length=200, required=False)
        snapshot = serializers.CharField(max_length=200, required=False)
        reason = serializers.CharField(max_length=2000, allow_blank=True)

    @extend_schema_serializer(component_name="IncidentOutput")
    class OutputSerializer(serializers.Serializer):
        incident_seq = serializers.IntegerField()
        halt_seq = serializers.IntegerField()
        target_kind = serializers.CharField()
        target_id = serializers.CharField()
        reason = serializers.CharField()
        halt_reason = serializers.CharField()

    @extend_schema(
        operation_id="halts_incident_declare",
        request=InputSerializer,
        responses={201: OutputSerializer, **ERRORS},
    )
    def post(self, request: Request) -> Response:
        roles.require(request.user, roles.INCIDENT_DECLARE)
        data = self.InputSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        incident, halt = gov_services.security_incident_declare(
            actor=request.user,
            reason=data.validated_data["reason"],
            trace=data.validated_data.get("trace"),
            snapshot=data.validated_data.get("snapshot"),
        )
        body = {
            "incident_seq": incident.seq,
            "halt_seq": halt.seq,
            "target_kind": halt.payload["target_kind"],
            "target_id": halt.payload["target_id"],
            "reason": incident.payload["reason"],
            "halt_reason": halt.payload["reason"],
        }
        return Response(self.OutputSerializer(body).data, status=status.HTTP_201_CREATED)


class MemberKeyOutput(serializers.Serializer):
    key_id = serializers.CharField()
    owner = serializers.CharField(source="user.username")
    public_key = serializers.CharField()
    fingerprint = serializers.CharField()
    label = serializers.CharField()  # type: ignore[assignment]  # DRF pops declared fields
    registered_at = serializers.DateTimeField()
    confirmed_at = serializers.DateTimeField(allow_null=True)
    confirmed_by = serializers.CharField(source="confirmed_by.username", default=None)
    revoked_at = serializers.DateTimeField(allow_null=True)


class ServerKeyOutput(serializers.Serializer):
    key_id = serializers.CharField()
    public_key = serializers.CharField()
    fingerprint = serializers.CharField()
    valid_from = serializers.DateTimeField()
    valid_until = serializers.DateTimeField(allow_null=True)
    revoked_at = serializers.DateTimeField(allow_null=True)


class KeyListApi(APIView):
    @extend_schema_serializer(component_name="KeyListOutput")
    class OutputSerializer(serializers.Serializer):
        member_keys = MemberKeyOutput(many=True)
        server_keys = ServerKeyOutput(many=True)

    @extend_schema(operation_id="keys_list", responses={200: OutputSerializer, **ERRORS})
    def get(self, request: Request) -> Response:
        from governance.models import SigningKey

        roles.require(request.user, roles.BROWSE)
        body = {"member_keys": gov.member_key_list(), "server_keys": SigningKey.objects.all()}
        return Response(self.OutputSerializer(body).data)


class KeyRegisterApi(APIView):
    """Register your own Ed25519 public key; an admin confirms it before it can sign."""

    @extend_schema_serializer(component_name="KeyRegisterInput")
    class InputSerializer(serializers.Serializer):
        public_key = serializers.CharField(max_length=4096)
        label = serializers.CharField(  # type: ignore[assignment]  # DRF pops declared fields
            max_length=200, required=False, default=""
        )

    @extend_schema(
        operation_id="keys_register",
        request=InputSerializer,
        responses={201: MemberKeyOutput, **ERRORS},
    )
    def post(self, request: Request) -> Response:
        roles.require(request.user, roles.SIGNING_KEY_REGISTER)
        data = self.InputSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        key = gov_services.member_key_register(
            user=request.user,
            public_key=data.validated_data["public_key"],
            label=data.validated_data["label"],
        )
        return Response(MemberKeyOutput(key).data, status=status.HTTP_201_CREATED)


class KeyConfirmApi(APIView):
    @extend_schema(
        operation_id="keys_confirm", request=None, responses={200: MemberKeyOutput, **ERRORS}
    )
    def post(self, request: Request, key_id: str) -> Response:
        key = roles.access_member_key_by_id(request.user, key_id, roles.MANAGE)
        key = gov_services.member_key_confirm(key=key, admin=request.user)
        return Response(MemberKeyOutput(key).data)


class EventOutput(serializers.Serializer):
    seq = serializers.IntegerField()
    code = serializers.IntegerField()
    type = serializers.CharField()
    created_at = serializers.DateTimeField()
    actor = serializers.SerializerMethodField()
    payload = serializers.JSONField()
    prev_hash = serializers.CharField()
    hash = serializers.CharField()
    server_key_id = serializers.CharField()
    server_signature = serializers.CharField()
    actor_key_id = serializers.CharField(allow_null=True)
    actor_signature = serializers.CharField(allow_null=True)

    def get_actor(self, event: Any) -> str:
        return event.actor_label or (event.actor.username if event.actor_id else "")


class EventListApi(APIView):
    """The ledger, newest first, read-only; page with `before` (a seq)."""

    @extend_schema_serializer(component_name="EventListFilter")
    class FilterSerializer(serializers.Serializer):
        range = serializers.ChoiceField(choices=sorted(codes.RANGES), required=False)
        before = serializers.IntegerField(required=False, min_value=1)
        limit = serializers.IntegerField(required=False, min_value=1, max_value=500, default=100)

    @extend_schema_serializer(component_name="EventListOutput")
    class OutputSerializer(serializers.Serializer):
        results = EventOutput(many=True)
        next_before = serializers.IntegerField(allow_null=True)

    @extend_schema(
        operation_id="governance_events_list",
        parameters=[FilterSerializer],
        responses={200: OutputSerializer, **ERRORS},
    )
    def get(self, request: Request) -> Response:
        roles.require(request.user, roles.BROWSE)
        params = self.FilterSerializer(data=request.query_params)
        params.is_valid(raise_exception=True)
        data = params.validated_data
        found = gov.events(code_range=data.get("range")).select_related("actor")
        if "before" in data:
            found = found.filter(seq__lt=data["before"])
        limit = data["limit"]
        rows = list(found[: limit + 1])
        more = len(rows) > limit
        rows = rows[:limit]
        body = {"results": rows, "next_before": rows[-1].seq if more and rows else None}
        return Response(self.OutputSerializer(body).data)


class TableMismatchOutput(serializers.Serializer):
    code = serializers.CharField()
    table = serializers.CharField()
    row = serializers.CharField()
    message = serializers.CharField()


class LedgerVerificationApi(APIView):
    """How far the chain is verified, from the newest signed verification mark, and every
    table the decisions depend on checked against the ledger (``tables`` names each row that
    disagrees). The request never walks the chain: it checks at most
    ``GOVERNANCE_VERIFY_INLINE_MAX`` events after the mark; beyond that ``unverified`` says
    how many are not yet verified (``ok`` is false, ``broke_at`` null) and the background
    verification ``verification_id`` was queued or joined."""

    @extend_schema_serializer(component_name="LedgerVerificationOutput")
    class OutputSerializer(serializers.Serializer):
        ok = serializers.BooleanField()
        size = serializers.IntegerField()
        head_hash = serializers.CharField()
        genesis_hash = serializers.CharField()
        broke_at = serializers.IntegerField(allow_null=True)
        code = serializers.CharField(allow_null=True)
        reason = serializers.CharField(allow_null=True)
        tables = TableMismatchOutput(many=True)
        head_seq = serializers.IntegerField()
        verified_through = serializers.IntegerField(allow_null=True)
        mark_through_seq = serializers.IntegerField(allow_null=True)
        checked_now = serializers.IntegerField()
        unverified = serializers.IntegerField()
        verification_id = serializers.IntegerField(allow_null=True)
        verification_state = serializers.CharField(allow_null=True)
        message = serializers.CharField()

    @extend_schema(
        operation_id="governance_verification", responses={200: OutputSerializer, **ERRORS}
    )
    def get(self, request: Request) -> Response:
        roles.require(request.user, roles.BROWSE)
        result = ledger_verification_read(actor=request.user).as_dict()
        return Response(self.OutputSerializer(result).data)


# --- the ledger as a transparency log (governance.transparency) --------------------------------


class WitnessCosignatureOutput(serializers.Serializer):
    witness = serializers.CharField()
    key_id = serializers.CharField()
    tree_size = serializers.IntegerField()
    timestamp = serializers.IntegerField()
    line = serializers.CharField()


class WitnessLatestOutput(serializers.Serializer):
    name = serializers.CharField()
    url = serializers.CharField()
    key_id = serializers.CharField()
    size = serializers.IntegerField(allow_null=True)
    timestamp = serializers.IntegerField(allow_null=True)


class WitnessedOutput(serializers.Serializer):
    quorum = serializers.IntegerField()
    configured = serializers.IntegerField()
    witnessed_size = serializers.IntegerField(allow_null=True)
    witnesses = WitnessLatestOutput(many=True)


class TransparencyOutput(serializers.Serializer):
    origin = serializers.CharField()
    vkeys = serializers.ListField(child=serializers.CharField())
    tree_size = serializers.IntegerField()
    checkpoint = serializers.CharField()
    cosigned_checkpoint = serializers.CharField()
    cosignatures = WitnessCosignatureOutput(many=True)
    witnessed = WitnessedOutput()


class TransparencyApi(APIView):
    """The ledger's Merkle tree: this installation's origin line, the verifier key strings of
    its checkpoints (C2SP signed-note vkeys, the current key first) and the signed checkpoint
    (C2SP tlog-checkpoint) of the whole tree, or of the tree at ``size``."""

    class FilterSerializer(serializers.Serializer):
        size = serializers.IntegerField(required=False, min_value=0)

    @extend_schema(
        operation_id="governance_transparency",
        parameters=[FilterSerializer],
        responses={200: TransparencyOutput, **ERRORS},
    )
    def get(self, request: Request) -> Response:
        roles.require(request.user, roles.BROWSE)
        params = self.FilterSerializer(data=request.query_params)
        params.is_valid(raise_exception=True)
        cp = transparency.checkpoint(params.validated_data.get("size"))
        body = {
            "origin": transparency.origin(),
            "vkeys": transparency.verifier_keys(),
            "tree_size": transparency.tree_size(),
            "checkpoint": cp.note,
            "cosigned_checkpoint": witnessing.cosigned_note(cp),
            "cosignatures": witnessing.cosignatures(cp.size, bytes(cp.root_hash)),
            "witnessed": witnessing.summary(),
        }
        return Response(TransparencyOutput(body).data)


class InclusionProofOutput(serializers.Serializer):
    type = serializers.CharField()
    checkpoint = serializers.CharField()
    seq = serializers.IntegerField()
    leaf_index = serializers.IntegerField()
    tree_size = serializers.IntegerField()
    leaf = serializers.CharField()
    leaf_hash = serializers.CharField()
    proof = serializers.ListField(child=serializers.CharField())
    root_hash = serializers.CharField()


class InclusionProofApi(APIView):
    """Event ``seq``'s RFC 9162 inclusion proof in the signed checkpoint at ``size`` (the
    whole tree by default): ``python -m tlog check-inclusion`` checks it offline."""

    class FilterSerializer(serializers.Serializer):
        seq = serializers.IntegerField(min_value=1)
        size = serializers.IntegerField(required=False, min_value=1)

    @extend_schema(
        operation_id="governance_inclusion_proof",
        parameters=[FilterSerializer],
        responses={200: InclusionProofOutput, **ERRORS},
    )
    def get(self, request: Request) -> Response:
        roles.require(request.user, roles.BROWSE)
        params = self.FilterSerializer(data=request.query_params)
        params.is_valid(raise_exception=True)
        data = params.validated_data
        document = transparency.inclusion_document(data["seq"], data.get("size"))
        return Response(InclusionProofOutput(document).data)


class ConsistencyProofOutput(serializers.Serializer):
    type = serializers.CharField()
    checkpoint = serializers.CharField()
    old_size = serializers.IntegerField()
    new_size = serializers.IntegerField()
    old_root = serializers.CharField()
    new_root = serializers.CharField()
    proof = serializers.ListField(child=serializers.CharField())


class ConsistencyProofApi(APIView):
    """The RFC 9162 consistency proof from tree size ``old`` to the signed checkpoint at
    ``size`` (the whole tree by default): ``python -m tlog check-consistency`` checks it
    against the checkpoint an auditor kept."""

    class FilterSerializer(serializers.Serializer):
        old = serializers.IntegerField(min_value=0)
        size = serializers.IntegerField(required=False, min_value=0)

    @extend_schema(
        operation_id="governance_consistency_proof",
        parameters=[FilterSerializer],
        responses={200: ConsistencyProofOutput, **ERRORS},
    )
    def get(self, request: Request) -> Response:
        roles.require(request.user, roles.BROWSE)
        params = self.FilterSerializer(data=request.query_params)
        params.is_valid(raise_exception=True)
        data = params.validated_data
        document = transparency.consistency_document(data["old"], data.get("size"))
        return Response(ConsistencyProofOutput(document).data)
