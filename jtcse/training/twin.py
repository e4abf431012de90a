"""Train a JTCSE twin on a text corpus with ``SentenceTransformerTrainer``.

Output layout of ``output_dir``::

    modules.json, tower_1/, tower_2/, ...   the final twin (best by dev Spearman when a dev file is given)
    run_summary.json                        what ran, on what, and how it went (schema: docs/runs.md)
    training_curves.png                     loss terms (and dev Spearman) over the steps
    checkpoints/checkpoint-<step>/          kept with keep_checkpoints; a rerun resumes from the last one
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from jtcse.corpus import read_training_sentences
from jtcse.locking import locks_output
from jtcse.training.settings import TrainingSettings, TwinSettings, resolve
from jtcse.training.trainer_run import (
    TrainerRun,
    dev_evaluator,
    require_negatives,
    run_trainer,
    start_run,
    training_device,
)


def count_truncated(sentences: list[str], tokenizer, max_seq_length: int, chunk: int = 4096) -> int:
    """How many sentences are longer than ``max_seq_length`` tokens (they are truncated in training)."""
    truncated = 0
    for start in range(0, len(sentences), chunk):
        lengths = [len(ids) for ids in tokenizer(sentences[start : start + chunk], verbose=False)["input_ids"]]
        truncated += sum(length > max_seq_length for length in lengths)
    return truncated


@locks_output("output_dir")
def train_twin(
    tower_a: str | None = None,
    tower_b: str | None = None,
    corpus: str | Path | None = None,
    output_dir: str | Path = "runs/jtcse",
    *,
    pooling: str | None = None,
    dev_file: str | Path | None = None,
    resume: bool = True,
    extra_losses: Mapping[str, Callable] | None = None,
    device: str | None = None,
    show_progress: bool = True,
    plot: bool = True,
    overwrite: bool = False,
    callbacks: Sequence[Any] = (),
    settings: TwinSettings | TrainingSettings | None = None,
    text_column: str | None = None,
    **keys: Any,
) -> dict[str, Any]:
    """Train a JTCSE twin and write it to ``output_dir``; returns the run summary (also ``run_summary.json``).

    How it trains: ``settings`` (a :class:`~jtcse.training.settings.TwinSettings`, or just its
    :class:`~jtcse.training.settings.TrainingSettings`) and/or its keys as keywords (``batch_size=32,
    max_steps=100, cael_every=0, ictm_weight=0.5`` ...), on top of ``TwinSettings()`` (the CPU recipe); a dev
    file is scored every ``eval_steps``, and with ``checkpoint="best-dev"`` the best checkpoint by it is kept.
    ``tower_a``/``tower_b`` None: the embedded MiniLM; ``corpus`` None: the standard library's prose (a table or
    dataset: its ``text_column``, :mod:`jtcse.text_inputs`).
    ``cael_every`` 0 trains without cross-attention (TNCSE). ``pooling`` (``cls`` | ``mean``; ``None``: the towers' own, see
    :func:`jtcse.modeling.build.build_twin`) pools each tower for ``encode`` and for every loss term.
    ``extra_losses``: ``{name: fn(outputs) -> scalar}`` on the twin's
    own training-mode outputs (``token_embeddings``, ``pooled_1`` ...), and ``regularizers``: specs such
    as ``"simreg:weight=2"`` (see :mod:`jtcse.losses.registry`), a key of the settings; both join the JTCSE terms through
    :class:`jtcse.losses.RegularizedLoss` and are logged by name. Run rules (resume, overwrite,
    checkpoints, summary) are the stage runner's (:func:`jtcse.training.trainer_run.run_trainer`);
    ``precision``/``gradient_checkpointing`` are for GPUs; ``device`` (``None``: the trainer's choice) is
    checked with the precision before anything loads (:func:`~jtcse.training.trainer_run.training_device`). ``callbacks``: extra ``TrainerCallback``s.
    ``gather_across_devices``: under a multi-process launch, every rank's anchors meet the candidates of
    all ranks (docs/distributed.md). ``mini_batch_size``: train with :class:`jtcse.losses.CachedJTCSELoss`
    (GradCache), this many sentences per forward; not with regularisers or extra losses.
    ``hard_negatives``: batches of neighbours by tower I as it starts (:mod:`jtcse.training.hard_batches`).
    A ``max_seq_length`` above the towers' position table is clamped to it (with a warning; the summary
    records the length used).
    """
    from jtcse.losses.registry import check_mini_batch_size
    from jtcse.modeling.loading import check_pooling
    from jtcse.output_paths import WORKING_FOLDERS, fingerprint
    from jtcse.training.teacher_cache import sentences_digest

    settings = resolve(TwinSettings(), settings, keys, "train_twin")  # checked: before anything is loaded
    training, terms = settings.training, settings.loss
    cael_every = settings.cael_every or None
    check_pooling(pooling)
    training_device(device, training.precision)
    check_mini_batch_size(terms.mini_batch_size, terms.regularizers, extra_losses)
    output_dir = Path(output_dir)
    sentences, data = read_training_sentences(corpus, text_column=text_column)  # before the heavy imports
    require_negatives(len(sentences), "a JTCSE twin")
    evaluator = dev_evaluator(dev_file, training)
    plan = start_run(
        "twin",
        output_dir,
        settings,
        {
            # by content: a retrained tower folder, or another model saved at its path, is another tower
            "towers": [fingerprint(t, ignore=WORKING_FOLDERS, missing_ok=True) for t in (tower_a, tower_b)],
            "corpus": sentences_digest(sentences)[:16],  # the sentences, not the file's path
            "cael_every": cael_every,
            "pooling": pooling,
            "loss_weights": [settings.nce_weight, settings.icnce_weight, settings.ictm_weight],
            "extra_losses": sorted(extra_losses or {}),
            "paraphrase_threshold": settings.paraphrase_threshold if settings.hard_negatives else None,
            "dev_file": fingerprint(dev_file),  # its content: a dev file edited in place is another one
        },
        inputs=[tower_a, tower_b, corpus, dev_file],
        resume=resume,
        overwrite=overwrite,
    )
    if plan.finished:
        return plan.summary

    from datasets import Dataset

    from jtcse.losses.registry import build_regularised_loss
    from jtcse.modeling.build import build_twin
    from jtcse.training.distributed import pooler_parameters

    model = build_twin(tower_a, tower_b, cael_every=cael_every, pooling=pooling, device=device)  # tower I's length
    base = _jtcse_loss(model, settings)
    twin = model[0]
    dataset, overrides = Dataset.from_dict({"text": sentences}), {}
    if settings.hard_negatives:  # batches of neighbours, by tower I as it starts
        dataset, overrides = _neighbour_batches(dataset, tower_a, training, settings.paraphrase_threshold, device)
        data["hard_negative_batches"] = len(set(dataset["label"]))
    stage = TrainerRun(
        name="twin",
        plan=plan,
        model=model,
        loss=build_regularised_loss(model, base, list(terms.regularizers), extra_terms=extra_losses),
        train_dataset=dataset,
        settings=training,
        role="twin",
        evaluator=evaluator,
        model_info={
            "towers": [str(t) if t else "embedded MiniLM" for t in (tower_a, tower_b)],
            "cael_every": twin.cael_every,
            "cael_layers": twin.cael_layers,
            "pooling": twin.pooling,
            "num_layers": twin.num_layers,
        },
        data=data,
        # a dev score and a logged loss before any update (not again on a resume); whole batches only
        # (ICNCE/ICTM pair rows across a batch)
        trainer_overrides=dict(
            logging_first_step=True,
            eval_on_start=evaluator is not None and plan.resume_from is None,
            dataloader_drop_last=len(sentences) > training.batch_size,
            disable_tqdm=not show_progress,
            # only ICTM reads the towers' poolers: without it DDP must expect parameters without gradients
            ddp_find_unused_parameters=not settings.ictm_weight and bool(pooler_parameters(model)),
            **overrides,
        ),
        callbacks=callbacks,
        plot=plot,
        device=device,
    )  # now at its training length: counted at it, saved at its own
    data["truncated_to_max_seq_length"] = count_truncated(sentences, model.tokenizer, model.max_seq_length)
    return run_trainer(stage)


def _jtcse_loss(model, settings: TwinSettings):
    """The JTCSE loss of ``settings`` on the twin ``model``: :class:`~jtcse.losses.JTCSELoss`, or with a
    ``mini_batch_size`` its GradCache form :class:`~jtcse.losses.CachedJTCSELoss`."""
    from jtcse.losses import CachedJTCSELoss, JTCSELoss

    terms = settings.loss
    weights = dict(
        temperature=terms.temperature,
        nce_weight=settings.nce_weight,
        icnce_weight=settings.icnce_weight,
        ictm_weight=settings.ictm_weight,
        seed=settings.training.seed,
        gather_across_devices=terms.gather_across_devices,
    )
    if not terms.mini_batch_size:  # None or 0: no GradCache
        return JTCSELoss(model, **weights)
    return CachedJTCSELoss(model, mini_batch_size=terms.mini_batch_size, **weights)


def _neighbour_batches(dataset, guide, training, threshold: float, device):
    """``dataset`` with each sentence's batch of neighbours as its ``label`` and the trainer argument that makes
    each such group one batch (:mod:`jtcse.training.hard_batches`); ``guide``: the model whose embeddings group."""
    from jtcse.devices import autocast
    from jtcse.modeling.loading import load_model
    from jtcse.training.hard_batches import GROUP_COLUMN, GroupBatchSampler, group_labels, neighbour_groups

    model = load_model(guide, role="encode", device=device)
    with autocast(training.precision, str(model.device)):  # at the twin's precision
        vectors = model.encode(dataset["text"], batch_size=64, convert_to_numpy=True, show_progress_bar=False)
    groups = neighbour_groups(vectors, training.batch_size, threshold, training.seed)
    labelled = dataset.add_column(GROUP_COLUMN, group_labels(groups, len(dataset)))
    return labelled, {"batch_sampler": GroupBatchSampler}
