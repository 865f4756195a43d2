"""Auditors' notes on a trace: ``GET/POST /api/traces/<ref>/notes/`` (TRACE_NOTE events)."""

from __future__ import annotations

from drf_spectacular.utils import extend_schema, extend_schema_serializer
from rest_framework import serializers, status
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from console import roles
from console.api.governance import ERRORS
from governance.selectors import trace_notes
from governance.services.notes import trace_note_add


class NoteOutput(serializers.Serializer):
    """One note as the ledger holds it."""

    seq = serializers.IntegerField(help_text="the TRACE_NOTE event's ledger seq")
    author = serializers.CharField(source="actor_label")
    created_at = serializers.DateTimeField()
    text = serializers.CharField(source="payload.text")
    trace_id = serializers.CharField(source="payload.trace_id")
    file_sha256 = serializers.CharField(source="payload.file_sha256")
    hash = serializers.CharField(help_text="the event's chain hash")


class TraceNotesApi(APIView):
    @extend_schema_serializer(component_name="TraceNoteCreateInput")
    class InputSerializer(serializers.Serializer):
        # blank and length are the service's refusals (NOTE_INVALID), one message for all
        text = serializers.CharField(allow_blank=True, trim_whitespace=False)

    @extend_schema(
        operation_id="trace_notes_list", responses={200: NoteOutput(many=True), **ERRORS}
    )
    def get(self, request: Request, trace_ref: str) -> Response:
        """The notes on a stored trace (by file sha256 or trace id), oldest first."""
        trace = roles.access_trace_by_id(request.user, trace_ref, roles.BROWSE)
        return Response(NoteOutput(trace_notes(trace), many=True).data)

    @extend_schema(
        operation_id="trace_notes_create",
        request=InputSerializer,
        responses={201: NoteOutput, **ERRORS},
    )
    def post(self, request: Request, trace_ref: str) -> Response:
        """Append a note (auditor or admin): a TRACE_NOTE event; never edited or removed."""
        trace = roles.access_trace_by_id(request.user, trace_ref, roles.TRACE_NOTE_ADD)
        data = self.InputSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        event = trace_note_add(trace=trace, actor=request.user, text=data.validated_data["text"])
        return Response(NoteOutput(event).data, status=status.HTTP_201_CREATED)
