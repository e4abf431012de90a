"""The stage runner (jtcse.training.trainer_run): the non-finite-loss guard, the summary's loss history, precision,
one settings rule for every trainer, the checkpoint policy and the summary schema."""

from __future__ import annotations

import re

import pytest
import torch
from transformers import TrainerControl, TrainerState

from jtcse.errors import JTCSEError
from jtcse.training.arguments import DEV_METRIC
from jtcse.training.run_summary import SCHEMA_VERSION, loss_history
from jtcse.training.trainer_run import nan_guard


class _ScaledSum(torch.nn.Module):
    """A stand-in loss module: the guard only watches what ``forward`` returns."""

    def forward(self, values):
        return values.sum()


@pytest.mark.parametrize("bad", [float("nan"), float("inf")])
def test_non_finite_loss_stops_training_with_a_clear_error(bad, tmp_path):
    loss = _ScaledSum()
    guard = nan_guard(loss, 1e-3, tmp_path)
    state, control = TrainerState(), TrainerControl()
    for step, value in enumerate([0.5, bad, 0.25], start=0):
        state.global_step = step
        guard.on_step_begin(None, state, control)
        loss(torch.tensor([value, 1.0]))
    assert guard.first_bad_step() == 2
    control.should_log = True
    with pytest.raises(JTCSEError, match=r"NaN or infinite at step 2\. Try a lower learning rate \(now 0\.001\)"):
        guard.on_step_end(None, state, control)
    guard.remove()
    loss(torch.tensor([bad]))  # the hook is gone: nothing is recorded any more
    assert guard.first_bad_step() == 2


def test_loss_history_picks_first_last_and_best_dev():
    history = [
        {"loss": 3.0, "step": 1},
        {DEV_METRIC: 0.5, "step": 2},
        {"loss": 2.0, "step": 3},
        {DEV_METRIC: 0.7, "step": 4},
        {DEV_METRIC: 0.6, "step": 6},
        {"loss": 1.5, "step": 6},
    ]
    out = loss_history(history)
    assert out["first_logged_loss"] == 3.0 and out["last_logged_loss"] == 1.5
    assert out["best_dev_spearman"] == 0.7 and out["best_step"] == 4
    assert out["dev_spearman_by_step"] == {2: 0.5, 4: 0.7, 6: 0.6}


@pytest.mark.slow
@pytest.mark.parametrize("stage", ["simcse", "distill"])
def test_simcse_and_distill_stop_on_a_nan_loss_naming_the_step(stage, tiny_bert, tmp_path):
    from jtcse.defaults import default_corpus_sentences
    from jtcse.training.distill import distill
    from jtcse.training.simcse import train_simcse

    sentences = default_corpus_sentences(limit=16)
    # AdamW moves every weight by about lr in step 1; with lr = 1e30 the step-2 forward overflows
    settings = dict(batch_size=8, max_steps=4, logging_steps=1, learning_rate=1e30, max_seq_length=16)
    with pytest.raises(JTCSEError, match=r"NaN or infinite at step 2\b.*lower learning rate"):
        if stage == "simcse":
            train_simcse(tiny_bert, sentences, tmp_path / "run", **settings)
        else:
            distill(tiny_bert, tiny_bert, sentences, tmp_path / "run", **settings)
    assert not (tmp_path / "run" / "modules.json").exists()


def test_precision_flags():
    import torch

    from jtcse.training.arguments import precision_flags
    from jtcse.training.settings import TrainingSettings

    assert precision_flags("fp32") == {"fp16": False, "bf16": False}
    assert precision_flags("bf16", "cpu") == {"fp16": False, "bf16": True}
    with pytest.raises(JTCSEError, match="precision: Input should be 'auto', 'fp32', 'fp16' or 'bf16'"):
        TrainingSettings(precision="half")  # the one check of a precision name; precision_flags trusts it
    assert precision_flags("auto", "cpu") == {"fp16": False, "bf16": False}
    with pytest.raises(ValueError, match="precision fp16 needs a CUDA device, not 'cpu'"):  # jtcse.devices' rule
        precision_flags("fp16", "cpu")  # also where a GPU is visible: the CPU was asked for
    if not torch.cuda.is_available():
        assert precision_flags("auto") == {"fp16": False, "bf16": False}
        with pytest.raises(ValueError, match="fp16 needs a CUDA device"):
            precision_flags("fp16")


@pytest.mark.slow
def test_twin_trains_in_bf16_with_gradient_checkpointing(tmp_path, tiny_bert, tiny_bert_b):
    """The GPU options reach the trainer and the towers (run here on the CPU: bf16 autocast)."""
    import torch
    from transformers import TrainerCallback

    from jtcse.training.twin import train_twin

    seen = {}

    class Inspect(TrainerCallback):
        def on_step_end(self, args, state, control, model=None, **kwargs):
            seen["bf16"] = args.bf16
            seen["checkpointing"] = [m.is_gradient_checkpointing for m in model[0].tower_models()]

    torch.set_num_threads(1)
    corpus = tmp_path / "c.txt"
    corpus.write_text("\n".join(f"sentence number {i} about topic {i % 5}" for i in range(24)) + "\n", encoding="utf-8")
    summary = train_twin(
        tiny_bert,
        tiny_bert_b,
        corpus,
        tmp_path / "run",
        batch_size=8,
        max_seq_length=16,
        max_steps=2,
        learning_rate=5e-5,
        precision="bf16",
        gradient_checkpointing=True,
        show_progress=False,
        plot=False,
        callbacks=[Inspect()],
    )
    assert summary["steps"] == 2
    assert seen == {"bf16": True, "checkpointing": [True, True]}


# ------------------------------------------------------------------------------ the stage runner's rules

_BAD_SETTINGS = [
    ({"batch_size": 1}, "batch_size: Input should be greater than or equal to 2"),
    ({"max_seq_length": 3}, "max_seq_length: Input should be greater than or equal to 4"),
    ({"learning_rate": float("nan")}, "learning_rate: Input should be a finite number"),
    ({"learning_rate": 0.0}, "learning_rate: Input should be greater than 0"),
    ({"max_steps": 0}, "max_steps: must be a positive step count or -1"),
    ({"eval_steps": 0}, "eval_steps: Input should be greater than or equal to 1"),
    ({"precision": "fp8"}, "precision: Input should be 'auto', 'fp32', 'fp16' or 'bf16'"),
    ({"checkpoint": "best"}, "checkpoint: Input should be 'last' or 'best-dev'"),
]


@pytest.mark.parametrize("stage", ["twin", "simcse", "distill"])
@pytest.mark.parametrize("bad, message", _BAD_SETTINGS)
def test_every_stage_refuses_bad_settings_by_the_same_rule(stage, bad, message, tiny_bert, tiny_bert_b, tmp_path):
    """One rule (TrainingSettings) for every stage, checked before anything is loaded or written."""
    from jtcse.training.distill import distill
    from jtcse.training.settings import TrainingSettings
    from jtcse.training.simcse import train_simcse
    from jtcse.training.twin import train_twin

    with pytest.raises(JTCSEError, match=re.escape(message)):
        TrainingSettings(**bad)
    sentences = [f"sentence number {i}" for i in range(8)]
    out = tmp_path / "run"
    with pytest.raises(JTCSEError, match=re.escape(message)):
        if stage == "twin":
            corpus = tmp_path / "c.txt"
            corpus.write_text("\n".join(sentences) + "\n", encoding="utf-8")
            train_twin(tiny_bert, tiny_bert_b, corpus, out, **{"max_steps": 1, **bad})
        elif stage == "simcse":
            train_simcse(tiny_bert, sentences, out, **{"max_steps": 1, **bad})
        else:
            distill(tiny_bert, tiny_bert, sentences, out, **{"max_steps": 1, **bad})
    assert not out.exists()


def test_trainers_take_settings_whole_or_as_keywords_on_their_own_defaults():
    """``settings=`` replaces a trainer's defaults (a whole settings object, or just its training part), keywords
    go on top by key (a training key reaches into the training part), a misspelt keyword is a TypeError. Each
    trainer's defaults are its settings class's (the CPU recipe's numbers, evaluation/DEFAULTS.md), and the
    pipeline's stages are those very classes: one number, one place."""
    from jtcse.pipeline.settings import PipelineConfig
    from jtcse.training.settings import DistillSettings, TrainingSettings, TwinSettings, WarmupSettings, resolve

    warmup, twin, distill = WarmupSettings(), TwinSettings(), DistillSettings()
    for preset in (warmup.training, twin.training, distill.training):
        assert preset != TrainingSettings()
    assert (warmup.training.epochs, twin.training.max_steps, distill.training.epochs) == (1, 25, 2)  # the recipe's
    assert (twin.training.logging_steps, twin.training.precision, twin.cael_every) == (None, "fp32", 2)
    pipeline = PipelineConfig()
    assert (pipeline.warmup, pipeline.distill.training) == (warmup, distill.training)
    assert isinstance(pipeline.twin, TwinSettings) and pipeline.twin.training == twin.training
    given = TrainingSettings(batch_size=8, seed=7)
    assert resolve(warmup, None, {}, "train_simcse") == warmup
    assert resolve(warmup, given, {}, "train_simcse") == warmup.replace(training=given)
    assert resolve(warmup, given, {"max_steps": 3}, "train_simcse").training == given.replace(max_steps=3)
    assert resolve(twin, None, {"batch_size": 8, "cael_every": 0}, "train_twin") == TwinSettings(
        training=twin.training.model_dump() | {"batch_size": 8}, cael_every=0
    )
    with pytest.raises(TypeError, match="train_simcse\\(\\) got an unexpected keyword argument 'batch_sise'"):
        resolve(warmup, None, {"batch_sise": 8}, "train_simcse")
    with pytest.raises(JTCSEError, match="batch_size: Input should be greater than or equal to 2"):
        resolve(twin, None, {"batch_size": 1}, "train_twin")
    with pytest.raises(
        JTCSEError, match="objective: Input should be 'mse', 'mse-normalized', 'cosine' or 'similarity'"
    ):
        resolve(distill, None, {"objective": "kl"}, "distill")


SUMMARY_KEYS = {
    "schema_version",
    "stage",
    "output_dir",
    "saved_model",
    "saved_step",
    "model",
    "data",
    "loss",
    "settings",
    "resumed_from",
    "steps",
    "seconds",
    "train_loss",
    "first_logged_loss",
    "last_logged_loss",
    "loss_terms",
    "dev_file",
    "dev_spearman_by_step",
    "best_dev_spearman",
    "best_step",
    "final_dev_spearman",
    "checkpoints",
    "training_curves",
    "versions",
    "config",
}


@pytest.mark.slow
def test_checkpoint_policy_best_and_last_while_training_then_deleted_unless_kept(tiny_bert, tmp_path, shared_data):
    """With ``checkpoint="best-dev"`` the trainer holds the best checkpoint by dev Spearman and the last one while
    training, and saves the best; after the final save they are deleted, unless ``keep_checkpoints``. Every stage
    writes one summary schema."""
    from transformers import TrainerCallback

    from jtcse.training.simcse import train_simcse

    dev = tmp_path / "dev.csv"
    lines = (shared_data / "stsbenchmark" / "sts-dev.csv").read_text(encoding="utf-8").splitlines()[:40]
    dev.write_text("\n".join(lines) + "\n", encoding="utf-8")
    seen: list[tuple[int, list[str], str | None]] = []

    class Watch(TrainerCallback):
        def on_step_begin(self, args, state, control, **kwargs):
            ckpts = sorted(p.name for p in (tmp_path / "kept" / "checkpoints").glob("checkpoint-*"))
            best = state.best_model_checkpoint and state.best_model_checkpoint.rsplit("/", 1)[-1]
            seen.append((state.global_step, ckpts, best))

    sentences = [f"sentence number {i} about topic {i % 5}" for i in range(32)]
    settings = dict(dev_file=dev, batch_size=8, max_steps=8, eval_steps=2, learning_rate=1e-3, max_seq_length=16,
                    checkpoint="best-dev")  # fmt: skip
    kept = train_simcse(tiny_bert, sentences, tmp_path / "kept", keep_checkpoints=True, callbacks=[Watch()], **settings)
    for step, ckpts, best in seen:
        assert len(ckpts) <= 2, (step, ckpts)  # never more than the best and the last
        if ckpts:
            assert f"checkpoint-{2 * (step // 2)}" in ckpts and (best is None or best in ckpts), (step, ckpts, best)
    left = sorted(p.name for p in (tmp_path / "kept" / "checkpoints").glob("checkpoint-*"))
    best_name = f"checkpoint-{kept['best_step']}"
    assert {best_name, "checkpoint-8"} <= set(left) and len(left) <= 2, (left, best_name)
    assert kept["checkpoints"] == str(tmp_path / "kept" / "checkpoints")
    assert set(kept) == SUMMARY_KEYS and kept["schema_version"] == SCHEMA_VERSION
    assert kept["final_dev_spearman"] == pytest.approx(kept["best_dev_spearman"], abs=1e-6)
    assert kept["saved_step"] == kept["best_step"] and kept["saved_model"] == "best checkpoint by dev Spearman"

    dropped = train_simcse(tiny_bert, sentences, tmp_path / "dropped", **settings)
    assert dropped["checkpoints"] is None and not (tmp_path / "dropped" / "checkpoints").exists()
    assert (tmp_path / "dropped" / "training_curves.png").is_file()
