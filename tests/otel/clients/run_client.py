"""Run one traced agent conversation with a real OpenTelemetry client and export it over OTLP/HTTP.

Runs in the clients' virtualenv (tests/otel/clients/requirements.txt), as a subprocess: two
instrumentations of `openai` cannot be active in one process, so each run has one.

The conversation is what an agent framework does: a parent `invoke_agent` span; the `openai`
client asks the model (the fake server, fake_openai.py), which calls the tool `get_weather`; the
tool runs in an `execute_tool` span (gen_ai.tool.name, .call.id, .call.arguments, .call.result);
the client asks again with the tool's result and gets the final text. The model-call spans are
the instrumentation's own; the agent and tool spans are ours, in the GenAI conventions' shape.

The spans leave through the SDK's own OTLP/HTTP exporters (protobuf, JSON, or both from one
tracer provider, so the two bodies describe the same spans), batched in one request, or
`--one-by-one`, each span in its own request as it ends (children first).

On stdout: one JSON object saying what was run and exported (trace id, span names, each export's
result). The exit status is 0 when every export succeeded, 3 when one failed.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys
import threading
from collections.abc import Sequence
from typing import Any

INSTRUMENTATIONS = ("openai-v2", "openinference", "openllmetry", "none")
EXPORTERS = ("proto", "json", "both")

AGENT_NAME = "weather-agent"
REQUEST_MODEL = "gpt-4o-mini"
SYSTEM_PROMPT = "You are a weather assistant. Use the tools you are given."
USER_PROMPT = "What is the weather in Paris?"
TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "get_weather",
            "description": "The current weather in a city.",
            "parameters": {
                "type": "object",
                "properties": {"city": {"type": "string"}},
                "required": ["city"],
            },
        },
    }
]


def get_weather(city: str) -> dict[str, Any]:
    """The tool: a fixed answer, so a fixture is reproducible."""
    return {"city": city, "temperature_c": 18, "conditions": "sunny"}


def content_environment(instrumentation: str, content: bool) -> dict[str, str]:
    """The environment variables that turn each instrumentation's message-content capture on or
    off (../shared/notes/test-clients.md). Set before the instrumentation is imported."""
    if instrumentation == "openai-v2":
        return {
            # the latest GenAI conventions: gen_ai.input.messages / gen_ai.output.messages on spans
            "OTEL_SEMCONV_STABILITY_OPT_IN": "gen_ai_latest_experimental",
            "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT": "SPAN_ONLY"
            if content
            else "NO_CONTENT",
        }
    if instrumentation == "openllmetry":
        return {"TRACELOOP_TRACE_CONTENT": "true" if content else "false"}
    if instrumentation == "openinference":
        hide = "false" if content else "true"
        names = (
            "INPUTS",
            "OUTPUTS",
            "INPUT_MESSAGES",
            "OUTPUT_MESSAGES",
            "INPUT_TEXT",
            "OUTPUT_TEXT",
        )
        return {f"OPENINFERENCE_HIDE_{name}": hide for name in names}
    return {}


def instrument(instrumentation: str, tracer_provider: Any) -> None:
    if instrumentation == "openai-v2":
        from opentelemetry.instrumentation.openai_v2 import OpenAIInstrumentor
    elif instrumentation == "openinference":
        from openinference.instrumentation.openai import OpenAIInstrumentor
    elif instrumentation == "openllmetry":
        from opentelemetry.instrumentation.openai import OpenAIInstrumentor
    else:
        return
    OpenAIInstrumentor().instrument(tracer_provider=tracer_provider)


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--instrumentation", choices=INSTRUMENTATIONS, required=True)
    parser.add_argument("--exporter", choices=EXPORTERS, default="proto")
    parser.add_argument(
        "--endpoint",
        required=True,
        help="the full traces URL, e.g. http://127.0.0.1:4318/v1/traces",
    )
    parser.add_argument(
        "--header",
        action="append",
        default=[],
        metavar="K=V",
        help="an export request header (repeatable), e.g. 'Authorization=Bearer abc'",
    )
    parser.add_argument("--gzip", action=argparse.BooleanOptionalAction, default=True)
    parser.add_argument(
        "--content",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="capture message content (and the tool's arguments and result)",
    )
    parser.add_argument(
        "--one-by-one", action="store_true", help="export each span in its own request"
    )
    parser.add_argument(
        "--openai-base-url", required=True, help="the fake server, e.g. http://127.0.0.1:N/v1"
    )
    parser.add_argument("--stream", action="store_true", help="ask for streamed answers")
    parser.add_argument(
        "--divergent-tool-result",
        action="store_true",
        help="record one tool result on the execute_tool span and send the model another (a "
        "replay divergence, for the audit's negative tests)",
    )
    parser.add_argument("--service-name", default="otel-test-client")
    args = parser.parse_args(argv)
    headers = {}
    for item in args.header:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            parser.error(f"--header takes K=V, not {item!r}")
        headers[key.strip()] = value
    args.headers = headers
    return args


def make_exporters(args: argparse.Namespace) -> list[tuple[str, Any]]:
    kinds = ("proto", "json") if args.exporter == "both" else (args.exporter,)
    exporters = []
    for kind in kinds:
        if kind == "proto":
            from opentelemetry.exporter.otlp.proto.http import Compression
            from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

            compression = Compression.Gzip if args.gzip else Compression.NoCompression
        else:
            from opentelemetry.exporter.otlp.common.http import Compression
            from opentelemetry.exporter.otlp.json.http.trace_exporter import OTLPSpanExporter

            compression = Compression.GZIP if args.gzip else Compression.NONE
        exporter = OTLPSpanExporter(
            endpoint=args.endpoint, headers=args.headers, compression=compression, timeout=10
        )
        exporters.append((kind, exporter))
    return exporters


class Recording:
    """A span exporter that hands each batch to the real one and keeps what came of it."""

    def __init__(
        self, kind: str, exporter: Any, log: list[dict[str, Any]], lock: threading.Lock
    ) -> None:
        self.kind, self.exporter, self.log, self.lock = kind, exporter, log, lock

    def export(self, spans: Sequence[Any]) -> Any:
        result = self.exporter.export(spans)
        with self.lock:
            self.log.append(
                {"exporter": self.kind, "spans": [s.name for s in spans], "result": result.name}
            )
        return result

    def shutdown(self) -> None:
        self.exporter.shutdown()

    def force_flush(self, timeout_millis: int = 30_000) -> bool:
        return self.exporter.force_flush(timeout_millis)


def _message_of(choice_message: Any) -> dict[str, Any]:
    """The assistant message to send back, as the `openai` client's own dict."""
    return choice_message.model_dump(exclude_none=True, exclude={"refusal", "annotations", "audio"})


def _complete(
    client: Any, messages: list[dict[str, Any]], stream: bool
) -> tuple[dict[str, Any], Any]:
    """One model call; returns (the assistant message as a dict, the usage)."""
    params = {
        "model": REQUEST_MODEL,
        "messages": messages,
        "tools": TOOLS,
        "temperature": 0.2,
        "max_tokens": 200,
    }
    if not stream:
        response = client.chat.completions.create(**params)
        return _message_of(response.choices[0].message), response.usage
    content: list[str] = []
    calls: dict[int, dict[str, Any]] = {}
    usage = None
    for chunk in client.chat.completions.create(
        **params, stream=True, stream_options={"include_usage": True}
    ):
        usage = chunk.usage or usage
        for choice in chunk.choices:
            delta = choice.delta
            if delta.content:
                content.append(delta.content)
            for call in delta.tool_calls or []:
                into = calls.setdefault(
                    call.index,
                    {"id": None, "type": "function", "function": {"name": "", "arguments": ""}},
                )
                if call.id:
                    into["id"] = call.id
                if call.function and call.function.name:
                    into["function"]["name"] += call.function.name
                if call.function and call.function.arguments:
                    into["function"]["arguments"] += call.function.arguments
    message: dict[str, Any] = {"role": "assistant"}
    if content:
        message["content"] = "".join(content)
    if calls:
        message["tool_calls"] = [calls[i] for i in sorted(calls)]
    return message, usage


def converse(args: argparse.Namespace, tracer: Any) -> dict[str, Any]:
    """The agent: model call, tool, model call, under one `invoke_agent` span."""
    import uuid

    import openai
    from opentelemetry.trace import SpanKind, Status, StatusCode

    client = openai.OpenAI(
        base_url=args.openai_base_url, api_key="sk-fake-test-key", max_retries=0, timeout=20
    )
    messages: list[dict[str, Any]] = [
        {"role": "system", "content": SYSTEM_PROMPT},
        {"role": "user", "content": USER_PROMPT},
    ]
    usage = {"input": 0, "output": 0}
    agent_attributes = {
        "gen_ai.operation.name": "invoke_agent",
        "gen_ai.provider.name": "openai",
        "gen_ai.agent.name": AGENT_NAME,
        "gen_ai.conversation.id": f"conv-{uuid.uuid4().hex[:16]}",
        "gen_ai.request.model": REQUEST_MODEL,
    }
    with tracer.start_as_current_span(
        f"invoke_agent {AGENT_NAME}", kind=SpanKind.INTERNAL, attributes=agent_attributes
    ) as agent:
        answer = None
        for _ in range(4):  # the fake server needs two calls; a bound keeps a broken one finite
            message, call_usage = _complete(client, messages, args.stream)
            if call_usage is not None:
                usage["input"] += call_usage.prompt_tokens
                usage["output"] += call_usage.completion_tokens
            messages.append(message)
            if not message.get("tool_calls"):
                answer = message.get("content")
                break
            for call in message["tool_calls"]:
                name, arguments = call["function"]["name"], call["function"]["arguments"]
                tool_attributes = {
                    "gen_ai.operation.name": "execute_tool",
                    "gen_ai.tool.name": name,
                    "gen_ai.tool.call.id": call["id"],
                    "gen_ai.tool.type": "function",
                    "gen_ai.tool.description": TOOLS[0]["function"]["description"],
                }
                with tracer.start_as_current_span(
                    f"execute_tool {name}", kind=SpanKind.INTERNAL, attributes=tool_attributes
                ) as tool_span:
                    result = json.dumps(get_weather(**json.loads(arguments)))
                    if args.content:
                        tool_span.set_attribute("gen_ai.tool.call.arguments", arguments)
                        recorded = (
                            result.replace("18", "21") if args.divergent_tool_result else result
                        )
                        tool_span.set_attribute("gen_ai.tool.call.result", recorded)
                messages.append({"role": "tool", "tool_call_id": call["id"], "content": result})
        agent.set_attribute("gen_ai.usage.input_tokens", usage["input"])
        agent.set_attribute("gen_ai.usage.output_tokens", usage["output"])
        if answer is None:
            agent.set_status(Status(StatusCode.ERROR, "the model never answered in text"))
        trace_id = format(agent.get_span_context().trace_id, "032x")
    return {"trace_id": trace_id, "answer": answer, "messages": messages}


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    os.environ.update(content_environment(args.instrumentation, args.content))
    logging.basicConfig(level=logging.WARNING, stream=sys.stderr)

    from opentelemetry import trace
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor, SimpleSpanProcessor

    resource = Resource.create({"service.name": args.service_name, "service.version": "1.0.0"})
    provider = TracerProvider(resource=resource)
    exports: list[dict[str, Any]] = []
    lock = threading.Lock()
    for kind, exporter in make_exporters(args):
        recording = Recording(kind, exporter, exports, lock)
        if args.one_by_one:
            processor = SimpleSpanProcessor(recording)
        else:
            # one request at the end (force_flush): no timer, and a batch larger than the run
            processor = BatchSpanProcessor(
                recording, schedule_delay_millis=600_000, max_export_batch_size=512
            )
        provider.add_span_processor(processor)
    trace.set_tracer_provider(provider)
    instrument(args.instrumentation, provider)

    tracer = provider.get_tracer("otel-test-client.agent", "1.0.0")
    outcome = converse(args, tracer)
    flushed = provider.force_flush(timeout_millis=30_000)
    provider.shutdown()
    summary = {
        "instrumentation": args.instrumentation,
        "exporter": args.exporter,
        "content": args.content,
        "one_by_one": args.one_by_one,
        "stream": args.stream,
        "trace_id": outcome["trace_id"],
        "answer": outcome["answer"],
        "flushed": flushed,
        "exports": exports,
    }
    json.dump(summary, sys.stdout)
    sys.stdout.write("\n")
    ok = flushed and exports and all(e["result"] == "SUCCESS" for e in exports)
    return 0 if ok else 3


if __name__ == "__main__":
    sys.exit(main())
