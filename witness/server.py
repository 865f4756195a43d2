"""The witness over HTTP, with the standard library's threading server (no framework):

* ``POST /add-checkpoint``: :meth:`witness.core.Witness.add_checkpoint`;
* ``GET /<sha256(origin) hex>/checkpoint``: the latest cosigned checkpoint of that log.

Keep-alive (HTTP/1.1) as the spec recommends; every refusal is a short text body.
"""

from __future__ import annotations

import re
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import ClassVar

from witness.core import MAX_BODY, TEXT_TYPE, Response, Witness

_LATEST = re.compile(r"^/([0-9a-f]{64})/checkpoint$")


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "replay-witness/1"
    witness: ClassVar[Witness]
    quiet: ClassVar[bool] = False

    def _send(self, response: Response) -> None:
        self.send_response(response.status)
        self.send_header("Content-Type", response.content_type)
        self.send_header("Content-Length", str(len(response.body)))
        self.end_headers()
        self.wfile.write(response.body)

    def do_POST(self) -> None:
        if self.path != "/add-checkpoint":
            self._send(Response(404, b"not found\n"))
            return
        length_text = self.headers.get("Content-Length", "")
        if not length_text.isdigit():
            self.close_connection = True
            self._send(Response(400, b"malformed request: no Content-Length\n"))
            return
        length = int(length_text)
        if length > MAX_BODY:
            self.close_connection = True
            self._send(Response(400, f"malformed request: more than {MAX_BODY} bytes\n".encode()))
            return
        body = self.rfile.read(length)
        self._send(self.witness.add_checkpoint(body))

    def do_GET(self) -> None:
        match = _LATEST.match(self.path)
        if match is None:
            self._send(Response(404, b"not found\n"))
            return
        self._send(self.witness.latest(match.group(1)))

    def log_message(self, format: str, *args: object) -> None:
        if not self.quiet:
            super().log_message(format, *args)


def make_server(
    witness: Witness, host: str, port: int, *, quiet: bool = False
) -> ThreadingHTTPServer:
    handler = type("WitnessHandler", (Handler,), {"witness": witness, "quiet": quiet})
    server = ThreadingHTTPServer((host, port), handler)
    server.daemon_threads = True
    return server


__all__ = ["TEXT_TYPE", "Handler", "make_server"]
