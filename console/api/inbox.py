"""``GET /api/inbox/``: what the inbox page lists, as JSON."""

from __future__ import annotations

from drf_spectacular.utils import extend_schema
from rest_framework import serializers
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from console import roles
from console.api.common import ErrorOutput
from governance.requests import inbox

ERRORS = {401: ErrorOutput, 403: ErrorOutput}


class InboxItemOutput(serializers.Serializer):
    kind = serializers.CharField(help_text="the kind of governed request (force-continue ...)")
    label = serializers.CharField()  # type: ignore[assignment]  # DRF pops declared fields
    key = serializers.CharField(help_text="the request within its kind: its id, a halt's seq")
    subject = serializers.CharField()
    filed_by = serializers.CharField()
    filed_at = serializers.DateTimeField()
    expires_at = serializers.DateTimeField(allow_null=True)
    due_date = serializers.DateField(allow_null=True)
    needs = serializers.CharField(help_text="the signatures still missing, in words")
    url = serializers.CharField(help_text="its approval page")
    capacities = serializers.ListField(
        child=serializers.CharField(), help_text="the roles you may sign it in"
    )


class InboxApi(APIView):
    """The governed requests waiting for your signature, every kind, oldest first."""

    @extend_schema(operation_id="inbox_list", responses={200: InboxItemOutput(many=True), **ERRORS})
    def get(self, request: Request) -> Response:
        roles.require(request.user, roles.INBOX)
        in_effect = roles.roles(request.user)
        items = (
            inbox.waiting_for(request.user, roles=in_effect)
            if inbox.signs_anything(in_effect)
            else []
        )
        return Response(InboxItemOutput(items, many=True).data)
