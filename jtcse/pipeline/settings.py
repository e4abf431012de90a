"""Every setting of one pipeline run, declared once on pydantic (:mod:`jtcse.schema`): :class:`PipelineConfig`, its top-level
keys and one table a stage (``[warmup]``, ``[warmup_b]``, ``[probe]``, ``[twin]``, ``[ensemble]``, ``[distill]``).
``jtcse pipeline``'s options, recipe files and ``--dump-recipe`` are generated from it. The trained stages' tables are
their trainers' own settings classes (:mod:`jtcse.training.settings`: the CPU recipe); the numbers the pipeline adds
are here (:data:`ENSEMBLE_WEIGHTS`). Each table is a stage's (:mod:`jtcse.pipeline.stages`: its name, unless the stage
says otherwise).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, ClassVar, Literal

from pydantic import model_validator

from jtcse.devices import Precision
from jtcse.errors import JTCSEError, SettingError
from jtcse.modeling.loading import TOWER_POOLING_HELP, TOWER_POOLING_UNSET, Pooling
from jtcse.pipeline.stages import UNTIL, WARMUP_A
from jtcse.schema import Array, Layer, Positive, Settings, build, keys, section, sections, setting, to_mapping
from jtcse.text_inputs import STS_INPUTS
from jtcse.training.ensemble import Combine, Weights, combine_setting, weights_setting
from jtcse.training.settings import DistillSettings, ReportTo, TwinSettings, WarmupSettings, seed_range

PipelineSeed = seed_range(1)
"""The pipeline's seed: warm-up II trains at seed + 1."""


@dataclass(frozen=True)
class DefaultWeights:
    """The default ensemble's weights when no selection file chooses them: ``warmups`` for (warm-up I, warm-up II,
    the starting model) without a twin, ``twin`` for (the twin, the starting model) with one, ``twin_towers`` for
    (tower I, tower II, the starting model) with the twin's towers as members. Chosen on two selection files (STS-B
    train, SICK train) by the study in ``evaluation/DEFAULTS.md`` ("The twin in the main job"), which says how and
    what they score; a test keeps them equal to its results."""

    warmups: tuple[float, ...] = (1.25, 1.25, 1.0)
    twin: tuple[float, ...] = (1.25, 1.0)
    twin_towers: tuple[float, ...] = (1.0, 1.0, 1.0)

    def of(self, twin: bool, towers: bool) -> tuple[float, ...]:
        """The weights of the members a run has: the twin's ``towers``, else the ``twin``, else the warm-ups."""
        return self.twin_towers if towers else self.twin if twin else self.warmups


ENSEMBLE_WEIGHTS = DefaultWeights()


def _shown(weights: tuple[float, ...]) -> str:
    return ",".join(f"{w:g}" for w in weights)


class ProbeSettings(Settings):
    """Short twins at each learning rate; the best on the selection file trains the twin."""

    enabled: bool = setting(
        False,
        "Probe the twin's learning rate on the selection file (probe/): its choice replaces [twin] learning_rate.",
        switch=True,
    )
    learning_rates: Array[Positive] = setting(
        (1e-5, 3e-5, 1e-4), "The twin learning rates the probe tries.", min_length=1
    )
    max_steps: int = setting(100, "Steps of each probe twin.", ge=1, aliases=("steps",))


class TwinStageSettings(TwinSettings):
    enabled: bool = setting(
        True,
        "Train the JTCSE twin on the two warm-ups (twin/); the ensemble then holds the twin, else the warm-ups. What "
        "it gains and costs on the embedded MiniLM: evaluation/DEFAULTS.md.",
        switch=True,
    )


class EnsembleSettings(Settings):
    """The teacher of the distillation: the twin (else the two warm-ups) with the starting model (UC)."""

    enabled: bool | None = setting(
        None,
        "Join the twin (else the two warm-ups) and the model tower I started from in an ensemble that teaches the "
        "student (UCD).",
        switch=True,
        unset="on when tower I starts from a sentence-transformers model and no other members are named",
    )
    models: Array[str] = setting(
        (),
        "A model joined to the trained twin in the ensemble (JTCSE+UC), repeatable; with it the starting model is a "
        "member only when enabled is set.",
        key="with",
        repeat=True,
        metavar="MODEL",
    )
    weights: Weights | None = weights_setting(
        "One positive weight per member (the twin's, else the two warm-ups', first).",
        unset=f"chosen on the selection files; without one {_shown(ENSEMBLE_WEIGHTS.twin)} for (twin, start), "
        f"{_shown(ENSEMBLE_WEIGHTS.twin_towers)} for (tower I, tower II, start) and "
        f"{_shown(ENSEMBLE_WEIGHTS.warmups)} for (warm-up I, warm-up II, start), chosen on STS-B train and SICK "
        "train (evaluation/DEFAULTS.md); else all 1",
    )
    combine: Combine = combine_setting("How the ensemble joins its members' embeddings: concat or sum.")
    twin_towers: bool = setting(
        False,
        "With a twin: its two towers are two members (each weighted like the warm-ups), not its summed embedding; "
        "ICTM pulls the towers apart, which an ensemble wants.",
    )

    @model_validator(mode="after")
    def _members_named_while_off(self) -> EnsembleSettings:
        if self.enabled is False and self.models:
            raise JTCSEError("enabled = false (--no-ensemble) and models to ensemble with contradict each other.")
        return self


class DistillStageSettings(DistillSettings):
    student: str | None = setting(
        None,
        "The distillation student, kept with its own pooling.",
        unset="the model tower I started from (tower_a)",
        aliases=("--student",),
    )


_SET_FOR_EVERY_STAGE = ("seed", "precision", "report_to")


class PipelineConfig(Settings):
    """Every setting of one pipeline run (a recipe file holds these keys; ``jtcse pipeline --help`` lists them)."""

    NOT_KEYS: ClassVar[dict[str, str]] = {
        "device": "where a run happens is not one of its settings; give --device on the command line",
        "output": "the folder a run writes is not one of its settings; give -o/--output on the command line",
        "selection_file": 'the selection files are a list: selection_files = ["FILE", ...] (--selection-file, '
        "repeatable, on the command line)",
    }

    tower_a: str | None = setting(
        None,
        "Tower I's starting model: a sentence-transformers or transformers folder, or a Hub name.",
        unset="the embedded MiniLM",
    )
    tower_b: str | None = setting(
        None, "Tower II's starting model (a twin's towers share an architecture and tokenizer).", unset="tower I's"
    )
    corpus: str | None = setting(
        None,
        "The sentences: a UTF-8 text file (one sentence a line), .jsonl, .csv/.tsv (a header), .parquet, a "
        "save_to_disk folder or hf:NAME[:CONFIG][:SPLIT].",
        metavar="FILE",
        unset="the embedded stdlib prose",
    )
    text_column: str | None = setting(
        None,
        "The corpus's text column, when it is a table or dataset.",
        unset="text, sentence, sentence1, anchor or query, else its only string column",
    )
    pairs_a: str | None = setting(
        None,
        "RTT pairs (original<TAB>paraphrase) for tower I's warm-up.",
        metavar="FILE",
        unset="dropout views only",
    )
    pairs_b: str | None = setting(
        None, "RTT pairs for tower II's warm-up (another pivot language).", metavar="FILE", unset="dropout views only"
    )
    dev_file: str | None = setting(
        None,
        f"The dev pairs: {STS_INPUTS}. Reported by the eval stage (all pairs and per genre), and what a stage "
        "with checkpoint = best-dev keeps its best checkpoint by; read only by those.",
        metavar="FILE",
        unset="none",
    )
    selection_files: Array[str] = setting(
        (),
        "Labelled data to choose on, repeatable, as eval mteb --local-task takes it (PATH or TYPE:PATH): an STS "
        "file or dataset, as --dev-file takes it (Spearman, per genre too), a classification folder or file (accuracy of mteb's logistic regression, "
        "scored on a stratified half of its train split, seed 42, and trained on the other half: its test split is "
        "never read), a BEIR folder or retrieval-pairs:FILE (nDCG@10). The ensemble's weights, and with --probe the "
        "twin's learning rate, are those with the best mean main score over the inputs (fractions, each input "
        "counting equally); the eval stage reports every model's score on each, and with given weights they are "
        "only reported. Pairs an STS file shares with the dev file are left out; a file that largely is the dev "
        "file is refused. E.g. --selection-file sts-train-selection.csv --selection-file trec/ --selection-file "
        "retrieval-pairs:sts-train-selection.csv.",
        flag="selection_file",
        repeat=True,
        metavar="INPUT",
    )
    pooling: Pooling | None = setting(None, TOWER_POOLING_HELP, unset=TOWER_POOLING_UNSET)
    seed: PipelineSeed = setting(42, "Seed of warm-up I, the twin and the distillation; warm-up II uses seed + 1.")
    precision: Precision | None = setting(
        None,
        "Precision of every training stage, and of the eval stage's encoding: auto (bf16 on a GPU that has it and on "
        "a CPU with native bf16, AVX512-BF16 or AMX, where the run takes 0.6 of fp32's time; else fp32), fp32, fp16 "
        "(CUDA) or bf16.",
        unset="each stage's own: auto",
    )
    report_to: ReportTo = setting(
        "none",
        "Where every training stage reports its logs: none, tensorboard (event files in each stage's folder, "
        "runs/), wandb or mlflow; each stage's run is named OUT/stage (e.g. OUT/twin).",
    )
    until: Literal[UNTIL] = setting(UNTIL[-1], f"Last stage to run: {', '.join(UNTIL)}.")
    warmup: WarmupSettings = section(
        WarmupSettings(), "Each tower's SimCSE warm-up (tower_a/, tower_b/).", exclude=_SET_FOR_EVERY_STAGE
    )
    warmup_b: WarmupSettings = section(
        WarmupSettings(),
        "What differs for tower II's warm-up (tower_b/): a key left out is [warmup]'s.",
        exclude=_SET_FOR_EVERY_STAGE,
        base=WARMUP_A.metadata.table,
    )
    probe: ProbeSettings = section(ProbeSettings(), "The twin's learning-rate probe (probe/).")
    twin: TwinStageSettings = section(TwinStageSettings(), "The JTCSE twin (twin/).", exclude=_SET_FOR_EVERY_STAGE)
    ensemble: EnsembleSettings = section(EnsembleSettings(), "The ensemble that teaches the student (ensemble/).")
    distill: DistillStageSettings = section(
        DistillStageSettings(), "The distillation into one student (distilled/).", exclude=_SET_FOR_EVERY_STAGE
    )

    @classmethod
    def from_values(cls, values: dict[str, Any], where: str = "pipeline settings") -> PipelineConfig:
        """A config from the values a recipe holds (``{"tower_a": ..., "twin": {"max_steps": 2}}``)."""
        return build(cls, [Layer(values, where=where)])

    @property
    def start_b(self) -> str | None:
        """Tower II's starting model: ``tower_b``, else tower I's (``None``: the embedded MiniLM)."""
        return self.tower_b if self.tower_b is not None else self.tower_a

    def values(self) -> dict[str, Any]:
        return to_mapping(self)


def recipe_name(table: str | None) -> Callable[[str], str | None]:
    """How a recipe names a key of ``table`` (``[twin] cael_every``; a top-level key as it is; another ``None``)."""
    tables = sections(PipelineConfig)
    own = keys(tables[table].cls, tables[table].exclude) if table else {}
    top = keys(PipelineConfig)
    return lambda key: f"[{table}] {key}" if key in own else key if key in top else None


def stage_error(err: SettingError, table: str | None) -> SettingError:
    """``err``, raised about a setting of the stage whose settings are ``table``, naming the setting as a recipe
    does (``jtcse pipeline`` names its options instead: ``--twin-cael-every``)."""
    return err.within(table).renamed(recipe_name(table))
