"""jtcse.rtt.backends.make_translator: the backend by name, and each bad setting as a clear error."""

from __future__ import annotations

import pytest

from jtcse.errors import JTCSEError
from jtcse.rtt.backends import GoogletransSettings, ReplaySettings, Seq2SeqSettings, make_translator
from jtcse.rtt.cache import TranslationCache
from jtcse.rtt.googletrans_backend import GoogletransTranslator
from jtcse.rtt.replay import ReplayTranslator


@pytest.fixture
def store(tmp_path):
    with TranslationCache(tmp_path / "cache.sqlite") as cache:
        yield cache


def test_backend_by_name(store, tmp_path):
    assert isinstance(make_translator("googletrans", store, ["de"]), GoogletransTranslator)
    (tmp_path / "earlier").mkdir()
    (tmp_path / "earlier" / "pairs.de.tsv").write_text("a\tb\n", encoding="utf-8")
    replay = make_translator("replay", store, ["de", "fr"], replay=ReplaySettings(pairs_dir=tmp_path / "earlier"))
    assert isinstance(replay, ReplayTranslator)


@pytest.mark.parametrize(
    ("backend", "settings", "message"),
    [
        ("deepl", {}, "unknown RTT backend 'deepl'"),
        ("seq2seq", {"seq2seq": Seq2SeqSettings()}, "needs --model"),
        ("googletrans", {"googletrans": GoogletransSettings(ca_bundle="/no/such/ca.pem")}, "CA bundle not found"),
        ("replay", {"replay": ReplaySettings(pairs_dir="/no/such/run")}, "must be the output directory"),
    ],
)
def test_bad_settings_are_clear_errors(store, backend, settings, message):
    with pytest.raises(JTCSEError, match=message):
        make_translator(backend, store, ["de"], **settings)


def test_replay_dir_without_pairs_for_the_pivots(store, tmp_path):
    with pytest.raises(JTCSEError, match="No pairs.<pivot>.tsv for de, fr"):
        make_translator("replay", store, ["de", "fr"], replay=ReplaySettings(pairs_dir=tmp_path))
