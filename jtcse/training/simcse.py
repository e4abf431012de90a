"""Tower warm-up: unsupervised SimCSE, optionally with round-trip-translation (RTT) positives.

Each training row is (anchor, positive); the loss is sentence-transformers'
``MultipleNegativesRankingLoss`` (InfoNCE with in-batch negatives, scale = 1/τ):

    ℓ_i = −log  exp(cos(z_i, z_i⁺)/τ) / Σ_j exp(cos(z_i, z_j⁺)/τ)

Without a pairs file the positive is the sentence itself and the two dropout passes make the views
(Gao et al., 2021, "SimCSE"). With a pairs file (``original<TAB>paraphrase``) a sentence's positive is its
round-trip paraphrase, still under dropout (Zong & Zhang, 2023, EDFSE; JTCSE warm-up, DESIGN §4).

The output is a plain sentence-transformers checkpoint, ``Transformer`` + CLS ``Pooling``, usable as a
tower by ``jtcse train``.
"""

from __future__ import annotations

import hashlib
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import torch
from torch import nn

from jtcse.errors import JTCSEError
from jtcse.training.common import (
    build_training_args,
    dev_evaluator,
    prepare_output_dir,
    read_sentences,
    run_outcome,
    save_final_model,
    train_guarded,
    write_run_summary,
)


class SummedLosses(nn.Module):
    """A base loss plus extra losses on the same batch, returned as named parts (``simcse``, ...).

    The trainer sums the parts and logs each one. ``extras`` follow the sentence-transformers loss
    convention (``forward(sentence_features, labels)``) and carry their own weights. Token-level
    regularisers wrap this module (:func:`jtcse.losses.registry.build_regularised_loss`) and join the
    parts under their own names.
    """

    def __init__(self, model, base: nn.Module, extras: Sequence[nn.Module]):
        super().__init__()
        self.model = model
        self.base = base
        self.extras = nn.ModuleList(extras)

    def forward(self, sentence_features, labels) -> dict[str, torch.Tensor]:
        parts = {"simcse": self.base(sentence_features, labels)}
        for index, extra in enumerate(self.extras):
            parts[f"{index}_{type(extra).__name__}"] = extra(sentence_features, labels)
        return parts

    def get_config_dict(self) -> dict[str, Any]:
        return {"extras": [type(extra).__name__ for extra in self.extras]}

    @property
    def citation(self) -> str:
        return self.base.citation


def simcse_rows(sentences: Sequence[str] | None, pairs=None) -> tuple[list[str], list[str], dict[str, int]]:
    """Training rows (anchors, positives) and their counts.

    Every usable paraphrase pair is one row; every corpus sentence without a pair is one
    (sentence, sentence) row (dropout views). Repeated corpus sentences are kept once.
    """
    anchors: list[str] = list(pairs.originals) if pairs is not None else []
    positives: list[str] = list(pairs.paraphrases) if pairs is not None else []
    paired = set(anchors)
    dropout_only = 0
    for sentence in dict.fromkeys(sentences or []):
        if sentence not in paired:
            anchors.append(sentence)
            positives.append(sentence)
            dropout_only += 1
    counts = {"rows": len(anchors), "paraphrase_rows": len(anchors) - dropout_only, "dropout_only_rows": dropout_only}
    return anchors, positives, counts


def _fingerprint(texts: Sequence[str]) -> str:
    digest = hashlib.sha256()
    for text in texts:
        digest.update(text.encode("utf-8"))
        digest.update(b"\0")
    return digest.hexdigest()[:16]


def train_simcse(
    model=None,
    corpus: str | Path | Sequence[str] | None = None,
    output_dir: str | Path = "runs/simcse",
    *,
    pairs_file: str | Path | None = None,
    batch_size: int = 64,
    max_seq_length: int = 32,
    learning_rate: float = 3e-5,
    epochs: float = 1,
    max_steps: int = -1,
    seed: int = 42,
    temperature: float = 0.05,
    dev_file: str | Path | None = None,
    eval_steps: int = 125,
    save_steps: int | None = None,
    logging_steps: int = 50,
    extra_losses: Sequence[Callable[[Any], nn.Module]] | None = None,
    regularizers: Sequence[str] = (),
    resume: bool = True,
    overwrite: bool = False,
    keep_checkpoints: bool = False,
    callbacks: Sequence[Any] = (),
    precision: str = "auto",
    gradient_checkpointing: bool = False,
) -> dict[str, Any]:
    """Warm up one tower with SimCSE and save it to ``output_dir`` as Transformer + CLS Pooling.

    ``model``: path, ``SentenceTransformer`` or ``None`` (embedded MiniLM). Any pooling other than CLS
    (and a trailing ``Normalize``) is replaced; the summary lists the changes.
    ``corpus``: a one-sentence-a-line file, a list of sentences, or ``None`` (the embedded prose corpus,
    unless ``pairs_file`` is given, in which case the pairs alone are the training data).
    ``pairs_file``: ``original<TAB>paraphrase`` TSV; identical pairs are counted and dropped.
    ``dev_file``: STS-B-format file; the checkpoint with the best dev Spearman is kept.
    ``extra_losses``: callables ``f(model) -> loss`` (e.g. a regulariser class), added to the SimCSE loss.
    ``regularizers``: token-level regulariser specs such as ``"dispersion:weight=0.1"`` (see
    :mod:`jtcse.losses.registry`), computed on the token states of the SimCSE forward itself; each is
    logged as its own term next to ``simcse`` and listed in the summary.
    An interrupted run in ``output_dir`` resumes from its last checkpoint when ``resume``.

    Returns the run summary (also written to ``<output_dir>/run_summary.json``).
    """
    from datasets import Dataset
    from sentence_transformers.sentence_transformer.losses import MultipleNegativesRankingLoss

    from jtcse.defaults import default_corpus_sentences
    from jtcse.losses.registry import build_regularised_loss, parse_regularizer_spec
    from jtcse.modeling.loading import describe_source, load_cls_tower
    from jtcse.training.paraphrase_pairs import read_paraphrase_pairs

    start = time.perf_counter()
    if temperature <= 0:
        raise JTCSEError(f"temperature must be positive (got {temperature}).")
    if max_seq_length < 4:
        raise JTCSEError(f"max sequence length must be at least 4 tokens (got {max_seq_length}).")
    regularizers = list(regularizers)
    for spec in regularizers:  # syntax errors fail before anything is loaded or written
        parse_regularizer_spec(spec)

    corpus_note: dict[str, Any] = {}
    if corpus is not None:
        sentences: list[str] | None
        sentences, label, skipped = read_sentences(corpus, "corpus")
        corpus_note = {"corpus": label}
        if isinstance(corpus, (str, Path)):
            corpus_note["corpus_skipped_blank_lines"] = skipped
    elif pairs_file is None:
        sentences = default_corpus_sentences()
        corpus_note = {"corpus": "<embedded stdlib prose>"}
    else:
        sentences = None
    pairs = read_paraphrase_pairs(pairs_file) if pairs_file is not None else None
    anchors, positives, counts = simcse_rows(sentences, pairs)
    if len(anchors) < 2:
        raise JTCSEError(f"SimCSE needs at least 2 training sentences for in-batch negatives (got {len(anchors)}).")
    evaluator = dev_evaluator(dev_file, batch_size=batch_size)

    model_source = describe_source(model)
    config = {
        "stage": "simcse",
        "model": model_source,
        "data": _fingerprint(anchors + positives),
        "batch_size": batch_size,
        "max_seq_length": max_seq_length,
        "learning_rate": learning_rate,
        "epochs": epochs,
        "max_steps": max_steps,
        "seed": seed,
        "temperature": temperature,
        "regularizers": regularizers,
        "dev_file": str(dev_file) if dev_file else None,
        "eval_steps": eval_steps,
    }
    resume_from = prepare_output_dir(output_dir, config, resume=resume, overwrite=overwrite)

    tower, pooling_changes = load_cls_tower(model, role="tower")
    saved_max_seq_length = tower.max_seq_length
    tower.max_seq_length = max_seq_length

    base_loss = MultipleNegativesRankingLoss(tower, scale=1.0 / temperature)
    extras = [factory(tower) for factory in (extra_losses or [])]
    # named terms (a dict) whenever there is more than the SimCSE loss, so the trainer logs each one
    loss = SummedLosses(tower, base_loss, extras) if extras or regularizers else base_loss
    loss = build_regularised_loss(tower, loss, regularizers)

    args = build_training_args(
        output_dir,
        batch_size=batch_size,
        learning_rate=learning_rate,
        epochs=epochs,
        max_steps=max_steps,
        seed=seed,
        has_dev=evaluator is not None,
        eval_steps=eval_steps,
        save_steps=save_steps,
        logging_steps=logging_steps,
        precision=precision,
        gradient_checkpointing=gradient_checkpointing,
        use_no_duplicates_sampler=True,
    )
    trainer, _ = train_guarded(
        tower,
        args,
        Dataset.from_dict({"anchor": anchors, "positive": positives}),
        loss,
        evaluator,
        learning_rate=learning_rate,
        output_dir=output_dir,
        resume_from=resume_from,
        callbacks=callbacks,
    )
    final_dev = save_final_model(
        tower, output_dir, evaluator, max_seq_length=saved_max_seq_length, keep_checkpoints=keep_checkpoints
    )

    summary: dict[str, Any] = {
        "stage": "simcse",
        "output_dir": str(output_dir),
        "model": model_source,
        "pooling_changes": pooling_changes,
        **corpus_note,
        "pairs_file": str(pairs_file) if pairs_file else None,
        "pairs_used": len(pairs) if pairs is not None else 0,
        "pairs_dropped_identical": pairs.dropped_identical if pairs is not None else 0,
        "pairs_dropped_empty": pairs.dropped_empty if pairs is not None else 0,
        **counts,
        "regularizers": loss.get_config_dict()["regularizers"] if regularizers else [],
        **run_outcome(trainer, resume_from=resume_from, final_dev=final_dev, started=start, config=config),
    }
    write_run_summary(output_dir, summary)
    return summary
