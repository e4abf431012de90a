"""The replay backend: answers only from translations made earlier, and says which it cannot serve.

Two sources, for machines without network and for exact reproducibility:

* the translation cache — legs (``en→de``, ``de→en``) stored under another backend's name
  (``googletrans``, ``seq2seq:...``);
* previously written RTT pairs files — whole round trips (original → paraphrase) for a pivot.

A text found in neither comes back as a :class:`TranslationFailure` and is recorded in
:attr:`ReplayTranslator.missing`.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path

from jtcse.errors import JTCSEError
from jtcse.rtt.base import ResultCallback, TranslationFailure, Translator
from jtcse.rtt.cache import TranslationCache
from jtcse.rtt.pairs import read_pairs

NOT_SERVED = "not in the replay sources"


class ReplayTranslator(Translator):
    """Serve cached legs of ``backend`` from ``cache`` and/or round trips from pairs files per pivot."""

    name = "replay"
    caches_results = False

    def __init__(
        self,
        cache: TranslationCache | None = None,
        backend: str | None = None,
        pairs_files: Mapping[str, str | Path] | None = None,
    ) -> None:
        if cache is None and not pairs_files:
            raise JTCSEError("The replay backend needs a translation cache or previously written pairs files.")
        self.cache = cache
        self.backend = backend
        if cache is not None and backend is None:
            names = cache.backends()
            if len(names) == 1:
                self.backend = names[0]
            elif names:
                raise JTCSEError(
                    f"The cache {cache.path} holds translations of several backends ({', '.join(names)}); "
                    "name the one to replay (--replay-backend)."
                )
        self.round_trips: dict[str, dict[str, str]] = {}
        for pivot, path in (pairs_files or {}).items():
            self.round_trips[pivot] = dict(read_pairs(path))
        self.missing: list[tuple[str, str, str]] = []  # (source, target, text)
        self.served = 0

    def pivots(self, source: str) -> list[str]:
        """The pivots whose ``source → pivot → source`` round trips these sources can serve."""
        held = set(self.round_trips)
        if self.cache is not None and self.backend is not None:
            legs = self.cache.directions(self.backend)
            held.update(t for s, t in legs if s == source and (t, source) in legs)
        return sorted(held)

    def check_languages(self, codes: Iterable[str]) -> None:
        """``codes`` is ``[source, *pivots]`` (as :func:`~jtcse.rtt.runner.run_rtt` passes them): refuse,
        before anything is written, a pivot the sources hold nothing for, naming the ones they hold."""
        source, *pivots = list(codes)
        held = self.pivots(source)
        absent = [p for p in pivots if p not in held]
        if absent:
            where = [f"cache {self.cache.path} ({self.backend or 'empty'})"] if self.cache is not None else []
            where += [f"pairs files for {', '.join(sorted(self.round_trips))}"] if self.round_trips else []
            raise JTCSEError(
                f"The replay sources hold no {source}→pivot→{source} round trips for pivot(s) {', '.join(absent)}; "
                f"they hold: {', '.join(held) or 'none'} ({'; '.join(where)})."
            )

    def translate(
        self,
        texts: Sequence[str],
        source: str,
        target: str,
        on_result: ResultCallback | None = None,
    ) -> list[str | TranslationFailure]:
        found: dict[str, str] = {}
        if self.cache is not None and self.backend is not None:
            found = self.cache.get_many(self.backend, source, target, texts)
        return self._serve(texts, found, source, target, on_result)

    def round_trip(self, texts: Sequence[str], source: str, pivot: str) -> list[str | TranslationFailure]:
        """Round trips from the pivot's pairs file first; the rest through cached legs (if a cache is given)."""
        table = self.round_trips.get(pivot)
        if table is None:
            return super().round_trip(texts, source, pivot)
        if self.cache is None:
            return self._serve(texts, table, source, f"{pivot}→{source}", None)
        results: list[str | TranslationFailure] = [table.get(t, TranslationFailure(NOT_SERVED)) for t in texts]
        rest = [i for i, r in enumerate(results) if isinstance(r, TranslationFailure)]
        self.served += len(texts) - len(rest)
        if rest:
            for i, r in zip(rest, super().round_trip([texts[i] for i in rest], source, pivot), strict=True):
                results[i] = r
        return results

    def _serve(self, texts, found, source, target, on_result) -> list[str | TranslationFailure]:
        results: list[str | TranslationFailure] = []
        for i, text in enumerate(texts):
            if text in found:
                result: str | TranslationFailure = found[text]
                self.served += 1
            else:
                result = TranslationFailure(NOT_SERVED)
                self.missing.append((source, target, text))
            results.append(result)
            if on_result is not None:
                on_result(i, result)
        return results

    def stats(self) -> dict:
        return {"requests": 0, "replayed": self.served, "not_served": len(self.missing)}
