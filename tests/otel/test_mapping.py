"""core.formats.otel.mapping: one plain span dict -> one normalised span record, driven by what
the three dialects' real emitters wrote (tests/otel/fixtures, captured from the official
OpenTelemetry instrumentation, OpenInference and OpenLLMetry tracing one agent conversation
against a fake OpenAI server), plus the spellings the captured versions no longer write
(the deprecated per-message events, OpenLLMetry's flattened prompts, OpenInference's TOOL
spans), built from those emitters' sources."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from core.canonical import jcs
from core.formats.otel import mapping, otlp

FIXTURES = Path(__file__).parent / "fixtures"
MANIFEST = json.loads((FIXTURES / "manifest.json").read_text())

SYSTEM = "You are a weather assistant. Use the tools you are given."
USER = "What is the weather in Paris?"
CALL_ID = "call_fake_weather_paris"
ARGUMENTS = {"city": "Paris"}
RESULT = {"city": "Paris", "temperature_c": 18, "conditions": "sunny"}
ANSWER = "It is 18 °C and sunny in Paris."
DEFINITION = {
    "type": "function",
    "name": "get_weather",
    "description": "The current weather in a city.",
    "parameters": {
        "type": "object",
        "properties": {"city": {"type": "string"}},
        "required": ["city"],
    },
}


def text(content: str) -> dict[str, Any]:
    return {"type": "text", "content": content}


def call(arguments: Any = ARGUMENTS) -> dict[str, Any]:
    return {"type": "tool_call", "id": CALL_ID, "name": "get_weather", "arguments": arguments}


def response(value: Any = RESULT) -> dict[str, Any]:
    return {"type": "tool_call_response", "id": CALL_ID, "response": value}


FIRST_INPUT = [
    {"role": "system", "parts": [text(SYSTEM)]},
    {"role": "user", "parts": [text(USER)]},
]
SECOND_INPUT = [
    *FIRST_INPUT,
    {"role": "assistant", "parts": [call()]},
    {"role": "tool", "parts": [response()]},
]


def first_output(finish_reason: str, *parts: dict[str, Any]) -> list[dict[str, Any]]:
    return [{"role": "assistant", "parts": [*parts, call()], "finish_reason": finish_reason}]


SECOND_OUTPUT = [{"role": "assistant", "parts": [text(ANSWER)], "finish_reason": "stop"}]


def records(file: str) -> list[dict[str, Any]]:
    kind = otlp.JSON if file.endswith(".json") else otlp.PROTOBUF
    decoded = otlp.decode((FIXTURES / file).read_bytes(), kind)
    return [mapping.span_record(span) for span in decoded.spans]


def by_operation(file: str) -> dict[str, list[dict[str, Any]]]:
    found: dict[str, list[dict[str, Any]]] = {}
    for record in sorted(records(file), key=lambda r: int(r["start_time_unix_nano"])):
        found.setdefault(record["operation"], []).append(record)
    return found


CONTENT_FILES = {
    "openai-v2": ["openai-v2-proto.bin", "openai-v2-json.json", "openai-v2-proto-stream.bin"],
    "openinference": [
        "openinference-proto.bin",
        "openinference-json.json",
        "openinference-proto-stream.bin",
    ],
    "openllmetry": [
        "openllmetry-proto.bin",
        "openllmetry-json.json",
        "openllmetry-proto-stream.bin",
    ],
}
ALL_FILES = sorted(f for entry in MANIFEST["sets"].values() for f in entry["files"])


# --- the captured conversations ---------------------------------------------------------------


@pytest.mark.parametrize("file", CONTENT_FILES["openai-v2"])
def test_official_instrumentation(file):
    spans = by_operation(file)
    first, second = spans["chat"]
    assert first["dialect"] == second["dialect"] == "gen_ai"
    assert first["kind"] == "client"
    assert first["name"] == "chat gpt-4o-mini"
    assert first["scope"] == {
        "name": "opentelemetry.util.genai.handler",
        "version": "1.1b0",
        "attributes": [],
    }
    # the span's own fields, kept whatever they map to
    assert (first["trace_state"], first["flags"]) == ("", 256)
    assert first["schema_url"] == "https://opentelemetry.io/schemas/1.37.0"
    assert first["provider"] == "openai"
    assert first["request_model"] == "gpt-4o-mini"
    assert first["response_model"] == "gpt-4o-mini-2024-07-18"
    assert (first["response_id"], second["response_id"]) == ("chatcmpl-fake-1", "chatcmpl-fake-2")
    assert first["request_parameters"] == {"temperature": 0.2, "max_tokens": 200}
    assert first["input_messages"] == FIRST_INPUT
    # the official instrumentation keeps OpenAI's finish reason: tool_calls
    assert first["output_messages"] == first_output("tool_calls")
    assert first["finish_reasons"] == ["tool_calls"]
    assert first["usage"] == {"input_tokens": 61, "output_tokens": 17, "total_tokens": None}
    assert second["input_messages"] == SECOND_INPUT
    assert second["output_messages"] == SECOND_OUTPUT
    assert second["usage"] == {"input_tokens": 96, "output_tokens": 12, "total_tokens": None}
    assert first["tool_definitions"] is None  # 2.4b0 writes none
    assert first["system_instructions"] is None
    assert first["tool"] is None


@pytest.mark.parametrize("file", CONTENT_FILES["openinference"])
def test_openinference(file):
    spans = by_operation(file)
    first, second = spans["chat"]
    assert first["dialect"] == "openinference"
    assert first["name"] == "ChatCompletion"
    assert first["kind"] == "internal"  # not client
    assert first["status"] == {"code": "ok", "message": ""}
    assert first["provider"] == "openai"  # llm.system
    # llm.model_name is the response's model; the requested one is in llm.invocation_parameters
    assert first["request_model"] == "gpt-4o-mini"
    assert first["response_model"] == "gpt-4o-mini-2024-07-18"
    assert first["response_id"] == "chatcmpl-fake-1"  # only in output.value
    streamed = "stream" in file
    expected_parameters: dict[str, Any] = {"max_tokens": 200, "temperature": 0.2}
    if streamed:
        expected_parameters |= {"stream": True, "stream_options": {"include_usage": True}}
    assert first["request_parameters"] == expected_parameters
    assert first["input_messages"] == FIRST_INPUT
    assert first["output_messages"] == first_output("tool_calls")
    assert first["finish_reasons"] == ["tool_calls"]
    assert first["usage"] == {"input_tokens": 61, "output_tokens": 17, "total_tokens": 78}
    assert first["tool_definitions"] == [DEFINITION]  # OpenAI's spelling, flattened
    assert second["input_messages"] == SECOND_INPUT
    assert second["output_messages"] == SECOND_OUTPUT
    assert second["usage"] == {"input_tokens": 96, "output_tokens": 12, "total_tokens": 108}


@pytest.mark.parametrize("file", CONTENT_FILES["openllmetry"])
def test_openllmetry(file):
    spans = by_operation(file)
    first, second = spans["chat"]
    assert first["dialect"] == "openllmetry"
    assert first["name"] == "openai.chat"
    assert first["kind"] == "client"
    assert first["request_model"] == "gpt-4o-mini"
    assert first["response_model"] == "gpt-4o-mini-2024-07-18"
    assert first["request_parameters"] == {"max_tokens": 200, "temperature": 0.2}
    assert first["input_messages"] == FIRST_INPUT
    # OpenLLMetry maps OpenAI's tool_calls to the conventions' tool_call; streamed, it writes
    # an empty text part before the tool call
    if "stream" in file:
        assert first["output_messages"] == first_output("tool_call", text(""))
    else:
        assert first["output_messages"] == first_output("tool_call")
    assert first["tool_definitions"] == [DEFINITION]  # already the conventions' spelling
    assert first["finish_reasons"] == ["tool_call"]
    assert first["usage"] == {"input_tokens": 61, "output_tokens": 17, "total_tokens": 78}
    assert second["input_messages"] == SECOND_INPUT
    assert second["output_messages"] == SECOND_OUTPUT


@pytest.mark.parametrize("dialect", sorted(CONTENT_FILES))
def test_the_agent_and_tool_spans(dialect):
    for file in CONTENT_FILES[dialect]:
        spans = by_operation(file)
        (tool,) = spans["execute_tool"]
        (agent,) = spans["invoke_agent"]
        assert tool["dialect"] == agent["dialect"] == "gen_ai"
        assert tool["tool"] == {
            "name": "get_weather",
            "call_id": CALL_ID,
            "arguments": ARGUMENTS,  # the JSON string parsed
            "result": RESULT,
        }
        assert tool["input_messages"] is tool["output_messages"] is None
        assert agent["parent_span_id"] is None
        assert tool["parent_span_id"] == agent["span_id"]
        assert agent["agent_name"] == "weather-agent"
        assert agent["conversation_id"].startswith("conv-")
        assert agent["usage"] == {"input_tokens": 157, "output_tokens": 29, "total_tokens": None}
        assert agent["service"] == "otel-test-client"


def test_the_three_dialects_map_one_conversation_to_the_same_messages():
    """Equal but for what the sources really differ in: OpenLLMetry's finish reason
    ``tool_call`` where the official instrumentation and OpenInference keep OpenAI's
    ``tool_calls``, and OpenLLMetry's empty text part before a streamed tool call."""
    conversations = {}
    for files in CONTENT_FILES.values():
        for file in files:
            chats = by_operation(file)["chat"]
            conversations[file] = [(c["input_messages"], c["output_messages"]) for c in chats]
    for file, chats in conversations.items():
        (in1, out1), (in2, out2) = chats
        assert in1 == FIRST_INPUT, file
        assert in2 == SECOND_INPUT, file
        assert out2 == SECOND_OUTPUT, file
        if file.startswith("openllmetry"):
            parts = (text(""),) if "stream" in file else ()
            assert out1 == first_output("tool_call", *parts), file
        else:
            assert out1 == first_output("tool_calls"), file
    # and the tool's execution, its call and the response the model got agree
    for file in conversations:
        spans = by_operation(file)
        tool = spans["execute_tool"][0]["tool"]
        (asked,) = spans["chat"][0]["output_messages"][0]["parts"][-1:]
        given = spans["chat"][1]["input_messages"][3]["parts"][0]
        assert asked["arguments"] == tool["arguments"]
        assert given["response"] == tool["result"]


def openai_to_conventions(message: dict[str, Any]) -> dict[str, Any]:
    """The oracle's own reading of an OpenAI chat message (what the fake server received)."""
    if message["role"] == "tool":
        parts = [
            {
                "type": "tool_call_response",
                "id": message["tool_call_id"],
                "response": json.loads(message["content"]),
            }
        ]
    else:
        parts = [text(message["content"])] if message.get("content") is not None else []
        parts += [
            {
                "type": "tool_call",
                "id": c["id"],
                "name": c["function"]["name"],
                "arguments": json.loads(c["function"]["arguments"]),
            }
            for c in message.get("tool_calls", [])
        ]
    return {"role": message["role"], "parts": parts}


@pytest.mark.parametrize(
    "name",
    [
        "openai-v2",
        "openinference",
        "openllmetry",
        "openai-v2-stream",
        "openinference-stream",
        "openllmetry-stream",
    ],
)
def test_the_input_messages_are_what_the_model_received(name):
    entry = MANIFEST["sets"][name]
    seen = json.loads((FIXTURES / entry["seen"]).read_text())
    chats = by_operation(entry["files"][0])["chat"]
    assert len(chats) == len(seen)
    for chat, request in zip(chats, seen, strict=True):
        assert chat["input_messages"] == [
            openai_to_conventions(m) for m in request["body"]["messages"]
        ]


@pytest.mark.parametrize(
    "file",
    [
        "openai-v2-proto-nocontent.bin",
        "openai-v2-json-nocontent.json",
        "openinference-proto-nocontent.bin",
        "openllmetry-proto-nocontent.bin",
    ],
)
def test_without_content(file):
    spans = by_operation(file)
    for chat in spans["chat"]:
        assert chat["input_messages"] is None
        assert chat["output_messages"] is None
        assert chat["system_instructions"] is None
        assert chat["usage"]["input_tokens"] in (61, 96)
        assert chat["request_model"] == "gpt-4o-mini"
        assert chat["tool_definitions"] is None
    assert spans["chat"][0]["finish_reasons"] in (["tool_calls"], ["tool_call"])
    assert spans["execute_tool"][0]["tool"] == {
        "name": "get_weather",
        "call_id": CALL_ID,
        "arguments": None,
        "result": None,
    }


def test_the_divergent_tool_result_is_recorded_as_each_span_says():
    spans = by_operation("openai-v2-proto-divergent.bin")
    assert spans["execute_tool"][0]["tool"]["result"] == {**RESULT, "temperature_c": 21}
    assert spans["chat"][1]["input_messages"][3] == {"role": "tool", "parts": [response()]}


def test_a_span_sent_alone_maps_as_in_a_batch():
    alone = [r for n in range(1, 5) for r in records(f"openai-v2-proto-onebyone-{n}.bin")]
    assert [r["operation"] for r in alone] == ["chat", "execute_tool", "chat", "invoke_agent"]
    assert alone[0]["input_messages"] == FIRST_INPUT
    assert alone[2]["output_messages"] == SECOND_OUTPUT


@pytest.mark.parametrize("file", ALL_FILES)
def test_nothing_is_lost_and_every_record_is_canonicalisable(file):
    kind = otlp.JSON if file.endswith(".json") else otlp.PROTOBUF
    for span in otlp.decode((FIXTURES / file).read_bytes(), kind).spans:
        original = copy.deepcopy(span)
        record = mapping.span_record(span)
        assert span == original  # the span dict is not changed
        assert record["attributes"] == span["attributes"]
        assert record["events"] == span["events"]
        assert record["links"] == span["links"]
        assert record["resource_attributes"] == span["resource"]["attributes"]
        assert record["dropped"] == {"attributes": 0, "events": 0, "links": 0}
        assert record["span_id"] == span["span_id"]
        assert record["start_time_unix_nano"] == span["start_time_unix_nano"]
        jcs(record)


def test_a_span_that_is_not_a_genai_one():
    record = mapping.span_record(
        plain_span({"http.request.method": "GET"}, kind="SPAN_KIND_SERVER")
    )
    assert record["dialect"] is None
    assert record["kind"] == "server"
    for name in (
        "operation",
        "provider",
        "request_model",
        "input_messages",
        "tool",
        "usage",
        "finish_reasons",
        "tool_definitions",
        "conversation_id",
        "agent_name",
    ):
        assert record[name] is None, name
    assert record["request_parameters"] == {}


# --- the spellings the captured versions no longer write --------------------------------------


def any_value(value: Any) -> dict[str, Any]:
    if value is None:
        return {}
    if isinstance(value, bool):
        return {"boolValue": value}
    if isinstance(value, int):
        return {"intValue": str(value)}
    if isinstance(value, float):
        return {"doubleValue": value}
    if isinstance(value, str):
        return {"stringValue": value}
    if isinstance(value, list):
        return {"arrayValue": {"values": [any_value(v) for v in value]}}
    return {
        "kvlistValue": {"values": [{"key": k, "value": any_value(v)} for k, v in value.items()]}
    }


def attributes(values: dict[str, Any]) -> list[dict[str, Any]]:
    return [{"key": k, "value": any_value(v)} for k, v in values.items()]


def plain_span(
    values: dict[str, Any],
    *,
    events: list[tuple[str, dict[str, Any]]] = (),  # type: ignore[assignment]
    kind: str = "SPAN_KIND_CLIENT",
) -> dict[str, Any]:
    return {
        "trace_id": "0102030405060708090a0b0c0d0e0f10",
        "span_id": "0102030405060708",
        "parent_span_id": "",
        "trace_state": "",
        "flags": 0,
        "name": "span",
        "kind": kind,
        "start_time_unix_nano": "1",
        "end_time_unix_nano": "2",
        "attributes": attributes(values),
        "dropped_attributes_count": 1,
        "events": [
            {
                "time_unix_nano": "1",
                "name": name,
                "attributes": attributes(body),
                "dropped_attributes_count": 0,
            }
            for name, body in events
        ],
        "dropped_events_count": 2,
        "links": [],
        "dropped_links_count": 3,
        "status": {"code": "STATUS_CODE_ERROR", "message": "boom"},
        "resource": {
            "attributes": attributes({"service.name": "svc"}),
            "dropped_attributes_count": 0,
        },
        "scope": {"name": "scope", "version": "1", "attributes": []},
        "schema_url": "",
    }


TOOL_CALLS_JSON = json.dumps(
    [
        {
            "id": CALL_ID,
            "type": "function",
            "function": {"name": "get_weather", "arguments": '{"city": "Paris"}'},
        }
    ]
)


def test_deprecated_per_message_events():
    """The events the conventions had before the content attributes: each message its own
    span event, its body in the event's attributes (as fields, or whole in
    ``gen_ai.event.content``), choices as ``gen_ai.choice``."""
    tool_body = json.dumps(RESULT)
    span = plain_span(
        {
            "gen_ai.system": "openai",
            "gen_ai.request.model": "gpt-4o-mini",
            "gen_ai.usage.prompt_tokens": 96,
            "gen_ai.usage.completion_tokens": 12,
        },
        events=[
            ("gen_ai.system.message", {"gen_ai.system": "openai", "content": SYSTEM}),
            ("gen_ai.user.message", {"gen_ai.event.content": json.dumps({"content": USER})}),
            ("gen_ai.assistant.message", {"tool_calls": TOOL_CALLS_JSON}),
            ("gen_ai.tool.message", {"content": tool_body, "id": CALL_ID}),
            (
                "gen_ai.choice",
                {
                    "index": 0,
                    "finish_reason": "stop",
                    "message": {"role": "assistant", "content": ANSWER},
                },
            ),
        ],
    )
    record = mapping.span_record(span)
    assert record["dialect"] == "gen_ai"
    assert record["operation"] is None  # the old conventions had no gen_ai.operation.name
    assert record["provider"] == "openai"
    assert record["usage"] == {"input_tokens": 96, "output_tokens": 12, "total_tokens": None}
    assert record["input_messages"] == SECOND_INPUT
    assert record["output_messages"] == SECOND_OUTPUT
    assert record["finish_reasons"] == ["stop"]
    assert record["events"] == span["events"]


def test_deprecated_events_without_content_give_no_messages():
    span = plain_span(
        {"gen_ai.system": "openai"},
        events=[
            ("gen_ai.user.message", {"gen_ai.system": "openai"}),
            ("gen_ai.choice", {"index": 0, "finish_reason": "stop", "message": {}}),
        ],
    )
    record = mapping.span_record(span)
    assert record["input_messages"] is None
    assert record["output_messages"] is None
    assert record["finish_reasons"] is None


def test_choices_in_their_index_order():
    span = plain_span(
        {"gen_ai.operation.name": "chat"},
        events=[
            (
                "gen_ai.choice",
                {
                    "gen_ai.event.content": json.dumps(
                        {"index": 1, "finish_reason": "length", "message": {"content": "b"}}
                    )
                },
            ),
            (
                "gen_ai.choice",
                {
                    "gen_ai.event.content": json.dumps(
                        {"index": 0, "finish_reason": "stop", "message": {"content": "a"}}
                    )
                },
            ),
        ],
    )
    assert mapping.span_record(span)["output_messages"] == [
        {"role": "assistant", "parts": [text("a")], "finish_reason": "stop"},
        {"role": "assistant", "parts": [text("b")], "finish_reason": "length"},
    ]


def test_the_oldest_content_events():
    span = plain_span(
        {"gen_ai.system": "openai"},
        events=[
            (
                "gen_ai.content.prompt",
                {
                    "gen_ai.prompt": json.dumps(
                        [
                            {"role": "user", "content": USER},
                            {"role": "assistant", "tool_calls": json.loads(TOOL_CALLS_JSON)},
                            {
                                "role": "tool",
                                "tool_call_id": CALL_ID,
                                "content": json.dumps(RESULT),
                            },
                        ]
                    )
                },
            ),
            (
                "gen_ai.content.completion",
                {
                    "gen_ai.completion": json.dumps(
                        [{"role": "assistant", "content": ANSWER, "finish_reason": "stop"}]
                    )
                },
            ),
        ],
    )
    record = mapping.span_record(span)
    assert record["input_messages"] == SECOND_INPUT[1:]
    assert record["output_messages"] == SECOND_OUTPUT


def test_openllmetry_flattened_prompts_and_completions():
    """OpenLLMetry before 0.5x: ``gen_ai.prompt.N.*`` / ``gen_ai.completion.N.*``."""
    span = plain_span(
        {
            "llm.request.type": "chat",
            "gen_ai.system": "openai",
            "gen_ai.request.model": "gpt-4o-mini",
            "llm.frequency_penalty": 0.5,
            "llm.chat.stop_sequences": ["\n"],
            "gen_ai.prompt.0.role": "system",
            "gen_ai.prompt.0.content": SYSTEM,
            "gen_ai.prompt.1.role": "user",
            "gen_ai.prompt.1.content": json.dumps([{"type": "text", "text": USER}]),
            "gen_ai.prompt.2.role": "assistant",
            "gen_ai.prompt.2.tool_calls.0.id": CALL_ID,
            "gen_ai.prompt.2.tool_calls.0.name": "get_weather",
            "gen_ai.prompt.2.tool_calls.0.arguments": '{"city": "Paris"}',
            "gen_ai.prompt.3.role": "tool",
            "gen_ai.prompt.3.content": json.dumps(RESULT),
            "gen_ai.prompt.3.tool_call_id": CALL_ID,
            "gen_ai.completion.0.role": "assistant",
            "gen_ai.completion.0.content": ANSWER,
            "gen_ai.completion.0.finish_reason": "stop",
            "gen_ai.usage.prompt_tokens": 96,
            "gen_ai.usage.completion_tokens": 12,
            "llm.usage.total_tokens": 108,
            "llm.request.functions.0.name": "get_weather",
            "llm.request.functions.0.description": "The current weather in a city.",
            "llm.request.functions.0.parameters": json.dumps(DEFINITION["parameters"]),
        }
    )
    record = mapping.span_record(span)
    assert record["dialect"] == "openllmetry"
    assert record["operation"] == "chat"
    assert record["provider"] == "openai"
    assert record["input_messages"] == SECOND_INPUT
    assert record["output_messages"] == SECOND_OUTPUT
    assert record["finish_reasons"] == ["stop"]
    assert record["usage"] == {"input_tokens": 96, "output_tokens": 12, "total_tokens": 108}
    assert record["tool_definitions"] == [DEFINITION]
    assert record["request_parameters"] == {"frequency_penalty": 0.5, "stop_sequences": ["\n"]}


def test_openllmetry_flattened_completion_with_a_tool_call_and_a_refusal():
    span = plain_span(
        {
            "llm.request.type": "chat",
            "gen_ai.completion.0.finish_reason": "tool_calls",
            "gen_ai.completion.0.role": "assistant",
            "gen_ai.completion.0.tool_calls.0.id": CALL_ID,
            "gen_ai.completion.0.tool_calls.0.name": "get_weather",
            "gen_ai.completion.0.tool_calls.0.arguments": '{"city": "Paris"}',
            "gen_ai.completion.1.refusal": "no",
        }
    )
    assert mapping.span_record(span)["output_messages"] == [
        {"role": "assistant", "parts": [call()], "finish_reason": "tool_calls"},
        {"role": "assistant", "parts": [{"type": "refusal", "content": "no"}]},
    ]


def test_traceloop_tool_and_agent_spans():
    tool = mapping.span_record(
        plain_span(
            {
                "traceloop.span.kind": "tool",
                "traceloop.entity.name": "get_weather",
                "traceloop.entity.input": json.dumps({"args": [], "kwargs": ARGUMENTS}),
                "traceloop.entity.output": json.dumps(RESULT),
            },
            kind="SPAN_KIND_INTERNAL",
        )
    )
    assert tool["dialect"] == "openllmetry"
    assert tool["operation"] == "execute_tool"
    # a call by keywords alone: its keywords, as the model's tool call spells the arguments
    assert tool["tool"] == {
        "name": "get_weather",
        "call_id": None,
        "arguments": ARGUMENTS,
        "result": RESULT,
    }
    positional = mapping.span_record(
        plain_span(
            {
                "traceloop.span.kind": "tool",
                "traceloop.entity.name": "echo",
                "traceloop.entity.input": json.dumps({"args": ["Paris"], "kwargs": {}}),
                "traceloop.entity.output": json.dumps("sunny"),  # a string: JSON-quoted
            }
        )
    )
    assert positional["tool"] == {
        "name": "echo",
        "call_id": None,
        "arguments": {"args": ["Paris"], "kwargs": {}},
        "result": "sunny",
    }
    agent = mapping.span_record(
        plain_span({"traceloop.span.kind": "agent", "traceloop.entity.name": "weather-agent"})
    )
    assert (agent["operation"], agent["agent_name"]) == ("invoke_agent", "weather-agent")
    workflow = mapping.span_record(plain_span({"traceloop.span.kind": "workflow"}))
    assert workflow["operation"] == "invoke_workflow"
    task = mapping.span_record(plain_span({"traceloop.span.kind": "task"}))
    assert (task["dialect"], task["operation"]) == ("openllmetry", None)


def test_openinference_tool_span():
    record = mapping.span_record(
        plain_span(
            {
                "openinference.span.kind": "TOOL",
                "tool.name": "get_weather",
                "tool.id": CALL_ID,
                "tool.description": "The current weather in a city.",
                "tool.parameters": json.dumps(DEFINITION["parameters"]),
                "input.value": '{"city": "Paris"}',
                "output.value": json.dumps(RESULT),
                "session.id": "session-1",
            },
            kind="SPAN_KIND_INTERNAL",
        )
    )
    assert record["dialect"] == "openinference"
    assert record["operation"] == "execute_tool"
    assert record["tool"] == {
        "name": "get_weather",
        "call_id": CALL_ID,
        "arguments": ARGUMENTS,
        "result": RESULT,
    }
    assert record["tool_definitions"] == [DEFINITION]
    assert record["conversation_id"] == "session-1"


def test_openinference_redacted_tool_values_are_absent():
    record = mapping.span_record(
        plain_span(
            {
                "openinference.span.kind": "TOOL",
                "tool.name": "t",
                "input.value": "__REDACTED__",
                "output.value": "__REDACTED__",
            }
        )
    )
    assert record["tool"] == {"name": "t", "call_id": None, "arguments": None, "result": None}


CONTENTS = "llm.input_messages.0.message.contents"
OUT_CONTENTS = "llm.output_messages.0.message.contents"


def test_openinference_content_lists_and_other_span_kinds():
    record = mapping.span_record(
        plain_span(
            {
                "openinference.span.kind": "LLM",
                "llm.provider": "azure",
                "llm.system": "openai",
                "llm.request.model_name": "gpt-4o",
                "llm.response.model_name": "gpt-4o-2024",
                "llm.input_messages.0.message.role": "user",
                "llm.input_messages.0.message.contents.0.message_content.type": "text",
                "llm.input_messages.0.message.contents.0.message_content.text": "look",
                "llm.input_messages.0.message.contents.1.message_content.type": "image",
                f"{CONTENTS}.1.message_content.image.image.url": "https://x/y.png",
                "llm.input_messages.0.message.contents.2.message_content.type": "image",
                f"{CONTENTS}.2.message_content.image.image.url": "data:image/png;base64,AAAA",
                "llm.input_messages.0.message.name": "ann",
                # indexes sort as numbers: 10 after 2
                "llm.input_messages.10.message.role": "user",
                "llm.input_messages.10.message.content": "ten",
                "llm.input_messages.2.message.role": "user",
                "llm.input_messages.2.message.content": "two",
                "llm.output_messages.0.message.role": "assistant",
                "llm.output_messages.0.message.contents.0.message_content.type": "reasoning",
                "llm.output_messages.0.message.contents.0.message_content.text": "hmm",
                "llm.output_messages.0.message.contents.1.message_content.type": "tool_use",
                "llm.output_messages.0.message.contents.1.tool_call.id": CALL_ID,
                "llm.output_messages.0.message.contents.1.tool_call.function.name": "get_weather",
                f"{OUT_CONTENTS}.1.tool_call.function.arguments": '{"city": "Paris"}',
                # the same call in message.tool_calls too (additive, as OpenInference says)
                "llm.output_messages.0.message.tool_calls.0.tool_call.id": CALL_ID,
                "llm.output_messages.0.message.tool_calls.0.tool_call.function.name": "get_weather",
                "llm.output_messages.0.message.tool_calls.0.tool_call.function.arguments": (
                    '{"city": "Paris"}'
                ),
                "llm.output_messages.1.message.role": "assistant",
                "llm.output_messages.1.message.content": "second choice",
                "llm.finish_reason": "tool_calls",
            }
        )
    )
    assert record["provider"] == "azure"  # llm.provider before llm.system
    assert (record["request_model"], record["response_model"]) == ("gpt-4o", "gpt-4o-2024")
    assert record["input_messages"] == [
        {
            "role": "user",
            "name": "ann",
            "parts": [
                text("look"),
                {"type": "uri", "modality": "image", "uri": "https://x/y.png"},
                {"type": "blob", "modality": "image", "mime_type": "image/png", "content": "AAAA"},
            ],
        },
        {"role": "user", "parts": [text("two")]},
        {"role": "user", "parts": [text("ten")]},
    ]
    # OpenInference gives the first choice's finish reason only
    assert record["output_messages"] == [
        {
            "role": "assistant",
            "parts": [{"type": "reasoning", "content": "hmm"}, call()],
            "finish_reason": "tool_calls",
        },
        {"role": "assistant", "parts": [text("second choice")]},
    ]
    kinds = {
        "EMBEDDING": "embeddings",
        "AGENT": "invoke_agent",
        "RETRIEVER": "retrieval",
        "CHAIN": None,
    }
    for kind, operation in kinds.items():
        record = mapping.span_record(
            plain_span({"openinference.span.kind": kind, "agent.name": "a"})
        )
        assert record["operation"] == operation
        assert record["agent_name"] == "a"
    completion = mapping.span_record(
        plain_span(
            {
                "openinference.span.kind": "LLM",
                "llm.prompts.0.prompt.text": "Say",
                "llm.choices.0.completion.text": "hi",
            }
        )
    )
    assert completion["operation"] == "text_completion"
    assert completion["input_messages"] == [{"role": "user", "parts": [text("Say")]}]
    assert completion["output_messages"] == [{"role": "assistant", "parts": [text("hi")]}]


def test_conventions_content_in_structured_form():
    """The conventions prefer structured AnyValues to JSON strings: the same messages."""
    as_json = plain_span(
        {
            "gen_ai.operation.name": "chat",
            "gen_ai.input.messages": json.dumps(SECOND_INPUT),
            "gen_ai.output.messages": json.dumps(SECOND_OUTPUT),
            "gen_ai.system_instructions": json.dumps([text(SYSTEM)]),
            "gen_ai.tool.definitions": json.dumps([DEFINITION]),
        }
    )
    structured = plain_span(
        {
            "gen_ai.operation.name": "chat",
            "gen_ai.input.messages": SECOND_INPUT,
            "gen_ai.output.messages": SECOND_OUTPUT,
            "gen_ai.system_instructions": [text(SYSTEM)],
            "gen_ai.tool.definitions": [DEFINITION],
        }
    )
    one, other = mapping.span_record(as_json), mapping.span_record(structured)
    for name in ("input_messages", "output_messages", "system_instructions", "tool_definitions"):
        assert one[name] == other[name], name
    assert one["input_messages"] == SECOND_INPUT
    assert one["system_instructions"] == [text(SYSTEM)]
    assert one["tool_definitions"] == [DEFINITION]
    jcs(other)


def test_tool_call_values_parsed_only_when_an_object_or_array():
    messages = [
        {
            "role": "assistant",
            "parts": [
                {"type": "tool_call", "name": "f", "arguments": '{"a": 1}'},
                {"type": "tool_call", "name": "f", "arguments": "[1, 2]"},
                {"type": "tool_call", "name": "f", "arguments": '"a string"'},
                {"type": "tool_call", "name": "f", "arguments": "not json {"},
                {"type": "tool_call", "name": "f", "arguments": '{"a": 1, "a": 2}'},  # duplicate
                {"type": "tool_call", "name": "f", "arguments": '{"n": 12345678901234567890}'},
                {"type": "tool_call", "name": "f", "arguments": '{"x": NaN}'},
                {"type": "tool_call", "name": "f"},
                {"type": "image", "anything": 1},
            ],
        },
        {"role": "tool", "parts": [{"type": "tool_call_response", "response": "42"}]},
    ]
    record = mapping.span_record(plain_span({"gen_ai.input.messages": json.dumps(messages)}))
    parts = record["input_messages"][0]["parts"]
    assert [p["arguments"] for p in parts[:8]] == [
        {"a": 1},
        [1, 2],
        '"a string"',
        "not json {",
        '{"a": 1, "a": 2}',  # a duplicate key is ambiguous: kept as the string
        '{"n": 12345678901234567890}',  # beyond 2**53: no canonical form; kept as the string
        '{"x": NaN}',
        None,  # absent: null, the schema's default
    ]
    assert all(p["id"] is None for p in parts[:8])  # absent: null
    assert parts[8] == {"type": "image", "anything": 1}  # other parts as given
    assert record["input_messages"][1]["parts"] == [
        {"type": "tool_call_response", "id": None, "response": "42"}
    ]
    jcs(record)


def test_content_that_does_not_parse_is_kept_for_the_schema_check():
    record = mapping.span_record(
        plain_span(
            {
                "gen_ai.input.messages": "not json",
                "gen_ai.output.messages": '{"a": 1}',
                "gen_ai.tool.definitions": '["x"]',
            }
        )
    )
    assert record["input_messages"] == ["not json"]
    assert record["output_messages"] == [{"a": 1}]
    assert record["tool_definitions"] is None  # the record holds objects only


def test_the_record_fields():
    span = plain_span(
        {
            "gen_ai.operation.name": "chat",
            "gen_ai.provider.name": "openai",
            "gen_ai.system": "ignored: the provider name comes first",
            "gen_ai.request.model": "m",
            "gen_ai.request.seed": 7,
            "gen_ai.request.stop_sequences": ["a", "b"],
            "gen_ai.request.top_p": 1.0,
            "gen_ai.response.finish_reasons": ["stop", "length"],
            "gen_ai.conversation.id": "c",
            "gen_ai.agent.name": "a",
            "gen_ai.usage.input_tokens": 1,
            "gen_ai.usage.output_tokens": 2.0,
            "gen_ai.usage.total_tokens": 3,
        }
    )
    span["parent_span_id"] = "1111111111111111"
    record = mapping.span_record(span)
    assert {k: v for k, v in record.items() if k not in ("attributes", "events", "links")} == {
        "span_id": "0102030405060708",
        "parent_span_id": "1111111111111111",
        "name": "span",
        "kind": "client",
        "start_time_unix_nano": "1",
        "end_time_unix_nano": "2",
        "status": {"code": "error", "message": "boom"},
        "service": "svc",
        "scope": {"name": "scope", "version": "1", "attributes": []},
        "schema_url": "",
        "trace_state": "",
        "flags": 0,
        "dialect": "openllmetry",  # gen_ai.usage.total_tokens is OpenLLMetry's own
        "operation": "chat",
        "provider": "openai",
        "request_model": "m",
        "response_model": None,
        "response_id": None,
        "request_parameters": {"seed": 7, "stop_sequences": ["a", "b"], "top_p": 1.0},
        "conversation_id": "c",
        "agent_name": "a",
        "input_messages": None,
        "output_messages": None,
        "system_instructions": None,
        "tool_definitions": None,
        "tool": None,
        "usage": {"input_tokens": 1, "output_tokens": 2, "total_tokens": 3},
        "finish_reasons": ["stop", "length"],
        "dropped": {"attributes": 1, "events": 2, "links": 3},
        "resource_attributes": [{"key": "service.name", "value": {"stringValue": "svc"}}],
    }


def test_json_value_of_every_anyvalue():
    value = {
        "kvlistValue": {
            "values": [
                {"key": "s", "value": {"stringValue": "x"}},
                {"key": "i", "value": {"intValue": "9007199254740992"}},
                {"key": "big", "value": {"intValue": "9007199254740993"}},
                {"key": "d", "value": {"doubleValue": 1.5}},
                {"key": "nan", "value": {"doubleValue": "NaN"}},
                {"key": "b", "value": {"bytesValue": "AA=="}},
                {"key": "t", "value": {"boolValue": True}},
                {"key": "e", "value": {}},
                {"key": "a", "value": {"arrayValue": {"values": [{"intValue": "1"}]}}},
                {"key": "s", "value": {"stringValue": "last"}},
            ]
        }
    }
    assert mapping.json_value(value) == {
        "s": "last",
        "i": 2**53,
        "big": "9007199254740993",
        "d": 1.5,
        "nan": "NaN",
        "b": "AA==",
        "t": True,
        "e": None,
        "a": [1],
    }


# --- fuzz: any span maps, and its record can be canonicalised ----------------------------------

KEYS = [
    "gen_ai.operation.name",
    "gen_ai.provider.name",
    "gen_ai.system",
    "gen_ai.request.model",
    "gen_ai.request.temperature",
    "gen_ai.response.model",
    "gen_ai.response.id",
    "gen_ai.response.finish_reasons",
    "gen_ai.usage.input_tokens",
    "gen_ai.usage.output_tokens",
    "gen_ai.usage.total_tokens",
    "gen_ai.input.messages",
    "gen_ai.output.messages",
    "gen_ai.system_instructions",
    "gen_ai.tool.definitions",
    "gen_ai.tool.name",
    "gen_ai.tool.call.id",
    "gen_ai.tool.call.arguments",
    "gen_ai.tool.call.result",
    "gen_ai.conversation.id",
    "gen_ai.agent.name",
    "openinference.span.kind",
    "llm.model_name",
    "llm.invocation_parameters",
    "llm.finish_reason",
    "llm.token_count.prompt",
    "tool.name",
    "tool.parameters",
    "input.value",
    "output.value",
    "session.id",
    "llm.request.type",
    "traceloop.span.kind",
    "traceloop.entity.name",
    "traceloop.entity.input",
    "traceloop.entity.output",
    "llm.input_messages.0.message.role",
    "llm.input_messages.0.message.content",
    "llm.input_messages.1.message.tool_call_id",
    "llm.input_messages.0.message.contents.0.message_content.type",
    "llm.input_messages.0.message.contents.0.message_content.text",
    "llm.output_messages.0.message.tool_calls.0.tool_call.function.arguments",
    "llm.output_messages.0.message.tool_calls.0.tool_call.id",
    "llm.tools.0.tool.json_schema",
    "gen_ai.prompt.0.role",
    "gen_ai.prompt.0.content",
    "gen_ai.prompt.0.tool_calls.0.arguments",
    "gen_ai.completion.0.finish_reason",
    "gen_ai.completion.0.tool_calls.0.name",
    "llm.request.functions.0.parameters",
    "llm.input_messages.²",
    "gen_ai.prompt.٣.role",
]
EVENTS = [
    "gen_ai.user.message",
    "gen_ai.assistant.message",
    "gen_ai.tool.message",
    "gen_ai.choice",
    "gen_ai.content.prompt",
    "gen_ai.content.completion",
    "gen_ai.client.inference.operation.details",
    "other",
]
EVENT_KEYS = [
    "content",
    "role",
    "tool_calls",
    "id",
    "index",
    "finish_reason",
    "message",
    "gen_ai.event.content",
    "gen_ai.prompt",
    "gen_ai.completion",
    "gen_ai.input.messages",
]


def json_texts() -> Any:
    leaves = (
        st.none()
        | st.booleans()
        | st.integers(-(2**64), 2**64)
        | st.text(max_size=8)
        | st.floats(allow_nan=False, allow_infinity=False)
        | st.sampled_from(["tool", "tool_call", "tool_call_response", "text", "parts", "role"])
    )
    values = st.recursive(
        leaves,
        lambda inner: (
            st.lists(inner, max_size=3)
            | st.dictionaries(
                st.sampled_from(
                    [
                        "role",
                        "parts",
                        "type",
                        "content",
                        "id",
                        "name",
                        "arguments",
                        "response",
                        "function",
                        "tool_calls",
                        "message",
                        "args",
                        "kwargs",
                        "finish_reason",
                        "index",
                        "model",
                    ]
                ),
                inner,
                max_size=4,
            )
        ),
        max_leaves=10,
    )
    return values.map(json.dumps) | st.sampled_from(["{", "[1,", '{"a":1,"a":2}', "__REDACTED__"])


def any_values() -> Any:
    leaves = (
        st.builds(lambda s: {"stringValue": s}, json_texts() | st.text(max_size=8))
        | st.builds(lambda b: {"boolValue": b}, st.booleans())
        | st.builds(lambda i: {"intValue": str(i)}, st.integers(-(2**63), 2**63 - 1))
        | st.builds(
            lambda d: {"doubleValue": d},
            st.floats(allow_nan=False, allow_infinity=False) | st.sampled_from(["NaN", "Infinity"]),
        )
        | st.just({"bytesValue": "AA=="})
        | st.just({})
    )
    return st.recursive(
        leaves,
        lambda inner: (
            st.builds(lambda vs: {"arrayValue": {"values": vs}}, st.lists(inner, max_size=3))
            | st.builds(
                lambda kvs: {"kvlistValue": {"values": [{"key": k, "value": v} for k, v in kvs]}},
                st.lists(
                    st.tuples(st.sampled_from(["role", "parts", "type", "content"]), inner),
                    max_size=3,
                ),
            )
        ),
        max_leaves=8,
    )


def pairs(keys: list[str]) -> Any:
    return st.lists(
        st.builds(lambda k, v: {"key": k, "value": v}, st.sampled_from(keys), any_values()),
        max_size=8,
    )


@st.composite
def fuzzed_spans(draw: st.DrawFn) -> dict[str, Any]:
    span = plain_span({})
    span["attributes"] = draw(pairs(KEYS))
    span["events"] = [
        {"time_unix_nano": "1", "name": name, "attributes": attrs, "dropped_attributes_count": 0}
        for name, attrs in draw(
            st.lists(st.tuples(st.sampled_from(EVENTS), pairs(EVENT_KEYS)), max_size=4)
        )
    ]
    return span


@pytest.mark.slow
@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(span=fuzzed_spans())
def test_fuzz_any_span_maps_to_a_canonicalisable_record(span):
    record = mapping.span_record(span)
    jcs(record)
    for name in ("input_messages", "output_messages", "system_instructions", "tool_definitions"):
        assert record[name] is None or isinstance(record[name], list)
    if record["tool_definitions"] is not None:
        assert all(isinstance(d, dict) for d in record["tool_definitions"])
    assert record["attributes"] is span["attributes"]
