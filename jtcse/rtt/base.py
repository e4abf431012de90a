"""The translator interface every RTT backend implements: a batch of texts, source, target → texts.

A backend answers each input text with either its translation (a ``str``) or a
:class:`TranslationFailure` saying why it could not be translated, so one bad text never costs the
rest of its batch. ``on_result(i, result)`` is called as soon as text ``i`` is done, which is what
lets the cache persist every translation the moment it arrives (and a killed run lose nothing).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass

from jtcse.errors import JTCSEError


@dataclass(frozen=True)
class TranslationFailure:
    """A text the backend could not translate, and why (shown to the user, never cached)."""

    reason: str


ResultCallback = Callable[[int, "str | TranslationFailure"], None]


class Translator(ABC):
    """A translation backend.

    ``name`` is the namespace of the backend's entries in the cache (two backends, or two models,
    that may translate differently must have different names). ``max_chars`` is the longest text
    the backend accepts (``None``: no character limit). ``caches_results`` is false for backends
    whose answers are themselves stored translations (replay).
    """

    name: str = "translator"
    max_chars: int | None = None
    caches_results: bool = True

    @abstractmethod
    def translate(
        self,
        texts: Sequence[str],
        source: str,
        target: str,
        on_result: ResultCallback | None = None,
    ) -> list[str | TranslationFailure]:
        """Translate ``texts`` from ``source`` to ``target``; one result per text, in order."""

    def round_trip(self, texts: Sequence[str], source: str, pivot: str) -> list[str | TranslationFailure]:
        """``source → pivot → source`` for each text (two :meth:`translate` legs unless overridden)."""
        there = self.translate(texts, source, pivot)
        ok = [i for i, r in enumerate(there) if isinstance(r, str) and r.strip()]
        back = self.translate([there[i] for i in ok], pivot, source) if ok else []
        results: list[str | TranslationFailure] = []
        for r in there:
            if isinstance(r, TranslationFailure):
                results.append(TranslationFailure(f"{source}→{pivot}: {r.reason}"))
            else:
                results.append("")  # an empty pivot text gives an empty round trip
        for i, r in zip(ok, back, strict=True):
            results[i] = TranslationFailure(f"{pivot}→{source}: {r.reason}") if isinstance(r, TranslationFailure) else r
        return results

    def supported_languages(self) -> Sequence[str] | None:
        """The language codes this backend accepts, or ``None`` when it cannot tell in advance."""
        return None

    def check_languages(self, codes: Iterable[str]) -> None:
        """Raise :class:`JTCSEError` naming every unsupported code and listing the supported ones."""
        supported = self.supported_languages()
        if supported is None:
            return
        allowed = set(supported)
        bad = [c for c in codes if c not in allowed]
        if bad:
            listing = ", ".join(sorted(allowed))
            raise JTCSEError(
                f"Unsupported language code(s) for the {self.name} backend: {', '.join(bad)}. Supported: {listing}"
            )

    def stats(self) -> dict:
        """Counters worth reporting in a run summary (requests made, retries, ...)."""
        return {}

    def close(self) -> None:  # noqa: B027 (an optional hook: most backends hold nothing to release)
        """Release network clients, models, event loops."""

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> None:
        self.close()
