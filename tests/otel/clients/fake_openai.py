"""A fake OpenAI Chat Completions server for the real-client tests (stdlib only).

It speaks just enough of `POST /v1/chat/completions` for one conversation with a tool call, so
the real `openai` client and its instrumentations run unchanged against it:

- a request whose messages hold no `tool` message is answered with a call of the tool
  `get_weather` {"city": "Paris"} (finish_reason `tool_calls`);
- a request whose messages hold the tool's result is answered with the final text.

Both non-streaming and streaming (server-sent events, with the usage chunk when
`stream_options.include_usage` asks for it) answers are served. The answers are fixed (ids,
token counts, created time) so a fixture captured twice differs only in what the clients make
up themselves (trace and span ids, times).

Every request body is recorded, parsed, in arrival order (`FakeOpenAI.requests`): a test can
assert that a trace holds exactly the messages the server saw.

The server runs in the test process (a thread); the clients run in their own virtualenv and
reach it at `base_url`. `python fake_openai.py [--port N]` serves it standalone.
"""

from __future__ import annotations

import argparse
import json
import threading
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

MODEL = "gpt-4o-mini-2024-07-18"
CREATED = 1767225600  # 2026-01-01T00:00:00Z: fixed, so answers are reproducible
TOOL_CALL_ID = "call_fake_weather_paris"
TOOL_NAME = "get_weather"
TOOL_ARGUMENTS = '{"city": "Paris"}'
FINAL_TEXT = "It is 18 °C and sunny in Paris."
#: (prompt, completion) tokens of the first and the second answer
USAGE = {"tool_call": (61, 17), "final": (96, 12)}
SYSTEM_FINGERPRINT = "fp_fake0001"


def _usage(kind: str) -> dict[str, int]:
    prompt, completion = USAGE[kind]
    return {
        "prompt_tokens": prompt,
        "completion_tokens": completion,
        "total_tokens": prompt + completion,
    }


def answer_kind(body: dict[str, Any]) -> str:
    """`final` once the conversation carries the tool's result, else `tool_call`."""
    messages = body.get("messages") or []
    return "final" if any(m.get("role") == "tool" for m in messages) else "tool_call"


def _message(kind: str) -> dict[str, Any]:
    if kind == "tool_call":
        call = {
            "id": TOOL_CALL_ID,
            "type": "function",
            "function": {"name": TOOL_NAME, "arguments": TOOL_ARGUMENTS},
        }
        return {"role": "assistant", "content": None, "refusal": None, "tool_calls": [call]}
    return {"role": "assistant", "content": FINAL_TEXT, "refusal": None}


def completion(kind: str, number: int) -> dict[str, Any]:
    """The non-streaming answer: a `chat.completion` object."""
    return {
        "id": f"chatcmpl-fake-{number}",
        "object": "chat.completion",
        "created": CREATED + number,
        "model": MODEL,
        "choices": [
            {
                "index": 0,
                "message": _message(kind),
                "logprobs": None,
                "finish_reason": "tool_calls" if kind == "tool_call" else "stop",
            }
        ],
        "usage": _usage(kind),
        "system_fingerprint": SYSTEM_FINGERPRINT,
        "service_tier": "default",
    }


def chunks(kind: str, number: int, include_usage: bool) -> list[dict[str, Any]]:
    """The streaming answer: `chat.completion.chunk` objects, as OpenAI splits them."""
    base = {
        "id": f"chatcmpl-fake-{number}",
        "object": "chat.completion.chunk",
        "created": CREATED + number,
        "model": MODEL,
        "system_fingerprint": SYSTEM_FINGERPRINT,
        "service_tier": "default",
    }
    extra = {"usage": None} if include_usage else {}

    def chunk(delta: dict[str, Any], finish_reason: str | None = None) -> dict[str, Any]:
        choice = {"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish_reason}
        return {**base, "choices": [choice], **extra}

    if kind == "tool_call":
        head = {
            "index": 0,
            "id": TOOL_CALL_ID,
            "type": "function",
            "function": {"name": TOOL_NAME, "arguments": ""},
        }
        half = len(TOOL_ARGUMENTS) // 2
        out = [
            chunk({"role": "assistant", "content": None, "tool_calls": [head], "refusal": None}),
            chunk({"tool_calls": [{"index": 0, "function": {"arguments": TOOL_ARGUMENTS[:half]}}]}),
            chunk({"tool_calls": [{"index": 0, "function": {"arguments": TOOL_ARGUMENTS[half:]}}]}),
            chunk({}, "tool_calls"),
        ]
    else:
        words = FINAL_TEXT.split(" ")
        pieces = [w + " " for w in words[:-1]] + [words[-1]]
        out = [chunk({"role": "assistant", "content": "", "refusal": None})]
        out += [chunk({"content": piece}) for piece in pieces]
        out.append(chunk({}, "stop"))
    if include_usage:
        out.append({**base, "choices": [], "usage": _usage(kind)})
    return out


class FakeOpenAI:
    """The server, started on 127.0.0.1 and a free port; a context manager."""

    def __init__(self, host: str = "127.0.0.1", port: int = 0) -> None:
        self.requests: list[dict[str, Any]] = []  # {"path", "body"} in arrival order
        self._lock = threading.Lock()
        self._server = ThreadingHTTPServer((host, port), _handler_for(self))
        self._server.daemon_threads = True
        self._thread: threading.Thread | None = None

    @property
    def base_url(self) -> str:
        """What `openai.OpenAI(base_url=...)` takes."""
        host, port = self._server.server_address[:2]
        return f"http://{host}:{port}/v1"

    @property
    def bodies(self) -> list[dict[str, Any]]:
        """The request bodies received, in order."""
        with self._lock:
            return [r["body"] for r in self.requests]

    def record(self, path: str, body: dict[str, Any]) -> int:
        """Keep one request; returns its number (1 for the first)."""
        with self._lock:
            self.requests.append({"path": path, "body": body})
            return len(self.requests)

    def clear(self) -> None:
        with self._lock:
            self.requests.clear()

    def start(self) -> FakeOpenAI:
        self._thread = threading.Thread(
            target=self._server.serve_forever,
            kwargs={"poll_interval": 0.05},  # a quick stop()
            name="fake-openai",
            daemon=True,
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()
        if self._thread is not None:
            self._thread.join(timeout=5)

    def __enter__(self) -> FakeOpenAI:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


def _handler_for(server: FakeOpenAI) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, format: str, *args: Any) -> None:
            pass  # quiet: a test's output is not the place for an access log

        def _send_json(self, status: int, payload: Any) -> None:
            data = json.dumps(payload).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def _error(self, status: int, message: str) -> None:
            self._send_json(
                status,
                {"error": {"message": message, "type": "invalid_request_error", "code": None}},
            )

        def do_POST(self) -> None:
            if not self.path.split("?")[0].rstrip("/").endswith("/chat/completions"):
                self._error(HTTPStatus.NOT_FOUND, f"no route {self.path}")
                return
            length = int(self.headers.get("Content-Length") or 0)
            try:
                body = json.loads(self.rfile.read(length) or b"null")
            except ValueError:
                self._error(HTTPStatus.BAD_REQUEST, "the body is not JSON")
                return
            if not isinstance(body, dict) or not isinstance(body.get("messages"), list):
                self._error(HTTPStatus.BAD_REQUEST, "messages is required")
                return
            number = server.record(self.path, body)
            kind = answer_kind(body)
            if not body.get("stream"):
                self._send_json(HTTPStatus.OK, completion(kind, number))
                return
            include_usage = bool((body.get("stream_options") or {}).get("include_usage"))
            events = [f"data: {json.dumps(c)}\n\n" for c in chunks(kind, number, include_usage)]
            data = ("".join(events) + "data: [DONE]\n\n").encode()
            self.send_response(HTTPStatus.OK)
            self.send_header("Content-Type", "text/event-stream")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def do_GET(self) -> None:
            self._error(HTTPStatus.NOT_FOUND, f"no route {self.path}")

    return Handler


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--port", type=int, default=0)
    args = parser.parse_args()
    with FakeOpenAI(port=args.port) as server:
        print(server.base_url, flush=True)
        threading.Event().wait()


if __name__ == "__main__":
    main()
