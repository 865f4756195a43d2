"""The real clients against the running console: the OpenTelemetry SDK's own OTLP/HTTP
exporters (protobuf and JSON, gzip on and off) and three real instrumentations of the
``openai`` client (the official openai-v2, OpenInference, OpenLLMetry), each in its own
process, tracing one conversation with a tool call against the fake OpenAI server and
exporting to ``<console>/otlp/v1/traces`` with an API token. Each run lands as one trace
whose sealed record holds exactly the messages and tool call the fake server saw."""

from __future__ import annotations

import json

import pytest

from governance.services import api_token_create
from otel.models import OtelSpan, OtelTrace, OtlpBody
from otel.services import otel_seal
from tests.console.personas import persona
from tests.otel.clients.harness import run_client
from tests.otel.helpers import as_parts, record_of, seen_parts

pytestmark = [pytest.mark.usefixtures("flushable_transactional_db"), pytest.mark.slow]


@pytest.fixture
def endpoint(live_server):
    _row, token = api_token_create(user=persona("oscar"))
    return f"{live_server.url}/otlp/v1/traces", {"Authorization": f"Bearer {token}"}


RUNS = [
    pytest.param("openai-v2", {"exporter": "proto", "gzip": True}, id="openai-v2-proto-gzip"),
    pytest.param("openai-v2", {"exporter": "json", "gzip": False}, id="openai-v2-json-plain"),
    pytest.param("openai-v2", {"exporter": "json", "gzip": True}, id="openai-v2-json-gzip"),
    pytest.param("openinference", {"exporter": "proto", "gzip": False}, id="openinference"),
    pytest.param("openllmetry", {"exporter": "proto", "gzip": True}, id="openllmetry"),
    pytest.param("openai-v2", {"one_by_one": True}, id="openai-v2-one-by-one"),
]


@pytest.mark.parametrize(("instrumentation", "options"), RUNS)
def test_a_real_client_lands_as_one_trace_holding_what_the_model_saw(
    otel_clients, fake_openai, endpoint, instrumentation, options
):
    url, headers = endpoint
    run = run_client(
        otel_clients, instrumentation, url, fake_openai.base_url, headers=headers, **options
    )
    assert run.summary["flushed"] is True
    trace_id = run.summary["trace_id"]
    assert all(e["result"] == "SUCCESS" for e in run.summary["exports"]), run.summary["exports"]
    assert OtelTrace.objects.filter(trace_id=trace_id).exists()
    if options.get("one_by_one"):
        assert OtlpBody.objects.count() == 4  # one request a span
    assert OtelSpan.objects.filter(trace_id=trace_id).count() == 4
    trace = otel_seal(trace_id=trace_id)
    assert trace.last_status == "ok", trace.ingest_report
    record = record_of(trace)
    calls = [s for s in record["spans"] if s["input_messages"] is not None]
    seen = fake_openai.bodies
    assert len(calls) == len(seen) == 2
    for call, body in zip(calls, seen, strict=True):
        assert [as_parts(m) for m in call["input_messages"]] == [
            seen_parts(m) for m in body["messages"]
        ]
    (tool,) = [s["tool"] for s in record["spans"] if s["tool"]]
    asked = seen[1]["messages"][2]["tool_calls"][0]
    assert (tool["name"], tool["call_id"]) == (asked["function"]["name"], asked["id"])
    assert tool["arguments"] == json.loads(asked["function"]["arguments"])
    assert tool["result"] == json.loads(seen[1]["messages"][3]["content"])


def test_a_run_without_content_lands_for_the_structural_audit(otel_clients, fake_openai, endpoint):
    url, headers = endpoint
    run = run_client(
        otel_clients, "openai-v2", url, fake_openai.base_url, headers=headers, content=False
    )
    trace = otel_seal(trace_id=run.summary["trace_id"])
    assert trace.last_status == "ok"
    assert record_of(trace)["content"] == "none"


def test_an_exporter_without_a_token_is_refused_and_nothing_is_stored(
    otel_clients, fake_openai, live_server
):
    url = f"{live_server.url}/otlp/v1/traces"
    run = run_client(otel_clients, "none", url, fake_openai.base_url, check=False)
    assert run.returncode == 3  # run_client.py: an export failed
    assert {e["result"] for e in run.summary["exports"]} == {"FAILURE"}
    assert OtlpBody.objects.count() == 0
