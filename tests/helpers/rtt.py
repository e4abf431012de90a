"""The googletrans backend pointed at the local stand-in server (the ``stub`` fixture, tests/conftest.py)."""

from __future__ import annotations


def google(server, **kwargs):
    """A googletrans backend pointed at ``server``, with fast backoff for tests."""
    from jtcse.rtt.googletrans_backend import GoogletransTranslator

    kwargs.setdefault("backoff_base", 0.02)
    kwargs.setdefault("timeout", 2.0)
    kwargs.setdefault("rate_limit", None)
    kwargs.setdefault("seed", 0)
    return GoogletransTranslator(server.service_url, ca_bundle=server.cert, **kwargs)
