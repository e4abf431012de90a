"""Tower warm-up (``jtcse simcse``): pairs file reading, training rows, loss going down, CLS output."""

from __future__ import annotations

import json

import pytest
import torch
from helpers.cli import invoke_cli

from jtcse.defaults import default_corpus_sentences
from jtcse.errors import JTCSEError
from jtcse.training.paraphrase_pairs import read_paraphrase_pairs
from jtcse.training.simcse import simcse_rows, train_simcse


@pytest.fixture(scope="module")
def spread_bert(tmp_path_factory) -> str:
    from helpers.spread_towers import make_spread_tower

    return make_spread_tower(tmp_path_factory.mktemp("spread") / "bert", "bert", seed=0)


def _paraphrase(sentence: str) -> str:
    """A deterministic stand-in for a round trip: same content, other surface form."""
    words = sentence.rstrip(".").split()
    return " ".join(words[1:] + words[:1]) + ", indeed."


def _simcse_loss_on_batch(model, anchors: list[str], positives: list[str]) -> float:
    """The SimCSE loss on one fixed batch, dropout on, with a fixed dropout seed."""
    from sentence_transformers.sentence_transformer.losses import MultipleNegativesRankingLoss

    loss = MultipleNegativesRankingLoss(model)
    features = [model.preprocess(anchors), model.preprocess(positives)]
    model.train()
    torch.manual_seed(0)
    with torch.no_grad():
        return float(loss(features, None))


# ---------------------------------------------------------------- pairs file


def test_pairs_file_counts_and_drops_identical_and_empty(tmp_path):
    path = tmp_path / "rtt.tsv"
    path.write_text(
        "The cat sat on the mat.\tA cat was sitting on the mat.\n"
        "Hello  World.\thello world.\n"  # same after whitespace/case normalisation
        "\n"
        "Nothing came back.\t\n"
        "It rains.\tIt is raining.\n",
        encoding="utf-8",
    )
    pairs = read_paraphrase_pairs(path)
    assert pairs.originals == ["The cat sat on the mat.", "It rains."]
    assert pairs.paraphrases == ["A cat was sitting on the mat.", "It is raining."]
    assert (pairs.dropped_identical, pairs.dropped_empty, pairs.skipped_blank_lines) == (1, 1, 1)


@pytest.mark.parametrize(
    "content, message",
    [
        (b"", "is empty"),
        (b"\n \n", "is empty"),
        (b"Same.\tsame.\nX y.\t x  Y. \n", "no usable pair: 2"),
        (b"one field only\n", "line 1 is not 'original<TAB>paraphrase': it has 1 tab-separated fields"),
        (b"a\tb\tc\n", "line 1 .* it has 3"),
        (b"ok\tfine\nbad \xff\tbyte\n", "line 2 is not valid UTF-8"),
    ],
)
def test_pairs_file_errors(tmp_path, content, message):
    path = tmp_path / "bad.tsv"
    path.write_bytes(content)
    with pytest.raises(JTCSEError, match=message):
        read_paraphrase_pairs(path)
    with pytest.raises(JTCSEError, match="not found"):
        read_paraphrase_pairs(tmp_path / "missing.tsv")


def test_rows_pair_sentences_with_paraphrases_and_keep_the_rest_as_dropout_views(tmp_path):
    path = tmp_path / "p.tsv"
    path.write_text("a b c.\tc b a.\n", encoding="utf-8")
    anchors, positives, counts = simcse_rows(["a b c.", "d e f.", "d e f.", "g h."], read_paraphrase_pairs(path))
    assert list(zip(anchors, positives, strict=True)) == [("a b c.", "c b a."), ("d e f.", "d e f."), ("g h.", "g h.")]
    assert counts == {"rows": 3, "paraphrase_rows": 1, "dropout_only_rows": 2}
    anchors, positives, counts = simcse_rows(None, read_paraphrase_pairs(path))
    assert (anchors, positives, counts["rows"]) == (["a b c."], ["c b a."], 1)


# ---------------------------------------------------------------- model set-up


def test_mean_pooled_normalized_minilm_becomes_a_cls_tower(minilm_path):
    from sentence_transformers.base.modules import Transformer
    from sentence_transformers.sentence_transformer.modules import Pooling

    from jtcse.modeling.loading import load_cls_tower

    tower, changes = load_cls_tower(minilm_path)
    modules = list(tower)
    assert [type(m) for m in modules] == [Transformer, Pooling]
    assert modules[1].pooling_mode == "cls"
    assert changes == ["replaced 'mean' pooling by CLS pooling", "dropped Normalize"]
    # the CLS embedding is the first token's last hidden state, unnormalised
    features = tower.preprocess(["a short sentence"])
    with torch.no_grad():
        out = tower(features)
    torch.testing.assert_close(out["sentence_embedding"][0], out["token_embeddings"][0, 0])


def test_a_cls_tower_is_taken_unchanged(tiny_bert):
    from jtcse.modeling.loading import load_cls_tower

    _, changes = load_cls_tower(tiny_bert)
    assert changes == []


@pytest.fixture(scope="module")
def mean_normalized_bert(tiny_bert, tmp_path_factory):
    """tiny_bert saved as Transformer + mean Pooling + Normalize, the shape of the shipped MiniLM."""
    from sentence_transformers import SentenceTransformer
    from sentence_transformers.sentence_transformer.modules import Normalize, Pooling

    base = SentenceTransformer(tiny_bert, device="cpu")[0]
    path = tmp_path_factory.mktemp("mean") / "tower"
    SentenceTransformer(modules=[base, Pooling(32, pooling_mode="mean"), Normalize()], device="cpu").save(str(path))
    return str(path)


@pytest.mark.slow
def test_warmup_keeps_the_models_own_pooling_and_modules_unless_asked(mean_normalized_bert, tmp_path):
    batch = default_corpus_sentences(limit=8)
    kept = train_simcse(mean_normalized_bert, batch, tmp_path / "kept", batch_size=8, max_steps=1)
    modules = [m["type"].rsplit(".", 1)[-1] for m in json.loads((tmp_path / "kept" / "modules.json").read_text())]
    assert modules == ["Transformer", "Pooling", "Normalize"]
    assert kept["model"]["pooling"] == "mean" and kept["model"]["changes"] == []
    cls = train_simcse(mean_normalized_bert, batch, tmp_path / "cls", pooling="cls", batch_size=8, max_steps=1)
    assert cls["model"]["pooling"] == "cls"
    assert cls["model"]["changes"] == ["replaced 'mean' pooling by CLS pooling", "dropped Normalize"]
    with pytest.raises(JTCSEError, match="pooling: Input should be 'cls' or 'mean'"):
        train_simcse(mean_normalized_bert, batch, tmp_path / "bad", pooling="weightedmean")


def test_a_weighted_mean_model_is_refused_with_the_reason_until_a_pooling_is_given(tiny_bert, tmp_path):
    from sentence_transformers import SentenceTransformer
    from sentence_transformers.sentence_transformer.modules import Pooling

    from jtcse.modeling.loading import load_tower

    base = SentenceTransformer(tiny_bert, device="cpu")[0]
    path = str(tmp_path / "weighted")
    SentenceTransformer(modules=[base, Pooling(32, pooling_mode="weightedmean")], device="cpu").save(path)
    with pytest.raises(JTCSEError, match="pools with 'weightedmean'; a JTCSE tower pools cls or mean"):
        load_tower(path)
    model, pooling, changes = load_tower(path, pooling="mean")
    assert pooling == "mean" and changes == ["replaced 'weightedmean' pooling by mean pooling"]
    assert load_tower(tiny_bert)[1:] == ("cls", [])


# ---------------------------------------------------------------- training


@pytest.mark.slow
def test_warmup_lowers_the_simcse_loss_on_a_fixed_batch_and_saves_a_cls_tower(spread_bert, tmp_path):
    from sentence_transformers import SentenceTransformer

    batch = default_corpus_sentences(limit=16)  # the corpus is one batch: every step sees it
    before = _simcse_loss_on_batch(SentenceTransformer(spread_bert), batch, batch)
    out = tmp_path / "tower"
    summary = train_simcse(spread_bert, batch, out, batch_size=16, max_steps=10, learning_rate=1e-3, max_seq_length=24)
    after = _simcse_loss_on_batch(SentenceTransformer(str(out)), batch, batch)
    assert after < before * 0.6, (before, after)
    assert summary["steps"] == 10 and summary["data"]["dropout_only_rows"] == 16
    assert json.loads((out / "run_summary.json").read_text())["steps"] == 10
    modules = json.loads((out / "modules.json").read_text())
    assert [m["type"].rsplit(".", 1)[-1] for m in modules] == ["Transformer", "Pooling"]
    assert json.loads((out / "1_Pooling" / "config.json").read_text())["pooling_mode"] == "cls"
    assert SentenceTransformer(str(out)).max_seq_length == 64  # the tower's own limit, not the training one
    assert not (out / "checkpoints").exists()
    with pytest.raises(JTCSEError, match="already holds a finished run"):
        train_simcse(spread_bert, batch, out, batch_size=16, max_steps=1)


@pytest.mark.slow
def test_warmup_with_rtt_pairs_uses_paraphrases_as_positives(spread_bert, tmp_path):
    from sentence_transformers import SentenceTransformer

    sentences = default_corpus_sentences(limit=16)
    pairs_path = tmp_path / "rtt_de.tsv"
    lines = [f"{s}\t{_paraphrase(s)}" for s in sentences] + [f"{s}\t{s.upper()}" for s in sentences[:5]]
    pairs_path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    anchors, positives = sentences[:16], [_paraphrase(s) for s in sentences[:16]]
    before = _simcse_loss_on_batch(SentenceTransformer(spread_bert), anchors, positives)
    out = tmp_path / "tower_de"
    summary = train_simcse(
        spread_bert, None, out, pairs_file=pairs_path, batch_size=16, max_steps=10, learning_rate=1e-3
    )
    after = _simcse_loss_on_batch(SentenceTransformer(str(out)), anchors, positives)
    assert after < before * 0.6, (before, after)
    data = summary["data"]
    assert data["pairs_used"] == 16 and data["pairs_dropped_identical"] == 5
    assert data["paraphrase_rows"] == 16 and data["dropout_only_rows"] == 0


@pytest.mark.slow
def test_the_checkpoint_setting_says_which_model_is_kept(tiny_bert, tmp_path, shared_data):
    """With a dev file, checkpoint best-dev keeps the checkpoint with the best dev Spearman; the default (last) keeps
    the last step and only reports the dev file."""
    dev = tmp_path / "dev.csv"
    lines = (shared_data / "stsbenchmark" / "sts-dev.csv").read_text(encoding="utf-8").splitlines()[:60]
    dev.write_text("\n".join(lines) + "\n", encoding="utf-8")
    settings = dict(dev_file=dev, batch_size=16, max_steps=6, eval_steps=2, learning_rate=1e-3)
    sentences = default_corpus_sentences(limit=64)
    best = train_simcse(tiny_bert, sentences, tmp_path / "best", checkpoint="best-dev", **settings)
    by_step = best["dev_spearman_by_step"]
    assert sorted(by_step) == [2, 4, 6]
    assert best["best_dev_spearman"] == max(by_step.values()) and best["saved_step"] == best["best_step"]
    # the saved model is the best checkpoint, not the last one
    assert best["final_dev_spearman"] == pytest.approx(best["best_dev_spearman"], abs=1e-6)
    last = train_simcse(tiny_bert, sentences, tmp_path / "last", **settings)
    assert last["dev_spearman_by_step"] == by_step  # the same run, scored alike
    assert last["saved_model"] == "last step" and last["saved_step"] == 6
    assert last["final_dev_spearman"] == pytest.approx(by_step[6], abs=1e-6)


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"temperature": 0.0}, "temperature: Input should be greater than 0"),
        ({"batch_size": 1}, "batch_size: Input should be greater than or equal to 2"),
        ({"corpus": ["only one sentence"]}, "at least 2 distinct training sentences"),
        ({"corpus": ["  ", ""]}, "no sentences"),
    ],
)
def test_bad_settings_are_clear_errors(tiny_bert, tmp_path, kwargs, message):
    kwargs = {"corpus": ["first sentence", "second sentence"], **kwargs}
    with pytest.raises(JTCSEError, match=message):
        train_simcse(tiny_bert, output_dir=tmp_path / "out", **kwargs)


@pytest.mark.slow
@pytest.mark.cli
def test_cli_reports_an_empty_pairs_file_in_one_line(tmp_path):
    empty = tmp_path / "empty.tsv"
    empty.write_text("", encoding="utf-8")
    result = invoke_cli("simcse", "-o", tmp_path / "out", "--pairs", empty)  # the old name still works
    assert result.returncode == 2
    assert result.stderr.splitlines() == [
        "DeprecationWarning: --pairs is deprecated; use --pairs-file.",
        f"Error: pairs file {empty} is empty (no original<TAB>paraphrase lines).",
    ]


def test_cli_takes_the_pairs_file_as_pairs_file_and_refuses_both_names(tmp_path):
    from typer.testing import CliRunner

    from jtcse.cli import app

    empty = tmp_path / "empty.tsv"
    empty.write_text("", encoding="utf-8")
    out = ["simcse", "-o", str(tmp_path / "out")]
    result = CliRunner().invoke(app, [*out, "--pairs-file", str(empty)])
    assert isinstance(result.exception, JTCSEError) and "is empty" in str(result.exception)
    result = CliRunner().invoke(app, [*out, "--pairs-file", str(empty), "--pairs", str(empty)])
    assert isinstance(result.exception, JTCSEError) and "give --pairs-file once" in str(result.exception)


@pytest.mark.slow
def test_extra_losses_and_regularizers_join_the_simcse_loss_as_logged_terms(tiny_bert, tmp_path):
    """One run, both ways of adding a term: a function (extra_losses) and a regularizer spec."""
    summary = train_simcse(
        tiny_bert,
        default_corpus_sentences(limit=32),
        tmp_path / "tower",
        batch_size=16,
        max_steps=2,
        logging_steps=1,
        extra_losses={"norm": lambda out: 0.01 * out["sentence_embedding"].pow(2).sum(-1).mean()},
        regularizers=["dispersion:weight=0.1"],
        keep_checkpoints=True,
    )
    state = json.loads(next((tmp_path / "tower" / "checkpoints").glob("checkpoint-*/trainer_state.json")).read_text())
    logged = [entry for entry in state["log_history"] if "loss" in entry]
    assert {"simcse", "norm", "dispersion"} <= set(logged[0]) and logged[0]["dispersion"] != 0
    total = logged[0]["simcse"] + logged[0]["norm"] + logged[0]["dispersion"]
    assert logged[0]["loss"] == pytest.approx(total, rel=1e-3)
    assert summary["loss_terms"].keys() >= {"simcse", "norm", "dispersion"}
    assert summary["config"]["extra_losses"] == ["norm"] and summary["steps"] == 2
    assert [(r["name"], r["weight"]) for r in summary["loss"]["regularizers"]] == [("DispersionLoss", 0.1)]
    assert summary["config"]["regularizers"] == ["dispersion:weight=0.1"]


@pytest.mark.slow
@pytest.mark.cli
def test_cli_bad_regularizer_spec_is_a_one_line_error(tmp_path):
    result = invoke_cli("simcse", "-o", tmp_path / "out", "--regularizer", "dispersion:wieght=1")
    assert result.returncode == 2
    assert result.stderr.strip() == (
        "Error: --regularizer[0]: regulariser 'dispersion' has no option 'wieght'; options: weight, temperature, "
        "variant, layers, norm_weight."
    )
    assert not (tmp_path / "out").exists()  # refused before anything was written


@pytest.mark.slow
@pytest.mark.cli
def test_cli_refuses_a_weighted_mean_start_in_one_line_until_pooling_maps_it(tiny_bert, tmp_path):
    """A starting model pooling neither cls nor mean: jtcse simcse and jtcse train give the reason in one line;
    --pooling mean maps it explicitly, and the summary says so."""
    from helpers.cli import one_error_line
    from sentence_transformers import SentenceTransformer
    from sentence_transformers.sentence_transformer.modules import Pooling

    weighted = str(tmp_path / "weighted")
    SentenceTransformer(modules=[SentenceTransformer(tiny_bert, device="cpu")[0],
                                 Pooling(32, pooling_mode="weightedmean")], device="cpu").save(weighted)  # fmt: skip
    corpus = tmp_path / "corpus.txt"
    corpus.write_text("\n".join(default_corpus_sentences(limit=16)) + "\n", encoding="utf-8")
    tiny = ["--corpus", corpus, "--max-steps", 1, "--batch-size", 4, "--max-seq-length", 16]
    for args in (["simcse", "--model", weighted], ["train", "--tower-a", weighted, "--tower-b", weighted]):
        line = one_error_line(invoke_cli(*args, *tiny, "-o", tmp_path / args[0]))
        assert "pools with 'weightedmean'" in line and "pooling='mean' (--pooling)" in line, line
        assert not (tmp_path / args[0]).exists()
    mapped = invoke_cli("simcse", "--model", weighted, *tiny, "--pooling", "mean", "-o", tmp_path / "mapped")
    assert mapped.returncode == 0, mapped.stderr[-2000:]
    summary = json.loads((tmp_path / "mapped" / "run_summary.json").read_text(encoding="utf-8"))
    assert summary["model"]["pooling"] == "mean"
    assert summary["model"]["changes"] == ["replaced 'weightedmean' pooling by mean pooling"]
