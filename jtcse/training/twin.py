"""Train a JTCSE twin on a text corpus with ``SentenceTransformerTrainer``.

Output layout of ``output_dir``::

    modules.json, tower_1/, tower_2/, ...   the final twin (best by dev Spearman when a dev file is given)
    run_summary.json                        what ran, on what, and how it went
    training_curves.png                     loss terms (and dev Spearman) over the steps
    checkpoints/checkpoint-<step>/          trainer checkpoints; a rerun resumes from the last one
"""

from __future__ import annotations

import json
import math
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from jtcse.errors import JTCSEError

CHECKPOINT_SUBDIR = "checkpoints"
SUMMARY_FILE = "run_summary.json"
CURVES_FILE = "training_curves.png"


def read_training_sentences(corpus: str | Path | None) -> tuple[list[str], dict[str, Any]]:
    """Distinct sentences to train on, plus counts for the summary (blank lines skipped, duplicates dropped).

    ``corpus=None`` uses the standard library's prose (:func:`jtcse.defaults.default_corpus_sentences`).
    Missing, empty and non-UTF-8 files raise :class:`JTCSEError` (see :func:`jtcse.corpus.read_corpus`).
    """
    from jtcse.corpus import read_corpus
    from jtcse.defaults import default_corpus_sentences

    if corpus is None:
        raw, stats = default_corpus_sentences(), {"corpus": "stdlib pydoc_data.topics prose", "skipped_empty_lines": 0}
    else:
        read = read_corpus(corpus)
        raw = read.sentences
        stats = {"corpus": str(Path(corpus).resolve()), "skipped_empty_lines": read.skipped_empty}
    sentences = list(dict.fromkeys(raw))
    stats.update(corpus_lines=len(raw), duplicates_dropped=len(raw) - len(sentences), sentences=len(sentences))
    return sentences, stats


def count_truncated(sentences: list[str], tokenizer, max_seq_length: int, chunk: int = 4096) -> int:
    """How many sentences are longer than ``max_seq_length`` tokens (they are truncated in training)."""
    truncated = 0
    for start in range(0, len(sentences), chunk):
        lengths = [len(ids) for ids in tokenizer(sentences[start : start + chunk])["input_ids"]]
        truncated += sum(length > max_seq_length for length in lengths)
    return truncated


def _last_checkpoint(checkpoint_dir: Path) -> str | None:
    from transformers.trainer_utils import get_last_checkpoint

    return get_last_checkpoint(str(checkpoint_dir)) if checkpoint_dir.is_dir() else None


def _check_positive(name: str, value, minimum=1) -> None:
    if value is None or value < minimum:
        raise JTCSEError(f"{name} must be >= {minimum}, not {value!r}.")


def train_twin(
    tower_a: str | None = None,
    tower_b: str | None = None,
    corpus: str | Path | None = None,
    output_dir: str | Path = "runs/jtcse",
    *,
    cael_every: int | None = 2,
    batch_size: int = 64,
    max_seq_length: int = 64,
    learning_rate: float = 1.3e-6,
    epochs: float = 1,
    max_steps: int = -1,
    seed: int = 42,
    dev_file: str | Path | None = None,
    eval_steps: int = 100,
    resume: bool = True,
    temperature: float = 0.05,
    nce_weight: float = 1.0,
    icnce_weight: float = 1.0,
    ictm_weight: float = 0.5,
    extra_losses: Mapping[str, Callable] | None = None,
    regularizers: Sequence[str] = (),
    logging_steps: int | None = None,
    warmup_ratio: float = 0.0,
    save_total_limit: int = 2,
    device: str | None = None,
    show_progress: bool = True,
    plot: bool = True,
) -> dict[str, Any]:
    """Train a JTCSE twin and write it to ``output_dir``; returns the run summary (also ``run_summary.json``).

    Defaults follow the reference recipe (batch 64, length 64, lr 1.3e-6, k=2, one epoch, dev
    evaluation every 100 steps keeping the best checkpoint). ``tower_a``/``tower_b`` None: the
    embedded MiniLM; ``corpus`` None: the standard library's prose. ``cael_every`` None trains
    without cross-attention (TNCSE). ``extra_losses``: ``{name: fn(outputs) -> scalar}`` added to the
    JTCSE loss (see :class:`jtcse.losses.JTCSELoss`). ``regularizers``: token-level regulariser specs
    such as ``"simreg:weight=2"`` or ``"dispersion:weight=0.1"`` (see :mod:`jtcse.losses.registry`),
    computed on the twin's own forward (its ``token_embeddings``, the sum of the towers' last hidden
    states) and logged as separate terms. ``resume``: continue from the last checkpoint
    under ``output_dir/checkpoints`` when there is one.
    """
    _check_positive("batch_size", batch_size)
    _check_positive("max_seq_length", max_seq_length, 2)
    _check_positive("eval_steps", eval_steps)
    if not (learning_rate > 0 and math.isfinite(learning_rate)):
        raise JTCSEError(f"learning_rate must be a positive number, not {learning_rate!r}.")
    if max_steps is None or max_steps == 0 or max_steps < -1:
        raise JTCSEError(f"max_steps must be a positive step count or -1 (use epochs), not {max_steps!r}.")
    if max_steps == -1 and not epochs > 0:
        raise JTCSEError(f"epochs must be positive, not {epochs!r}.")

    output_dir = Path(output_dir)
    checkpoint_dir = output_dir / CHECKPOINT_SUBDIR
    sentences, data_stats = read_training_sentences(corpus)  # before the heavy imports: bad files fail fast
    evaluator = None
    if dev_file is not None:
        from jtcse.evaluation.sts import STSDevEvaluator

        evaluator = STSDevEvaluator(dev_file, name="sts-dev")

    import torch
    from datasets import Dataset
    from sentence_transformers import SentenceTransformerTrainer, SentenceTransformerTrainingArguments

    from jtcse.losses import JTCSELoss
    from jtcse.losses.registry import build_regularised_loss
    from jtcse.modeling.build import build_twin
    from jtcse.training.nan_guard import NonFiniteLossGuard

    model = build_twin(tower_a, tower_b, cael_every=cael_every, max_seq_length=max_seq_length, device=device)
    data_stats["truncated_to_max_seq_length"] = count_truncated(sentences, model.tokenizer, max_seq_length)
    dataset = Dataset.from_dict({"text": sentences})
    loss = JTCSELoss(
        model,
        temperature=temperature,
        nce_weight=nce_weight,
        icnce_weight=icnce_weight,
        ictm_weight=ictm_weight,
        seed=seed,
        extra_terms=extra_losses,
    )
    loss = build_regularised_loss(model, loss, list(regularizers))
    guard = NonFiniteLossGuard(
        loss,
        hint=f"Try a lower learning rate (now {learning_rate:g}) or check the towers for NaN weights; "
        f"earlier checkpoints are in {checkpoint_dir}.",
    )

    steps_per_epoch = max(1, len(sentences) // batch_size) if len(sentences) > batch_size else 1
    total_steps = max_steps if max_steps > 0 else math.ceil(steps_per_epoch * epochs)
    logging_steps = logging_steps or max(1, min(50, eval_steps, total_steps // 10 or 1))
    metric = "eval_sts-dev_spearman_cosine"
    args = SentenceTransformerTrainingArguments(
        output_dir=str(checkpoint_dir),
        per_device_train_batch_size=batch_size,
        learning_rate=learning_rate,
        num_train_epochs=epochs,
        max_steps=max_steps,
        seed=seed,
        logging_steps=logging_steps,
        logging_first_step=True,
        logging_nan_inf_filter=False,  # the filter syncs with the host every step; NonFiniteLossGuard reports NaN
        eval_strategy="steps" if evaluator else "no",
        eval_steps=eval_steps,
        eval_on_start=evaluator is not None,
        save_strategy="steps",
        save_steps=eval_steps,
        save_total_limit=save_total_limit,
        load_best_model_at_end=evaluator is not None,
        metric_for_best_model=metric if evaluator else None,
        greater_is_better=True,
        dataloader_drop_last=len(sentences) > batch_size,
        dataloader_pin_memory=torch.cuda.is_available(),
        report_to="none",
        disable_tqdm=not show_progress,
        use_cpu=device == "cpu",
        **({"warmup_steps": warmup_ratio} if warmup_ratio else {}),  # a float below 1 is a ratio in transformers 5
    )
    trainer = SentenceTransformerTrainer(
        model=model, args=args, train_dataset=dataset, loss=loss, evaluator=evaluator, callbacks=[guard]
    )
    resume_from = _last_checkpoint(checkpoint_dir) if resume else None
    started = time.time()
    try:
        train_output = trainer.train(resume_from_checkpoint=resume_from)
    finally:
        guard.remove()
    runtime = time.time() - started

    model.save(str(output_dir))
    history = trainer.state.log_history
    dev_scores = [(entry["step"], entry[metric]) for entry in history if metric in entry]
    final_dev = evaluator(model)["sts-dev_spearman_cosine"] if evaluator else None
    last_losses = next((entry for entry in reversed(history) if "loss" in entry), {})
    summary = {
        "output_dir": str(output_dir.resolve()),
        "model": "best checkpoint by STS-B dev Spearman" if evaluator else "last step",
        "towers": [str(tower_a) if tower_a else "embedded MiniLM", str(tower_b) if tower_b else "embedded MiniLM"],
        "cael_every": model[0].cael_every,
        "cael_layers": model[0].cael_layers,
        "num_layers": model[0].num_layers,
        **data_stats,
        "batch_size": batch_size,
        "max_seq_length": max_seq_length,
        "learning_rate": learning_rate,
        "epochs": epochs,
        "max_steps": max_steps,
        "seed": seed,
        "loss": loss.get_config_dict(),
        "resumed_from": resume_from,
        "global_step": trainer.state.global_step,
        "train_runtime_s": round(runtime, 2),
        "train_loss": train_output.training_loss,
        "last_logged_loss_terms": {k: v for k, v in last_losses.items() if k not in ("epoch", "step")},
        "dev_file": str(dev_file) if dev_file else None,
        "dev_spearman_history": dev_scores,
        "best_dev_spearman": trainer.state.best_metric,
        "best_checkpoint": trainer.state.best_model_checkpoint,
        "final_dev_spearman": final_dev,
        "versions": _versions(),
        "log_history": history,
    }
    summary["training_curves"] = _plot_curves(history, metric, output_dir / CURVES_FILE) if plot else None
    (output_dir / SUMMARY_FILE).write_text(json.dumps(summary, indent=2, default=str), encoding="utf-8")
    return summary


def _versions() -> dict[str, str]:
    import sentence_transformers
    import torch
    import transformers

    import jtcse

    return {
        "jtcse": jtcse.__version__,
        "sentence_transformers": sentence_transformers.__version__,
        "transformers": transformers.__version__,
        "torch": torch.__version__,
    }


def _plot_curves(history: list[dict], metric: str, path: Path) -> str | None:
    """Loss terms per logged step (and dev Spearman when evaluated) as a PNG."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    skip = {"loss", "grad_norm", "learning_rate", "epoch", "step"}
    terms = sorted({key for entry in history if "loss" in entry for key in entry if key not in skip})
    train = [entry for entry in history if "loss" in entry]
    dev = [(entry["step"], entry[metric]) for entry in history if metric in entry]
    if not train and not dev:
        return None
    fig, axes = plt.subplots(1, 2 if dev else 1, figsize=(11 if dev else 6, 4), squeeze=False)
    ax = axes[0][0]
    steps = [entry["step"] for entry in train]
    ax.plot(steps, [entry["loss"] for entry in train], label="total", linewidth=2)
    for term in terms:
        ax.plot(steps, [entry.get(term, float("nan")) for entry in train], label=term)
    ax.set_xlabel("step")
    ax.set_ylabel("loss")
    ax.legend()
    ax.set_title("JTCSE loss terms")
    if dev:
        ax = axes[0][1]
        ax.plot([s for s, _ in dev], [v for _, v in dev], marker="o")
        ax.set_xlabel("step")
        ax.set_ylabel("Spearman (cosine)")
        ax.set_title("STS-B dev")
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return str(path)
