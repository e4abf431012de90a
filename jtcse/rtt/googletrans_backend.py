"""The googletrans backend: the free Google Translate web endpoint, polite and robust.

``googletrans`` (4.x, async, httpx) builds the requests — URL, the ``gtx`` client parameters — and
parses the JSON answers; this wrapper owns the transport policy that a crawl of a million sentences
needs and googletrans lacks (its ``translate`` turns an HTTP 429 into a silent "translation" equal
to the input):

* bounded concurrency (``asyncio.Semaphore``) and a rate limit (requests per second, see
  :class:`AsyncRateLimiter`), with a global cool-down when the service answers 429;
* retries on HTTP 429, 5xx, timeouts and dropped connections, with exponential backoff and "equal
  jitter": attempt ``k`` waits ``d/2 + U(0, d/2)`` with ``d = min(backoff_max, backoff_base·2^k)``,
  and never less than the server's ``Retry-After``;
* packing: up to ``pack_size`` short sentences (``pack_chars`` characters in all) travel in one
  request, newline-joined, and are split back on the newlines; if the line count comes back wrong,
  or the service rejects the pack (4xx), it is re-sent one sentence per request so that only the
  culprit fails;
* a clear :class:`ServiceUnreachableError` when the host cannot be reached at all, and a stop after
  ``max_consecutive_failures`` failed texts in a row (everything translated before is cached).
"""

from __future__ import annotations

import asyncio
import random
import ssl
from collections.abc import Sequence
from dataclasses import dataclass, field

from jtcse.errors import JTCSEError
from jtcse.rtt.base import ResultCallback, TranslationFailure, Translator
from jtcse.rtt.settings import GoogletransSettings

_DEFAULTS = GoogletransSettings()
"""The settings' defaults are the translator's (``jtcse rtt`` declares them once)."""
DEFAULT_SERVICE_URL = _DEFAULTS.service_url
GOOGLE_MAX_CHARS = 5000


class ServiceUnreachableError(JTCSEError):
    """The translation service could not be reached (DNS, refused connection, TLS, proxy)."""


class ServiceFailingError(JTCSEError):
    """The service answered, but failed too many texts in a row to go on."""


class AsyncRateLimiter:
    """Space request starts at least ``1/rate`` seconds apart (a leaky bucket without burst).

    Hand-written because it is a dozen lines and needs a :meth:`pause` (a cool-down shared by all
    requests after a 429) that the small limiter libraries do not offer.
    """

    def __init__(self, rate: float | None) -> None:
        self.interval = 0.0 if not rate else 1.0 / rate
        self._next = 0.0

    async def acquire(self) -> None:
        loop = asyncio.get_running_loop()
        now = loop.time()
        slot = max(now, self._next)
        self._next = slot + self.interval
        if slot > now:
            await asyncio.sleep(slot - now)

    def pause(self, seconds: float) -> None:
        """Let no request start during the next ``seconds``."""
        self._next = max(self._next, asyncio.get_running_loop().time() + seconds)


@dataclass
class GoogletransStats:
    requests: int = 0
    retries: int = 0
    http_errors: dict[int, int] = field(default_factory=dict)
    timeouts: int = 0
    connection_errors: int = 0
    pack_fallbacks: int = 0
    failed_texts: int = 0
    backoff_delays: list[float] = field(default_factory=list)

    def as_dict(self) -> dict:
        return {
            "requests": self.requests,
            "retries": self.retries,
            "http_errors": {str(k): v for k, v in sorted(self.http_errors.items())},
            "timeouts": self.timeouts,
            "connection_errors": self.connection_errors,
            "pack_fallbacks": self.pack_fallbacks,
            "failed_texts": self.failed_texts,
            "backoff_seconds": round(sum(self.backoff_delays), 3),
        }


class _TextFailed(Exception):
    def __init__(self, reason: str, *, rejected: bool = False) -> None:
        super().__init__(reason)
        self.reason = reason
        self.rejected = rejected  # the service refused this input (4xx), as opposed to being unavailable


class GoogletransTranslator(Translator):
    """Translate through googletrans with bounded concurrency, a rate limit and retries.

    ``service_url`` is the host (and optional port) serving ``/translate_a/single`` over https —
    the default Google endpoint, a mirror, or a local stand-in; ``ca_bundle`` adds a CA file to
    trust (self-signed local servers, corporate TLS proxies); ``proxy`` is passed to httpx.
    """

    name = "googletrans"
    max_chars = GOOGLE_MAX_CHARS

    def __init__(
        self,
        service_url: str = DEFAULT_SERVICE_URL,
        *,
        concurrency: int = _DEFAULTS.concurrency,
        rate_limit: float | None = _DEFAULTS.rate_limit,
        max_retries: int = _DEFAULTS.max_retries,
        max_connect_retries: int = 2,
        backoff_base: float = _DEFAULTS.backoff_base,
        backoff_max: float = 60.0,
        timeout: float = _DEFAULTS.timeout,
        pack_size: int = _DEFAULTS.pack_size,
        pack_chars: int = 2000,
        max_consecutive_failures: int = 50,
        ca_bundle: str | None = None,
        proxy: str | None = None,
        http2: bool = True,
        seed: int | None = None,
    ) -> None:
        try:
            import googletrans  # noqa: F401
        except ImportError as err:
            raise JTCSEError("The googletrans backend needs `pip install 'jtcse[rtt]'` (googletrans, httpx).") from err
        if concurrency < 1:
            raise JTCSEError(f"concurrency must be at least 1, got {concurrency}")
        if rate_limit is not None and rate_limit <= 0:
            raise JTCSEError(f"rate limit must be positive requests/second (or None for no limit), got {rate_limit}")
        if pack_size < 1 or pack_chars < 1:
            raise JTCSEError("pack_size and pack_chars must be at least 1")
        self.service_url = service_url.removeprefix("https://").rstrip("/")
        self.concurrency = concurrency
        self.rate_limit = rate_limit
        self.max_retries = max_retries
        self.max_connect_retries = max_connect_retries
        self.backoff_base = backoff_base
        self.backoff_max = backoff_max
        self.timeout = timeout
        self.pack_size = pack_size
        self.pack_chars = pack_chars
        self.max_consecutive_failures = max_consecutive_failures
        self.ca_bundle = ca_bundle
        self.proxy = proxy
        self.http2 = http2
        self._rng = random.Random(seed)
        self._stats = GoogletransStats()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._gt = None
        self._consecutive_failures = 0

    # -- languages --------------------------------------------------------------------------------
    def supported_languages(self) -> list[str]:
        from googletrans import LANGUAGES

        return sorted(LANGUAGES)

    def stats(self) -> dict:
        return self._stats.as_dict()

    @property
    def request_stats(self) -> GoogletransStats:
        return self._stats

    # -- client -----------------------------------------------------------------------------------
    def _client(self):
        """A googletrans ``Translator`` speaking the ``gtx`` protocol to ``service_url`` over our httpx client."""
        if self._gt is None:
            import httpx
            from googletrans import Translator as GoogleTranslator
            from googletrans.constants import DEFAULT_USER_AGENT

            verify: bool | ssl.SSLContext = True
            if self.ca_bundle:
                verify = ssl.create_default_context(cafile=self.ca_bundle)
            http2 = self.http2
            if http2:
                try:
                    import h2  # noqa: F401
                except ImportError:
                    http2 = False
            gt = GoogleTranslator(service_urls=[self.service_url])
            # googletrans switches a non-"googleapis" host to the legacy token-based "webapp"
            # protocol; we speak the key-less "gtx" protocol of translate.googleapis.com to any host.
            gt.service_urls = [self.service_url]
            gt.client_type = "gtx"
            # Our own client: its pool size follows our concurrency, and TLS/proxy/timeout are ours.
            default_client = gt.client
            gt.client = httpx.AsyncClient(
                http2=http2,
                proxy=self.proxy,
                verify=verify,
                timeout=httpx.Timeout(self.timeout),
                limits=httpx.Limits(max_connections=self.concurrency, max_keepalive_connections=self.concurrency),
                headers={"User-Agent": DEFAULT_USER_AGENT},
            )
            self._loop.run_until_complete(default_client.aclose())
            self._gt = gt
        return self._gt

    def close(self) -> None:
        if self._loop is not None and not self._loop.is_closed():
            if self._gt is not None:
                self._loop.run_until_complete(self._gt.client.aclose())
            self._loop.close()
        self._gt = None
        self._loop = None

    # -- public API -------------------------------------------------------------------------------
    def translate(
        self,
        texts: Sequence[str],
        source: str,
        target: str,
        on_result: ResultCallback | None = None,
    ) -> list[str | TranslationFailure]:
        """Translate ``texts``; blocks on a private event loop kept open between calls (connection reuse)."""
        self.check_languages([source, target])
        if self._loop is None or self._loop.is_closed():
            self._loop = asyncio.new_event_loop()
        gt = self._client()
        return self._loop.run_until_complete(self._translate_all(gt, list(texts), source, target, on_result))

    # -- internals --------------------------------------------------------------------------------
    def _packs(self, texts: list[str]) -> list[list[int]]:
        """Group indices of consecutive texts into requests of ≤ pack_size texts and ≤ pack_chars chars."""
        packs: list[list[int]] = []
        current: list[int] = []
        chars = 0
        for i, text in enumerate(texts):
            packable = "\n" not in text and len(text) <= self.pack_chars
            if current and (not packable or len(current) >= self.pack_size or chars + 1 + len(text) > self.pack_chars):
                packs.append(current)
                current, chars = [], 0
            if not packable:
                packs.append([i])
                continue
            current.append(i)
            chars += len(text) + (1 if len(current) > 1 else 0)
        if current:
            packs.append(current)
        return packs

    async def _translate_all(self, gt, texts, source, target, on_result) -> list[str | TranslationFailure]:
        results: list[str | TranslationFailure | None] = [None] * len(texts)
        limiter = AsyncRateLimiter(self.rate_limit)
        semaphore = asyncio.Semaphore(self.concurrency)

        def finish(i: int, result: str | TranslationFailure) -> None:
            results[i] = result
            if isinstance(result, TranslationFailure):
                self._stats.failed_texts += 1
                self._consecutive_failures += 1
                if self._consecutive_failures >= self.max_consecutive_failures:
                    raise ServiceFailingError(
                        f"The translation service at {self.service_url} failed {self._consecutive_failures} texts in a "
                        f"row (last: {result.reason}); stopping. Everything translated so far is cached: rerun later "
                        "to resume, or lower --concurrency/--rate-limit."
                    )
            else:
                self._consecutive_failures = 0
            if on_result is not None:
                on_result(i, result)

        async def run_pack(pack: list[int]) -> None:
            for i in pack:
                if not texts[i].strip():
                    finish(i, "")
            pack = [i for i in pack if texts[i].strip()]
            if not pack:
                return
            query = "\n".join(texts[i] for i in pack)
            try:
                async with semaphore:
                    translated = await self._request(gt, limiter, query, source, target)
            except _TextFailed as failed:
                if failed.rejected and len(pack) > 1:  # find the culprit: one text per request
                    self._stats.pack_fallbacks += 1
                    await asyncio.gather(*(run_pack([i]) for i in pack))
                    return
                for i in pack:
                    finish(i, TranslationFailure(failed.reason))
                return
            lines = translated.split("\n") if len(pack) > 1 else [translated]
            if len(lines) != len(pack):
                self._stats.pack_fallbacks += 1
                await asyncio.gather(*(run_pack([i]) for i in pack))
                return
            for i, line in zip(pack, lines, strict=True):
                finish(i, line.strip())

        tasks = [asyncio.ensure_future(run_pack(p)) for p in self._packs(texts)]
        try:
            await asyncio.gather(*tasks)
        finally:
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
        return results  # type: ignore[return-value]

    def _backoff(self, attempt: int, retry_after: float | None) -> float:
        ceiling = min(self.backoff_max, self.backoff_base * (2.0**attempt))
        delay = ceiling / 2 + self._rng.uniform(0.0, ceiling / 2)
        if retry_after is not None:
            delay = max(delay, min(retry_after, self.backoff_max))
        return delay

    async def _request(self, gt, limiter: AsyncRateLimiter, query: str, source: str, target: str) -> str:
        """One text (or pack) with retries; returns the translated text or raises ``_TextFailed``."""
        import httpx
        from googletrans.utils import format_json

        attempt = 0
        connect_failures = 0
        while True:
            await limiter.acquire()
            retry_after: float | None = None
            reason: str
            retryable = True
            is_429 = False
            try:
                request = await gt.build_request(query, dest=target, src=source, override={})
                self._stats.requests += 1
                response = await gt.client.send(request)
            except httpx.TimeoutException:
                self._stats.timeouts += 1
                reason = f"timed out after {self.timeout:g}s"
            except (httpx.ConnectError, httpx.ProxyError, httpx.UnsupportedProtocol) as err:
                self._stats.connection_errors += 1
                connect_failures += 1
                reason = f"cannot connect: {err}"
                if connect_failures > self.max_connect_retries:
                    raise ServiceUnreachableError(
                        f"Cannot reach the translation service at https://{self.service_url} ({err or type(err).__name__}). "
                        "Check the network, --service-url, --proxy and --ca-bundle; offline, use --backend seq2seq "
                        "(a local model) or --backend replay (cached translations)."
                    ) from None
            except httpx.TransportError as err:  # dropped connection, protocol error: transient
                self._stats.connection_errors += 1
                reason = f"connection error: {err or type(err).__name__}"
            else:
                status = response.status_code
                if status == 200:
                    try:
                        data = format_json(response.text)
                        return "".join(segment[0] or "" for segment in data[0] if segment)
                    except Exception:
                        raise _TextFailed(
                            f"unreadable answer from the service: {response.text[:120]!r}", rejected=True
                        ) from None
                self._stats.http_errors[status] = self._stats.http_errors.get(status, 0) + 1
                reason = f"HTTP {status}"
                if status == 429 or status >= 500:
                    is_429 = status == 429
                    header = response.headers.get("Retry-After")
                    if header is not None:
                        try:
                            retry_after = float(header)
                        except ValueError:
                            retry_after = None
                else:
                    retryable = False
                    reason = f"HTTP {status}: {response.text[:200]}"
            if not retryable:
                raise _TextFailed(reason, rejected=True)
            if attempt >= self.max_retries:
                raise _TextFailed(f"{reason} (gave up after {attempt + 1} attempts)")
            delay = self._backoff(attempt, retry_after)
            if is_429:
                limiter.pause(delay)
            self._stats.backoff_delays.append(delay)
            self._stats.retries += 1
            attempt += 1
            await asyncio.sleep(delay)
