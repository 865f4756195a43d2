"""The real-client harness works: the fake OpenAI server, the capture server, the clients'
virtualenv, and each instrumentation's run exporting over OTLP/HTTP (protobuf and JSON, gzip on
and off, batched and one span per request), and the golden fixtures made with it are whole.

The runs are real: openai, the instrumentation and the SDK's exporters in their own virtualenv
(tests/otel/clients/), one subprocess per run (~1-2 s each).
"""

from __future__ import annotations

import gzip
import json
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import pytest

from tests.otel.clients import fake_openai as fake
from tests.otel.clients.harness import (
    REQUIREMENTS,
    ClientsUnavailable,
    converse,
    ensure_clients_venv,
    requirements_hash,
    same_export,
)

FIXTURES = Path(__file__).resolve().parent / "fixtures"

#: the scope of each instrumentation's model-call spans, and their name
MODEL_CALL = {
    "openai-v2": ("opentelemetry.util.genai.handler", "chat gpt-4o-mini"),
    "openinference": ("openinference.instrumentation.openai", "ChatCompletion"),
    "openllmetry": ("opentelemetry.instrumentation.openai.v1", "openai.chat"),
}
OURS = ["execute_tool get_weather", "invoke_agent weather-agent"]


def post(url: str, body: bytes, headers: dict[str, str]) -> tuple[int, dict[str, str], bytes]:
    request = urllib.request.Request(url, data=body, headers=headers, method="POST")  # noqa: S310
    try:
        with urllib.request.urlopen(request, timeout=10) as response:  # noqa: S310
            return response.status, dict(response.headers), response.read()
    except urllib.error.HTTPError as error:
        with error:
            return error.code, dict(error.headers), error.read()


def spans_of(otlp_json: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    """(scope name, span) of every span of an OTLP JSON body, in order."""
    return [
        (scope_spans.get("scope", {}).get("name", ""), span)
        for resource_spans in otlp_json["resourceSpans"]
        for scope_spans in resource_spans["scopeSpans"]
        for span in scope_spans["spans"]
    ]


def attribute(span: dict[str, Any], key: str) -> Any:
    """The plain value of one attribute of an OTLP JSON span, or None."""
    for item in span.get("attributes", []):
        if item["key"] == key:
            (value,) = item["value"].values()
            return value
    return None


# --- the two servers, in this process ---------------------------------------------------------


def ask(server: fake.FakeOpenAI, body: dict[str, Any]) -> tuple[int, bytes]:
    status, _, data = post(
        f"{server.base_url}/chat/completions",
        json.dumps(body).encode(),
        {"Content-Type": "application/json"},
    )
    return status, data


def test_the_fake_server_asks_for_the_tool_then_answers_and_records_each_request(fake_openai):
    first = {"model": "m", "messages": [{"role": "user", "content": "Weather in Paris?"}]}
    status, data = ask(fake_openai, first)
    assert status == 200
    choice = json.loads(data)["choices"][0]
    assert choice["finish_reason"] == "tool_calls"
    (call,) = choice["message"]["tool_calls"]
    assert call["id"] == fake.TOOL_CALL_ID
    assert (call["function"]["name"], json.loads(call["function"]["arguments"])) == (
        "get_weather",
        {"city": "Paris"},
    )

    tool = {"role": "tool", "tool_call_id": fake.TOOL_CALL_ID, "content": '{"t": 18}'}
    second = {**first, "messages": [*first["messages"], choice["message"], tool]}
    status, data = ask(fake_openai, second)
    answer = json.loads(data)
    assert answer["choices"][0]["message"]["content"] == fake.FINAL_TEXT
    assert answer["choices"][0]["finish_reason"] == "stop"
    assert answer["usage"]["total_tokens"] == sum(fake.USAGE["final"])
    assert fake_openai.bodies == [first, second]
    assert ask(fake_openai, {"no": "messages"})[0] == 400
    assert fake_openai.bodies == [first, second]


def test_the_fake_server_streams_the_same_answers(fake_openai):
    body = {"messages": [{"role": "user", "content": "?"}], "stream": True}
    status, data = ask(fake_openai, {**body, "stream_options": {"include_usage": True}})
    assert status == 200
    events = [line.removeprefix("data: ") for line in data.decode().split("\n\n") if line]
    assert events[-1] == "[DONE]"
    chunks = [json.loads(e) for e in events[:-1]]
    arguments = "".join(
        call["function"].get("arguments", "")
        for chunk in chunks
        for choice in chunk["choices"]
        for call in choice["delta"].get("tool_calls", [])
    )
    assert arguments == fake.TOOL_ARGUMENTS
    assert chunks[-1]["choices"] == []
    assert chunks[-1]["usage"]["prompt_tokens"] == fake.USAGE["tool_call"][0]


def test_the_capture_server_keeps_bodies_gunzipped_and_answers_in_their_encoding(otlp_capture):
    proto = b"\x0a\x02\x0a\x00"  # any bytes: the server decodes nothing
    status, headers, answer = post(
        otlp_capture.base_url + "/otlp/v1/traces",
        gzip.compress(proto),
        {"Content-Type": "application/x-protobuf", "Content-Encoding": "gzip"},
    )
    assert (status, headers["Content-Type"], answer) == (200, "application/x-protobuf", b"")
    status, headers, answer = post(
        otlp_capture.traces_url, b'{"resourceSpans": []}', {"Content-Type": "application/json"}
    )
    assert (status, headers["Content-Type"], answer) == (200, "application/json", b"{}")
    assert post(otlp_capture.base_url + "/v1/logs", b"", {})[0] == 404

    first, second = otlp_capture.captures
    assert (first.body, first.encoding, first.path) == (proto, "gzip", "/otlp/v1/traces")
    assert second.json() == {"resourceSpans": []}
    assert second.raw == second.body
    stored = otlp_capture.directory
    assert (stored / "001.bin").read_bytes() == proto
    assert json.loads((stored / "002.json").read_text()) == {"resourceSpans": []}
    assert json.loads((stored / "001.meta.json").read_text())["content_encoding"] == "gzip"


# --- the golden fixtures --------------------------------------------------------------------


def test_every_fixture_file_is_in_the_manifest_and_each_set_in_the_readme():
    manifest = json.loads((FIXTURES / "manifest.json").read_text())
    readme = (FIXTURES / "README.md").read_text()
    listed = set()
    for name, entry in manifest["sets"].items():
        assert f"`{name}`" in readme, name
        listed.update(entry["files"])
        listed.add(entry["seen"])
        seen = json.loads((FIXTURES / entry["seen"]).read_text())
        assert [request["path"] for request in seen] == ["/v1/chat/completions"] * 2
        (tool_message,) = [m for m in seen[1]["body"]["messages"] if m["role"] == "tool"]
        assert tool_message["tool_call_id"] == fake.TOOL_CALL_ID
    assert all((FIXTURES / name).is_file() for name in listed)
    # every body and record of what the server saw is one of a set (other files may join them)
    captured = [p.name for p in FIXTURES.iterdir() if p.suffix == ".bin" or "-json" in p.name]
    captured += [p.name for p in FIXTURES.glob("*.seen.json")]
    assert set(captured) <= listed
    pinned = dict(
        line.split("==")
        for line in REQUIREMENTS.read_text().splitlines()
        if "==" in line and not line.startswith("#")
    )
    assert manifest["versions"] == {name: pinned[name] for name in manifest["versions"]}
    assert set(manifest["versions"]) == set(pinned)


# --- real clients ---------------------------------------------------------------------------


def test_the_clients_venv_has_the_pinned_versions(otel_clients):
    installed = {name.lower(): version for name, version in otel_clients.versions().items()}
    for line in REQUIREMENTS.read_text().splitlines():
        if "==" in line and not line.startswith("#"):
            name, version = line.split("==")
            assert installed[name.lower()] == version, name
    assert (otel_clients.path / ".complete").exists()


def test_a_build_that_fails_says_why_and_leaves_nothing_half_built(tmp_path):
    requirements = tmp_path / "requirements.txt"
    requirements.write_text("this is not a requirement ===\n")  # pip refuses it before any download
    with pytest.raises(ClientsUnavailable, match="exited"):
        ensure_clients_venv(var=tmp_path / "var", requirements=requirements)
    assert not (tmp_path / "var" / requirements_hash(requirements)).exists()


@pytest.mark.parametrize("instrumentation", [*MODEL_CALL, "none"])
def test_each_instrumentation_exports_one_trace_as_protobuf_and_as_json(
    otel_clients, instrumentation
):
    run = converse(
        otel_clients, instrumentation, exporter="both", headers={"Authorization": "Bearer t0k"}
    )
    assert run.summary["answer"] == fake.FINAL_TEXT
    assert [e["result"] for e in run.summary["exports"]] == ["SUCCESS", "SUCCESS"]
    assert len(run.seen) == 2
    assert sorted(c.content_type for c in run.captures) == [
        "application/json",
        "application/x-protobuf",
    ]
    for capture in run.captures:
        assert capture.path == "/v1/traces"
        assert capture.encoding == "gzip"
        assert gzip.decompress(capture.raw) == capture.body
        assert capture.headers["authorization"] == "Bearer t0k"
    (proto,), (json_body,) = run.bodies("proto"), run.bodies("json")
    # one tracer provider, two exporters: the same spans in either encoding
    assert same_export(otel_clients, proto, json_body)

    spans = spans_of(json.loads(json_body))
    assert {span["traceId"] for _, span in spans} == {run.summary["trace_id"]}
    if instrumentation == "none":
        assert [span["name"] for _, span in spans] == OURS
        return
    scope, name = MODEL_CALL[instrumentation]
    assert sorted(span["name"] for _, span in spans) == sorted([name, name, *OURS])
    assert [s for s, span in spans if span["name"] == name] == [scope, scope]


def test_without_gzip_the_bodies_go_as_they_are(otel_clients):
    run = converse(otel_clients, "openai-v2", exporter="both", gzip=False)
    assert len(run.captures) == 2
    for capture in run.captures:
        assert capture.encoding == ""
        assert capture.raw == capture.body


def _messages_of(span: dict[str, Any], key: str) -> list[dict[str, Any]] | None:
    value = attribute(span, key)
    return None if value is None else json.loads(value)


def test_with_content_the_spans_hold_the_messages_the_server_saw_and_without_none(otel_clients):
    run = converse(otel_clients, "openai-v2", exporter="json")
    spans = [span for _, span in spans_of(run.captures[0].json())]
    chats = [span for span in spans if span["name"] == "chat gpt-4o-mini"]
    assert len(chats) == 2
    for chat, request in zip(chats, run.seen, strict=True):
        sent = request["body"]["messages"]
        recorded = _messages_of(chat, "gen_ai.input.messages")
        assert [m["role"] for m in recorded] == [m["role"] for m in sent]
        for message, part in zip(sent, (m["parts"][0] for m in recorded), strict=True):
            if message["role"] == "tool":
                assert part == {
                    "type": "tool_call_response",
                    "id": message["tool_call_id"],
                    "response": message["content"],
                }
            elif message.get("tool_calls"):
                function = message["tool_calls"][0]["function"]
                assert (part["type"], part["name"]) == ("tool_call", function["name"])
                assert part["arguments"] == json.loads(function["arguments"])
            else:
                assert part == {"type": "text", "content": message["content"]}
    (tool,) = [span for span in spans if span["name"] == "execute_tool get_weather"]
    assert attribute(tool, "gen_ai.tool.call.arguments") == fake.TOOL_ARGUMENTS
    tool_message = run.seen[1]["body"]["messages"][-1]
    assert attribute(tool, "gen_ai.tool.call.result") == tool_message["content"]

    quiet = converse(otel_clients, "openai-v2", exporter="json", content=False)
    keys = {
        item["key"] for _, span in spans_of(quiet.captures[0].json()) for item in span["attributes"]
    }
    assert "gen_ai.usage.input_tokens" in keys
    assert not keys & {
        "gen_ai.input.messages",
        "gen_ai.output.messages",
        "gen_ai.tool.call.arguments",
        "gen_ai.tool.call.result",
    }


def test_one_by_one_sends_each_span_alone_children_first(otel_clients):
    run = converse(otel_clients, "openai-v2", exporter="json", one_by_one=True)
    per_request = [spans_of(capture.json()) for capture in run.captures]
    assert [len(spans) for spans in per_request] == [1, 1, 1, 1]
    names = [spans[0][1]["name"] for spans in per_request]
    assert names == ["chat gpt-4o-mini", *OURS[:1], "chat gpt-4o-mini", *OURS[1:]]
    root = per_request[-1][0][1]
    assert root.get("parentSpanId", "") == ""
    assert {s[0][1]["parentSpanId"] for s in per_request[:-1]} == {root["spanId"]}


def test_streamed_answers_are_traced_too(otel_clients):
    run = converse(otel_clients, "openllmetry", stream=True)
    assert run.summary["answer"] == fake.FINAL_TEXT
    assert [request["body"]["stream"] for request in run.seen] == [True, True]
    assert len(run.bodies("proto")) == 1


def test_a_refused_export_makes_the_client_exit_3(otel_clients):
    run = converse(otel_clients, "none", status=400, check=False)
    assert run.returncode == 3
    assert [e["result"] for e in run.summary["exports"]] == ["FAILURE"]
    assert len(run.captures) == 1
