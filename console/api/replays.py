"""Replays over the API: start one (mode checked against the roles, options against the
trace's format), poll it, read its report."""

from __future__ import annotations

from typing import Any

from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import extend_schema, extend_schema_field, extend_schema_serializer
from rest_framework import serializers, status
from rest_framework.exceptions import PermissionDenied, ValidationError
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from console import roles
from console.api.common import ErrorOutput, RunOutput
from console.api.errors import REPORT_NOT_READY, ApiError
from core.formats import formats
from core.formats.protocol import OptionError
from governance.services import replay_request

ERRORS = {400: ErrorOutput, 401: ErrorOutput, 403: ErrorOutput, 404: ErrorOutput}
MODES = (roles.MODE_AUDIT, roles.MODE_SANDBOX, roles.MODE_PRODUCTION)


def _options_schema() -> dict[str, Any]:
    """Every registered format's replay options, for the API schema."""
    properties: dict[str, Any] = {}
    for fmt in formats():
        for option in getattr(fmt, "replay_options", ()):
            properties[option.name] = {
                **option.schema,
                "default": option.default,
                "description": f"{fmt.name}: {option.help}",
            }
    return {
        "type": "object",
        "properties": properties,
        "additionalProperties": False,
        "description": "the trace format's replay options (omitted: its defaults); a format "
        "without options refuses any, and an unknown name or a wrong type is INVALID_INPUT "
        "(`fields.options` says which)",
    }


@extend_schema_field(_options_schema())
class OptionsField(serializers.JSONField):
    """A JSON object of replay options, checked against the trace's format by the service."""


class ReplayCreateApi(APIView):
    """Start a replay. It runs as a task; poll its status, then read the report."""

    @extend_schema_serializer(component_name="ReplayCreateInput")
    class InputSerializer(serializers.Serializer):
        trace = serializers.CharField(
            max_length=64,
            help_text="the stored file: its sha256, its upload id (upload:ID), or a trace id "
            "that exactly one stored file carries (several: 400 AMBIGUOUS_TRACE_ID, naming each "
            "copy under detail.copies)",
        )
        mode = serializers.ChoiceField(choices=MODES, default=roles.MODE_AUDIT)
        options = OptionsField(required=False)

    @extend_schema(
        operation_id="replays_create",
        request=InputSerializer,
        responses={202: RunOutput, **ERRORS},
    )
    def post(self, request: Request) -> Response:
        roles.require(request.user, roles.REPLAY_AUDIT)
        data = self.InputSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        mode = data.validated_data["mode"]
        trace = roles.access_trace_to_replay(
            request.user, data.validated_data["trace"], roles.REPLAY_AUDIT
        )
        if mode not in roles.replay_modes_for(request.user):
            raise PermissionDenied(f"your roles do not allow a {mode} replay")
        try:
            run = replay_request(
                trace=trace,
                mode=mode,
                actor=request.user,
                options=data.validated_data.get("options"),
            )
        except OptionError as exc:
            raise ValidationError({"options": [exc.message]}) from None
        run.refresh_from_db()
        return Response(RunOutput(run).data, status=status.HTTP_202_ACCEPTED)


class ReplayStatusApi(APIView):
    @extend_schema(operation_id="replays_retrieve", responses={200: RunOutput, **ERRORS})
    def get(self, request: Request, run_id: str) -> Response:
        run = roles.access_run_by_id(request.user, run_id, roles.BROWSE)
        return Response(RunOutput(run).data)


class ReplayReportApi(APIView):
    """The report exactly as contracts.md §3 spells it (plus a few extra keys)."""

    @extend_schema(
        operation_id="replays_report",
        responses={200: OpenApiTypes.OBJECT, 409: ErrorOutput, **ERRORS},
    )
    def get(self, request: Request, run_id: str) -> Response:
        run = roles.access_run_by_id(request.user, run_id, roles.BROWSE)
        if run.report is None:
            raise ApiError(REPORT_NOT_READY, f"replay {run.id} is {run.state}", 409)
        return Response(run.report)
