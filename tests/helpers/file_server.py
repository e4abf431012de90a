"""A real local HTTP file server for the download tests: ``Range`` support (or not), and a way to die mid-file.

:class:`FileServer` serves ``files`` (URL path -> bytes) on ``127.0.0.1`` at a free port (bound to port 0, so
tests can run in parallel) from a thread of ``http.server``. It answers ``GET`` with ``200`` and the whole
body, or, when ``ranges`` is on and the request carries ``Range: bytes=N-``, with ``206`` and
``Content-Range``; a start past the end is ``416``. ``die_after[path] = n`` makes the next answer for
``path`` send ``n`` body bytes of the promised length and then close the connection (once: the entry is
removed). Every request is logged with its ``Range`` header, its status and the body bytes sent.
"""

from __future__ import annotations

import re
import socket
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from jtcse.testing.server_thread import ServerThread


@dataclass
class Served:
    """One request the server answered."""

    path: str
    range: str | None
    status: int
    sent: int = 0


class FileServer(ServerThread):
    """Serve ``files`` over plain HTTP on 127.0.0.1 in a background thread (use as a context manager)."""

    def __init__(self, files: dict[str, bytes] | None = None, *, ranges: bool = True):
        self.files = dict(files or {})
        self.ranges = ranges
        self.die_after: dict[str, int] = {}
        self.log: list[Served] = []
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args) -> None:  # quiet
                pass

            def do_GET(self) -> None:  # noqa: N802 - http.server naming
                path = self.path.split("?", 1)[0]
                asked = self.headers.get("Range")
                record = Served(path, asked, 404)
                server.log.append(record)
                body = server.files.get(path)
                if body is None:
                    self._send(record, 404, b"not found", {})
                    return
                start = 0
                match = re.fullmatch(r"bytes=(\d+)-", asked or "")
                if server.ranges and match:
                    start = int(match.group(1))
                    if start >= len(body):
                        self._send(record, 416, b"", {"Content-Range": f"bytes */{len(body)}"})
                        return
                    headers = {"Content-Range": f"bytes {start}-{len(body) - 1}/{len(body)}"}
                    self._send(record, 206, body[start:], headers, die=server.die_after.pop(path, None))
                else:
                    self._send(record, 200, body, {"Accept-Ranges": "bytes"} if server.ranges else {},
                               die=server.die_after.pop(path, None))  # fmt: skip

            def _send(self, record: Served, status: int, body: bytes, headers: dict, die: int | None = None) -> None:
                record.status = status
                self.send_response(status)
                self.send_header("Content-Type", "application/octet-stream")
                self.send_header("Content-Length", str(len(body)))
                for key, value in headers.items():
                    self.send_header(key, value)
                self.end_headers()
                payload = body if die is None else body[:die]
                try:
                    self.wfile.write(payload)
                    self.wfile.flush()
                    record.sent = len(payload)
                    if die is not None:  # promised len(body) bytes, sent fewer: hang up
                        self.close_connection = True
                        self.connection.shutdown(socket.SHUT_RDWR)
                except (BrokenPipeError, ConnectionResetError):
                    pass

        self._serve(ThreadingHTTPServer(("127.0.0.1", 0), Handler), "file-server")

    def url(self, path: str) -> str:
        return f"http://127.0.0.1:{self.port}{path}"
