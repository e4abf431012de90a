"""Tower warm-up: unsupervised SimCSE, optionally with round-trip-translation (RTT) positives.

Each training row is (anchor, positive); the loss is sentence-transformers'
``MultipleNegativesRankingLoss`` (InfoNCE with in-batch negatives, scale = 1/τ):

    ℓ_i = −log  exp(cos(z_i, z_i⁺)/τ) / Σ_j exp(cos(z_i, z_j⁺)/τ)

Without a pairs file the positive is the sentence itself and the two dropout passes make the views
(Gao et al., 2021, "SimCSE"). With a pairs file (``original<TAB>paraphrase``) a sentence's positive is its
round-trip paraphrase, still under dropout (Zong & Zhang, 2023, EDFSE; the JTCSE warm-up).

The output is a plain sentence-transformers checkpoint, usable as a tower by ``jtcse train``: the starting
model with its own modules when it pools CLS or mean (the embedded MiniLM: mean ``Pooling`` + ``Normalize``;
the warm-up is then plain SimCSE of that model), else ``Transformer`` + the ``pooling`` asked for (CLS for a
plain ``transformers`` model); a training-only head (the NITP regulariser's predictor) is trained and kept in
the checkpoints but not saved with the final tower, so it loads without jtcse.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from jtcse.corpus import read_training_sentences
from jtcse.locking import locks_output
from jtcse.training.positives import corpus_part, positive_of
from jtcse.training.settings import ContrastiveSettings, TrainingSettings, WarmupSettings, resolve
from jtcse.training.trainer_run import (
    TrainerRun,
    dev_evaluator,
    require_negatives,
    run_trainer,
    start_run,
    training_device,
)


def simcse_rows(
    sentences: Sequence[str] | None, pairs=None, positives: str = "dropout", seed: int = 42
) -> tuple[list[str], list[str], dict[str, int]]:
    """Training rows (anchors, positives) and their counts.

    Every usable paraphrase pair is one row; every corpus sentence without a pair is one row whose positive is
    the sentence itself (``positives="dropout"``: the dropout views) or the sentence changed as ``positives``
    says (:func:`jtcse.training.positives.positive_of`, drawn from ``seed``). Repeated corpus sentences are kept
    once.
    """
    anchors: list[str] = list(pairs.originals) if pairs is not None else []
    augmented: list[str] = list(pairs.paraphrases) if pairs is not None else []
    paired = set(anchors)
    dropout_only = 0
    for sentence in dict.fromkeys(sentences or []):
        if sentence not in paired:
            anchors.append(sentence)
            augmented.append(positive_of(sentence, positives, seed))
            dropout_only += 1
    counts = {"rows": len(anchors), "paraphrase_rows": len(anchors) - dropout_only, "dropout_only_rows": dropout_only}
    return anchors, augmented, counts


def _fingerprint(texts: Sequence[str]) -> str:
    digest = hashlib.sha256()
    for text in texts:
        digest.update(text.encode("utf-8"))
        digest.update(b"\0")
    return digest.hexdigest()[:16]


@locks_output("output_dir")
def train_simcse(
    model=None,
    corpus: str | Path | Sequence[str] | None = None,
    output_dir: str | Path = "runs/simcse",
    *,
    pairs_file: str | Path | None = None,
    pooling: str | None = None,
    dev_file: str | Path | None = None,
    extra_losses: Mapping[str, Callable[[dict[str, Any]], Any]] | None = None,
    resume: bool = True,
    overwrite: bool = False,
    callbacks: Sequence[Any] = (),
    device: str | None = None,
    settings: WarmupSettings | TrainingSettings | None = None,
    text_column: str | None = None,
    pair_columns: str | None = None,
    **keys: Any,
) -> dict[str, Any]:
    """Warm up one tower with SimCSE and save it to ``output_dir``.

    ``model``: path, ``SentenceTransformer`` or ``None`` (embedded MiniLM). ``pooling`` (``cls`` | ``mean``;
    ``None``: the model's own, :func:`jtcse.modeling.loading.load_tower`): the model's own pooling is kept
    with all its modules (``Normalize`` ...); another one replaces what follows its Transformer, and a model
    pooling otherwise (weighted mean, last token ...) must be given one. The summary lists the changes.
    ``corpus``: a one-sentence-a-line file, a table or dataset (:mod:`jtcse.text_inputs`; its ``text_column``), a
    list of sentences, or ``None`` (the embedded prose corpus, unless ``pairs_file`` is given, in which case the
    pairs alone are the training data).
    ``pairs_file``: ``original<TAB>paraphrase`` TSV, or a table of pairs (its ``pair_columns``, ``"A,B"``);
    identical pairs are counted and dropped.
    ``dev_file``: STS pairs (an STS-B file or a table, :func:`~jtcse.evaluation.sts.read_sts_input`), scored every ``eval_steps``; with ``checkpoint="best-dev"`` the checkpoint
    with the best dev Spearman is kept.
    How long and how it trains: ``settings`` (a :class:`~jtcse.training.settings.WarmupSettings`, or just its
    :class:`~jtcse.training.settings.TrainingSettings`) and/or its keys as keywords (``batch_size=32,
    max_steps=100, temperature=0.05`` ...), on top of ``WarmupSettings()``. ``regularizers`` (specs such as
    ``"dispersion:weight=0.1"``, see :mod:`jtcse.losses.registry`) and ``extra_losses`` (``{name: fn(features)
    -> scalar}``) are computed on the token states of the SimCSE forward itself
    (:class:`jtcse.losses.RegularizedLoss`); each is logged as its own term next to ``simcse``. Run rules
    (resume, overwrite, checkpoints, summary) are the stage runner's (:func:`jtcse.training.trainer_run.run_trainer`).
    ``gather_across_devices``: under a multi-process launch, every rank's anchors meet the positives of all
    ranks (docs/distributed.md). ``mini_batch_size``: train with sentence-transformers'
    ``CachedMultipleNegativesRankingLoss`` (GradCache), this many sentences per forward; not with regularisers
    or extra losses. ``device`` (``None``: the trainer's choice) is checked with the precision before anything
    loads (:func:`~jtcse.training.trainer_run.training_device`).

    Returns the run summary (also written to ``<output_dir>/run_summary.json``).
    """
    from jtcse.losses.registry import build_regularised_loss, check_mini_batch_size
    from jtcse.modeling.loading import check_pooling, describe_source, load_tower
    from jtcse.output_paths import WORKING_FOLDERS, fingerprint
    from jtcse.training.paraphrase_pairs import read_paraphrase_pairs

    settings = resolve(WarmupSettings(), settings, keys, "train_simcse")  # checked: before anything is loaded
    training, terms = settings.training, settings.loss
    check_pooling(pooling)
    training_device(device, training.precision)
    check_mini_batch_size(terms.mini_batch_size, terms.regularizers, extra_losses)

    no_corpus = corpus is None and pairs_file is not None
    sentences, data = (None, {}) if no_corpus else read_training_sentences(corpus, text_column=text_column)
    if sentences is not None:
        sentences = corpus_part(sentences, settings.corpus_part)
    pairs = read_paraphrase_pairs(pairs_file, pair_columns) if pairs_file is not None else None
    anchors, positives, counts = simcse_rows(sentences, pairs, settings.positives, training.seed)
    require_negatives(len(anchors), "SimCSE")
    data.update(
        counts,
        positives=settings.positives,
        corpus_part=settings.corpus_part,
        pairs_file=str(pairs_file) if pairs_file else None,
        pairs_used=len(pairs) if pairs is not None else 0,
        pairs_dropped_identical=pairs.dropped_identical if pairs is not None else 0,
        pairs_dropped_empty=pairs.dropped_empty if pairs is not None else 0,
    )
    evaluator = dev_evaluator(dev_file, training, batch_size=training.batch_size)

    model_source = describe_source(model)
    plan = start_run(
        "simcse",
        output_dir,
        settings,
        {
            # by content: another model saved at the same path is another input (the embedded one: by its name)
            "model": fingerprint(model, ignore=WORKING_FOLDERS, missing_ok=True) or model_source,
            "pooling": pooling,
            "data": _fingerprint(anchors + positives),
            "extra_losses": sorted(extra_losses or {}),
            "dev_file": fingerprint(dev_file),  # its content: a dev file edited in place is another one
        },
        inputs=[model, corpus, pairs_file, dev_file],
        resume=resume,
        overwrite=overwrite,
    )
    if plan.finished:
        return plan.summary

    from datasets import Dataset

    from jtcse.training.distributed import pooler_parameters

    tower, pooled, pooling_changes = load_tower(model, pooling=pooling, role="tower", device=device)
    base = simcse_loss(tower, terms)
    return run_trainer(
        TrainerRun(
            name="simcse",
            plan=plan,
            model=tower,
            loss=build_regularised_loss(
                tower, base, list(terms.regularizers), extra_terms=extra_losses, base_name="simcse"
            ),
            train_dataset=Dataset.from_dict({"anchor": anchors, "positive": positives}),
            settings=training,
            role="tower",
            evaluator=evaluator,
            model_info={"source": model_source, "pooling": pooled, "changes": pooling_changes},
            data=data,
            use_no_duplicates_sampler=True,
            device=device,
            # neither pooling reads the transformers pooler, so under DDP its parameters get no gradient
            trainer_overrides=dict(ddp_find_unused_parameters=bool(pooler_parameters(tower))),
            callbacks=callbacks,
        )
    )


def simcse_loss(tower, terms: ContrastiveSettings):
    """SimCSE's InfoNCE on ``tower`` as ``terms`` say: sentence-transformers' ``MultipleNegativesRankingLoss`` at
    scale 1/τ, or with a ``mini_batch_size`` its GradCache form ``CachedMultipleNegativesRankingLoss``; the cosines
    in float32 under any autocast (:func:`~jtcse.losses.functional.cos_sim`)."""
    from sentence_transformers.sentence_transformer.losses import (
        CachedMultipleNegativesRankingLoss,
        MultipleNegativesRankingLoss,
    )

    from jtcse.losses.functional import cos_sim

    kwargs = dict(
        scale=1.0 / terms.temperature, similarity_fct=cos_sim, gather_across_devices=terms.gather_across_devices
    )
    if not terms.mini_batch_size:  # None or 0: no GradCache
        return MultipleNegativesRankingLoss(tower, **kwargs)
    return CachedMultipleNegativesRankingLoss(tower, mini_batch_size=terms.mini_batch_size, **kwargs)
