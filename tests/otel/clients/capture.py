"""A capture server for OTLP/HTTP trace exports (stdlib only).

It accepts `POST` on any path ending in `/v1/traces`, keeps each body as it arrived and
gunzipped (`Content-Encoding: gzip`; deflate too), with the request's headers, and answers 200
with an empty `ExportTraceServiceResponse` in the request's encoding: no bytes for protobuf (an
empty message encodes to nothing), `{}` for JSON. It decodes nothing: what the clients send is
exactly what the tests and the fixtures get.

With a directory, each request is also written there, numbered in arrival order:
`NNN.bin` (protobuf) or `NNN.json` (JSON), gunzipped, and `NNN.meta.json` with the path, the
headers, the encoding and the size and sha256 of the body as sent.

`python capture.py --dir DIR [--port N]` serves it standalone.
"""

from __future__ import annotations

import argparse
import gzip
import hashlib
import json
import threading
import zlib
from dataclasses import dataclass, field
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

PROTOBUF = "application/x-protobuf"
JSON = "application/json"


@dataclass
class Capture:
    """One export request as received."""

    path: str
    headers: dict[str, str]  # names lower-cased, in arrival order
    raw: bytes  # the body as sent (compressed when it was)
    body: bytes  # the body decompressed

    @property
    def content_type(self) -> str:
        return self.headers.get("content-type", "").split(";")[0].strip().lower()

    @property
    def is_json(self) -> bool:
        return self.content_type == JSON

    @property
    def encoding(self) -> str:
        return self.headers.get("content-encoding", "").strip().lower()

    def json(self) -> Any:
        return json.loads(self.body)


@dataclass
class CaptureServer:
    """The server on 127.0.0.1 and a free port; a context manager. `captures` in arrival order."""

    directory: Path | None = None
    host: str = "127.0.0.1"
    port: int = 0
    #: the status answered (tests of a client's retries can set 503 or 429)
    status: int = HTTPStatus.OK
    captures: list[Capture] = field(default_factory=list)

    def __post_init__(self) -> None:
        self._lock = threading.Lock()
        self._arrived = threading.Condition(self._lock)
        self._server = ThreadingHTTPServer((self.host, self.port), _handler_for(self))
        self._server.daemon_threads = True
        self._thread: threading.Thread | None = None
        if self.directory is not None:
            self.directory.mkdir(parents=True, exist_ok=True)

    @property
    def base_url(self) -> str:
        host, port = self._server.server_address[:2]
        return f"http://{host}:{port}"

    @property
    def traces_url(self) -> str:
        """The full URL an OTLP/HTTP trace exporter's `endpoint` takes."""
        return f"{self.base_url}/v1/traces"

    def keep(self, capture: Capture) -> int:
        """Store one request; returns its number (1 for the first)."""
        with self._arrived:
            self.captures.append(capture)
            number = len(self.captures)
            if self.directory is not None:
                stem = self.directory / f"{number:03d}"
                stem.with_suffix(".json" if capture.is_json else ".bin").write_bytes(capture.body)
                meta = {
                    "path": capture.path,
                    "headers": capture.headers,
                    "content_encoding": capture.encoding or None,
                    "sent_bytes": len(capture.raw),
                    "sent_sha256": hashlib.sha256(capture.raw).hexdigest(),
                }
                stem.with_suffix(".meta.json").write_text(json.dumps(meta, indent=2) + "\n")
            self._arrived.notify_all()
            return number

    def wait_for(self, count: int, timeout: float = 10.0) -> list[Capture]:
        """The captures, once at least `count` have arrived (raises TimeoutError otherwise)."""
        with self._arrived:
            if not self._arrived.wait_for(lambda: len(self.captures) >= count, timeout):
                raise TimeoutError(f"{len(self.captures)} of {count} exports arrived")
            return list(self.captures)

    def clear(self) -> None:
        with self._lock:
            self.captures.clear()

    def start(self) -> CaptureServer:
        self._thread = threading.Thread(
            target=self._server.serve_forever,
            kwargs={"poll_interval": 0.05},  # a quick stop()
            name="otlp-capture",
            daemon=True,
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()
        if self._thread is not None:
            self._thread.join(timeout=5)

    def __enter__(self) -> CaptureServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


def decompress(raw: bytes, encoding: str) -> bytes:
    if encoding == "gzip":
        return gzip.decompress(raw)
    if encoding == "deflate":
        return zlib.decompress(raw)
    if encoding in ("", "identity"):
        return raw
    raise ValueError(f"unknown Content-Encoding {encoding!r}")


def _read_body(handler: BaseHTTPRequestHandler) -> bytes:
    if handler.headers.get("Transfer-Encoding", "").lower() == "chunked":
        parts = []
        while True:
            size = int(handler.rfile.readline().split(b";")[0].strip(), 16)
            if size == 0:
                while handler.rfile.readline() not in (b"\r\n", b"\n", b""):
                    pass  # trailers
                return b"".join(parts)
            parts.append(handler.rfile.read(size))
            handler.rfile.readline()
    return handler.rfile.read(int(handler.headers.get("Content-Length") or 0))


def _handler_for(server: CaptureServer) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, format: str, *args: Any) -> None:
            pass

        def _answer(self, status: int, content_type: str, data: bytes) -> None:
            self.send_response(status)
            self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def do_POST(self) -> None:
            raw = _read_body(self)
            if not self.path.split("?")[0].endswith("/v1/traces"):
                self._answer(HTTPStatus.NOT_FOUND, "text/plain", b"not a traces endpoint\n")
                return
            headers = {name.lower(): value for name, value in self.headers.items()}
            try:
                body = decompress(raw, headers.get("content-encoding", "").strip().lower())
            except (ValueError, OSError, EOFError, zlib.error) as error:
                self._answer(HTTPStatus.BAD_REQUEST, "text/plain", f"{error}\n".encode())
                return
            capture = Capture(path=self.path, headers=headers, raw=raw, body=body)
            server.keep(capture)
            if capture.is_json:
                self._answer(server.status, JSON, b"{}")
            else:
                self._answer(server.status, PROTOBUF, b"")

    return Handler


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dir", type=Path, required=True)
    parser.add_argument("--port", type=int, default=0)
    args = parser.parse_args()
    with CaptureServer(directory=args.dir, port=args.port) as server:
        print(server.traces_url, flush=True)
        threading.Event().wait()


if __name__ == "__main__":
    main()
