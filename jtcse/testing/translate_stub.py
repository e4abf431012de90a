"""A local stand-in for the Google Translate ``gtx`` endpoint, for the tests and ``scripts/bench_rtt.py``.

It speaks the part of the protocol googletrans uses — ``GET /translate_a/single`` with ``sl``, ``tl``
and ``q``, answered by the nested-list JSON whose first element holds ``[translated, original, ...]``
segments — over https with a self-signed certificate (googletrans only builds https URLs). Every
request is logged (time, parameters, status) so callers can count requests and check backoff.

The "translation" is a deterministic fake that makes round trips recognisable: English → ``xx``
gives ``"<xx> "`` plus the words reversed, and ``xx`` → English undoes that and appends ``" (xx)"``.
Sentences containing ``IDENTICAL`` come back unchanged and those containing ``VANISH`` come back empty.
A ``script`` callable can override the answer to any request (status, body, delay) to simulate
rate limiting, server errors and timeouts.
"""

from __future__ import annotations

import json
import shutil
import ssl
import subprocess
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

from jtcse.testing.server_thread import ServerThread


@dataclass
class StubRequest:
    """One request the stub received."""

    time: float
    path: str
    params: dict[str, str]
    status: int = 200


@dataclass
class StubReply:
    """An override of the normal answer: HTTP ``status``, ``body``, extra ``headers``, ``delay`` seconds."""

    status: int = 200
    body: str | None = None
    headers: dict[str, str] = field(default_factory=dict)
    delay: float = 0.0


def fake_translate(text: str, source: str, target: str) -> str:
    """The stub's deterministic "translation" of one line (see the module docstring)."""
    if "IDENTICAL" in text:
        return text
    if "VANISH" in text:
        return ""
    if target != "en":
        return f"<{target}> " + " ".join(reversed(text.split()))
    prefix = f"<{source}> "
    if text.startswith(prefix):
        return " ".join(reversed(text[len(prefix) :].split())) + f" ({source})"
    return text + f" ({source})"


def gtx_payload(text: str, source: str, target: str) -> str:
    """The JSON body Google's ``gtx`` client gets for ``text`` (one segment per line)."""
    lines = text.split("\n")
    segments = []
    for k, line in enumerate(lines):
        end = "\n" if k < len(lines) - 1 else ""
        segments.append([fake_translate(line, source, target) + end, line + end, None, None, 10])
    return json.dumps([segments, None, source, None, None, None, 1.0, [], [[source], None, [1.0], [source]]])


def make_self_signed_cert(directory: str | Path, host: str = "127.0.0.1") -> tuple[str, str]:
    """Write a throw-away certificate/key for ``host`` (an IP) into ``directory``; returns ``(cert, key)``.

    Uses ``cryptography`` when installed, else the ``openssl`` command line.
    """
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    cert, key = directory / "stub-cert.pem", directory / "stub-key.pem"
    try:
        import datetime
        import ipaddress

        from cryptography import x509
        from cryptography.hazmat.primitives import hashes, serialization
        from cryptography.hazmat.primitives.asymmetric import ec
        from cryptography.x509.oid import NameOID
    except ImportError:
        openssl = shutil.which("openssl")
        if openssl is None:
            raise RuntimeError("making a test certificate needs `cryptography` or the `openssl` command") from None
        subprocess.run(
            [openssl, "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
             "-keyout", str(key), "-out", str(cert), "-days", "2", "-subj", f"/CN={host}",
             "-addext", f"subjectAltName=IP:{host}"],
            check=True, capture_output=True,
        )  # fmt: skip
        return str(cert), str(key)
    private = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, host)])
    now = datetime.datetime.now(datetime.timezone.utc)
    certificate = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(private.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=2))
        .add_extension(x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address(host))]), critical=False)
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .sign(private, hashes.SHA256())
    )
    cert.write_bytes(certificate.public_bytes(serialization.Encoding.PEM))
    key.write_bytes(
        private.private_bytes(
            serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
        )
    )
    return str(cert), str(key)


Script = Callable[[StubRequest, int], "StubReply | None"]


class StubTranslateServer(ServerThread):
    """Serve the fake ``gtx`` endpoint on ``127.0.0.1`` over https in a background thread.

    ``latency`` seconds are added to every answer. ``script(request, n)`` (``n``: 0-based index of
    the request) may return a :class:`StubReply` to answer differently. Use as a context manager;
    ``service_url`` is what to pass to the googletrans backend, ``cert`` its CA bundle.
    """

    def __init__(self, cert: str, key: str, *, latency: float = 0.0, script: Script | None = None, port: int = 0):
        self.latency = latency
        self.script = script
        self.cert = cert
        self.requests: list[StubRequest] = []
        self.in_flight = 0
        self.peak_in_flight = 0  # most translation requests handled at the same time
        self._lock = threading.Lock()
        stub = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"
            # headers and body go out as two TLS records: with Nagle's algorithm the second waits for the client's
            # delayed ACK (40 ms on Linux) before it is sent, on every answer
            disable_nagle_algorithm = True

            def log_message(self, *args) -> None:  # quiet
                pass

            def do_GET(self) -> None:  # noqa: N802 - http.server naming
                parts = urlsplit(self.path)
                params = {k: v[-1] for k, v in parse_qs(parts.query, keep_blank_values=True).items()}
                record = StubRequest(time=time.monotonic(), path=parts.path, params=params)
                with stub._lock:
                    n = len(stub.requests)
                    stub.requests.append(record)
                    stub.in_flight += 1
                    stub.peak_in_flight = max(stub.peak_in_flight, stub.in_flight)
                try:
                    self._answer(record, n, parts.path, params)
                finally:
                    with stub._lock:
                        stub.in_flight -= 1

            def _answer(self, record: StubRequest, n: int, path: str, params: dict[str, str]) -> None:
                reply = stub.script(record, n) if stub.script else None
                if reply is None:
                    if path != "/translate_a/single" or "q" not in params:
                        reply = StubReply(status=404, body="not found")
                    else:
                        reply = StubReply(
                            body=gtx_payload(params["q"], params.get("sl", "auto"), params.get("tl", "en"))
                        )
                record.status = reply.status
                time.sleep(stub.latency + reply.delay)
                body = (reply.body if reply.body is not None else "error").encode("utf-8")
                try:
                    self.send_response(reply.status)
                    self.send_header("Content-Type", "application/json; charset=utf-8")
                    self.send_header("Content-Length", str(len(body)))
                    for k, v in reply.headers.items():
                        self.send_header(k, v)
                    self.end_headers()
                    self.wfile.write(body)
                except (BrokenPipeError, ConnectionResetError, ssl.SSLError):
                    pass  # the client gave up (timeout) before the answer

        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.load_cert_chain(cert, key)
        server = ThreadingHTTPServer(("127.0.0.1", port), Handler)
        server.socket = context.wrap_socket(server.socket, server_side=True)
        self._serve(server, "stub-translate")
        self.service_url = f"127.0.0.1:{self.port}"

    def translation_requests(self) -> list[StubRequest]:
        with self._lock:
            return [r for r in self.requests if r.path == "/translate_a/single"]


def main() -> None:  # pragma: no cover - manual use
    """``python -m jtcse.testing.translate_stub DIR [PORT] [LATENCY]``: serve until Ctrl-C; prints the CA path."""
    import sys

    directory = sys.argv[1] if len(sys.argv) > 1 else "."
    port = int(sys.argv[2]) if len(sys.argv) > 2 else 0
    latency = float(sys.argv[3]) if len(sys.argv) > 3 else 0.05
    cert, key = make_self_signed_cert(directory)
    server = StubTranslateServer(cert, key, latency=latency, port=port)
    print(json.dumps({"service_url": server.service_url, "ca_bundle": cert}), flush=True)
    server._server.serve_forever()


if __name__ == "__main__":  # pragma: no cover
    main()
