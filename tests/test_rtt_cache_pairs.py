"""Pairs-file format and the SQLite translation cache (concurrency, corruption)."""

from __future__ import annotations

import multiprocessing
import sqlite3
import threading

import pytest
from helpers.rtt import google

from jtcse.errors import JTCSEError
from jtcse.rtt.cache import CacheCorruptError, CachedTranslator, TranslationCache
from jtcse.rtt.pairs import read_pairs, write_pairs


def test_pairs_round_trip_and_cleaning(tmp_path):
    path = tmp_path / "p.tsv"
    n = write_pairs(path, [("a\tb", "c\nd"), ("Ünïcode 中文", "x\r\ny")])
    assert n == 2
    assert path.read_text("utf-8") == "a b\tc d\nÜnïcode 中文\tx y\n"
    assert read_pairs(path) == [("a b", "c d"), ("Ünïcode 中文", "x y")]
    assert not list(tmp_path.glob(".p.tsv.tmp*"))


@pytest.mark.parametrize(
    "content, message",
    [
        (b"only one field\n", "line 1 is not 'original<TAB>paraphrase'"),
        (b"ok\tfine\na\tb\tc\n", "line 2 .*it has 3 tab-separated fields"),
        (b"ok\t \n", "line 1"),
        (b"\n\n", "has no pairs"),
        (b"caf\xe9\tx\n", "line 1 is not valid UTF-8"),
    ],
)
def test_read_pairs_errors(tmp_path, content, message):
    path = tmp_path / "bad.tsv"
    path.write_bytes(content)
    with pytest.raises(JTCSEError, match=message):
        read_pairs(path)
    with pytest.raises(JTCSEError, match="not found"):
        read_pairs(tmp_path / "missing.tsv")


def test_cache_get_put_and_keys(tmp_path):
    with TranslationCache(tmp_path / "c.sqlite") as cache:
        cache.put_many("googletrans", "en", "de", [("hello", "hallo"), ("cat", "Katze")])
        cache.put("googletrans", "en", "de", "hello", "SHOULD NOT REPLACE")
        cache.put("seq2seq:m", "en", "de", "hello", "servus")
        assert cache.get_many("googletrans", "en", "de", ["hello", "dog", "cat"]) == {"hello": "hallo", "cat": "Katze"}
        assert cache.get_many("googletrans", "en", "fr", ["hello"]) == {}
        assert cache.get_many("seq2seq:m", "en", "de", ["hello"]) == {"hello": "servus"}
        assert cache.backends() == ["googletrans", "seq2seq:m"]
        many = [f"t{i}" for i in range(1200)]  # more than one IN(...) query
        cache.put_many("g", "en", "de", [(t, t.upper()) for t in many])
        assert len(cache.get_many("g", "en", "de", many)) == 1200
    with TranslationCache(tmp_path / "c.sqlite") as again:  # survives reopening
        assert again.count() == 1203
        assert again._conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"


def _writer(path: str, worker: int, n: int) -> None:
    with TranslationCache(path) as cache:
        for i in range(n):
            cache.put("g", "en", "de", f"w{worker}-{i}", f"x{i}")
            cache.put("g", "en", "de", f"shared-{i}", f"from {worker}")


@pytest.mark.slow
def test_cache_concurrent_writers_processes_and_threads(tmp_path):
    path = str(tmp_path / "c.sqlite")
    TranslationCache(path).close()
    ctx = multiprocessing.get_context("spawn")
    procs = [ctx.Process(target=_writer, args=(path, w, 60)) for w in range(3)]
    for p in procs:
        p.start()
    with TranslationCache(path) as shared:  # and threads sharing one handle meanwhile
        threads = [
            threading.Thread(target=lambda w=w: [shared.put("g", "en", "de", f"t{w}-{i}", "y") for i in range(60)])
            for w in range(3)
        ]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    for p in procs:
        p.join(60)
        assert p.exitcode == 0
    with TranslationCache(path) as cache:
        assert cache.count() == 3 * 60 + 3 * 60 + 60
        shared_rows = cache.get_many("g", "en", "de", [f"shared-{i}" for i in range(60)])
        assert len(shared_rows) == 60 and all(v.startswith("from ") for v in shared_rows.values())


def test_corrupt_cache_is_a_clear_error_and_left_untouched(tmp_path):
    path = tmp_path / "c.sqlite"
    path.write_bytes(b"this is not sqlite at all" * 100)
    before = path.read_bytes()
    with pytest.raises(CacheCorruptError, match=f"{path}.*corrupt or not an SQLite database.*left untouched"):
        TranslationCache(path)
    assert path.read_bytes() == before


def test_damaged_pages_are_detected(tmp_path):
    path = tmp_path / "c.sqlite"
    with TranslationCache(path) as cache:
        cache.put_many("g", "en", "de", [(f"text {i} " * 20, "y" * 200) for i in range(300)])
        cache._conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    data = bytearray(path.read_bytes())
    page = 4096
    assert len(data) > 12 * page
    for k in range(2, 12):  # scribble over the headers of some b-tree pages
        data[k * page : k * page + 16] = b"\xab" * 16
    path.write_bytes(bytes(data))
    with pytest.raises(CacheCorruptError, match=str(path)):
        TranslationCache(path)


def test_cached_translator_requests_only_misses(stub, tmp_path):
    with TranslationCache(tmp_path / "c.sqlite") as cache, google(stub) as backend:
        cached = CachedTranslator(backend, cache)
        first = cached.translate(["one", "two", "one"], "en", "de")
        assert first[0] == first[2]
        assert len(stub.translation_requests()) == 1 and cached.misses == 2
        second = cached.translate(["two", "three", "one"], "en", "de")
        assert second[0] == first[1] and second[2] == first[0]
        assert [r.params["q"] for r in stub.translation_requests()][1:] == ["three"]
        assert cache.count() == 3


def test_failures_are_not_cached(stub, tmp_path):
    from jtcse.rtt.base import TranslationFailure
    from jtcse.testing.translate_stub import StubReply

    stub.script = lambda request, n: StubReply(status=400) if n == 0 else None
    with TranslationCache(tmp_path / "c.sqlite") as cache, google(stub) as backend:
        cached = CachedTranslator(backend, cache)
        assert isinstance(cached.translate(["flaky"], "en", "de")[0], TranslationFailure)
        assert cache.count() == 0
        assert isinstance(cached.translate(["flaky"], "en", "de")[0], str)
        assert cache.count() == 1


def test_sqlite_file_is_a_plain_database(tmp_path):
    path = tmp_path / "c.sqlite"
    with TranslationCache(path) as cache:
        cache.put("g", "en", "de", "a", "b")
    rows = (
        sqlite3.connect(path).execute("SELECT backend, source, target, text, translation FROM translations").fetchall()
    )
    assert rows == [("g", "en", "de", "a", "b")]
