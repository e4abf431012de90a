"""The resumable RTT job: corpus → per pivot, ``source → pivot → source`` → pairs file + drop list.

Work goes in chunks; each translation is committed to the cache the moment it arrives, so a killed
or interrupted run resumes where it stopped and a rerun of a finished job makes no request. Per
pivot the job writes (atomically, when the pivot is complete):

* ``pairs.<pivot>.tsv`` — the kept ``original<TAB>round trip`` pairs (see :mod:`jtcse.rtt.pairs`);
* ``dropped.<pivot>.tsv`` — ``original<TAB>reason<TAB>detail`` for every sentence not kept:
  ``identical`` (round trip equals the source up to case and spacing), ``empty``, ``failed``
  (with the backend's reason) and ``too_long`` (over the backend's character limit, skipped unsent);

and ``summary.json`` with the counts per pivot and the backend's request statistics.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path

from jtcse.errors import JTCSEError
from jtcse.locking import atomic_path, atomic_write_json, crash_point
from jtcse.output_paths import FolderOutput, resolved
from jtcse.rtt.base import TranslationFailure, Translator
from jtcse.rtt.cache import CachedTranslator, TranslationCache
from jtcse.rtt.pairs import clean_field, normalise_for_comparison, write_pairs


@dataclass
class PivotSummary:
    pivot: str
    sentences: int = 0
    kept: int = 0
    identical: int = 0
    empty: int = 0
    failed: int = 0
    too_long: int = 0
    pairs_file: str = ""
    dropped_file: str = ""
    seconds: float = 0.0


@dataclass
class RTTSummary:
    backend: str
    source: str
    input_sentences: int
    pivots: list[PivotSummary] = field(default_factory=list)
    backend_stats: dict = field(default_factory=dict)
    cache: str | None = None

    def as_dict(self) -> dict:
        return asdict(self)


SUMMARY_FILE = "summary.json"


def pairs_path(output_dir: str | Path, pivot: str) -> Path:
    return Path(output_dir) / f"pairs.{pivot}.tsv"


def run_rtt(
    sentences: Sequence[str],
    pivots: Sequence[str],
    translator: Translator,
    output_dir: str | Path,
    *,
    source: str = "en",
    cache: TranslationCache | None = None,
    chunk_size: int = 1024,
    progress: bool = True,
    inputs: Sequence[str | Path | None] = (),
) -> RTTSummary:
    """Make round-trip paraphrases of ``sentences`` through each pivot and write the files above.

    ``translator`` is wrapped in a :class:`CachedTranslator` on ``cache`` (unless it is a replay
    backend). Sentences are cleaned of tabs/newlines first (the pairs format needs one line each);
    duplicates are translated once. The folder is locked while the job writes (one job per
    folder); a pivot for which every sentence failed is an error, not an empty pairs file. ``inputs``: the files
    and folders the sentences and translations were read from (the corpus, ``--replay-pairs``), which the
    output folder may neither be nor hold (:func:`~jtcse.output_paths.check_output_apart`).
    """
    pivots = list(dict.fromkeys(p.strip() for p in pivots if p.strip()))
    if not pivots:
        raise JTCSEError("Name at least one pivot language (e.g. --pivots de,fr,zh).")
    if source in pivots:
        raise JTCSEError(f"The pivot languages must differ from the source language {source!r}.")
    translator.check_languages([source, *pivots])
    if chunk_size < 1:
        raise JTCSEError(f"chunk size must be at least 1, got {chunk_size}")
    live = (
        cache_files(cache.path)
        if cache is not None and Path(cache.path).parent.resolve() == resolved(output_dir)
        else ()
    )
    with rtt_output(output_dir, inputs, live).writing() as out:
        out.add(*(name for pivot in pivots for name in (pairs_path(out.path, pivot).name, dropped_name(pivot))))
        out.add(SUMMARY_FILE)
        cleaned = [clean_field(s) for s in sentences]
        return _run_pivots(cleaned, pivots, translator, out.path, source, cache, chunk_size, progress)


def rtt_output(
    output_dir: str | Path, inputs: Sequence[str | Path | None] = (), live: Sequence[str] = ()
) -> FolderOutput:
    """``output_dir`` as what ``jtcse rtt`` writes (:class:`~jtcse.output_paths.FolderOutput`): a folder of its own
    (``jtcse_outputs.json`` lists the pairs, drop lists, summary and, when it is there, the cache: ``live``, written
    to on every run), never one of ``inputs`` nor a folder holding one."""
    return FolderOutput(output_dir, "jtcse rtt", inputs=inputs, live=live)


def cache_files(cache: str | Path) -> list[str]:
    """The names of an SQLite cache and of the files SQLite keeps beside it while it is open."""
    name = Path(cache).name
    return [name, *(f"{name}{suffix}" for suffix in ("-wal", "-shm", "-journal"))]


def dropped_name(pivot: str) -> str:
    return f"dropped.{pivot}.tsv"


def _run_pivots(
    cleaned: list[str],
    pivots: list[str],
    translator: Translator,
    output_dir: Path,
    source: str,
    cache: TranslationCache | None,
    chunk_size: int,
    progress: bool,
) -> RTTSummary:
    from tqdm.auto import tqdm

    engine: Translator = translator
    if cache is not None and translator.caches_results:
        engine = CachedTranslator(translator, cache)
    limit = translator.max_chars
    summary = RTTSummary(
        backend=translator.name,
        source=source,
        input_sentences=len(cleaned),
        cache=str(cache.path) if cache is not None else None,
    )
    for pivot in pivots:
        started = time.perf_counter()
        stats = PivotSummary(pivot=pivot, sentences=len(cleaned))
        kept: list[tuple[str, str]] = []
        dropped: list[tuple[str, str, str]] = []
        todo: list[str] = []
        for s in cleaned:
            if not s:
                stats.empty += 1
                dropped.append((s, "empty", "empty input line"))
            elif limit is not None and len(s) > limit:
                stats.too_long += 1
                dropped.append((s, "too_long", f"{len(s)} characters > {limit}, the {translator.name} limit; not sent"))
            else:
                todo.append(s)
        unique = list(dict.fromkeys(todo))
        answers: dict[str, str | TranslationFailure] = {}
        with tqdm(total=len(unique), desc=f"{source}→{pivot}→{source}", unit="sent", disable=not progress) as bar:
            for start in range(0, len(unique), chunk_size):
                chunk = unique[start : start + chunk_size]
                answers.update(zip(chunk, engine.round_trip(chunk, source, pivot), strict=True))
                bar.update(len(chunk))
        for s in todo:
            result = answers[s]
            if isinstance(result, TranslationFailure):
                stats.failed += 1
                dropped.append((s, "failed", result.reason))
            elif not result.strip():
                stats.empty += 1
                dropped.append((s, "empty", "the round trip came back empty"))
            elif normalise_for_comparison(result) == normalise_for_comparison(s):
                stats.identical += 1
                dropped.append((s, "identical", result))
            else:
                kept.append((s, result))
        if todo and stats.failed == len(todo):
            first = next(detail for _, reason, detail in dropped if reason == "failed")
            raise JTCSEError(
                f"No {source}→{pivot}→{source} round trip succeeded ({stats.failed} failed, e.g. {first!r}); "
                f"nothing was written for {pivot}."
            )
        stats.kept = write_pairs(pairs_path(output_dir, pivot), kept)
        stats.pairs_file = str(pairs_path(output_dir, pivot))
        dropped_path = output_dir / dropped_name(pivot)
        _write_dropped(dropped_path, dropped)
        stats.dropped_file = str(dropped_path)
        stats.seconds = round(time.perf_counter() - started, 3)
        summary.pivots.append(stats)
        crash_point("rtt-pivot")
    summary.backend_stats = engine.stats()
    atomic_write_json(output_dir / SUMMARY_FILE, summary.as_dict())
    return summary


def _write_dropped(path: Path, rows: list[tuple[str, str, str]]) -> None:
    with atomic_path(path) as tmp, tmp.open("w", encoding="utf-8", newline="\n") as handle:
        for original, reason, detail in rows:
            handle.write(f"{clean_field(original)}\t{reason}\t{clean_field(detail)}\n")
