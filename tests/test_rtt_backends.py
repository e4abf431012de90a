"""jtcse.rtt.backends.make_translator: the backend named by the job's settings (jtcse.rtt.settings, the one list of
backend names), and each bad setting as a clear error."""

from __future__ import annotations

import pytest

from jtcse.errors import JTCSEError, SettingError
from jtcse.rtt.backends import make_translator
from jtcse.rtt.cache import TranslationCache
from jtcse.rtt.googletrans_backend import GoogletransTranslator
from jtcse.rtt.replay import ReplayTranslator
from jtcse.rtt.settings import BACKENDS, RttSettings


@pytest.fixture
def store(tmp_path):
    with TranslationCache(tmp_path / "cache.sqlite") as cache:
        yield cache


def test_backend_by_name(store, tmp_path):
    assert isinstance(make_translator(RttSettings(pivots=["de"]), store), GoogletransTranslator)
    (tmp_path / "earlier").mkdir()
    (tmp_path / "earlier" / "pairs.de.tsv").write_text("a\tb\n", encoding="utf-8")
    replay = RttSettings(backend="replay", pivots=["de", "fr"], replay={"pairs_dir": tmp_path / "earlier"})
    assert isinstance(make_translator(replay, store), ReplayTranslator)


def test_the_translators_defaults_are_the_settings():
    settings, translator = RttSettings(), GoogletransTranslator()
    defaults = settings.googletrans
    assert (translator.concurrency, translator.rate_limit) == (defaults.concurrency, defaults.rate_limit) == (8, 50.0)


@pytest.mark.parametrize(
    ("settings", "message"),
    [
        (
            {"backend": "deepl"},
            "^backend: Input should be " + " or ".join(", ".join(f"'{b}'" for b in BACKENDS).rsplit(", ", 1)) + "$",
        ),
        ({"backend": "seq2seq"}, r"^backend seq2seq needs model \(a local path, a name, or an '\{src\}'/'\{tgt\}'"),
        ({"googletrans": {"concurrency": 0}}, r"^concurrency: Input should be greater than or equal to 1$"),
        ({"googletrans": {"timeout": 0.0}}, r"^timeout: Input should be greater than 0$"),
        ({"seq2seq": {"batch_size": 0}}, r"^batch_size: Input should be greater than or equal to 1$"),
    ],
)
def test_bad_settings_are_clear_errors_before_any_backend_is_made(settings, message):
    with pytest.raises(JTCSEError, match=message):
        RttSettings(**settings)
    with pytest.raises(SettingError, match=r"^backend seq2seq needs model"):
        RttSettings(seq2seq={"model": "m"}).replace(model=None, backend="seq2seq")


@pytest.mark.parametrize(
    ("settings", "message"),
    [
        ({"googletrans": {"ca_bundle": "/no/such/ca.pem"}}, "CA bundle not found"),
        ({"backend": "replay", "replay": {"pairs_dir": "/no/such/run"}}, "must be the output directory"),
    ],
)
def test_a_file_the_backend_needs_is_there(store, settings, message):
    with pytest.raises(JTCSEError, match=message):
        make_translator(RttSettings(pivots=["de"], **settings), store)


def test_replay_dir_without_pairs_for_the_pivots(store, tmp_path):
    settings = RttSettings(backend="replay", pivots=["de", "fr"], replay={"pairs_dir": tmp_path})
    with pytest.raises(JTCSEError, match="No pairs.<pivot>.tsv for de, fr"):
        make_translator(settings, store)


@pytest.mark.cli
def test_the_commands_options_are_the_settings_and_a_bad_one_is_one_line_before_anything_is_written(tmp_path):
    """jtcse rtt's options are generated from RttSettings (each key one option, the backends' names from the one
    list); a bad value is one line naming its option, with nothing written."""
    from helpers.cli import click_app, invoke_cli, one_error_line

    from jtcse.schema import keys

    command = click_app().commands["rtt"]
    options = {name for param in command.params for name in param.opts}
    assert {f"--{key.replace('_', '-')}" for key in keys(RttSettings)} <= options
    backend = next(param for param in command.params if "--backend" in param.opts)
    assert backend.metavar == "|".join(BACKENDS)
    out = tmp_path / "o"
    cases = {
        ("--concurrency", "0"): "Error: --concurrency: Input should be greater than or equal to 1",
        ("--limit", "0"): "Error: --limit: Input should be greater than or equal to 1",
        ("--backend", "deepl"): "Error: --backend: Input should be "
        + " or ".join(", ".join(f"'{b}'" for b in BACKENDS).rsplit(", ", 1)),
        ("--backend", "seq2seq"): "Error: --backend seq2seq needs --model (a local path, a name, or an "
        "'{src}'/'{tgt}' template).",
    }
    for typed, message in cases.items():
        assert one_error_line(invoke_cli("rtt", *typed, "-o", out, "--no-progress")) == message
    assert not out.exists()
