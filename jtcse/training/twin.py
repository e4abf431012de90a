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
from jtcse.training.stage import (
    Stage,
    TrainingSettings,
    dev_evaluator,
    require_negatives,
    run_stage,
    set_training_length,
    start_stage,
    training_device,
)


def count_truncated(sentences: list[str], tokenizer, max_seq_length: int, chunk: int = 4096) -> int:
    """How many sentences are longer than ``max_seq_length`` tokens (they are truncated in training)."""
    truncated = 0
    for start in range(0, len(sentences), chunk):
        lengths = [len(ids) for ids in tokenizer(sentences[start : start + chunk])["input_ids"]]
        truncated += sum(length > max_seq_length for length in lengths)
    return truncated


TWIN_SETTINGS = TrainingSettings(
    batch_size=16, max_seq_length=32, learning_rate=1e-5, max_steps=100, logging_steps=None, precision="fp32"
)
"""``train_twin``'s training settings by default, and the pipeline's twin stage's: the CPU recipe measured on the
embedded MiniLM (``evaluation/DEFAULTS.md``): 100 steps at lr 1e-5, the setting that measured least harmful to
pre-trained towers on the selection split (higher rates move them away from what they knew), logging about ten
times a run. The paper's (batch 64, length 64,
lr 1.3e-6, one epoch of Wiki1M) are in ``models/jtcse-bert-base/recipe.toml``."""


@locks_output("output_dir")
def train_twin(
    tower_a: str | None = None,
    tower_b: str | None = None,
    corpus: str | Path | None = None,
    output_dir: str | Path = "runs/jtcse",
    *,
    cael_every: int | None = 2,
    pooling: str | None = None,
    dev_file: str | Path | None = None,
    resume: bool = True,
    temperature: float = 0.05,
    nce_weight: float = 1.0,
    icnce_weight: float = 1.0,
    ictm_weight: float = 0.5,
    extra_losses: Mapping[str, Callable] | None = None,
    regularizers: Sequence[str] = (),
    device: str | None = None,
    show_progress: bool = True,
    plot: bool = True,
    overwrite: bool = False,
    gather_across_devices: bool = False,
    mini_batch_size: int | None = None,
    callbacks: Sequence[Any] = (),
    settings: TrainingSettings | None = None,
    **training: Any,
) -> dict[str, Any]:
    """Train a JTCSE twin and write it to ``output_dir``; returns the run summary (also ``run_summary.json``).

    How long and how it trains: ``settings`` (a :class:`~jtcse.training.stage.TrainingSettings`) and/or its
    fields as keywords (``batch_size=32, max_steps=100`` ...), on top of :data:`TWIN_SETTINGS` (the
    CPU recipe); with a dev file the best checkpoint by dev Spearman is kept. ``tower_a``/``tower_b`` None: the
    embedded MiniLM; ``corpus`` None: the standard library's prose. ``cael_every`` None trains
    without cross-attention (TNCSE). ``pooling`` (``cls`` | ``mean``; ``None``: the towers' own, see
    :func:`jtcse.modeling.build.build_twin`) pools each tower for ``encode`` and for every loss term.
    ``extra_losses``: ``{name: fn(outputs) -> scalar}`` on the twin's
    own training-mode outputs (``token_embeddings``, ``pooled_1`` ...), and ``regularizers``: specs such
    as ``"simreg:weight=2"`` (see :mod:`jtcse.losses.registry`); both join the JTCSE terms through
    :class:`jtcse.losses.RegularizedLoss` and are logged by name. Run rules (resume, overwrite,
    checkpoints, summary) are the stage runner's (:func:`jtcse.training.stage.run_stage`);
    ``precision``/``gradient_checkpointing`` are for GPUs; ``device`` (``None``: the trainer's choice) is
    checked with the precision before anything loads (:func:`~jtcse.training.stage.training_device`). ``callbacks``: extra ``TrainerCallback``s.
    ``gather_across_devices``: under a multi-process launch, every rank's anchors meet the candidates of
    all ranks (docs/distributed.md). ``mini_batch_size``: train with :class:`jtcse.losses.CachedJTCSELoss`
    (GradCache), this many sentences per forward; not with regularisers or extra losses.
    A ``max_seq_length`` above the towers' position table is clamped to it (with a warning; the summary
    records the length used).
    """
    from jtcse.losses.registry import check_mini_batch_size
    from jtcse.modeling.loading import check_pooling

    settings = TWIN_SETTINGS.given(settings, training, "train_twin")
    check_pooling(pooling)
    training_device(device, settings.precision)
    check_mini_batch_size(mini_batch_size, regularizers, extra_losses)
    output_dir = Path(output_dir)
    sentences, data = read_training_sentences(corpus)  # before the heavy imports: bad files fail fast
    require_negatives(len(sentences), "a JTCSE twin")
    evaluator = dev_evaluator(dev_file)
    plan = start_stage(
        "twin",
        output_dir,
        settings,
        {
            "towers": [str(tower_a) if tower_a else None, str(tower_b) if tower_b else None],
            "corpus": data["source"],
            "sentences": len(sentences),
            "cael_every": cael_every,
            "pooling": pooling,
            "temperature": temperature,
            "loss_weights": [nce_weight, icnce_weight, ictm_weight],
            "extra_losses": sorted(extra_losses or {}),
            "regularizers": list(regularizers),
            "gather_across_devices": gather_across_devices,
            "mini_batch_size": mini_batch_size,
            "dev_file": str(dev_file) if dev_file else None,
        },
        resume=resume,
        overwrite=overwrite,
    )
    if plan.finished:
        return plan.summary

    from datasets import Dataset

    from jtcse.losses import CachedJTCSELoss, JTCSELoss
    from jtcse.losses.registry import build_regularised_loss
    from jtcse.modeling.build import build_twin
    from jtcse.training.distributed import pooler_parameters

    model = build_twin(tower_a, tower_b, cael_every=cael_every, max_seq_length=None, pooling=pooling, device=device)
    set_training_length(model, settings, "twin")
    data["truncated_to_max_seq_length"] = count_truncated(sentences, model.tokenizer, model.max_seq_length)
    terms = dict(
        temperature=temperature,
        nce_weight=nce_weight,
        icnce_weight=icnce_weight,
        ictm_weight=ictm_weight,
        seed=settings.seed,
        gather_across_devices=gather_across_devices,
    )
    if mini_batch_size is None:
        base = JTCSELoss(model, **terms)
    else:
        base = CachedJTCSELoss(model, mini_batch_size=mini_batch_size, **terms)
    twin = model[0]
    return run_stage(
        Stage(
            name="twin",
            plan=plan,
            model=model,
            loss=build_regularised_loss(model, base, list(regularizers), extra_terms=extra_losses),
            train_dataset=Dataset.from_dict({"text": sentences}),
            settings=settings,
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
                dataloader_drop_last=len(sentences) > settings.batch_size,
                disable_tqdm=not show_progress,
                # only ICTM reads the towers' poolers: without it DDP must expect parameters without gradients
                ddp_find_unused_parameters=not ictm_weight and bool(pooler_parameters(model)),
            ),
            callbacks=callbacks,
            plot=plot,
            device=device,
        )
    )
