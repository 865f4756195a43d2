"""OTLP ingestion on the production stack (issue 31, "Figures"): 8 concurrent exporters each
sending 512-span batches to ``POST /otlp/v1/traces``, and what a hostile body costs a worker.

Run: ``.venv/bin/python bench/bench_otlp.py [--tiny | --quick] [--runs 3] [--exporters 8]
[--batch 512] [--requests 240] [--rate 5000] [--spans-per-trace 64] [--time-limit 120]
[--visible-within 180] [--calm 1.5] [--calm-wait 300] [--seal-after 3600] [--no-hostile]
[--nice-worker N] [--json FILE] [--pg postgres://postgres@127.0.0.1:5432]
[--database bench_otlp] [--redis URL] [--port N]``

What it does, on its own scratch PostgreSQL database (``--database``, dropped and made again;
its state under ``var/<database>-state/``):

1. bench_scale's helpers make the database, migrate it and add its people (the auditor alice,
   who may upload); ``manage.py api_token create alice`` gives the exporters' token. The
   stack starts as bench_pages starts it (``deploy/stack.py``: gunicorn with preload and
   ``WEB_CONCURRENCY`` default 5 sync workers, a Celery worker of 2 processes, beat; loopback
   only). ``REPLAY_OTEL_SEAL_AFTER_S`` is ``--seal-after`` (3600 s) for the stack, so that no
   trace of a run is sealed during a later one: each run measures ingestion, not sealing.
2. Each run builds its bodies first (``opentelemetry-proto``'s classes, serialised and
   gzipped before the clock starts): ``--requests`` export requests a phase, of ``--batch``
   spans each, each batch 8 agent runs of 64 spans with fresh random trace and span ids
   (nothing dedups): an ``invoke_agent`` root, ``chat`` calls and ``execute_tool`` spans
   carrying the GenAI conventions' attributes (``gen_ai.input.messages`` /
   ``gen_ai.output.messages`` JSON of a few hundred bytes, tool arguments and results,
   usage), resource and scope as the OpenTelemetry SDK writes them, children before their
   root as a batch processor sends them. ``--exporters`` threads (one ``http.client``
   connection each) send them, ``Authorization: Bearer``, ``Content-Type:
   application/x-protobuf``, ``Content-Encoding: gzip``, in two phases, each after the
   bodies before it are read and the 1-minute load average is below ``--calm`` (at most
   ``--calm-wait`` s), none starting a request after ``--time-limit`` s:

   * paced: each exporter sends one request every ``exporters * batch / rate`` s (0.82 s:
     ``--rate`` 5,000 spans/s offered, the target), as batch span processors do; the p95 of
     one request and the time to visibility at the target rate;
   * saturated: back to back, the most spans/s the stack accepts. There a request's latency
     is only the exporters' count over the requests per second (Little's law: 8 exporters at
     5,000 spans/s wait 0.8 s each), so its p95 is printed but not the target's figure.

3. Figures of a phase: spans accepted per second (spans of 200 answers less
   ``partial_success.rejected_spans``, over the wall time from the first request to the last
   answer), p50/p95 of one request, the time from each request's 200 until its first trace
   is visible as an open trace (its ``OtelTrace`` row, what ``manage.py otel status``
   lists: it is written with the span rows, in the same transaction; polled every 50 ms, at
   most ``--visible-within`` s after the last answer), and CPU milliseconds a request
   (bench_pages' accounting: the gunicorn processes, PostgreSQL's, this client; the Celery
   worker's from the first request until the last trace is visible). After both phases, 5
   requests sent alone: one request's time and its visibility with nothing queued.
   ``--nice-worker N`` (an experiment, not the stack as deployed) renices the Celery worker,
   to see what the request path gains when the background reader yields the cores.
4. Hostile bodies, one at a time to the same stack after each run: a gzip bomb (1 GiB of
   zeros, about 1 MiB sent), GenAI spans up to just under the 16 MiB decoded cap (18,371 of
   them; gzip: under the 8 MiB sent cap), and 49 spans of 10,000 attributes each (980,000
   protobuf messages: just under the million-values cap). For each, the largest rise of any
   gunicorn worker's peak RSS above its idle RSS just before (``VmHWM`` reset through
   ``/proc/<pid>/clear_refs``, as bench_bombs does), and for a body accepted, the Celery
   pool's rise while it reads it.

``--tiny`` is the smoke run tests/console/test_bench_smoke.py makes (2 exporters, 32-span
batches, one run, small hostile bodies, no waiting for calm); ``--quick`` (run_all --quick)
is three runs of 80 requests a phase. Figures are measurements, not tests: they depend on
the machine and on what else runs on it (2 shared cores here), which is why the 1-minute load
average is printed beside each phase, and before and after each run. The figures are printed
as a table: each beside its target, per run, and the runs' min / median / max.
"""

from __future__ import annotations

import argparse
import functools
import gzip
import http.client
import io
import json
import math
import os
import random
import re
import shutil
import statistics
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

BENCH = Path(__file__).resolve().parent
ROOT = BENCH.parent
if str(BENCH) not in sys.path:
    sys.path.insert(0, str(BENCH))

import bench_scale  # noqa: E402 - bench/ on sys.path
from bench_bombs import proc_status  # noqa: E402
from bench_console import free_port, percentile  # noqa: E402
from bench_pages import cpu_ms, cpu_seconds  # noqa: E402

PATH = "/otlp/v1/traces"
MiB = 1024**2
TARGET_SPANS_S = 5000
TARGET_P95_MS = 100
TARGET_VISIBLE_S = 2.0
TARGET_RSS_MIB = 256
ALONE = 5  # requests sent one at a time after a run: visibility with nothing else running
NAN = float("nan")

# What Phoenix and Langfuse publish about their ingestion (found with the search tool, pages
# and docs corpora, 2026); printed beside the figures.
PUBLISHED = (
    "Langfuse: no benchmark is published. The v3 release notes say the backend handles "
    '"hundreds of events per second" (langfuse.com/changelog/2024-12-09-Langfuse-v3-stable-'
    'release) and the infrastructure post says Langfuse Cloud grew to "tens of thousands of '
    'events per minute" (langfuse.com/blog/2024-12-langfuse-v3-infrastructure-evolution): '
    "a fleet's volume, with no hardware, batch size, latency or method, and events (a trace, "
    "an observation, a score) rather than OTLP spans; its scaling guide gives minimum "
    "container sizes (2 CPU, 4 GiB each for web and worker, plus PostgreSQL, Redis, "
    "ClickHouse) and no throughput. Phoenix (Arize): no ingestion figure is published (its "
    "community support answer says there are no official load-test benchmarks). Neither "
    "can be set beside these figures as a like-for-like comparison."
)


def log(message: str) -> None:
    print(f"[bench_otlp] {message}", file=sys.stderr, flush=True)


# --- bodies: realistic GenAI spans built with opentelemetry-proto's classes -----------------

CITIES = (
    "Paris", "Lisbon", "Oslo", "Nairobi", "Lima", "Osaka", "Quebec", "Tbilisi", "Hobart",
    "Reykjavik", "Montevideo", "Ulaanbaatar",
)  # fmt: skip
SYSTEM = "You are a weather assistant. Use the tools you are given, and answer in one sentence."


def _value(value: Any) -> Any:
    from opentelemetry.proto.common.v1 import common_pb2

    if isinstance(value, bool):
        return common_pb2.AnyValue(bool_value=value)
    if isinstance(value, int):
        return common_pb2.AnyValue(int_value=value)
    if isinstance(value, float):
        return common_pb2.AnyValue(double_value=value)
    if isinstance(value, (list, tuple)):
        return common_pb2.AnyValue(
            array_value=common_pb2.ArrayValue(values=[_value(v) for v in value])
        )
    return common_pb2.AnyValue(string_value=str(value))


def _attributes(pairs: dict[str, Any]) -> list[Any]:
    from opentelemetry.proto.common.v1 import common_pb2

    return [common_pb2.KeyValue(key=k, value=_value(v)) for k, v in pairs.items()]


def _dumps(value: Any) -> str:
    return json.dumps(value, separators=(",", ":"))


class SpanMaker:
    """Agent runs as an instrumented agent exports them: one ``invoke_agent`` root, then
    alternately a ``chat`` call asking for a tool and the ``execute_tool`` span running it,
    and a last ``chat`` that answers; random ids from ``rng``."""

    def __init__(self, rng: random.Random) -> None:
        self.rng = rng

    def _id(self, size: int) -> bytes:
        return (self.rng.getrandbits(8 * size) | 1).to_bytes(size, "big")

    def run(self, spans: int, t0: int, agent: str) -> tuple[bytes, list[Any], list[Any]]:
        """(trace id, model-call spans, agent and tool spans) of one run of ``spans`` spans,
        the children in the order they ended, the root last."""
        from opentelemetry.proto.trace.v1 import trace_pb2

        rng = self.rng
        trace_id, root_id = self._id(16), self._id(8)
        conversation = f"conv-{rng.getrandbits(64):016x}"
        chats: list[Any] = []
        tools: list[Any] = []
        tokens_in = tokens_out = 0
        now = t0 + 1_000_000
        previous: tuple[str, str, str] | None = None  # call id, city, result
        calls = max(1, spans // 2)
        for k in range(calls):
            city = CITIES[(k + rng.randrange(len(CITIES))) % len(CITIES)]
            last = 2 * k + 2 >= spans
            messages: list[dict[str, Any]] = [
                {"role": "system", "parts": [{"type": "text", "content": SYSTEM}]},
                {
                    "role": "user",
                    "parts": [{"type": "text", "content": f"What is the weather in {city}?"}],
                },
            ]
            if previous is not None:
                call_id, was, result = previous
                messages += [
                    {
                        "role": "assistant",
                        "parts": [
                            {"type": "tool_call", "id": call_id, "name": "get_weather",
                             "arguments": {"city": was}}
                        ],
                    },
                    {
                        "role": "tool",
                        "parts": [{"type": "tool_call_response", "id": call_id,
                                   "response": result}],
                    },
                ]  # fmt: skip
            call_id = f"call_{rng.getrandbits(96):024x}"
            if last:
                output = [
                    {
                        "role": "assistant",
                        "parts": [{"type": "text", "content": f"It is sunny in {city}, 18 C."}],
                        "finish_reason": "stop",
                    }
                ]
            else:
                output = [
                    {
                        "role": "assistant",
                        "parts": [{"type": "tool_call", "id": call_id, "name": "get_weather",
                                   "arguments": {"city": city}}],
                        "finish_reason": "tool_calls",
                    }
                ]  # fmt: skip
            used_in, used_out = 60 + 35 * k % 400, 12 + rng.randrange(20)
            tokens_in, tokens_out = tokens_in + used_in, tokens_out + used_out
            start, now = now, now + 400_000_000 + rng.randrange(300_000_000)
            chats.append(
                trace_pb2.Span(
                    trace_id=trace_id, span_id=self._id(8), parent_span_id=root_id,
                    name="chat gpt-4o-mini", kind=trace_pb2.Span.SPAN_KIND_CLIENT,
                    start_time_unix_nano=start, end_time_unix_nano=now, flags=256,
                    attributes=_attributes({
                        "gen_ai.operation.name": "chat",
                        "gen_ai.provider.name": "openai",
                        "gen_ai.request.model": "gpt-4o-mini",
                        "gen_ai.request.temperature": 0.2,
                        "gen_ai.request.max_tokens": 200,
                        "gen_ai.conversation.id": conversation,
                        "gen_ai.response.model": "gpt-4o-mini-2024-07-18",
                        "gen_ai.response.id": f"chatcmpl-{rng.getrandbits(64):016x}",
                        "gen_ai.response.finish_reasons": [output[0]["finish_reason"]],
                        "gen_ai.usage.input_tokens": used_in,
                        "gen_ai.usage.output_tokens": used_out,
                        "gen_ai.input.messages": _dumps(messages),
                        "gen_ai.output.messages": _dumps(output),
                        "server.address": "api.openai.com",
                        "server.port": 443,
                    }),
                )
            )  # fmt: skip
            if last or len(chats) + len(tools) + 1 >= spans:
                break
            result = _dumps(
                {"city": city, "temperature_c": rng.randrange(-10, 35), "conditions": "sunny"}
            )
            start, now = now, now + 2_000_000 + rng.randrange(50_000_000)
            tools.append(
                trace_pb2.Span(
                    trace_id=trace_id, span_id=self._id(8), parent_span_id=root_id,
                    name="execute_tool get_weather", kind=trace_pb2.Span.SPAN_KIND_INTERNAL,
                    start_time_unix_nano=start, end_time_unix_nano=now, flags=256,
                    attributes=_attributes({
                        "gen_ai.operation.name": "execute_tool",
                        "gen_ai.tool.name": "get_weather",
                        "gen_ai.tool.type": "function",
                        "gen_ai.tool.description": "The current weather in a city.",
                        "gen_ai.tool.call.id": call_id,
                        "gen_ai.tool.call.arguments": _dumps({"city": city}),
                        "gen_ai.tool.call.result": result,
                    }),
                )
            )  # fmt: skip
            previous = (call_id, city, result)
        root = trace_pb2.Span(
            trace_id=trace_id, span_id=root_id, name=f"invoke_agent {agent}",
            kind=trace_pb2.Span.SPAN_KIND_INTERNAL, start_time_unix_nano=t0,
            end_time_unix_nano=now + 1_000_000, flags=256,
            attributes=_attributes({
                "gen_ai.operation.name": "invoke_agent",
                "gen_ai.provider.name": "openai",
                "gen_ai.agent.name": agent,
                "gen_ai.conversation.id": conversation,
                "gen_ai.request.model": "gpt-4o-mini",
                "gen_ai.usage.input_tokens": tokens_in,
                "gen_ai.usage.output_tokens": tokens_out,
            }),
        )  # fmt: skip
        tools.append(root)
        return trace_id, chats, tools


def export_request(groups: list[tuple[str, list[Any]]], service: str) -> Any:
    """An ``ExportTraceServiceRequest`` of one process (resource) with a scope per group."""
    from opentelemetry.proto.collector.trace.v1 import trace_service_pb2
    from opentelemetry.proto.common.v1 import common_pb2
    from opentelemetry.proto.resource.v1 import resource_pb2
    from opentelemetry.proto.trace.v1 import trace_pb2

    resource = resource_pb2.Resource(
        attributes=_attributes({
            "telemetry.sdk.language": "python",
            "telemetry.sdk.name": "opentelemetry",
            "telemetry.sdk.version": "1.45.2",
            "service.name": service,
            "service.version": "1.0.0",
            "service.instance.id": f"{service}-instance",
        })
    )  # fmt: skip
    return trace_service_pb2.ExportTraceServiceRequest(
        resource_spans=[
            trace_pb2.ResourceSpans(
                resource=resource,
                scope_spans=[
                    trace_pb2.ScopeSpans(
                        scope=common_pb2.InstrumentationScope(name=name, version="1.0.0"),
                        spans=spans,
                    )
                    for name, spans in groups
                    if spans
                ],
            )
        ]
    )


@dataclass
class Body:
    """One export request as sent: gzipped protobuf, its spans, the trace ids it holds."""

    sent: bytes
    decoded_size: int
    spans: int
    trace_ids: list[str]


def genai_request(rng: random.Random, spans: int, per_trace: int, service: str) -> Any:
    """(ExportTraceServiceRequest, trace ids) of ``spans`` spans in runs of ``per_trace``."""
    maker = SpanMaker(rng)
    chats: list[Any] = []
    tools: list[Any] = []
    trace_ids: list[str] = []
    t0 = time.time_ns() - 60_000_000_000
    while len(chats) + len(tools) < spans:
        size = min(per_trace, spans - len(chats) - len(tools))
        trace_id, c, t = maker.run(size, t0 + rng.randrange(10_000_000_000), service)
        chats += c
        tools += t
        trace_ids.append(trace_id.hex())
    request = export_request(
        [("opentelemetry.instrumentation.openai_v2", chats), (f"{service}.agent", tools)],
        service,
    )
    return request, trace_ids


def genai_body(rng: random.Random, spans: int, per_trace: int, service: str) -> Body:
    request, trace_ids = genai_request(rng, spans, per_trace, service)
    raw = request.SerializeToString()
    return Body(gzip.compress(raw, compresslevel=6), len(raw), spans, trace_ids)


# --- hostile bodies ---------------------------------------------------------------------------


def gzip_bomb(inflated: int) -> bytes:
    """A gzip member of ``inflated`` zero bytes (about 1/1000 of it as sent)."""
    out = io.BytesIO()
    with gzip.GzipFile(fileobj=out, mode="wb", compresslevel=9, mtime=0) as gz:
        chunk = bytes(MiB)
        for _ in range(inflated // MiB):
            gz.write(chunk)
    return out.getvalue()


def at_the_caps(rng: random.Random, spans: int, decoded: int) -> tuple[bytes, int, int]:
    """(gzipped body, its decoded size, its spans): at most ``spans`` GenAI spans, as many
    as fit in ``decoded`` bytes, the last one padded with an attribute so that the protobuf
    body is just under ``decoded`` bytes."""
    from opentelemetry.proto.common.v1 import common_pb2

    request, _ = genai_request(rng, spans, 64, "hostile-agent")
    while request.ByteSize() > decoded:
        spans = int(spans * decoded / request.ByteSize() * 0.995)
        request, _ = genai_request(rng, spans, 64, "hostile-agent")
    span = request.resource_spans[0].scope_spans[-1].spans[-1]
    span.attributes.append(
        common_pb2.KeyValue(key="bench.padding", value=common_pb2.AnyValue(string_value=""))
    )
    room = decoded - request.ByteSize() - 64
    span.attributes[-1].value.string_value = "x" * max(0, room)
    raw = request.SerializeToString()
    assert len(raw) <= decoded, (len(raw), decoded)
    return gzip.compress(raw, compresslevel=6), len(raw), spans


def many_values(rng: random.Random, spans: int, attributes: int) -> tuple[bytes, int]:
    """(gzipped body, decoded size): ``spans`` spans of ``attributes`` small int attributes
    each: two protobuf messages (a KeyValue and its AnyValue) an attribute."""
    from opentelemetry.proto.common.v1 import common_pb2
    from opentelemetry.proto.trace.v1 import trace_pb2

    keys = [f"k{i}" for i in range(attributes)]
    trace_id = (rng.getrandbits(128) | 1).to_bytes(16, "big")
    made = []
    t0 = time.time_ns()
    for n in range(spans):
        made.append(
            trace_pb2.Span(
                trace_id=trace_id, span_id=(rng.getrandbits(64) | 1).to_bytes(8, "big"),
                name="wide", start_time_unix_nano=t0 + n, end_time_unix_nano=t0 + n + 1,
                attributes=[
                    common_pb2.KeyValue(key=k, value=common_pb2.AnyValue(int_value=i))
                    for i, k in enumerate(keys)
                ],
            )
        )  # fmt: skip
    raw = export_request([("hostile", made)], "hostile-agent").SerializeToString()
    return gzip.compress(raw, compresslevel=6), len(raw)


@functools.cache
def gzip_bomb_cached(inflated: int) -> bytes:
    return gzip_bomb(inflated)


def hostile_bodies(rng: random.Random, tiny: bool) -> list[tuple[str, bytes, int, int]]:
    """(name, gzipped body, decoded size, spans) of each hostile shape."""
    bomb = (32 if tiny else 1024) * MiB
    caps_spans, caps_bytes = (2000, 2 * MiB) if tiny else (20_000, 16 * MiB)
    wide_spans = 3 if tiny else 49
    caps, caps_decoded, caps_made = at_the_caps(rng, caps_spans, caps_bytes)
    return [
        (f"gzip bomb, {bomb // MiB} MiB of zeros", gzip_bomb_cached(bomb), bomb, 0),
        (f"GenAI spans to the {caps_bytes / MiB:.0f} MiB cap", caps, caps_decoded, caps_made),
        (f"{wide_spans} spans x 10,000 attrs", *many_values(rng, wide_spans, 10_000), wide_spans),
    ]


# --- the stack's processes --------------------------------------------------------------------


def _children(pid: int) -> list[int]:
    try:
        return [int(p) for p in Path(f"/proc/{pid}/task/{pid}/children").read_text().split()]
    except OSError:
        return []


def _cmdline(pid: int) -> bytes:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return b""


def stack_processes(stack: Any) -> dict[str, list[int]]:
    """The pids of gunicorn's workers and of the Celery worker's pool (the children of
    deploy/stack.py's ``web`` and ``worker``)."""
    found: dict[str, list[int]] = {"web": [], "pool": [], "worker": []}
    for child in _children(stack.pid):
        cmd = _cmdline(child)
        if b"gunicorn" in cmd:
            found["web"] = _children(child)
        elif b"celery" in cmd and b"worker" in cmd:
            found["pool"] = _children(child)
            found["worker"] = [child, *found["pool"]]
    return found


def _cpu_of(pids: list[int], before: dict, after: dict) -> float:
    """CPU seconds the processes ``pids`` spent between two bench_pages.cpu_seconds."""
    spent = 0.0
    for pid in pids:
        if pid in after:
            spent += after[pid][1] - (before[pid][1] if pid in before else 0.0)
    return spent


class Peaks:
    """Peak RSS above idle of a group of processes, from a reset of their ``VmHWM``."""

    def __init__(self, pids: list[int]) -> None:
        self.idle: dict[int, float] = {}
        for pid in pids:
            try:
                Path(f"/proc/{pid}/clear_refs").write_text("5")  # VmHWM := VmRSS
                self.idle[pid] = proc_status(pid, "VmRSS")
            except (OSError, KeyError):
                continue

    def over_idle(self) -> tuple[float, float, float]:
        """(largest peak above idle, that process's idle, what it still holds above idle)."""
        best = (0.0, 0.0, 0.0)
        for pid, idle in self.idle.items():
            try:
                peak, now = proc_status(pid, "VmHWM"), proc_status(pid, "VmRSS")
            except (OSError, KeyError):
                continue
            if peak - idle >= best[0]:
                best = (peak - idle, idle, now - idle)
        return best


# --- HTTP -------------------------------------------------------------------------------------


@dataclass
class Answer:
    status: int
    seconds: float
    rejected: int = 0
    code: str = ""
    error: str = ""
    done_at: float = 0.0


def post(conn: http.client.HTTPConnection, token: str, body: bytes) -> Answer:
    from opentelemetry.proto.collector.trace.v1 import trace_service_pb2

    t0 = time.perf_counter()
    try:
        conn.request(
            "POST",
            PATH,
            body=body,
            headers={
                "Authorization": f"Bearer {token}",
                "Content-Type": "application/x-protobuf",
                "Content-Encoding": "gzip",
            },
        )
        response = conn.getresponse()
        data = response.read()
        if response.will_close:
            conn.close()
    except (OSError, http.client.HTTPException) as exc:
        conn.close()
        done = time.perf_counter()
        return Answer(0, done - t0, error=type(exc).__name__, done_at=done)
    done = time.perf_counter()
    answer = Answer(response.status, done - t0, done_at=done)
    if response.status == 200:
        parsed = trace_service_pb2.ExportTraceServiceResponse()
        parsed.ParseFromString(data)
        answer.rejected = parsed.partial_success.rejected_spans
    else:  # a google.rpc.Status whose message starts with the refusal's code
        found = re.search(r"[A-Z][A-Z_]{3,}", status_message(data))
        answer.code = found[0] if found else data[:80].decode("utf-8", "replace")
    return answer


def status_message(data: bytes) -> str:
    """The ``message`` (field 2) of a protobuf ``google.rpc.Status``, or ``data`` as text."""
    pos = 0
    try:
        while pos < len(data):
            tag, pos = data[pos], pos + 1
            size = shift = 0
            while True:  # a varint: field 1's value, or field 2's length
                byte, pos = data[pos], pos + 1
                size |= (byte & 0x7F) << shift
                shift += 7
                if byte < 0x80:
                    break
            if tag == 0x12:
                return data[pos : pos + size].decode("utf-8", "replace")
    except IndexError:
        pass
    return data.decode("utf-8", "replace")


class Visibility:
    """When each request's first trace becomes visible as an open trace (its ``OtelTrace``
    row), polled from the database every ``every`` seconds in a thread of its own."""

    def __init__(self, every: float = 0.05) -> None:
        self.every = every
        self.pending: dict[str, float] = {}
        self.delays: list[float] = []
        self.last_seen = 0.0
        self.lock = threading.Lock()
        self.closing = threading.Event()
        self.deadline = float("inf")
        self.thread = threading.Thread(target=self._run, daemon=True)

    def start(self) -> Visibility:
        self.thread.start()
        return self

    def add(self, trace_id: str, answered_at: float) -> None:
        with self.lock:
            self.pending[trace_id] = answered_at

    def _run(self) -> None:
        from django.db import connection

        from otel.models import OtelTrace

        try:
            while True:
                with self.lock:
                    ids = list(self.pending)
                if ids:
                    seen = set(
                        OtelTrace.objects.filter(trace_id__in=ids).values_list(
                            "trace_id", flat=True
                        )
                    )
                    now = time.perf_counter()
                    with self.lock:
                        for trace_id in seen:
                            self.delays.append(now - self.pending.pop(trace_id))
                        if seen:
                            self.last_seen = now
                elif self.closing.is_set():
                    return
                if self.closing.is_set() and time.perf_counter() > self.deadline:
                    return
                time.sleep(self.every)
        finally:
            connection.close()

    def finish(self, within: float) -> int:
        """Wait until every request's trace is visible, at most ``within`` seconds; how many
        never were."""
        self.deadline = time.perf_counter() + within
        self.closing.set()
        self.thread.join()
        return len(self.pending)


# --- one run ----------------------------------------------------------------------------------


def drained(limit: float) -> float:
    """Wait until every stored body has been read (at most ``limit`` s); the seconds waited."""
    from django.db import connection

    from otel.models import OtlpBody

    t0 = time.perf_counter()
    while time.perf_counter() - t0 < limit:
        if not OtlpBody.objects.filter(otlpbodydone__isnull=True).exists():
            break
        time.sleep(0.5)
    connection.close()
    return time.perf_counter() - t0


def calm(threshold: float, limit: float) -> float:
    """Wait until the 1-minute load average is below ``threshold`` (at most ``limit`` s)."""
    t0 = time.monotonic()
    while os.getloadavg()[0] >= threshold and time.monotonic() - t0 < limit:
        time.sleep(5)
    return os.getloadavg()[0]


def send_all(
    host: str,
    token: str,
    shares: list[list[Body]],
    *,
    time_limit: float,
    watch: Visibility,
    interval: float | None = None,
) -> tuple[list[Answer], list[Body], float]:
    """Each share sent by its own exporter thread: back to back, or one request every
    ``interval`` seconds (the exporters staggered; a late one sends its next request as soon
    as the last is answered, as a batch span processor does). (answers, their bodies, wall
    seconds from the start to the last answer)."""
    answers: list[tuple[Answer, Body]] = []
    lock = threading.Lock()
    start = threading.Barrier(len(shares) + 1)
    begun = [0.0]

    def exporter(k: int, bodies: list[Body]) -> None:
        conn = http.client.HTTPConnection(host, timeout=300)
        mine = []
        start.wait()
        for n, body in enumerate(bodies):
            if interval is not None:
                due = begun[0] + (n + k / len(shares)) * interval
                time.sleep(max(0.0, due - time.perf_counter()))
            if time.perf_counter() - begun[0] > time_limit:
                break
            answer = post(conn, token, body.sent)
            if answer.status == 200:
                watch.add(body.trace_ids[0], answer.done_at)
            mine.append((answer, body))
        conn.close()
        with lock:
            answers.extend(mine)

    threads = [threading.Thread(target=exporter, args=kb) for kb in enumerate(shares)]
    for t in threads:
        t.start()
    begun[0] = time.perf_counter()
    start.wait()
    for t in threads:
        t.join()
    wall = max((a.done_at for a, _ in answers), default=begun[0]) - begun[0]
    return [a for a, _ in answers], [b for _, b in answers], wall


def phase(
    name: str,
    bodies: list[Body],
    interval: float | None,
    *,
    host: str,
    token: str,
    stack: Any,
    args: argparse.Namespace,
) -> dict[str, Any]:
    """One phase of a run: wait for the previous bodies to be read and for calm, send
    ``bodies`` over the exporters, wait until each request's trace is visible."""
    waited = drained(args.time_limit)
    load_calm = calm(args.calm, args.calm_wait)
    log(f"{name}: previous bodies read ({waited:.0f} s), load {load_calm:.2f}")
    shares = [bodies[k :: args.exporters] for k in range(args.exporters)]
    procs = stack_processes(stack)
    load_start = os.getloadavg()[0]
    watch = Visibility().start()
    before = cpu_seconds()
    answers, sent, wall = send_all(
        host, token, shares, time_limit=args.time_limit, watch=watch, interval=interval
    )
    after_send = cpu_seconds()
    last_answer = max((a.done_at for a in answers), default=time.perf_counter())
    missing = watch.finish(args.visible_within)
    after_drain = cpu_seconds()
    load_end = os.getloadavg()[0]
    ok = [(a, b) for a, b in zip(answers, sent, strict=True) if a.status == 200]
    accepted = sum(b.spans - a.rejected for a, b in ok)
    latencies = [a.seconds * 1000 for a in answers]
    cpu = cpu_ms(before, after_send, max(1, len(answers)))
    worker = _cpu_of(procs["worker"], before, after_drain) * 1000 / max(1, len(answers))
    delays = watch.delays
    errors = [a.error or f"{a.status} {a.code}" for a in answers if a.status != 200]
    figures = {
        "requests": len(answers),
        "planned": len(bodies),
        "ok": len(ok),
        "errors": len(errors),
        "error_kinds": sorted(set(errors)),
        "spans_accepted": accepted,
        "wall_s": round(wall, 2),
        "spans_s": accepted / wall if wall else 0.0,
        "requests_s": len(answers) / wall if wall else 0.0,
        "p50_ms": statistics.median(latencies) if latencies else NAN,
        "p95_ms": percentile(latencies, 0.95) if latencies else NAN,
        "max_ms": max(latencies, default=NAN),
        "visible_p50_s": statistics.median(delays) if delays else NAN,
        "visible_p95_s": percentile(delays + [math.inf] * missing, 0.95) if delays else NAN,
        "visible_max_s": max(delays + [math.inf] * missing, default=NAN),
        "not_visible": missing,
        "drain_s": max(0.0, watch.last_seen - last_answer) if delays else NAN,
        "cpu_ms": {**cpu, "worker": round(worker, 1)},
        "load_calm": load_calm,
        "load_start": load_start,
        "load_end": load_end,
    }
    log(
        f"{name}: {accepted} spans in {wall:.1f} s = {figures['spans_s']:.0f} spans/s, "
        f"p50 {figures['p50_ms']:.0f} ms p95 {figures['p95_ms']:.0f} ms, visible p50 "
        f"{figures['visible_p50_s']:.2f} s p95 {figures['visible_p95_s']:.2f} s max "
        f"{figures['visible_max_s']:.2f} s ({missing} never), errors {errors[:3]}, CPU ms a "
        f"request {figures['cpu_ms']}, load {load_start:.2f} -> {load_end:.2f}"
    )
    return figures


def one_run(
    number: int, host: str, token: str, stack: Any, args: argparse.Namespace
) -> dict[str, Any]:
    """Paced at ``--rate`` spans/s, then back to back (saturated), then requests alone."""
    rng = random.Random(31_000 + number)
    t0 = time.perf_counter()

    def build(count: int, service: str | None = None) -> list[Body]:
        return [
            genai_body(rng, args.batch, args.spans_per_trace, service or f"agent-{i % 8}")
            for i in range(count)
        ]

    paced, saturated, alone = build(args.requests), build(args.requests), build(ALONE, "alone")
    sent_kib = statistics.mean(len(b.sent) for b in paced) / 1024
    decoded_kib = statistics.mean(b.decoded_size for b in paced) / 1024
    log(
        f"run {number}: {3 * len(paced) + ALONE} bodies of {args.batch} spans built in "
        f"{time.perf_counter() - t0:.1f} s, {sent_kib:.0f} KiB sent, {decoded_kib:.0f} KiB "
        "decoded each"
    )
    interval = args.exporters * args.batch / args.rate
    figures: dict[str, Any] = {
        "run": number,
        "body_kib_sent": sent_kib,
        "body_kib_decoded": decoded_kib,
        "paced": phase(
            f"run {number} paced", paced, interval, host=host, token=token, stack=stack, args=args
        ),
        "saturated": phase(
            f"run {number} saturated",
            saturated,
            None,
            host=host,
            token=token,
            stack=stack,
            args=args,
        ),
    }
    # visibility with nothing else sent meanwhile: one request, its trace, the next
    drained(args.time_limit)
    delays, latencies = [], []
    conn = http.client.HTTPConnection(host, timeout=60)
    for body in alone:
        lone = Visibility().start()
        answer = post(conn, token, body.sent)
        latencies.append(answer.seconds * 1000)
        if answer.status == 200:
            lone.add(body.trace_ids[0], answer.done_at)
        lone.finish(args.visible_within)
        delays += lone.delays
    conn.close()
    figures["alone_ms"] = statistics.median(latencies)
    figures["visible_alone_s"] = statistics.median(delays) if delays else NAN
    figures["visible_alone_max_s"] = max(delays, default=NAN)
    log(
        f"run {number} alone: answered in {', '.join(f'{x:.0f}' for x in latencies)} ms, "
        f"visible after {', '.join(f'{d:.2f}' for d in delays)} s"
    )
    return figures


def hostile_run(
    number: int, host: str, token: str, stack: Any, args: argparse.Namespace
) -> list[dict[str, Any]]:
    """Each hostile shape sent alone; the peaks above idle of gunicorn's workers and, for a
    body accepted, of the Celery pool while it reads it."""
    import hashlib

    from django.db import connection

    from otel.models import OtlpBodyDone

    rows = []
    shapes = hostile_bodies(random.Random(3100 + number), args.tiny)
    drained(args.time_limit)
    for name, body, decoded, spans in shapes:
        procs = stack_processes(stack)
        web, pool = Peaks(procs["web"]), Peaks(procs["pool"])
        conn = http.client.HTTPConnection(host, timeout=300)
        answer = post(conn, token, body)
        conn.close()
        peak, idle, held = web.over_idle()
        row = {
            "run": number, "shape": name, "spans": spans, "sent_kib": len(body) / 1024,
            "decoded_mib": decoded / MiB, "status": answer.status,
            "code": answer.code or answer.error, "seconds": answer.seconds,
            "web_idle_mib": idle, "web_peak_over_idle_mib": peak, "web_held_mib": held,
            "pool_peak_over_idle_mib": None, "read_s": None,
            "load": os.getloadavg()[0],
        }  # fmt: skip
        if answer.status == 200:
            sha = hashlib.sha256(gzip.decompress(body)).hexdigest()
            t0 = time.perf_counter()
            while time.perf_counter() - t0 < args.time_limit:
                if OtlpBodyDone.objects.filter(body__sha256=sha).exists():
                    row["read_s"] = time.perf_counter() - t0
                    break
                time.sleep(0.5)
            row["pool_peak_over_idle_mib"] = pool.over_idle()[0]
        connection.close()
        rows.append(row)
        log(
            f"run {number} hostile {name}: {answer.status} {row['code']} in "
            f"{answer.seconds:.2f} s, web peak over idle {peak:.0f} MiB (idle {idle:.0f}, "
            f"held {held:+.0f}), pool {row['pool_peak_over_idle_mib']}"
        )
    return rows


# --- the table --------------------------------------------------------------------------------


def spread(values: list[float], fmt: str) -> str:
    values = [v for v in values if not math.isnan(v)]
    if not values:
        return "-"
    return " / ".join(format(v, fmt) for v in (min(values), statistics.median(values), max(values)))


def verdict(values: list[float], ok: Any) -> str:
    values = [v for v in values if not math.isnan(v)]
    if not values:
        return "-"
    met = sum(1 for v in values if ok(v))
    return "yes" if met == len(values) else "no" if met == 0 else f"{met} of {len(values)}"


def table(runs: list[dict[str, Any]], hostile: list[dict[str, Any]], rate: float) -> str:
    spans, p95, visible = f">= {TARGET_SPANS_S:,}", f"< {TARGET_P95_MS}", f"< {TARGET_VISIBLE_S:g}"
    rows: list[tuple[str, str, list[float], str, Any]] = []
    for key, title in (
        ("paced", f"paced, {rate:,.0f} spans/s offered"),
        ("saturated", "saturated, back to back"),
    ):
        mine = [r[key] for r in runs]
        rows += [
            (f"{title}: spans/s accepted", spans if key == "saturated" else "",
             [r["spans_s"] for r in mine], ",.0f",
             (lambda v: v >= TARGET_SPANS_S) if key == "saturated" else None),
            ("  one request p50 (ms)", "", [r["p50_ms"] for r in mine], ".0f", None),
            ("  one request p95 (ms)", p95, [r["p95_ms"] for r in mine], ".0f",
             lambda v: v < TARGET_P95_MS),
            ("  200 -> span visible p50 (s)", "", [r["visible_p50_s"] for r in mine], ".2f",
             None),
            ("  200 -> span visible p95 (s)", visible, [r["visible_p95_s"] for r in mine],
             ".2f", lambda v: v < TARGET_VISIBLE_S),
            ("  200 -> span visible max (s)", "", [r["visible_max_s"] for r in mine], ".2f",
             None),
            ("  last 200 -> last visible (s)", "", [r["drain_s"] for r in mine], ".1f", None),
            ("  CPU ms a request: web", "", [r["cpu_ms"]["web"] for r in mine], ".0f", None),
            ("  CPU ms a request: db", "", [r["cpu_ms"]["db"] for r in mine], ".0f", None),
            ("  CPU ms a request: worker", "", [r["cpu_ms"]["worker"] for r in mine], ".0f",
             None),
            ("  CPU ms a request: client", "", [r["cpu_ms"]["client"] for r in mine], ".0f",
             None),
            ("  errors (non-200)", "0", [r["errors"] for r in mine], "d", lambda v: v == 0),
            ("  load, 1-min, start", "", [r["load_start"] for r in mine], ".2f", None),
            ("  load, 1-min, end", "", [r["load_end"] for r in mine], ".2f", None),
        ]  # fmt: skip
    rows += [
        ("load, 1-min, before the run", "", [r["load_before"] for r in runs], ".2f", None),
        ("load, 1-min, after the run (its hostile bodies too)", "",
         [r["load_after"] for r in runs], ".2f", None),
        ("alone: one request, median of 5 (ms)", p95, [r["alone_ms"] for r in runs], ".0f",
         lambda v: v < TARGET_P95_MS),
        ("alone: 200 -> span visible, median of 5 (s)", visible,
         [r["visible_alone_s"] for r in runs], ".2f", lambda v: v < TARGET_VISIBLE_S),
    ]  # fmt: skip
    for shape in dict.fromkeys(h["shape"] for h in hostile):
        mine = [h for h in hostile if h["shape"] == shape]
        rows.append(
            (f"web peak RSS over idle, MiB: {shape}", f"<= {TARGET_RSS_MIB}",
             [h["web_peak_over_idle_mib"] for h in mine], ".0f",
             lambda v: v <= TARGET_RSS_MIB)
        )  # fmt: skip
    width = 56
    header = (
        f"{'figure':<{width}} {'target':>8} "
        + " ".join(f"{'run ' + str(r['run']):>9}" for r in runs)
        + f"  {'min / median / max':>24}  met"
    )
    lines = [header, "-" * len(header)]
    for label, target, values, fmt, ok in rows:
        cells = " ".join(f"{'-' if math.isnan(v) else format(v, fmt):>9}" for v in values) + " " * (
            10 * (len(runs) - len(values))
        )
        lines.append(
            f"{label:<{width}} {target:>8} {cells}  {spread(values, fmt):>24}  "
            f"{verdict(values, ok) if ok else ''}"
        )
    return "\n".join(lines)


def hostile_table(hostile: list[dict[str, Any]]) -> str:
    header = (
        f"{'run':>3} {'shape':<34} {'spans':>6} {'sent KiB':>9} {'decoded MiB':>11} {'answer':<20} "
        f"{'s':>6} {'web idle':>8} {'peak+':>6} {'held':>5} {'pool peak+':>10} {'read s':>7}"
    )
    lines = [header, "-" * len(header)]
    for h in hostile:
        pool = h["pool_peak_over_idle_mib"]
        read = h["read_s"]
        lines.append(
            f"{h['run']:>3} {h['shape']:<34} {h['spans']:>6} {h['sent_kib']:>9.0f} "
            f"{h['decoded_mib']:>11.1f} {str(h['status']) + ' ' + h['code']:<20} "
            f"{h['seconds']:>6.2f} "
            f"{h['web_idle_mib']:>8.0f} {h['web_peak_over_idle_mib']:>6.0f} "
            f"{h['web_held_mib']:>+5.0f} {'-' if pool is None else f'{pool:.0f}':>10} "
            f"{'-' if read is None else f'{read:.1f}':>7}"
        )
    return "\n".join(lines)


# --- main -------------------------------------------------------------------------------------


def prepare(args: argparse.Namespace) -> tuple[Path, str]:
    """A fresh scratch database with its people, and an API token of the auditor alice."""
    from django.core.management import call_command

    state = ROOT / "var" / f"{args.database}-state" / "prod"
    shutil.rmtree(state.parent, ignore_errors=True)
    bench_scale.database_fresh(args)
    state.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    env = bench_scale.state_env(args, state)
    bench_scale.django_setup(env)
    t0 = time.perf_counter()
    call_command("migrate", "--noinput", verbosity=0)
    bench_scale.fill_people()
    out = io.StringIO()
    call_command(
        "api_token", "create", "alice", "--name", "bench_otlp", stdout=out, stderr=io.StringIO()
    )
    token = out.getvalue().strip()
    log(f"database {args.database} migrated, people and token made in "
        f"{time.perf_counter() - t0:.1f} s; state {state}")  # fmt: skip
    from django.db import connections

    connections.close_all()
    return state, token


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tiny", action="store_true", help="a smoke run (the test suite's)")
    parser.add_argument("--quick", action="store_true", help="three short runs (run_all --quick)")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--exporters", type=int, default=8)
    parser.add_argument("--batch", type=int, default=512, help="spans a request")
    parser.add_argument("--requests", type=int, default=240, help="requests a run, all exporters")
    parser.add_argument("--spans-per-trace", type=int, default=64)
    parser.add_argument("--rate", type=float, default=5000.0, help="spans/s of the paced phase")
    parser.add_argument("--time-limit", type=float, default=120.0, help="seconds of sending a run")
    parser.add_argument("--visible-within", type=float, default=180.0)
    parser.add_argument("--calm", type=float, default=1.5, help="1-min load to wait for")
    parser.add_argument("--calm-wait", type=float, default=300.0, help="at most, seconds")
    parser.add_argument("--seal-after", default="3600", help="the stack's REPLAY_OTEL_SEAL_AFTER_S")
    parser.add_argument("--no-hostile", action="store_true", help="skip the hostile bodies")
    parser.add_argument(
        "--nice-worker",
        type=int,
        default=0,
        help="an experiment: run the stack's Celery worker at this nice value (0: as deployed)",
    )
    parser.add_argument("--pg", default="postgres://postgres@127.0.0.1:5432")
    parser.add_argument("--database", default="bench_otlp")
    parser.add_argument("--redis", default="redis://127.0.0.1:6379/10")
    parser.add_argument("--port", type=int, help="the stack's port (default: a free one)")
    parser.add_argument("--json", help="also write the figures to this file")
    args = parser.parse_args()
    if args.tiny:
        args.runs, args.exporters, args.batch, args.requests = 1, 2, 32, 4
        args.spans_per_trace, args.calm_wait, args.visible_within = 8, 0.0, 30.0
    elif args.quick:
        args.requests = 80
    if (args.tiny or args.quick) and args.database == "bench_otlp":
        args.database = "bench_otlp_tiny" if args.tiny else "bench_otlp_quick"

    state, token = prepare(args)
    os.environ["REPLAY_OTEL_SEAL_AFTER_S"] = str(args.seal_after)  # the stack inherits it
    port = args.port or free_port()
    host = f"127.0.0.1:{port}"
    t0 = time.perf_counter()
    stack = bench_scale.start_stack(args, state, port)
    log(f"stack ready on {host} in {time.perf_counter() - t0:.1f} s")
    if args.nice_worker:
        for pid in stack_processes(stack)["worker"]:  # its pool's new children inherit it
            os.setpriority(os.PRIO_PROCESS, pid, args.nice_worker)
        log(f"the Celery worker runs at nice {args.nice_worker} (an experiment)")
    runs: list[dict[str, Any]] = []
    hostile: list[dict[str, Any]] = []
    try:
        # as many concurrent requests as workers, twice: each worker's first export loads
        # what the first request of a process loads (the decoder, the models' caches)
        workers = len(stack_processes(stack)["web"]) or 1
        warm = [
            [genai_body(random.Random(k), args.batch, args.spans_per_trace, "warm-up")]
            for k in range(2 * workers)
        ]
        send_all(host, token, warm, time_limit=60.0, watch=Visibility())
        drained(args.time_limit)
        for number in range(1, args.runs + 1):
            load_before = os.getloadavg()[0]
            log(f"run {number}: 1-minute load before it {load_before:.2f}")
            run = one_run(number, host, token, stack, args)
            if not args.no_hostile:
                hostile += hostile_run(number, host, token, stack, args)
            run["load_before"], run["load_after"] = load_before, os.getloadavg()[0]
            log(f"run {number}: 1-minute load after it {run['load_after']:.2f}")
            runs.append(run)
    finally:
        bench_scale.stop(stack)

    first = runs[0]
    print(
        f"OTLP ingestion (issue 31): the production stack (deploy/stack.py: gunicorn sync "
        f"workers, WEB_CONCURRENCY default, preload; Celery worker of 2 processes and beat; "
        f"PostgreSQL {args.database}); {os.cpu_count()} CPU cores shared with whatever else "
        "runs (load = 1-minute load average)."
    )
    interval = args.exporters * args.batch / args.rate
    print(
        f"{args.exporters} exporters (threads, one connection each), {args.requests} requests "
        f"a phase of {args.batch} GenAI spans ({args.batch // args.spans_per_trace or 1} "
        f"agent runs of {args.spans_per_trace} spans, fresh ids), protobuf + gzip: "
        f"{first['body_kib_sent']:.0f} KiB sent, {first['body_kib_decoded']:.0f} KiB decoded "
        f"a request; {args.runs} runs, each: paced (each exporter one request every "
        f"{interval:.2f} s, {args.rate:,.0f} spans/s offered), then saturated (back to back: "
        f"the most it accepts; there one request's latency is {args.exporters} exporters / "
        "requests per second, Little's law), then 5 requests alone; "
        f"REPLAY_OTEL_SEAL_AFTER_S={args.seal_after} for the stack (no sealing during runs)"
        + (
            f"; the Celery worker at nice {args.nice_worker} (an experiment, not as deployed)."
            if args.nice_worker
            else "."
        )
    )
    print(
        "visible = the request's trace listed as open (its OtelTrace row, written with its "
        "span rows), polled every 50 ms (inf: not within --visible-within); CPU ms a "
        "request: web = gunicorn's processes, db = PostgreSQL's (all its databases) while "
        "sending, worker = Celery's until the last trace is visible."
    )
    print(table(runs, hostile, args.rate))
    if hostile:
        print()
        print("hostile bodies, each sent alone (peak+ = the largest rise of a process's peak")
        print("RSS above its idle RSS, MiB; pool = the Celery pool reading a body accepted):")
        print(hostile_table(hostile))
    print()
    print(f"Published figures to compare with: {PUBLISHED}")
    if args.json:
        Path(args.json).write_text(
            json.dumps({"args": vars(args), "runs": runs, "hostile": hostile}, indent=2)
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
