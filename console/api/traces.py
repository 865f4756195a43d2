"""Traces over the API: upload (multipart or raw body), verify without storing, list with
filters and cursor, detail."""

from __future__ import annotations

import os
from typing import Any

from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import (
    OpenApiParameter,
    PolymorphicProxySerializer,
    extend_schema,
    extend_schema_serializer,
)
from rest_framework import serializers, status
from rest_framework.exceptions import UnsupportedMediaType, ValidationError
from rest_framework.parsers import MultiPartParser
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from console import roles
from console.api.common import ErrorOutput, OctetStreamParser, RunOutput, TraceOutput
from console.api.errors import INVALID_INPUT, ApiError
from console.selectors import (
    MAX_PAGE_SIZE,
    OTEL_FILTERS,
    OTEL_LABELS,
    SORT_CHOICES,
    SORT_DEFAULT,
    VERDICT_ALIASES,
    CursorError,
    SortError,
    TraceFilters,
    sort_parse,
    trace_page,
    traces_mark_replayable,
)
from core.formats import formats
from core.formats.otel import facts as otel_facts
from core.formats.protocol import VerifyContext
from governance.selectors import halts_active_map
from privacy.redaction import mask_deep, trace_personal_texts
from replay import conf as replay_conf
from replay.models import Trace
from replay.selectors import runs_for_trace, trace_missing, trace_verdict_basis
from replay.services import trace_check, trace_ingest, trace_upload_batch
from replay.storage import blob_open

ERRORS = {400: ErrorOutput, 401: ErrorOutput, 403: ErrorOutput, 404: ErrorOutput}


def uploaded_file(request: Request) -> tuple[Any, str]:
    """The file a request carries: multipart ``file``, or the raw body named ``?filename=``."""
    content_type = (request.content_type or "").split(";")[0].strip().lower()
    if content_type == "multipart/form-data":
        upload = request.FILES.get("file")
        if upload is None:
            raise ValidationError({"file": ["No file was submitted."]})
        return upload, os.path.basename(upload.name or "upload")
    if content_type == "application/octet-stream":
        filename = os.path.basename(request.query_params.get("filename", "").strip())
        if not filename:
            raise ValidationError({"filename": ["Name the file (?filename=...)."]})
        return request._request, filename  # streamed by the service, never read whole here
    raise UnsupportedMediaType(content_type or "(none)")


def uploaded_inputs(request: Request) -> dict[str, bytes]:
    """The files a multipart request carries besides ``file`` (``inputs``, several): an AHD
    sidecar's token and brief, or a MACE log's snapshot files, by file name, each read up to
    the largest input (or archive) size any format allows + 1: which format they belong to
    is not known yet, and that format refuses what is larger than its own."""
    content_type = (request.content_type or "").split(";")[0].strip().lower()
    if content_type != "multipart/form-data":
        return {}
    from core.formats import archive

    limits = replay_conf.largest_input_limits()
    limit = limits.max_input_bytes
    packed = limits.archive.max_archive_bytes
    inputs = {}
    for f in request.FILES.getlist("inputs"):
        name = os.path.basename(f.name or "input")
        inputs[name] = f.read((packed if archive.is_archive(name) else limit) + 1)
    return inputs


def uploaded_contract(request: Request) -> tuple[str, bytes] | None:
    """The multipart field ``contract``: the contract a Paxman artifact is checked against
    (a JSON Dict DSL contract), read up to the largest input size any format allows + 1."""
    content_type = (request.content_type or "").split(";")[0].strip().lower()
    if content_type != "multipart/form-data":
        return None
    upload = request.FILES.get("contract")
    if upload is None:
        return None
    limit = replay_conf.largest_input_limits().max_input_bytes
    return os.path.basename(upload.name or "contract.json"), upload.read(limit + 1)


#: the companion parts an upload and a verify both take (the formats' rules group the rest)
COMPANION_PARTS = {
    "inputs": {
        "type": "array",
        "items": {"type": "string", "format": "binary"},
        "description": "an AHD sidecar's token and brief files, matched by the "
        "sidecar's recorded paths, or one archive of them (.tar.gz, .tgz, .zip); a "
        "MACE log's snapshot files (<snapshot_id>.json)",
    },
    "contract": {
        "type": "string",
        "format": "binary",
        "description": "a Paxman artifact's contract (JSON Dict DSL): its id must be "
        "the artifact's contract_id, else INVALID_CONTRACT",
    },
}
UPLOAD_BODY = {
    "multipart/form-data": {
        "type": "object",
        "properties": {
            "file": {
                "type": "array",
                "items": {"type": "string", "format": "binary"},
                "description": "the file to verify or store; to store several at once, one "
                "part per file: each trace goes with its companion files by the formats' rules "
                "(as the upload page groups a drop)",
            },
            **COMPANION_PARTS,
        },
        "required": ["file"],
    },
    "application/octet-stream": {"type": "string", "format": "binary"},
}
VERIFY_BODY = {
    "multipart/form-data": {
        "type": "object",
        "properties": {
            "file": {"type": "string", "format": "binary"},
            **COMPANION_PARTS,
        },
        "required": ["file"],
    },
    "application/octet-stream": {"type": "string", "format": "binary"},
}
FILENAME_PARAMETER = OpenApiParameter(
    "filename",
    OpenApiTypes.STR,
    description="the file name (raw body uploads): its suffix tells the spelling",
)


class TraceVerifyApi(APIView):
    """Verify one file of any format the console reads (a native trace, a Paxman artifact,
    an AHD sidecar) and store nothing: always a report, a refusal included, as
    `manage.py verify --json` prints it. An AHD sidecar is checked against the token and brief
    uploaded with it as `inputs`, else the server's AHD checkout (REPLAY_AHD_ROOT)."""

    parser_classes = (MultiPartParser, OctetStreamParser)

    class OutputSerializer(serializers.Serializer):
        format = serializers.CharField()
        stored = serializers.BooleanField(default=False)
        report = serializers.JSONField()

    @extend_schema(
        operation_id="traces_verify",
        request=VERIFY_BODY,
        parameters=[FILENAME_PARAMETER],
        responses={200: OutputSerializer, 413: ErrorOutput, **ERRORS},
    )
    def post(self, request: Request) -> Response:
        roles.require(request.user, roles.UPLOAD)
        source, filename = uploaded_file(request)
        checked = trace_check(
            source=source,
            filename=filename,
            halts=halts_active_map,
            inputs=uploaded_inputs(request),
            contract=uploaded_contract(request),
        )
        return Response({"format": checked.format, "stored": False, "report": checked.report})


@extend_schema_serializer(component_name="TraceUploadOutput")
class TraceUploadOutputSerializer(TraceOutput):
    created = serializers.BooleanField()
    report = serializers.JSONField(source="ingest_report")


@extend_schema_serializer(component_name="TraceUploadBatchItem")
class UploadBatchItemSerializer(serializers.Serializer):
    """One file of a multi-file upload: stored (``trace``), refused (``error_code``,
    ``message``), or a companion stored with the trace ``input_of`` names, ``input_as``
    saying what it is to that trace in its format's words (as the upload page does)."""

    filename = serializers.CharField()
    trace = TraceUploadOutputSerializer(allow_null=True)
    input_of = serializers.CharField(allow_null=True)
    input_as = serializers.CharField(allow_null=True)
    error_code = serializers.CharField(allow_null=True)
    message = serializers.CharField(allow_null=True)


@extend_schema_serializer(component_name="TraceUploadBatchOutput")
class UploadBatchSerializer(serializers.Serializer):
    results = UploadBatchItemSerializer(many=True)


class TraceUploadApi(APIView):
    """Upload and store files of any format the console reads: multipart `file` (with an
    AHD sidecar, its token and brief as `inputs`; with a MACE log, its snapshot files), or the
    raw bytes with `?filename=`. Several `file` parts are one upload, as a drop on the upload
    page: each trace is stored with its companions, grouped by the formats' own rules
    (`replay.services.trace_upload_batch`, the page's service); the explicit `inputs` and
    `contract` go with every trace, ahead of the grouped ones. One `file` answers its trace;
    several, `{"results": [...]}`, one per file."""

    parser_classes = (MultiPartParser, OctetStreamParser)

    OutputSerializer = TraceUploadOutputSerializer  # one component, in one file or many

    @extend_schema(
        operation_id="traces_upload",
        request=UPLOAD_BODY,
        parameters=[FILENAME_PARAMETER],
        responses={
            201: PolymorphicProxySerializer(
                component_name="TraceUploadCreated",
                serializers=[OutputSerializer, UploadBatchSerializer],
                resource_type_field_name=None,
            ),
            200: PolymorphicProxySerializer(
                component_name="TraceUploadFound",
                serializers=[OutputSerializer, UploadBatchSerializer],
                resource_type_field_name=None,
            ),
            413: ErrorOutput,
            **ERRORS,
        },
    )
    def post(self, request: Request) -> Response:
        roles.require(request.user, roles.UPLOAD)
        source, filename = uploaded_file(request)
        parts = request.FILES.getlist("file") if request.FILES else []
        if len(parts) > 1:
            return self._batch(request, parts)
        if parts:  # one multipart file: the same upload path, its refusal the answer
            [outcome] = [
                o
                for o in trace_upload_batch(
                    files=[(filename, source)],
                    uploaded_by=request.user,
                    inputs=uploaded_inputs(request),
                    contract=uploaded_contract(request),
                )
                if o.filename == filename
            ]
            if outcome.error is not None:
                raise outcome.error
            assert outcome.result is not None
            result = outcome.result
        else:
            result = trace_ingest(source=source, filename=filename, uploaded_by=request.user)
        trace = result.trace
        traces_mark_replayable([trace])
        trace.created = result.created  # type: ignore[attr-defined]
        code = status.HTTP_201_CREATED if result.created else status.HTTP_200_OK
        return Response(self.OutputSerializer(trace).data, status=code)

    def _batch(self, request: Request, parts: list[Any]) -> Response:
        files = [(os.path.basename(p.name or "upload"), p) for p in parts]
        outcomes = trace_upload_batch(
            files=files,
            uploaded_by=request.user,
            inputs=uploaded_inputs(request),
            contract=uploaded_contract(request),
        )
        traces = [o.result.trace for o in outcomes if o.result is not None]
        traces_mark_replayable(traces)
        results = []
        for o in outcomes:
            trace = None
            if o.result is not None:
                o.result.trace.created = o.result.created  # type: ignore[attr-defined]
                trace = TraceUploadOutputSerializer(o.result.trace).data
            results.append(
                {
                    "filename": o.filename,
                    "trace": trace,
                    "input_of": o.input_of or None,
                    "input_as": o.input_as or None,
                    "error_code": o.error.code if o.error is not None else None,
                    "message": o.error.message if o.error is not None else None,
                }
            )
        created = any(o.result is not None and o.result.created for o in outcomes)
        code = status.HTTP_201_CREATED if created else status.HTTP_200_OK
        return Response({"results": results}, status=code)


def _otel_value_valid(value: str) -> None:
    """No control or invisible character (the length: ``max_length``; a NUL: the field's
    own refusal), as the page's form (``console.forms.otel_value_valid``)."""
    problem = None if "\x00" in value else otel_facts.invisible(value)
    if problem is not None:
        raise serializers.ValidationError(f"not a value a trace holds: {problem}")


def _otel_filter(name: str) -> serializers.CharField:
    """An OpenTelemetry filter of the list (the page's: ``OTEL_LABELS``)."""
    _label, matches = OTEL_LABELS[name]
    return serializers.CharField(
        required=False,
        max_length=otel_facts.MAX_VALUE,
        validators=[_otel_value_valid],
        help_text=f"OpenTelemetry traces holding {matches}, in any span; combines with "
        "the other filters (every one given must hold)",
    )


class TraceListApi(APIView):
    """Traces newest first (or in ``?sort=``'s order), with filters and cursor pagination."""

    @extend_schema_serializer(component_name="TraceListFilter")
    class FilterSerializer(serializers.Serializer):
        format = serializers.CharField(required=False, max_length=32)
        verdict = serializers.ChoiceField(
            choices=[*Trace.Status.values, *VERDICT_ALIASES], required=False
        )
        replayable = serializers.BooleanField(required=False, allow_null=True, default=None)
        date_from = serializers.DateField(required=False)
        date_to = serializers.DateField(required=False)
        q = serializers.CharField(
            required=False,
            max_length=255,
            help_text="an exact trace or job id, an uploader's user name, or a part of a file "
            "name (three characters or more)",
        )
        service = _otel_filter("service")
        model = _otel_filter("model")
        operation = _otel_filter("operation")
        conversation = _otel_filter("conversation")
        agent = _otel_filter("agent")
        cursor = serializers.CharField(required=False, max_length=512)
        limit = serializers.IntegerField(required=False, min_value=1, max_value=MAX_PAGE_SIZE)
        sort = serializers.CharField(
            required=False,
            max_length=32,
            help_text=f"one of {', '.join(SORT_CHOICES)} (``-``: descending); "
            f"default {SORT_DEFAULT}; a cursor keeps the sort it was made for",
        )

        def validate_sort(self, value: str) -> str:
            try:
                sort_parse(value)
            except SortError as exc:
                raise serializers.ValidationError(str(exc)) from None
            return value

    @extend_schema_serializer(component_name="TraceListOutput")
    class OutputSerializer(serializers.Serializer):
        results = TraceOutput(many=True)
        next = serializers.CharField(allow_null=True)
        previous = serializers.CharField(allow_null=True)

    @extend_schema(
        operation_id="traces_list",
        parameters=[FilterSerializer],
        responses={200: OutputSerializer, **ERRORS},
    )
    def get(self, request: Request) -> Response:
        roles.require(request.user, roles.BROWSE)
        params = self.FilterSerializer(data=request.query_params)
        params.is_valid(raise_exception=True)
        data = params.validated_data
        filters = TraceFilters(
            format=data.get("format", ""),
            verdict=VERDICT_ALIASES.get(data.get("verdict", ""), data.get("verdict", "")),
            replayable=data.get("replayable"),
            date_from=data.get("date_from"),
            date_to=data.get("date_to"),
            q=data.get("q", "").strip(),
            **{name: data.get(name, "") for name in OTEL_FILTERS},
        )
        try:
            page = trace_page(
                filters=filters,
                cursor=data.get("cursor"),
                limit=data.get("limit"),
                sort=data.get("sort"),
            )
        except CursorError:
            raise ApiError(
                INVALID_INPUT, "invalid cursor", 400, fields={"cursor": ["invalid"]}
            ) from None

        def link(cursor: str | None) -> str | None:
            if cursor is None:
                return None
            query = request.query_params.copy()
            query["cursor"] = cursor
            return request.build_absolute_uri("?" + query.urlencode())

        body = {
            "results": TraceOutput(page.traces, many=True).data,
            "next": link(page.next_cursor),
            "previous": link(page.prev_cursor),
        }
        return Response(body)


class TraceRunOutput(RunOutput):
    verdict_effect = serializers.CharField(
        help_text="what this run does to the trace's verdict (core/replay/verdicts.py)"
    )


class TraceDetailApi(APIView):
    @extend_schema_serializer(component_name="TraceDetailOutput")
    class OutputSerializer(TraceOutput):
        missing = serializers.ListField(child=serializers.CharField())
        ingest_report = serializers.JSONField()
        required_snapshots = serializers.JSONField(source="required_snapshot_ids")
        verdict_run = serializers.UUIDField(
            allow_null=True,
            help_text="the run the verdict comes from; null: the verification at upload",
        )
        runs = TraceRunOutput(many=True, source="recent_runs")
        expired_at = serializers.DateTimeField(
            allow_null=True,
            help_text="when retention expired the file (its content is gone, its hashes stay)",
        )
        expiry_rule = serializers.CharField(help_text="the retention rule that expired it")

    @extend_schema(operation_id="traces_retrieve", responses={200: OutputSerializer, **ERRORS})
    def get(self, request: Request, trace_ref: str) -> Response:
        """A stored trace by the sha256 of its file, or by trace id (the newest copy)."""
        trace = roles.access_trace_by_id(request.user, trace_ref, roles.BROWSE)
        traces_mark_replayable([trace])
        trace.missing = trace_missing(trace)  # type: ignore[attr-defined]
        runs = runs_for_trace(trace)
        basis = trace_verdict_basis(trace, runs)
        trace.verdict_run = basis.run.id if basis.run else None  # type: ignore[attr-defined]
        trace.recent_runs = runs[:50]  # type: ignore[attr-defined]
        return Response(self.OutputSerializer(trace).data)


NOT_OTEL = "{ref} is {label} ({fmt}): only an OpenTelemetry GenAI trace has a normalised record"


class TraceRecordApi(APIView):
    @extend_schema(
        operation_id="traces_record",
        responses={200: OpenApiTypes.OBJECT, **ERRORS},
    )
    def get(self, request: Request, trace_ref: str) -> Response:
        """An OpenTelemetry GenAI trace's sealed record (docs/otel.md): every span normalised,
        its seal; personal values masked as on every page (``manage.py otel record`` prints
        the stored bytes themselves)."""
        trace = roles.access_trace_by_id(request.user, trace_ref, roles.BROWSE)
        fmt = formats().get(trace.format)
        if trace.format != "otel-genai" or fmt is None:
            raise ApiError(
                INVALID_INPUT,
                NOT_OTEL.format(
                    ref=trace_ref, label=getattr(fmt, "label", "a file"), fmt=trace.format
                ),
                400,
            )
        with blob_open(trace.blob.storage_name) as fh:
            record = fmt.parse(fh, trace.filename, VerifyContext())
        return Response(mask_deep(record.document, trace_personal_texts(trace.pk)))
