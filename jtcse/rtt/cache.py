"""Persistent translation cache: one SQLite file (WAL mode), keyed by (backend, source, target, text).

SQLite gives what a long crawl against a flaky service needs: one file, atomic commits that
survive a killed process, and many readers plus concurrent writers (threads or processes)
serialised by the database's own locking (``busy_timeout``). Every translation is committed as
soon as it arrives, so a rerun of the same job sends no request for anything already translated.
"""

from __future__ import annotations

import sqlite3
import threading
import time
from collections.abc import Iterable, Sequence
from pathlib import Path

from jtcse.errors import JTCSEError
from jtcse.locking import crash_point
from jtcse.rtt.base import ResultCallback, TranslationFailure, Translator

SCHEMA_VERSION = "1"
_SQL_VARS = 500  # texts per IN (...) query, well under SQLite's variable limit


class CacheCorruptError(JTCSEError):
    """The cache file exists but is not a readable translation cache."""


class TranslationCache:
    """A thread-safe handle on the SQLite cache at ``path`` (created when missing)."""

    def __init__(self, path: str | Path, *, busy_timeout_s: float = 60.0) -> None:
        self.path = Path(path)
        self._lock = threading.Lock()
        if self.path.is_dir():
            raise JTCSEError(f"Translation cache {self.path} is a folder; --cache names the SQLite file.")
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
        except (FileExistsError, NotADirectoryError):
            blocker = next(p for p in self.path.parents if p.exists())
            raise JTCSEError(
                f"Cannot create the translation cache {self.path}: {blocker} is a file, not a folder."
            ) from None
        try:
            self._conn = sqlite3.connect(
                str(self.path), timeout=busy_timeout_s, check_same_thread=False, isolation_level=None
            )
            self._conn.execute("PRAGMA journal_mode=WAL")
            self._conn.execute("PRAGMA synchronous=NORMAL")
            self._check_integrity()
            self._conn.executescript(
                """
                CREATE TABLE IF NOT EXISTS translations (
                    backend TEXT NOT NULL, source TEXT NOT NULL, target TEXT NOT NULL,
                    text TEXT NOT NULL, translation TEXT NOT NULL, created REAL NOT NULL,
                    PRIMARY KEY (backend, source, target, text)
                ) WITHOUT ROWID;
                CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
                """
            )
            self._conn.execute("INSERT OR IGNORE INTO meta VALUES ('schema_version', ?)", (SCHEMA_VERSION,))
            version = self._conn.execute("SELECT value FROM meta WHERE key='schema_version'").fetchone()[0]
        except sqlite3.DatabaseError as err:
            self._close_quietly()
            raise self._corrupt(err) from None
        if version != SCHEMA_VERSION:
            self._close_quietly()
            raise CacheCorruptError(
                f"Translation cache {self.path} has schema version {version}, this jtcse reads {SCHEMA_VERSION}. "
                "Pass another --cache path."
            )

    # -- errors ---------------------------------------------------------------------------------
    def _corrupt(self, err: Exception) -> CacheCorruptError:
        return CacheCorruptError(
            f"Translation cache {self.path} is corrupt or not an SQLite database ({err}). It was left untouched: "
            "move it aside (or pass another --cache path) and rerun; entries may be salvaged with "
            f"`sqlite3 {self.path} .recover`."
        )

    def _check_integrity(self) -> None:
        rows = self._conn.execute("PRAGMA quick_check").fetchall()
        if rows != [("ok",)]:
            problems = "; ".join(r[0] for r in rows[:3])
            raise sqlite3.DatabaseError(f"integrity check failed: {problems}")

    def _close_quietly(self) -> None:
        try:
            self._conn.close()
        except Exception:  # pragma: no cover - closing a broken handle
            pass

    def _run(self, fn):
        with self._lock:
            try:
                return fn(self._conn)
            except sqlite3.DatabaseError as err:
                if isinstance(err, sqlite3.OperationalError) and "locked" in str(err):
                    raise JTCSEError(f"Translation cache {self.path} stayed locked by another writer: {err}") from None
                raise self._corrupt(err) from None

    # -- reads and writes ---------------------------------------------------------------------------
    def get_many(self, backend: str, source: str, target: str, texts: Iterable[str]) -> dict[str, str]:
        """The cached translations of those ``texts`` that have one (text → translation)."""
        unique = list(dict.fromkeys(texts))
        found: dict[str, str] = {}

        def query(conn: sqlite3.Connection) -> None:
            for start in range(0, len(unique), _SQL_VARS):
                part = unique[start : start + _SQL_VARS]
                marks = ",".join("?" * len(part))
                rows = conn.execute(
                    f"SELECT text, translation FROM translations WHERE backend=? AND source=? AND target=? "
                    f"AND text IN ({marks})",
                    (backend, source, target, *part),
                )
                found.update(rows)

        self._run(query)
        return found

    def put_many(self, backend: str, source: str, target: str, items: Iterable[tuple[str, str]]) -> None:
        """Store ``(text, translation)`` pairs in one committed transaction (first writer wins)."""
        now = time.time()
        rows = [(backend, source, target, text, translation, now) for text, translation in items]
        if not rows:
            return

        def write(conn: sqlite3.Connection) -> None:
            conn.execute("BEGIN IMMEDIATE")
            try:
                conn.executemany("INSERT OR IGNORE INTO translations VALUES (?, ?, ?, ?, ?, ?)", rows)
            except BaseException:
                conn.execute("ROLLBACK")
                raise
            conn.execute("COMMIT")

        self._run(write)

    def put(self, backend: str, source: str, target: str, text: str, translation: str) -> None:
        self.put_many(backend, source, target, [(text, translation)])

    def count(self, backend: str | None = None) -> int:
        if backend is None:
            return self._run(lambda c: c.execute("SELECT COUNT(*) FROM translations").fetchone()[0])
        return self._run(
            lambda c: c.execute("SELECT COUNT(*) FROM translations WHERE backend=?", (backend,)).fetchone()[0]
        )

    def backends(self) -> list[str]:
        """The backend names that have entries in this cache."""
        return self._run(lambda c: [r[0] for r in c.execute("SELECT DISTINCT backend FROM translations ORDER BY 1")])

    def directions(self, backend: str) -> set[tuple[str, str]]:
        """The ``(source, target)`` language pairs ``backend`` has entries for."""
        rows = self._run(
            lambda c: c.execute(
                "SELECT DISTINCT source, target FROM translations WHERE backend=?", (backend,)
            ).fetchall()
        )
        return {(source, target) for source, target in rows}

    def close(self) -> None:
        with self._lock:
            self._close_quietly()

    def __enter__(self) -> TranslationCache:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


class CachedTranslator(Translator):
    """Wrap a backend so that cached texts are served locally and new translations are stored at once.

    Only the cache misses reach the backend; each of its answers is committed from the backend's
    ``on_result`` callback, i.e. as it arrives. Failures are not cached (a rerun retries them).
    Duplicated texts within a batch are translated once.
    """

    def __init__(self, inner: Translator, cache: TranslationCache) -> None:
        self.inner = inner
        self.cache = cache
        self.name = inner.name
        self.max_chars = inner.max_chars
        self.hits = 0
        self.misses = 0

    def translate(
        self,
        texts: Sequence[str],
        source: str,
        target: str,
        on_result: ResultCallback | None = None,
    ) -> list[str | TranslationFailure]:
        found = self.cache.get_many(self.name, source, target, texts)
        missing = [t for t in dict.fromkeys(texts) if t not in found]
        self.hits += sum(1 for t in texts if t in found)
        self.misses += len(missing)
        answers: dict[str, str | TranslationFailure] = dict(found)
        if missing:
            stored: set[int] = set()

            def store(i: int, result: str | TranslationFailure) -> None:
                if isinstance(result, str) and i not in stored:
                    self.cache.put(self.name, source, target, missing[i], result)
                    stored.add(i)
                    crash_point("rtt-translation")

            results = self.inner.translate(missing, source, target, on_result=store)
            leftovers = []
            for i, (text, result) in enumerate(zip(missing, results, strict=True)):
                answers[text] = result
                if isinstance(result, str) and i not in stored:
                    leftovers.append((text, result))
            self.cache.put_many(self.name, source, target, leftovers)
        out = [answers[t] for t in texts]
        if on_result is not None:
            for i, result in enumerate(out):
                on_result(i, result)
        return out

    def supported_languages(self):
        return self.inner.supported_languages()

    def stats(self) -> dict:
        return {"cache_hits": self.hits, "cache_misses": self.misses, **self.inner.stats()}

    def close(self) -> None:
        self.inner.close()
