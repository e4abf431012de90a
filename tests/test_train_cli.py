"""Training end to end: `jtcse train` -> checkpoint -> encode, resume, the run summary, and bad input."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from helpers.cli import invoke_cli

from jtcse.defaults import default_corpus_sentences
from jtcse.errors import JTCSEError
from jtcse.modeling.loading import load_model
from jtcse.training.twin import train_twin

pytestmark = pytest.mark.usefixtures("one_thread")


@pytest.fixture(scope="module")
def corpus(tmp_path_factory) -> Path:
    """36 sentences, two blank lines, one duplicate and one sentence far over any small max length."""
    sentences = default_corpus_sentences(limit=34)
    lines = sentences[:10] + ["", "   "] + sentences[10:] + [sentences[0], " ".join(["token"] * 120)]
    path = tmp_path_factory.mktemp("data") / "corpus.txt"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


@pytest.mark.slow
@pytest.mark.cli
def test_cli_train_writes_a_loadable_twin_and_a_summary(tmp_path, tiny_bert, tiny_bert_b, corpus, dev_file):
    out = tmp_path / "run"
    args = [
        "train",
        "--tower-a",
        tiny_bert,
        "--tower-b",
        tiny_bert_b,
        "--corpus",
        str(corpus),
        "-o",
        str(out),
        "--batch-size",
        "8",
        "--max-seq-length",
        "32",
        "--max-steps",
        "4",
        "--eval-steps",
        "2",
        "--lr",
        "5e-5",
        "--dev-file",
        str(dev_file),
        "--cael-every",
        "2",
    ]
    run = invoke_cli(*args)
    assert run.returncode == 0, run.stderr[-3000:]
    assert "run_summary.json" in run.stdout
    assert run.stderr.count("DeprecationWarning: --lr is deprecated; use --learning-rate.") == 1  # the old name works

    summary = json.loads((out / "run_summary.json").read_text())
    assert summary["steps"] == 4 and summary["settings"]["learning_rate"] == 5e-5
    data = summary["data"]
    assert data["skipped_blank_lines"] == 2 and data["duplicates_dropped"] == 1
    assert data["sentences"] == 35 and data["truncated_to_max_seq_length"] >= 1
    assert summary["model"]["cael_layers"] == [2, 4]
    assert {"nce_1", "nce_2", "icnce", "ictm"} <= set(summary["loss_terms"])
    assert list(summary["dev_spearman_by_step"]) == ["0", "2", "4"]
    assert summary["best_dev_spearman"] == max(list(summary["dev_spearman_by_step"].values())[1:])
    assert (out / "training_curves.png").stat().st_size > 0
    assert not (out / "checkpoints").exists()  # deleted after the final save (one policy for every stage)

    model = load_model(out)
    assert model[0].cael_every == 2
    embeddings = model.encode(["A freshly trained twin.", "It encodes sentences."])
    assert embeddings.shape == (2, 32) and np.isfinite(embeddings).all()
    initial = load_model(tiny_bert).encode(["A freshly trained twin."]) + load_model(tiny_bert_b).encode(
        ["A freshly trained twin."]
    )
    assert np.abs(embeddings[:1] - initial).max() > 1e-4  # training moved the towers


@pytest.mark.slow
def test_resume_continues_from_the_last_checkpoint(tmp_path, tiny_bert, tiny_bert_b, corpus):
    common = dict(
        corpus=corpus,
        output_dir=tmp_path / "run",
        batch_size=8,
        max_seq_length=24,
        learning_rate=5e-5,
        eval_steps=2,
        cael_every=0,
        show_progress=False,
        plot=False,
    )
    first = train_twin(tiny_bert, tiny_bert_b, max_steps=2, keep_checkpoints=True, **common)
    assert first["steps"] == 2 and first["resumed_from"] is None
    second = train_twin(tiny_bert, tiny_bert_b, max_steps=3, **common)
    assert second["resumed_from"].endswith("checkpoint-2")
    assert second["steps"] == 3
    fresh = train_twin(tiny_bert, tiny_bert_b, max_steps=1, resume=False, **{**common, "output_dir": tmp_path / "r2"})
    assert fresh["resumed_from"] is None and fresh["steps"] == 1


@pytest.mark.slow
def test_nan_loss_stops_training_and_names_the_step(tmp_path, tiny_bert, tiny_bert_b, corpus):
    # AdamW moves every weight by about lr in step 1; with lr = 1e30 the step-2 forward overflows
    with pytest.raises(JTCSEError, match=r"NaN or infinite at step 2\b.*lower learning rate"):
        train_twin(
            tiny_bert,
            tiny_bert_b,
            corpus,
            tmp_path / "run",
            batch_size=8,
            max_steps=5,
            eval_steps=5,
            learning_rate=1e30,
            show_progress=False,
            plot=False,
        )
    assert not (tmp_path / "run" / "modules.json").exists()


def test_bad_corpus_files(tmp_path, tiny_bert, tiny_bert_b):
    kwargs = dict(output_dir=tmp_path / "run", max_steps=1, show_progress=False)
    with pytest.raises(JTCSEError, match="Corpus file not found"):
        train_twin(tiny_bert, tiny_bert_b, tmp_path / "missing.txt", **kwargs)
    blank = tmp_path / "blank.txt"
    blank.write_text("\n \n\t\n", encoding="utf-8")
    with pytest.raises(JTCSEError, match="no sentences"):
        train_twin(tiny_bert, tiny_bert_b, blank, **kwargs)
    latin = tmp_path / "latin1.txt"
    latin.write_bytes("first line\nsecond line\ncaf\u00e9 au lait\n".encode("latin-1"))
    with pytest.raises(JTCSEError, match="line 3 is not valid UTF-8"):
        train_twin(tiny_bert, tiny_bert_b, latin, **kwargs)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"batch_size": 0}, "batch_size: Input should be greater than or equal to 2"),
        ({"max_seq_length": 1}, "max_seq_length: Input should be greater than or equal to 4"),
        ({"learning_rate": float("nan")}, "learning_rate: Input should be a finite number"),
        ({"max_steps": 0}, "max_steps: must be a positive step count or -1"),
        ({"cael_every": 3}, r"cael_every=3 does not divide the towers' 4 layers"),
    ],
)
def test_bad_settings(tmp_path, tiny_bert, tiny_bert_b, corpus, kwargs, message):
    with pytest.raises(ValueError, match=message):
        train_twin(tiny_bert, tiny_bert_b, corpus, tmp_path / "run", **{"max_steps": 1, **kwargs})


@pytest.mark.slow
@pytest.mark.cli
def test_cli_reports_user_mistakes_in_one_line(tmp_path, tiny_bert, tiny_roberta, corpus):
    cases = [
        (["--corpus", str(tmp_path / "missing.txt")], "Corpus file not found"),
        (
            ["--corpus", str(corpus), "--tower-a", tiny_bert, "--tower-b", tiny_roberta],
            "The towers differ in model type",
        ),
    ]
    for extra, message in cases:
        run = invoke_cli("train", "-o", tmp_path / "run", *extra)
        assert run.returncode == 2, run.stderr[-2000:]
        error_lines = [line for line in run.stderr.splitlines() if line.startswith("Error:")]
        assert len(error_lines) == 1 and message in error_lines[0]
        assert "Traceback" not in run.stderr


@pytest.mark.slow
def test_regularisers_join_the_jtcse_loss_as_logged_terms(tmp_path, tiny_bert, tiny_bert_b, corpus):
    import torch

    from jtcse import build_twin
    from jtcse.losses import DispersionLoss, JTCSELoss
    from jtcse.losses.registry import build_regularised_loss
    from jtcse.training.twin import train_twin

    model = build_twin(tiny_bert, tiny_bert_b, cael_every=2, max_seq_length=16)
    model.train()
    base = JTCSELoss(model, seed=3)
    wrapped = build_regularised_loss(model, base, ["dispersion:weight=0.5"])
    features = model.tokenize(["one small sentence", "another one here", "and a third"])
    torch.manual_seed(0)
    terms = wrapped([features], None)
    assert set(terms) == {"nce_1", "nce_2", "icnce", "ictm", "dispersion"}
    # the regulariser's term is λ·penalty on the twin's own forward (same dropout masks: reseed)
    torch.manual_seed(0)
    outputs = model(
        dict(
            features,
            input_ids=torch.cat([features["input_ids"]] * 2),
            attention_mask=torch.cat([features["attention_mask"]] * 2),
            token_type_ids=torch.cat([features["token_type_ids"]] * 2),
        )
    )
    expected = 0.5 * DispersionLoss(model).penalty(outputs)
    torch.testing.assert_close(terms["dispersion"], expected)

    summary = train_twin(
        tiny_bert,
        tiny_bert_b,
        corpus,
        tmp_path / "reg",
        batch_size=8,
        max_seq_length=16,
        max_steps=2,
        learning_rate=5e-5,
        regularizers=["dispersion:weight=0.1", "simreg:weight=2,temperature=0.1"],
        mini_batch_size=0,  # token-level terms need the plain loss: GradCache (the twin's default) off
        extra_losses={"cls_norm": lambda out: 0.01 * out["pooled_1"].norm(dim=-1).mean()},
        show_progress=False,
        plot=False,
    )
    assert {"dispersion", "simreg", "icnce", "cls_norm"} <= set(summary["loss_terms"])
    assert summary["loss"]["terms"] == ["cls_norm", "dispersion", "simreg"]
    assert [r["name"] for r in summary["loss"]["regularizers"]] == ["DispersionLoss", "SimRegLoss"]


@pytest.mark.slow
@pytest.mark.cli
def test_unknown_regulariser_is_a_one_line_error(tmp_path, tiny_bert, tiny_bert_b, corpus):
    run = invoke_cli(
        "train",
        "--tower-a",
        tiny_bert,
        "--tower-b",
        tiny_bert_b,
        "--corpus",
        corpus,
        "-o",
        tmp_path / "x",
        "--max-steps",
        "1",
        "--regularizer",
        "simreg:wieght=2",
    )
    assert run.returncode == 2 and "Traceback" not in run.stderr
    assert "wieght" in run.stderr
