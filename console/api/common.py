"""Shared pieces of the API views: field serializers used by several, and the parsers."""

from __future__ import annotations

from typing import Any

from rest_framework import serializers
from rest_framework.negotiation import DefaultContentNegotiation
from rest_framework.parsers import BaseParser


class OctetStreamParser(BaseParser):
    """Declares that a raw trace body is accepted; the view streams it itself."""

    media_type = "application/octet-stream"

    def parse(self, stream: Any, media_type: str | None = None, parser_context: Any = None):
        return stream


class SchemaFormatNegotiation(DefaultContentNegotiation):
    """`/api/schema/?format=json`: the one view where `?format=` picks the renderer.

    URL_FORMAT_OVERRIDE is off for the whole API, where `format` is a filter."""

    def select_renderer(self, request: Any, renderers: Any, format_suffix: str | None = None):
        chosen = format_suffix or request.query_params.get("format") or None
        return super().select_renderer(request, renderers, chosen)


class RunOutput(serializers.Serializer):
    id = serializers.UUIDField()
    trace_id = serializers.CharField(source="trace.trace_id")
    trace_sha256 = serializers.CharField(source="trace.blob.sha256")
    mode = serializers.CharField()
    options = serializers.DictField(help_text="the format's replay options this run used")
    state = serializers.CharField()
    progress_done = serializers.IntegerField()
    progress_total = serializers.IntegerField()
    status = serializers.CharField()
    error_code = serializers.CharField()
    authoritative = serializers.BooleanField()
    force_continued = serializers.SerializerMethodField()
    resumed_from = serializers.UUIDField(source="resumed_from_id", allow_null=True)
    requested_by = serializers.CharField(source="requested_by.username", default=None)
    created_at = serializers.DateTimeField()
    started_at = serializers.DateTimeField(allow_null=True)
    finished_at = serializers.DateTimeField(allow_null=True)

    def get_force_continued(self, run: Any) -> bool:
        return bool((run.report or {}).get("force_continued"))


class TraceOutput(serializers.Serializer):
    upload_id = serializers.SerializerMethodField(
        help_text="the stored file's upload id, upload:ID: names this one file where several "
        "carry one trace id (a replay by trace id is then refused: AMBIGUOUS_TRACE_ID)"
    )
    trace_id = serializers.CharField()
    format = serializers.CharField()
    schema_version = serializers.IntegerField()
    filename = serializers.CharField()
    encoding = serializers.CharField()
    job_id = serializers.CharField()
    job_seed = serializers.CharField()
    runtime_name = serializers.CharField()
    runtime_version = serializers.CharField()
    started_at = serializers.DateTimeField(allow_null=True)
    event_count = serializers.IntegerField()
    step_count = serializers.IntegerField()
    verdict = serializers.CharField(source="last_status")
    replayable = serializers.BooleanField()
    size = serializers.IntegerField(source="blob.size")
    sha256 = serializers.CharField(source="blob.sha256")
    created_at = serializers.DateTimeField()
    uploaded_by = serializers.CharField(source="uploaded_by.username", default=None)

    def get_upload_id(self, trace: Any) -> str:
        from replay.selectors import UPLOAD_PREFIX

        return f"{UPLOAD_PREFIX}{trace.pk}"


class ErrorOutput(serializers.Serializer):
    error_code = serializers.CharField()
    message = serializers.CharField()
