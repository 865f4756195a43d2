"""POST /otlp/v1/traces: what an exporter gets back for each kind of body, what is stored (the
body by its digest, its OTLP_RECEIVED event, its spans), and what is never half-stored."""

from __future__ import annotations

import gzip
import hashlib
import json

import pytest
from django.test import Client
from opentelemetry.proto.collector.trace.v1 import trace_service_pb2
from opentelemetry.proto.common.v1 import common_pb2
from opentelemetry.proto.resource.v1 import resource_pb2
from opentelemetry.proto.trace.v1 import trace_pb2

from core.ledger import codes
from governance.models import GovernanceEvent
from governance.services import api_token_create
from otel.models import OtelSpan, OtelTrace, OtlpBody, OtlpBodyDone
from tests.console.personas import BY_ROLE, persona

pytestmark = pytest.mark.django_db

TRACE_ID = bytes.fromhex("5b8efff798038103d269b633813fc60c")
PROTOBUF = "application/x-protobuf"
JSON = "application/json"


def _kv(key: str, value: str | int) -> common_pb2.KeyValue:
    if isinstance(value, int):
        return common_pb2.KeyValue(key=key, value=common_pb2.AnyValue(int_value=value))
    return common_pb2.KeyValue(key=key, value=common_pb2.AnyValue(string_value=value))


def span(
    span_id: int,
    parent: int | None = None,
    *,
    name: str = "chat gpt-4o",
    start: int = 0,
    end: int = 10,
    attrs: dict[str, str | int] | None = None,
) -> trace_pb2.Span:
    return trace_pb2.Span(
        trace_id=TRACE_ID,
        span_id=span_id.to_bytes(8, "big"),
        parent_span_id=parent.to_bytes(8, "big") if parent is not None else b"",
        name=name,
        kind=trace_pb2.Span.SPAN_KIND_CLIENT,
        start_time_unix_nano=1_700_000_000_000_000_000 + start,
        end_time_unix_nano=1_700_000_000_000_000_000 + end,
        attributes=[_kv(k, v) for k, v in (attrs or {}).items()],
    )


def request_of(*spans: trace_pb2.Span) -> bytes:
    message = trace_service_pb2.ExportTraceServiceRequest(
        resource_spans=[
            trace_pb2.ResourceSpans(
                resource=resource_pb2.Resource(attributes=[_kv("service.name", "weather-agent")]),
                scope_spans=[trace_pb2.ScopeSpans(spans=list(spans))],
            )
        ]
    )
    return message.SerializeToString()


def token_of(name: str) -> str:
    _row, token = api_token_create(user=persona(name))
    return token


@pytest.fixture
def token() -> str:
    return token_of("alice")


@pytest.fixture
def post(django_capture_on_commit_callbacks):
    """POST a body to the receiver; what the request queues on commit runs when it would
    (tasks are inline here)."""

    def send(body: bytes, token: str | None, *, content_type: str = PROTOBUF, **headers: str):
        extra = {f"HTTP_{k.upper().replace('-', '_')}": v for k, v in headers.items()}
        if token is not None:
            extra["HTTP_AUTHORIZATION"] = f"Bearer {token}"
        with django_capture_on_commit_callbacks(execute=True):
            return Client().post("/otlp/v1/traces", body, content_type=content_type, **extra)

    return send


def response_of(data: bytes) -> trace_service_pb2.ExportTraceServiceResponse:
    message = trace_service_pb2.ExportTraceServiceResponse()
    message.ParseFromString(data)
    return message


def test_a_protobuf_export_is_stored_with_its_event_and_read_into_spans(token, post):
    body = request_of(span(1, name="invoke_agent weather", end=100), span(2, 1, start=5, end=50))
    response = post(body, token)
    assert response.status_code == 200
    assert response["Content-Type"] == PROTOBUF
    assert not response_of(response.content).HasField("partial_success")
    sha = hashlib.sha256(body).hexdigest()
    row = OtlpBody.objects.get()
    assert (row.sha256, row.size, row.span_count, row.content_type) == (sha, len(body), 2, PROTOBUF)
    event = GovernanceEvent.objects.get(seq=row.event_seq)
    assert event.type == codes.OTLP_RECEIVED
    assert event.payload["body_sha256"] == sha
    assert event.payload["trace_ids"] == [TRACE_ID.hex()]
    assert event.actor_id == persona("alice").pk
    assert OtlpBodyDone.objects.get(body=row).new_spans == 2  # read at once (tasks inline)
    assert sorted(OtelSpan.objects.values_list("span_id", flat=True)) == [
        "0000000000000001",
        "0000000000000002",
    ]
    state = OtelTrace.objects.get(trace_id=TRACE_ID.hex())
    assert (state.open, state.root_ended, state.span_count, state.service) == (
        True,
        True,
        2,
        "weather-agent",
    )


def test_the_same_body_twice_stores_nothing_new(token, post):
    body = request_of(span(1))
    assert post(body, token).status_code == 200
    before = GovernanceEvent.objects.count()
    again = post(body, token)
    assert again.status_code == 200
    assert OtlpBody.objects.count() == 1
    assert OtelSpan.objects.count() == 1
    assert GovernanceEvent.objects.count() == before


def test_gzip_is_undone_and_the_digest_is_of_the_body_itself(token, post):
    body = request_of(span(1))
    response = post(gzip.compress(body), token, content_encoding="gzip")
    assert response.status_code == 200
    assert OtlpBody.objects.get().sha256 == hashlib.sha256(body).hexdigest()


def test_without_a_token_401_and_a_role_that_may_not_upload_403(post):
    body = request_of(span(1))
    missing = post(body, None)
    assert missing.status_code == 401
    assert missing["WWW-Authenticate"].startswith("Bearer")
    assert post(body, "rac_not-a-token").status_code == 401
    for role, name in BY_ROLE.items():
        status = post(body, token_of(name)).status_code
        # upload: auditor, operator, admin; a token never carries admin (a second factor)
        assert status == (200 if role in ("auditor", "operator") else 403), role
    assert OtlpBody.objects.count() == 1  # alice's and oscar's: one body, stored once


def test_another_content_type_is_415_and_another_method_405(token, post):
    response = post(b"{}", token, content_type="text/plain")
    assert response.status_code == 415
    assert json.loads(response.content)["error_code"] == "UNSUPPORTED_MEDIA_TYPE"
    got = Client().get("/otlp/v1/traces", HTTP_AUTHORIZATION=f"Bearer {token}")
    assert got.status_code == 405
    assert got["Allow"] == "POST"
    assert OtlpBody.objects.count() == 0


def test_a_body_that_does_not_parse_is_400_and_stores_nothing(token, post):
    response = post(b"\xff\xff\xff\xff not protobuf", token)
    assert response.status_code == 400
    assert response["Content-Type"] == PROTOBUF
    events = GovernanceEvent.objects.count()
    bad_json = post(b'{"resourceSpans": [', token, content_type=JSON)
    assert bad_json.status_code == 400
    assert json.loads(bad_json.content)["code"] == 3
    assert OtlpBody.objects.count() == 0
    assert GovernanceEvent.objects.count() == events


def test_oversized_bodies_are_413_as_sent_and_once_inflated(token, settings, post):
    settings.REPLAY_OTLP_MAX_BODY_BYTES = 1000
    settings.REPLAY_OTLP_MAX_DECODED_BYTES = 4000
    big = post(b"\0" * 1001, token)
    assert big.status_code == 413
    bomb = gzip.compress(b"\0" * 500_000)  # 500 KB of zeros in under 1 KB
    assert len(bomb) < 1000
    inflated = post(bomb, token, content_encoding="gzip")
    assert inflated.status_code == 413
    assert OtlpBody.objects.count() == 0


def test_json_export_gives_a_json_answer_naming_rejected_spans(token, post):
    good = {
        "traceId": TRACE_ID.hex(),
        "spanId": "00000000000000aa",
        "name": "chat",
        "kind": 3,
        "startTimeUnixNano": "1700000000000000000",
        "endTimeUnixNano": "1700000000000000100",
    }
    bad = {**good, "spanId": "0000000000000000"}  # hex, but the invalid all-zero id
    body = json.dumps(
        {"resourceSpans": [{"resource": {}, "scopeSpans": [{"spans": [good, bad]}]}]}
    ).encode()
    response = post(body, token, content_type=JSON)
    assert response.status_code == 200, response.content
    answer = json.loads(response.content)
    assert answer["partialSuccess"]["rejectedSpans"] in (1, "1")
    assert answer["partialSuccess"]["errorMessage"]
    assert OtelSpan.objects.get().span_id == "00000000000000aa"


def _status_of(response) -> tuple[int, str]:
    """The answer's status and the code its google.rpc.Status message starts with."""
    if response["Content-Type"] == JSON:
        return response.status_code, json.loads(response.content)["error_code"]
    data = response.content
    assert data[0] == 0x08  # field 1, google.rpc.Status.code: a varint
    pos = 2 if data[1] < 0x80 else 3
    assert data[pos] == 0x12  # field 2, the message: its length, a varint, then its bytes
    pos, length, shift = pos + 1, 0, 0
    while True:
        byte = data[pos]
        length |= (byte & 0x7F) << shift
        pos, shift = pos + 1, shift + 7
        if byte < 0x80:
            break
    message = data[pos : pos + length].decode()
    assert pos + length == len(data)
    return response.status_code, message.split(":", 1)[0]


def _nested(depth: int) -> common_pb2.AnyValue:
    value = common_pb2.AnyValue(string_value="bottom")
    for _ in range(depth):
        value = common_pb2.AnyValue(array_value=common_pb2.ArrayValue(values=[value]))
    return value


HOSTILE = {
    "200,000 attributes on one span": lambda: request_of(
        span(1, attrs={f"a{i}": i for i in range(200_000)})
    ),
    "attribute values nested 40 deep": lambda: request_of(
        trace_pb2.Span(
            trace_id=TRACE_ID,
            span_id=(1).to_bytes(8, "big"),
            name="deep",
            attributes=[common_pb2.KeyValue(key="deep", value=_nested(40))],
        )
    ),
    "a truncated body": lambda: request_of(span(1), span(2, 1))[:-7],
}


@pytest.mark.parametrize("case", sorted(HOSTILE))
def test_hostile_protobuf_bodies_are_refused_with_their_code_and_nothing_stored(token, post, case):
    events = GovernanceEvent.objects.count()
    response = post(HOSTILE[case](), token)
    expected = {
        "200,000 attributes on one span": (400, "TOO_MANY_ATTRIBUTES"),
        "attribute values nested 40 deep": (400, "TOO_DEEP"),
        "a truncated body": (400, "BAD_PROTOBUF"),
    }[case]
    assert _status_of(response) == expected
    assert response["Content-Type"] == PROTOBUF
    assert OtlpBody.objects.count() == 0
    assert OtelSpan.objects.count() == 0
    assert GovernanceEvent.objects.count() == events


JSON_CASES = {
    b'{"resourceSpans": [], "resourceSpans": []}': "BAD_JSON",  # a duplicate key
    b'{"resourceSpans": [{"scopeSpans": [{"spans": [{"traceId": "not hex!"}]}]}]}': ("INVALID_ID"),
    b'{"resourceSpans": {"not": "a list"}}': "WRONG_TYPE",
    b'{"resourceSpans": [' + b"[" * 5000 + b"]" * 5000 + b"]}": "TOO_DEEP",
}


@pytest.mark.parametrize("body", sorted(JSON_CASES), ids=lambda b: b[:40].decode())
def test_hostile_json_bodies_are_refused_with_their_code_and_nothing_stored(token, post, body):
    response = post(body, token, content_type=JSON)
    assert _status_of(response) == (400, JSON_CASES[body])
    assert OtlpBody.objects.count() == 0


def test_a_corrupt_or_trailing_gzip_is_refused(token, post):
    body = gzip.compress(request_of(span(1)))
    assert _status_of(post(body[:-9], token, content_encoding="gzip")) == (400, "BAD_GZIP")
    assert _status_of(post(body + b"junk", token, content_encoding="gzip")) == (400, "BAD_GZIP")
    assert _status_of(post(b"plain", token, content_encoding="gzip")) == (400, "BAD_GZIP")
    assert _status_of(post(body, token, content_encoding="br")) == (415, "UNSUPPORTED_MEDIA_TYPE")
    assert OtlpBody.objects.count() == 0
