"""Fixtures shared by the RTT tests: a test certificate and a local https stand-in for Google Translate."""

from __future__ import annotations

import pytest

from jtcse.rtt.stub_server import StubTranslateServer, make_self_signed_cert


@pytest.fixture(scope="session")
def stub_cert(tmp_path_factory) -> tuple[str, str]:
    return make_self_signed_cert(tmp_path_factory.mktemp("tls"))


@pytest.fixture
def stub(stub_cert):
    """A fresh server per test (its request log is the test's), no added latency."""
    with StubTranslateServer(*stub_cert) as server:
        yield server


def google(server, **kwargs):
    """A googletrans backend pointed at ``server``, with fast backoff for tests."""
    from jtcse.rtt.googletrans_backend import GoogletransTranslator

    kwargs.setdefault("backoff_base", 0.02)
    kwargs.setdefault("timeout", 2.0)
    kwargs.setdefault("rate_limit", None)
    kwargs.setdefault("seed", 0)
    return GoogletransTranslator(server.service_url, ca_bundle=server.cert, **kwargs)
