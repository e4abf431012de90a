"""Train a JTCSE twin on a text corpus with ``SentenceTransformerTrainer``.

Output layout of ``output_dir``::

    modules.json, tower_1/, tower_2/, ...   the final twin (best by dev Spearman when a dev file is given)
    run_summary.json                        what ran, on what, and how it went
    training_curves.png                     loss terms (and dev Spearman) over the steps
    checkpoints/checkpoint-<step>/          trainer checkpoints; a rerun resumes from the last one
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from jtcse.errors import JTCSEError
from jtcse.training.common import (
    CHECKPOINTS_SUBDIR,
    DEV_METRIC,
    RUN_SUMMARY_NAME,
    build_training_args,
    dev_evaluator,
    prepare_output_dir,
    train_guarded,
    write_run_summary,
)

CHECKPOINT_SUBDIR = CHECKPOINTS_SUBDIR
SUMMARY_FILE = RUN_SUMMARY_NAME
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
    overwrite: bool = False,
    precision: str = "fp32",
    gradient_checkpointing: bool = False,
    callbacks: Sequence[Any] = (),
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
    under ``output_dir/checkpoints`` when there is one (also after a finished run, to train longer);
    the settings must match the earlier run's apart from ``max_steps``/``epochs``. A finished run with
    nothing to resume is refused unless ``overwrite`` (see
    :func:`jtcse.training.common.prepare_output_dir`). ``precision`` (``fp32``, the reference recipe's,
    or ``auto``/``bf16``/``fp16``) and ``gradient_checkpointing`` are for GPUs (see
    :func:`jtcse.training.common.build_training_args`). ``callbacks``: extra ``TrainerCallback``s.
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
    sentences, data_stats = read_training_sentences(corpus)  # before the heavy imports: bad files fail fast
    evaluator = dev_evaluator(dev_file)
    config = {
        "stage": "twin",
        "towers": [str(tower_a) if tower_a else None, str(tower_b) if tower_b else None],
        "corpus": data_stats["corpus"],
        "sentences": len(sentences),
        "cael_every": cael_every,
        "batch_size": batch_size,
        "max_seq_length": max_seq_length,
        "learning_rate": learning_rate,
        "epochs": epochs,
        "max_steps": max_steps,
        "seed": seed,
        "temperature": temperature,
        "loss_weights": [nce_weight, icnce_weight, ictm_weight],
        "extra_losses": sorted(extra_losses or {}),
        "regularizers": list(regularizers),
        "warmup_ratio": warmup_ratio,
        "dev_file": str(dev_file) if dev_file else None,
        "eval_steps": eval_steps,
    }
    resume_from = prepare_output_dir(output_dir, config, resume=resume, overwrite=overwrite)

    from datasets import Dataset

    from jtcse.losses import JTCSELoss
    from jtcse.losses.registry import build_regularised_loss
    from jtcse.modeling.build import build_twin

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

    steps_per_epoch = max(1, len(sentences) // batch_size) if len(sentences) > batch_size else 1
    total_steps = max_steps if max_steps > 0 else math.ceil(steps_per_epoch * epochs)
    logging_steps = logging_steps or max(1, min(50, eval_steps, total_steps // 10 or 1))
    args = build_training_args(
        output_dir,
        batch_size=batch_size,
        learning_rate=learning_rate,
        epochs=epochs,
        max_steps=max_steps,
        seed=seed,
        has_dev=evaluator is not None,
        eval_steps=eval_steps,
        logging_steps=logging_steps,
        warmup_ratio=warmup_ratio,  # a float below 1 is a ratio in transformers 5
        # twin-specific: a dev score and a logged loss before any update, whole batches only (the
        # ICNCE/ICTM terms pair rows across a batch)
        logging_first_step=True,
        eval_on_start=evaluator is not None,
        save_total_limit=save_total_limit,
        dataloader_drop_last=len(sentences) > batch_size,
        disable_tqdm=not show_progress,
        use_cpu=device == "cpu",
        precision=precision,
        gradient_checkpointing=gradient_checkpointing,
    )
    started = time.time()
    trainer, train_output = train_guarded(
        model, args, dataset, loss, evaluator,
        learning_rate=learning_rate, output_dir=output_dir, resume_from=resume_from, callbacks=callbacks,
    )
    runtime = time.time() - started

    model.save(str(output_dir))
    history = trainer.state.log_history
    dev_scores = [(entry["step"], entry[DEV_METRIC]) for entry in history if DEV_METRIC in entry]
    final_dev = evaluator(model)[evaluator.primary_metric] if evaluator else None
    last_losses = next((entry for entry in reversed(history) if "loss" in entry), {})
    summary = {
        "output_dir": str(output_dir.resolve()),
        "model": "best checkpoint by STS-B dev Spearman" if evaluator else "last step",
        "towers": [str(tower_a) if tower_a else "embedded MiniLM", str(tower_b) if tower_b else "embedded MiniLM"],
        "cael_every": model[0].cael_every,
        "cael_layers": model[0].cael_layers,
        "num_layers": model[0].num_layers,
        **data_stats,
        **{key: config[key] for key in ("batch_size", "max_seq_length", "learning_rate", "epochs", "max_steps", "seed")},
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
    summary["training_curves"] = _plot_curves(history, DEV_METRIC, output_dir / CURVES_FILE) if plot else None
    write_run_summary(output_dir, summary)
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
