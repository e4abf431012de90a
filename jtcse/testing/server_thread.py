"""The life cycle the local servers of the tests and benchmarks share: an ``http.server`` answering from a daemon
thread."""

from __future__ import annotations

import threading
from http.server import ThreadingHTTPServer


class ServerThread:
    """Start, stop and ``with`` for a ``ThreadingHTTPServer`` handed to :meth:`_serve` (``port`` is its port)."""

    def _serve(self, server: ThreadingHTTPServer, name: str) -> None:
        server.daemon_threads = True
        self._server = server
        self.port = server.server_address[1]
        # serve_forever notices shutdown() once per poll interval: 10 ms keeps each server's stop short
        self._thread = threading.Thread(target=server.serve_forever, args=(0.01,), name=name, daemon=True)

    def start(self):
        self._thread.start()
        return self

    def stop(self) -> None:
        if self._thread.is_alive():
            self._server.shutdown()
        self._server.server_close()

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()
