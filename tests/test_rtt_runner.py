"""The resumable RTT job and the `jtcse rtt` command, end to end against the local https server."""

from __future__ import annotations

import json

import pytest
from helpers.cli import invoke_cli, one_error_line
from helpers.rtt import google

from jtcse.errors import JTCSEError
from jtcse.rtt.cache import TranslationCache
from jtcse.rtt.pairs import read_pairs
from jtcse.rtt.replay import ReplayTranslator
from jtcse.rtt.runner import run_rtt
from jtcse.testing.translate_stub import StubReply, fake_translate


def _expected(text: str, pivot: str) -> str:
    return fake_translate(fake_translate(text, "en", pivot), pivot, "en")


def test_run_writes_pairs_and_drop_lists(stub, tmp_path):
    sentences = ["The cat sat.", "IDENTICAL stays put", "VANISH goes away", "", "x" * 5001, "tab\there", "The cat sat."]
    stub.script = lambda request, n: StubReply(status=400) if "poison" in request.params.get("q", "") else None
    sentences.append("a poison pill")
    with TranslationCache(tmp_path / "c.sqlite") as cache, google(stub) as backend:
        summary = run_rtt(sentences, ["de", "fr"], backend, tmp_path / "out", cache=cache, progress=False)
    de = summary.pivots[0]
    assert (de.kept, de.identical, de.empty, de.failed, de.too_long) == (3, 1, 2, 1, 1)
    assert read_pairs(tmp_path / "out" / "pairs.de.tsv") == [
        ("The cat sat.", _expected("The cat sat.", "de")),
        ("tab here", _expected("tab here", "de")),
        ("The cat sat.", _expected("The cat sat.", "de")),
    ]
    dropped = [line.split("\t") for line in (tmp_path / "out" / "dropped.de.tsv").read_text("utf-8").splitlines()]
    reasons = {row[0][:12]: (row[1], row[2]) for row in dropped}
    assert reasons["IDENTICAL st"][0] == "identical"
    assert reasons["VANISH goes "] == ("empty", "the round trip came back empty")
    assert reasons[""] == ("empty", "empty input line")
    assert reasons["x" * 12][0] == "too_long" and "5001 characters > 5000" in reasons["x" * 12][1]
    assert reasons["a poison pil"][0] == "failed" and "en→de: HTTP 400" in reasons["a poison pil"][1]
    saved = json.loads((tmp_path / "out" / "summary.json").read_text())
    assert saved["pivots"][1]["pivot"] == "fr" and saved["pivots"][1]["kept"] == 3
    assert not any("x" * 5001 in r.params.get("q", "") for r in stub.translation_requests())


def test_rerun_makes_zero_requests_and_same_files(stub, tmp_path):
    sentences = [f"Sentence number {i} is here." for i in range(50)]
    with TranslationCache(tmp_path / "c.sqlite") as cache:
        with google(stub, pack_size=4) as backend:
            run_rtt(sentences, ["de", "zh-cn"], backend, tmp_path / "a", cache=cache, progress=False)
        first = len(stub.translation_requests())
        assert first == 2 * 2 * 13  # 2 pivots × 2 legs × ceil(50/4)
        with google(stub, pack_size=4) as backend:
            summary = run_rtt(sentences, ["de", "zh-cn"], backend, tmp_path / "b", cache=cache, progress=False)
        assert len(stub.translation_requests()) == first
        assert summary.backend_stats["requests"] == 0 and summary.backend_stats["cache_hits"] == 200
    for name in ["pairs.de.tsv", "pairs.zh-cn.tsv"]:
        assert (tmp_path / "a" / name).read_bytes() == (tmp_path / "b" / name).read_bytes()


def test_replay_from_cache_and_pairs_reports_missing(stub, tmp_path):
    sentences = ["One small step.", "Two big leaps."]
    with TranslationCache(tmp_path / "c.sqlite") as cache:
        with google(stub) as backend:
            run_rtt(sentences, ["de"], backend, tmp_path / "a", cache=cache, progress=False)
        n = len(stub.translation_requests())
        replay = ReplayTranslator(cache)  # the only backend in the cache: googletrans
        summary = run_rtt(sentences + ["Never seen."], ["de"], replay, tmp_path / "b", cache=cache, progress=False)
        assert len(stub.translation_requests()) == n
        assert (tmp_path / "a" / "pairs.de.tsv").read_bytes() == (tmp_path / "b" / "pairs.de.tsv").read_bytes()
        assert [p.failed for p in summary.pivots] == [1]
        assert ("en", "de", "Never seen.") in replay.missing
        # a pivot the cache holds nothing for is refused before anything is written, naming what it holds
        with pytest.raises(JTCSEError, match=r"no en→pivot→en round trips for pivot\(s\) fr; they hold: de \(cache "):
            run_rtt(sentences, ["de", "fr"], replay, tmp_path / "c", cache=cache, progress=False)
        assert not (tmp_path / "c").exists()
        # a pivot it holds, but for none of these sentences: an error, not an empty pairs file
        with pytest.raises(
            JTCSEError,
            match=r"No en→de→en round trip succeeded \(1 failed, e.g. 'en→de: not in the replay sources'\); nothing was written",
        ):
            run_rtt(["Never seen."], ["de"], replay, tmp_path / "d", cache=cache, progress=False)
        assert not (tmp_path / "d" / "pairs.de.tsv").exists()
    from_pairs = ReplayTranslator(pairs_files={"de": tmp_path / "a" / "pairs.de.tsv"})
    out = from_pairs.round_trip(["Two big leaps.", "Never seen."], "en", "de")
    assert out[0] == _expected("Two big leaps.", "de") and "not in the replay sources" in out[1].reason
    with pytest.raises(JTCSEError, match="needs a translation cache or previously written pairs"):
        ReplayTranslator()


def test_bad_pivots(stub, tmp_path):
    with google(stub) as backend:
        with pytest.raises(JTCSEError, match="Unsupported language code.*klingon.*Supported: .*\\bde\\b"):
            run_rtt(["a b"], ["de", "klingon"], backend, tmp_path, progress=False)
        with pytest.raises(JTCSEError, match="differ from the source"):
            run_rtt(["a b"], ["en"], backend, tmp_path, progress=False)
        with pytest.raises(JTCSEError, match="at least one pivot"):
            run_rtt(["a b"], [" "], backend, tmp_path, progress=False)


@pytest.mark.cli
def test_cli_bad_input_is_one_line_error(tmp_path):
    (tmp_path / "c.txt").write_bytes(b"fine\n\xff bad\n")
    assert "line 2 is not valid UTF-8" in one_error_line(
        invoke_cli("rtt", "-i", tmp_path / "c.txt", "-o", tmp_path / "o")
    )
    (tmp_path / "bad.sqlite").write_bytes(b"garbage" * 200)
    (tmp_path / "ok.txt").write_text("one line\n")
    result = invoke_cli("rtt", "-i", tmp_path / "ok.txt", "-o", tmp_path / "o", "--cache", tmp_path / "bad.sqlite")
    assert f"Translation cache {tmp_path / 'bad.sqlite'} is corrupt" in one_error_line(result)
