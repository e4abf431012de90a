"""The googletrans backend against a real local https server speaking the gtx protocol."""

from __future__ import annotations

import pytest
from helpers.rtt import google

from jtcse.errors import JTCSEError
from jtcse.rtt.base import TranslationFailure
from jtcse.rtt.googletrans_backend import AsyncRateLimiter, ServiceFailingError, ServiceUnreachableError
from jtcse.testing.translate_stub import StubReply, StubTranslateServer, fake_translate


def test_translates_through_googletrans_request_format(stub):
    texts = ["The cat sat on the mat.", "It rained all day.", "A third one."]
    with google(stub) as t:
        out = t.translate(texts, "en", "de")
    assert out == [fake_translate(x, "en", "de") for x in texts]
    (request,) = stub.translation_requests()  # packed into one request
    assert request.params["client"] == "gtx" and request.params["sl"] == "en" and request.params["tl"] == "de"
    assert request.params["q"] == "\n".join(texts)


def test_packing_respects_size_and_chars(stub):
    texts = [f"sentence number {i}" for i in range(10)]
    with google(stub, pack_size=4, pack_chars=10_000) as t:
        assert t.translate(texts, "en", "fr") == [fake_translate(x, "en", "fr") for x in texts]
    # (the packs go out concurrently: the server may see them in any order)
    assert sorted(r.params["q"].count("\n") + 1 for r in stub.translation_requests()) == [2, 4, 4]
    stub.requests.clear()
    with google(stub, pack_size=16, pack_chars=40) as t:
        t.translate(texts, "en", "fr")
    assert all(len(r.params["q"]) <= 40 for r in stub.translation_requests())
    assert len(stub.translation_requests()) == 5  # 17 chars each: two (35 chars) per request


def test_pack_with_wrong_line_count_is_resent_one_by_one(stub):
    def merge_lines(request, n):
        q = request.params.get("q", "")
        if "\n" in q:  # a service that joins the lines of a pack
            return StubReply(body='[[["' + q.replace("\n", " ") + '", "x", null, null, 10]]]')
        return None

    stub.script = merge_lines
    texts = ["one two", "three four", "five six"]
    with google(stub) as t:
        out = t.translate(texts, "en", "de")
        assert t.stats()["pack_fallbacks"] == 1
    assert out == [fake_translate(x, "en", "de") for x in texts]
    assert len(stub.translation_requests()) == 1 + 3


@pytest.mark.parametrize("status", [429, 500, 503])
def test_retries_with_exponential_backoff_then_succeeds(stub, status):
    stub.script = lambda request, n: StubReply(status=status, body="busy") if n < 3 else None
    with google(stub, backoff_base=0.01, max_retries=5) as t:
        out = t.translate(["Hello there."], "en", "de")
        stats = t.request_stats
    assert out == [fake_translate("Hello there.", "en", "de")]
    log = stub.translation_requests()
    assert [r.status for r in log] == [status, status, status, 200]
    assert stats.retries == 3 and stats.http_errors == {status: 3}
    # equal jitter: attempt k waits within [d/2, d], d = base * 2^k
    for k, delay in enumerate(stats.backoff_delays):
        assert 0.01 * 2**k / 2 <= delay <= 0.01 * 2**k
    # and the server saw the waits: consecutive attempts are at least that far apart
    for k in range(3):
        assert log[k + 1].time - log[k].time >= stats.backoff_delays[k] * 0.95


def test_retry_after_header_is_honoured(stub):
    stub.script = lambda request, n: StubReply(status=429, headers={"Retry-After": "0.1"}) if n == 0 else None
    with google(stub, backoff_base=0.01) as t:
        t.translate(["Hello."], "en", "de")
        assert t.request_stats.backoff_delays[0] >= 0.1  # not the 0.005 to 0.01 s of the backoff alone
    log = stub.translation_requests()
    assert log[1].time - log[0].time >= 0.095


@pytest.mark.slow  # waits out a 0.3 s timeout
def test_timeout_is_retried(stub):
    stub.script = lambda request, n: StubReply(delay=1.5) if n == 0 else None
    with google(stub, timeout=0.3) as t:
        out = t.translate(["Slow one."], "en", "de")
        assert t.request_stats.timeouts == 1 and t.request_stats.retries == 1
    assert out == [fake_translate("Slow one.", "en", "de")]


def test_final_error_after_max_retries_fails_only_that_text(stub):
    stub.script = lambda request, n: StubReply(status=500) if "poison" in request.params.get("q", "") else None
    with google(stub, max_retries=2, pack_size=1) as t:
        out = t.translate(["fine text", "poison text", "another fine"], "en", "de")
        stats = t.request_stats
    assert out[0] == fake_translate("fine text", "en", "de") and out[2] == fake_translate("another fine", "en", "de")
    assert isinstance(out[1], TranslationFailure)
    assert "HTTP 500" in out[1].reason and "gave up after 3 attempts" in out[1].reason
    assert sum("poison" in r.params["q"] for r in stub.translation_requests()) == 3  # 1 + max_retries
    assert len(stats.backoff_delays) == 2


def test_client_errors_are_not_retried(stub):
    stub.script = lambda request, n: StubReply(status=400, body="bad request")
    with google(stub) as t:
        (out,) = t.translate(["x y"], "en", "de")
    assert isinstance(out, TranslationFailure) and out.reason.startswith("HTTP 400")
    assert len(stub.translation_requests()) == 1


def test_persistent_failure_stops_the_job_with_a_clear_error(stub):
    stub.script = lambda request, n: StubReply(status=429)
    with google(stub, max_retries=1, pack_size=1, max_consecutive_failures=3, concurrency=1) as t:
        with pytest.raises(ServiceFailingError, match="failed 3 texts in a row.*HTTP 429"):
            t.translate([f"text {i}" for i in range(10)], "en", "de")
    assert len(stub.translation_requests()) == 3 * 2  # stopped early, not 10 * 2


def test_unreachable_service_gives_a_clear_error(tmp_path, stub_cert):
    server = StubTranslateServer(*stub_cert)
    url = server.service_url
    server.stop()  # the port is now closed: connection refused
    from jtcse.rtt.googletrans_backend import GoogletransTranslator

    with GoogletransTranslator(url, ca_bundle=stub_cert[0], backoff_base=0.01) as t:
        with pytest.raises(ServiceUnreachableError, match=f"Cannot reach the translation service at https://{url}"):
            t.translate(["hello"], "en", "de")
        assert t.request_stats.connection_errors == 3  # 1 + max_connect_retries


def test_untrusted_certificate_is_an_unreachable_error(stub):
    from jtcse.rtt.googletrans_backend import GoogletransTranslator

    with GoogletransTranslator(stub.service_url, backoff_base=0.01) as t:  # no --ca-bundle
        with pytest.raises(ServiceUnreachableError, match="CERTIFICATE_VERIFY_FAILED|certificate"):
            t.translate(["hello"], "en", "de")


def test_concurrency_is_bounded(stub_cert):
    with StubTranslateServer(*stub_cert, latency=0.03) as server:
        with google(server, concurrency=3, pack_size=1) as t:
            t.translate([f"t {i}" for i in range(12)], "en", "de")
        assert server.peak_in_flight == 3


def test_rate_limit_spaces_requests(stub):
    # The limiter schedules the 6 starts 1/10 s apart, so the call cannot end before the sixth start's slot. A lower
    # bound on the whole call holds however loaded the machine is (a sleep never ends early), where the spacing of
    # arrivals at the server does not: a delayed first request can arrive just before the second.
    import time

    with google(stub, rate_limit=10.0, pack_size=1, concurrency=8) as t:
        start = time.monotonic()
        t.translate([f"t {i}" for i in range(6)], "en", "de")
        elapsed = time.monotonic() - start
    assert len(stub.translation_requests()) == 6
    assert elapsed >= 5 * 0.1 * 0.99  # unlimited, 6 concurrent requests to a local server take a few milliseconds


def test_rate_limiter_pause():
    import asyncio

    async def run():
        limiter = AsyncRateLimiter(None)
        loop = asyncio.get_running_loop()
        t0 = loop.time()
        await limiter.acquire()
        limiter.pause(0.1)
        await limiter.acquire()
        return loop.time() - t0

    assert asyncio.run(run()) >= 0.095


def test_unsupported_language_lists_supported(stub):
    with google(stub) as t:
        with pytest.raises(
            JTCSEError,
            match=r"Unsupported language code\(s\) for the googletrans backend: xx\. Supported: .*\bde\b.*\bzh-cn\b",
        ):
            t.translate(["hello"], "en", "xx")
    assert stub.translation_requests() == []


def test_empty_texts_are_answered_without_requests(stub):
    with google(stub) as t:
        assert t.translate(["", "  "], "en", "de") == ["", ""]
    assert stub.translation_requests() == []


def test_bad_settings_are_rejected():
    from jtcse.rtt.googletrans_backend import GoogletransTranslator

    with pytest.raises(JTCSEError, match="concurrency"):
        GoogletransTranslator(concurrency=0)
    with pytest.raises(JTCSEError, match="rate limit"):
        GoogletransTranslator(rate_limit=-1)
