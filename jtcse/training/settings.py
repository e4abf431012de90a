"""Every trainer's settings, each declared once (type, default, help, check) on pydantic (:mod:`jtcse.schema`).

* :class:`TrainingSettings`: how long and how any stage trains, and which model it keeps (``checkpoint``).
* :class:`WarmupSettings` (``jtcse simcse``, the pipeline's ``[warmup]``), :class:`TwinSettings` (``jtcse train``,
  ``[twin]``) and :class:`DistillSettings` (``jtcse distill``, ``[distill]``): a trainer's own values on top of its
  :class:`TrainingSettings`, whose defaults are that trainer's CPU recipe (measured on the embedded MiniLM in
  ``evaluation/DEFAULTS.md``). The paper's settings are in ``models/*/recipe.toml``.

The command-line options of ``jtcse simcse``, ``train``, ``distill`` and ``pipeline``, the recipe reader and
``jtcse pipeline --dump-recipe`` are generated from these declarations (``jtcse/commands/_settings.py``,
``jtcse/pipeline/recipe.py``). A trainer takes its settings object and/or keys as keywords
(``train_twin(..., max_steps=100, cael_every=0)``: :func:`resolve`).
"""

from __future__ import annotations

import math
import typing
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import model_validator

from jtcse.devices import Precision
from jtcse.errors import SettingError
from jtcse.losses.registry import regularizer_help
from jtcse.modeling.loading import Pooling
from jtcse.schema import Array, Positive, Settings, checked, get, group, keys, replace_keys, setting
from jtcse.training.positives import Positives, part_problem

Checkpoint = Literal["last", "best-dev"]
"""Which model a stage keeps (``checkpoint``): its last step, or the checkpoint with the best dev-file Spearman."""
CHECKPOINTS = dict(zip(typing.get_args(Checkpoint), ("last step", "best checkpoint by dev Spearman"), strict=True))
"""How a run summary says which model a stage kept (``saved_model``)."""
ReportTo = Literal["none", "tensorboard", "wandb", "mlflow"]
"""Where the Hugging Face Trainer reports a run's logs (its ``report_to``)."""
REPORT_PACKAGES = {"tensorboard": "tensorboard", "wandb": "wandb", "mlflow": "mlflow"}
"""The package each ``report_to`` needs (``pip install`` it; ``jtcse[tensorboard]`` brings TensorBoard)."""
OBJECTIVES = ("mse", "mse-normalized", "cosine", "similarity")
"""The distillation objectives (:mod:`jtcse.training.distill`); a distillation trains on one or on a sum of them."""


def _objective(value: str) -> str | None:
    parts = value.split("+")
    if all(part in OBJECTIVES for part in parts) and len(set(parts)) == len(parts):
        return None
    return (
        "Input should be 'mse', 'mse-normalized', 'cosine' or 'similarity', or a sum of distinct ones joined by + "
        "(e.g. similarity+mse)"
    )


Objective = Annotated[str, checked(_objective)]
"""A distillation objective (one of :data:`OBJECTIVES`) or a sum of them: ``similarity+mse``."""
MIN_BATCH_SIZE = 2
"""In-batch negatives need a second row; the twin's cross-tower terms pair rows across the batch."""
MIN_SEQ_LENGTH = 4
"""Room for the special tokens and at least two word pieces."""


MAX_SEED = 2**32 - 1
"""The largest seed every generator a run seeds takes (NumPy's: 0 to 2**32 - 1)."""


def seed_range(spare: int = 0):
    """A seed's type when ``seed + spare`` is drawn too (the pipeline's warm-up II: ``spare=1``): a whole number from 0
    to ``MAX_SEED - spare``."""

    def problem(value: int) -> str | None:
        if 0 <= value <= MAX_SEED - spare:
            return None
        return f"must be between 0 and {MAX_SEED - spare}" + (f" (seed + {spare} is used too)" if spare else "")

    return Annotated[int, checked(problem)]


Seed = seed_range()
"""A seed (data order, dropout): 0 to :data:`MAX_SEED`."""


def role(
    *, recorded: bool | Literal["when-on"] = False, card: bool = False, trainer_args: tuple[str, ...] = ()
) -> dict[str, Any]:
    """What a trainer's setting is beyond its value (``setting(extra=role(...))``), so that each list of settings is
    derived from the declarations: ``recorded``, a resumed or rerun run must share it (:func:`recorded_settings`;
    ``"when-on"``: a switch recorded only when on, so the runs made before it existed, off, stay the same runs);
    ``card``, the model card lists it (:func:`card_keys`); ``trainer_args``, the
    ``SentenceTransformerTrainingArguments`` keywords it is, as it is (:meth:`TrainingSettings.trainer_arguments`)."""
    return {"recorded": recorded, "card": card, "trainer_args": trainer_args}


def _steps(value: int) -> str | None:
    return None if value == -1 or value >= 1 else "must be a positive step count or -1 (train by epochs)"


StepCount = Annotated[int, checked(_steps)]
"""A number of steps, or -1: train by epochs."""


def _regularizer(spec: str) -> str | None:
    from jtcse.losses.registry import parse_regularizer_spec

    try:
        parse_regularizer_spec(spec)
    except ValueError as err:
        return str(err)
    return None


RegularizerSpec = Annotated[str, checked(_regularizer)]
"""A token-level loss term as the command line names it (:mod:`jtcse.losses.registry`)."""


class TrainingSettings(Settings):
    """How long and how a stage trains, and which model it keeps; checked once, the same way for every stage."""

    max_steps: StepCount = setting(
        -1,
        "Stop after this many optimizer steps (-1: run the epochs).",
        aliases=("steps",),
        extra=role(recorded=True, card=True, trainer_args=("max_steps",)),
    )
    epochs: Positive = setting(
        1.0,
        "Passes over the data (when max_steps is -1).",
        extra=role(recorded=True, card=True, trainer_args=("num_train_epochs",)),
    )
    learning_rate: Positive = setting(
        5e-5,
        "AdamW learning rate.",
        aliases=("lr",),
        extra=role(recorded=True, card=True, trainer_args=("learning_rate",)),
    )
    batch_size: int = setting(
        64,
        "Sentences per batch (each one's in-batch negatives are the others).",
        ge=MIN_BATCH_SIZE,
        extra=role(
            recorded=True, card=True, trainer_args=("per_device_train_batch_size", "per_device_eval_batch_size")
        ),
    )
    max_seq_length: int = setting(
        64,
        "Tokens per sentence in training; longer ones are truncated. The saved model keeps the length of the model "
        "it started from (docs/runs.md, Lengths).",
        ge=MIN_SEQ_LENGTH,
        extra=role(recorded=True, card=True),
    )
    warmup_ratio: float = setting(
        0.0,
        "Share of the steps over which the learning rate warms up.",
        ge=0,
        lt=1,
        extra=role(recorded=True, card=True, trainer_args=("warmup_steps",)),  # a float below 1: a share
    )
    eval_steps: int = setting(
        100,
        "Checkpoint, and score the dev file when one is given, every N steps.",
        ge=1,
        extra=role(recorded=True, card=True),
    )
    checkpoint: Checkpoint = setting(
        "last",
        "Which model the run keeps: last (its last step; a dev file is only reported) or best-dev (the "
        "checkpoint with the best dev-file Spearman, scored every eval_steps: the papers' protocol; needs a "
        "dev file).",
        extra=role(recorded=True),
    )
    save_steps: int | None = setting(
        None, "Checkpoint every N steps without a dev file.", ge=1, unset="every eval_steps"
    )
    logging_steps: int | None = setting(50, "Log the training loss every N steps.", ge=1, unset="about ten times a run")
    seed: Seed = setting(
        42,
        "Random seed (data order, dropout).",
        extra=role(recorded=True, card=True, trainer_args=("seed", "data_seed")),
    )
    precision: Precision = setting(
        "auto",
        "auto (bf16 mixed precision on a GPU that supports it and on a CPU with native bf16, AVX512-BF16 or AMX, "
        "where it takes about 0.6 of fp32's time; else fp32), fp32, fp16 (CUDA only) or bf16. The losses' "
        "similarities and log-softmax stay fp32.",
    )
    group_by_length: bool = setting(
        False,
        "Batches of sentences of about one length, as the HF Trainer's group_by_length (random groups of 50 batches, "
        "each sorted by length): far less padding than random batches, so faster steps, but each sentence's "
        "in-batch negatives are then of its length, which may change quality either way. Not with the twin's "
        "hard_negatives; a warm-up's batches are then not kept free of repeated texts.",
        extra=role(recorded="when-on"),
    )
    gradient_checkpointing: bool = setting(
        False,
        "Recompute layer activations in the backward pass: less GPU memory for ~30% more compute.",
        extra=role(trainer_args=("gradient_checkpointing",)),
    )
    report_to: ReportTo = setting(
        "none",
        "Where the trainer reports the run's logs (loss, learning rate, dev scores): none, tensorboard (event files "
        "in the run's folder, runs/), wandb or mlflow (their own settings, e.g. WANDB_PROJECT). The run is named "
        "after its folder (a pipeline stage: OUT/stage).",
        extra=role(trainer_args=("report_to",)),
    )
    keep_checkpoints: bool = setting(
        False,
        "Keep the trainer checkpoints (best and last) after the final save, e.g. to train a finished run "
        "further; by default they are deleted.",
    )

    def trainer_arguments(self) -> dict[str, Any]:
        """``{SentenceTransformerTrainingArguments keyword: value}`` of the settings that are one as they are (the
        others, e.g. ``checkpoint``, are rules of :func:`~jtcse.training.arguments.build_training_args`)."""
        return {
            arg: get(self, key) for key in keys(TrainingSettings).values() for arg in key.extra.get("trainer_args", ())
        }

    @property
    def kept_by_dev(self) -> bool:
        """Whether the stage keeps its best checkpoint by dev Spearman (``checkpoint`` best-dev) rather than its last
        step: the one place that reads ``checkpoint``."""
        return self.checkpoint == "best-dev"

    def check_dev_file(self, dev_file: str | Path | None) -> None:
        """A stage :attr:`kept_by_dev` needs a dev file (a :class:`~jtcse.errors.SettingError` naming both)."""
        if dev_file is None and self.kept_by_dev:
            raise SettingError(
                "{checkpoint} best-dev keeps the checkpoint with the best dev Spearman, so it needs a dev file "
                "({dev_file}); or keep the last step ({checkpoint} last).",
                {"checkpoint": "checkpoint", "dev_file": "--dev-file"},
            )

    def total_steps(self, rows: int) -> int:
        """The optimizer steps of a run over ``rows`` training rows: ``max_steps``, else the epochs' batches (as
        the trainer counts them, one process)."""
        if self.max_steps > 0:
            return self.max_steps
        return max(1, math.ceil(self.epochs * math.ceil(rows / self.batch_size)))

    def kept_by(self, dev_file: str | Path | None) -> str | Path | None:
        """``dev_file`` when the stage keeps its best checkpoint by it (:attr:`kept_by_dev`), else ``None``: a
        stage that keeps its last step need not score one while it trains."""
        return dev_file if self.kept_by_dev else None


class ContrastiveSettings(Settings):
    """The in-batch contrastive loss of a warm-up or a twin: its temperature, token-level terms added to it,
    negatives across devices and GradCache."""

    temperature: Positive = setting(0.05, "InfoNCE temperature τ (scale 1/τ).", extra=role(recorded=True, card=True))
    regularizers: Array[RegularizerSpec] = setting(
        (),
        regularizer_help(),
        flag="regularizer",
        repeat=True,
        metavar="SPEC",
        short="-r",
        extra=role(recorded=True),
    )
    gather_across_devices: bool = setting(
        False,
        "Under torchrun / accelerate launch: score every rank's sentences against the candidates of all ranks, "
        "so the in-batch negatives come from the global batch (world size × batch size).",
        extra=role(recorded=True),
    )
    mini_batch_size: int | None = setting(
        None,
        "GradCache: the contrastive loss over the whole batch, embedding only N sentences at a time (memory of "
        "a batch of N, one extra forward pass; same result). Not with regularizers; 0 turns it off.",
        ge=0,
        unset="no GradCache",
        extra=role(recorded=True),
    )

    def pass_factor(self) -> float:
        """How many times a sentence goes through the tower per update, counting a backward as two forwards: 1,
        or with GradCache 4/3 (its first forward runs without a graph, then the usual forward and backward)."""
        return 4 / 3 if self.mini_batch_size else 1.0

    @model_validator(mode="after")
    def _grad_cache_alone(self) -> ContrastiveSettings:
        from jtcse.losses.registry import check_mini_batch_size

        check_mini_batch_size(self.mini_batch_size, self.regularizers)
        return self


class WarmupSettings(Settings):
    """A SimCSE warm-up of one tower (``jtcse simcse``; the pipeline's ``[warmup]``): one pass of SimCSE's
    unsupervised recipe at MiniLM scale by default."""

    training: TrainingSettings = group(
        TrainingSettings(batch_size=32, max_seq_length=32, learning_rate=3e-5, eval_steps=125)
    )
    positives: Positives = setting(
        "dropout",
        "A corpus sentence's positive: dropout (the sentence itself, the two dropout passes being the views: "
        "SimCSE), deletion (10% of its words dropped), cutoff (a span of 10% of its words cut), repetition (up to "
        "32% of its words repeated, ESimCSE) or reorder (two words swapped). A pair of a pairs file keeps its "
        "paraphrase.",
    )
    corpus_part: Annotated[str, checked(part_problem)] = setting(
        "all",
        "The part of the corpus it trains on: all, or K/N, the K-th of N equal contiguous parts (e.g. 1/2).",
    )
    loss: ContrastiveSettings = group(ContrastiveSettings())

    def sentence_passes(self, layers: int | None = None) -> float:
        """The work of one training sentence in forward-and-backward passes through one tower (what a pipeline's
        estimate of the time left counts, at the speed it measured): two views."""
        return 2 * self.loss.pass_factor()


class TwinSettings(Settings):
    """A JTCSE twin (``jtcse train``; the pipeline's ``[twin]``). By default the twin measured best on the two
    selection files (STS-B train, SICK train; ``evaluation/DEFAULTS.md``): 128 sentences a step through GradCache (32 a
    forward pass), batches of neighbours (hard negatives), 25 steps at lr 1e-5, 32 tokens. The paper's (batch 64,
    length 64, lr 1.3e-6, one epoch, no GradCache, random batches) are in ``models/jtcse-bert-base/recipe.toml``."""

    training: TrainingSettings = group(
        TrainingSettings(batch_size=128, max_seq_length=32, learning_rate=1e-5, max_steps=25, logging_steps=None)
    )
    # recorded by train_twin in the form earlier runs have: cael_every 0 as None, the three weights as loss_weights,
    # paraphrase_threshold only with hard_negatives (so a finished run of the same settings stays finished)
    cael_every: int = setting(
        2,
        "A cross-attention encoder layer (CAEL) every k layers of the twin (k must divide the layer count; the "
        "last layer is always one). 0 = no cross-attention (TNCSE).",
        ge=0,
        extra=role(card=True),
    )
    nce_weight: float = setting(1.0, "Weight of InfoNCE inside each tower (0 = off).", ge=0)
    icnce_weight: float = setting(
        1.0, "Weight of ICNCE between the towers (primitive and cross-attention stream; 0 = off).", ge=0
    )
    ictm_weight: float = setting(0.5, "Weight of the tensor-modulus term ICTM (0 = off).", ge=0)
    hard_negatives: bool = setting(
        True,
        "Batches of neighbours: each batch gathers sentences the twin's tower I (as training starts) finds close, so "
        "the in-batch negatives are hard; one it scores as a paraphrase of another in the batch "
        "(paraphrase_threshold) is kept out of that batch.",
        extra=role(recorded=True),
    )
    paraphrase_threshold: float = setting(
        0.8, "With hard_negatives: the guide's cosine from which two sentences count as paraphrases.", gt=0, le=1
    )
    loss: ContrastiveSettings = group(ContrastiveSettings(mini_batch_size=32))

    @model_validator(mode="after")
    def _one_batching(self) -> TwinSettings:
        if self.hard_negatives and self.training.group_by_length:
            raise SettingError(
                "{hard_negatives} and {group_by_length} each decide what a batch holds (neighbours, or sentences of "
                "one length); turn one off.",
                ["hard_negatives", "group_by_length"],
            )
        return self

    def sentence_passes(self, layers: int | None = None) -> float:
        """As :meth:`WarmupSettings.sentence_passes`: two views through two towers, and with CAELs the cross stream
        again through the ``layers`` from the first CAEL up (half of them when ``layers`` is not known)."""
        cross = 0.0
        if self.cael_every:
            cross = 0.5 if not layers else (layers - self.cael_every + 1) / layers
        return 4 * (1 + cross) * self.loss.pass_factor()


class DistillSettings(Settings):
    """A distillation (``jtcse distill``; the pipeline's ``[distill]``): two passes over the corpus by default,
    better than one on the selection split."""

    training: TrainingSettings = group(
        TrainingSettings(batch_size=64, max_seq_length=32, learning_rate=2e-5, epochs=2, eval_steps=250)
    )
    objective: Objective = setting(
        "similarity",
        "Distillation objective: similarity (match in-batch cosine matrices; any widths), cosine, mse-normalized "
        "or mse (vectors; a training-only projection when widths differ), or a sum of them joined by + "
        "(similarity+mse: each term logged).",
        aliases=("--objective",),  # the pipeline's [distill] objective once had no prefix
        metavar="NAME[+NAME]",
        extra=role(recorded=True, card=True),
    )
    passage_sentences: int = setting(
        1,
        "Join this many consecutive corpus lines into one text before the teacher encodes them: the student learns "
        "the teacher on passages (cut at max_seq_length tokens) instead of single lines.",
        ge=1,
    )  # not recorded: the texts are (a run records their digest, so a run on other passages is another run)
    student_pooling: Pooling | None = setting(
        None,
        "Replace the student's pooling by cls or mean.",
        unset="the student's own",
        aliases=("--student-pooling",),
        extra=role(recorded=True, card=True),
    )
    teacher_batch_size: int = setting(128, "Batch size of the one-off teacher encoding.", ge=1)

    def sentence_passes(self, layers: int | None = None) -> float:
        """As :meth:`WarmupSettings.sentence_passes`: one view through the student."""
        return 1.0


TRAINERS = (WarmupSettings, TwinSettings, DistillSettings)
"""Each trainer's settings class (``jtcse simcse``, ``train``, ``distill``)."""


def recorded_settings(settings: Any) -> dict[str, Any]:
    """``{key: value}`` of a trainer's ``settings`` that a resumed (or rerun) run must share with the run it
    continues: each declared ``recorded`` (:func:`role`), through its groups (lengths may grow:
    :data:`~jtcse.training.run_dir.LENGTH_KEYS`)."""
    values = {name: get(settings, key) for name, key in keys(type(settings)).items() if key.extra.get("recorded")}
    switched = {name for name, key in keys(type(settings)).items() if key.extra.get("recorded") == "when-on"}
    return {name: value for name, value in values.items() if name not in switched or value}


def card_keys() -> tuple[str, ...]:
    """The trainers' settings a model card lists (declared ``card``), in declaration order, training's first."""
    named = (name for cls in TRAINERS for name, key in keys(cls).items() if key.extra.get("card"))
    return tuple(dict.fromkeys(named))


def resolve(defaults: Any, settings: Any, keywords: dict[str, Any], caller: str) -> Any:
    """A trainer's settings: ``settings`` (else ``defaults``; a bare :class:`TrainingSettings` replaces the
    defaults' training part) with the keys given as ``keywords`` on top; an unknown keyword is a ``TypeError``
    naming ``caller``."""
    if isinstance(settings, TrainingSettings):
        settings = defaults.replace(training=settings)
    return replace_keys(settings if settings is not None else defaults, keywords, caller)
