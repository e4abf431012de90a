"""The whole JTCSE recipe, resumable: warm up two towers → train the twin → (ensemble it with other models)
→ distil into the model you started from → evaluate every model against that starting model.

One run is one :class:`PipelineConfig` (every setting, declared once; ``jtcse pipeline``'s options, recipe
files and ``--dump-recipe`` are generated from it) carried out by :func:`run_pipeline` over the ordered list
of :data:`STAGES`. Each stage writes into its own folder; a rerun skips a stage whose folder holds a finished
run of the same settings, refuses one that finished with others, and resumes one that was interrupted. One
rule decides (:func:`jtcse.training.run_dir.finished_run`): a trainer's folder is judged by the trainer
itself from its ``run_summary.json``, whoever ran it (the pipeline, or ``jtcse simcse`` by hand), and the
pipeline's own stages record theirs the same way. Each trainer starts from fingerprints of the models it
reads, so a retrained upstream stage never leaves a stale model downstream.

The CPU defaults (``evaluation/DEFAULTS.md``) keep each stage's last step and only report the dev file; the
paper's recipes (``models/``) keep the best checkpoint by dev (``checkpoint = "best-dev"``). What is chosen
(the probe's twin learning rate, the ensemble's weights) is chosen on the selection file
(:mod:`jtcse.training.selection`).
"""

from __future__ import annotations

import logging
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, ClassVar

from jtcse.errors import JTCSEError
from jtcse.locking import atomic_write_json, atomic_write_text, locks_output
from jtcse.modeling.loading import POOLING, TOWER_POOLING_HELP, TOWER_POOLING_UNSET
from jtcse.schema import Layer, at_least, build, every, one_of, positive, section, setting, to_mapping, validate
from jtcse.training.distill import distill
from jtcse.training.run_dir import finished_run, finished_summary
from jtcse.training.settings import PRECISION, DistillSettings, TwinSettings, WarmupSettings, seed_range
from jtcse.training.simcse import train_simcse
from jtcse.training.twin import train_twin

logger = logging.getLogger(__name__)

ENSEMBLE_WEIGHTS = {"warmups": (0.4, 0.4, 1.0), "twin": (0.6, 1.0), "twin_towers": (0.4, 0.4, 1.0)}
"""The default ensemble's weights when no selection file chooses them: (warm-up I, warm-up II, the starting model)
without a twin, (the twin, the starting model) with one, (tower I, tower II, the starting model) with the twin's
towers as members. Each is the weight best on the selection split (STS-B train, 3 seeds) among those that keep
every genre of it within 0.3 points of the starting model's: larger weights score higher overall but trade the
start's captions away (``evaluation/DEFAULTS.md``, "Members that differ")."""
COMBINES = ("concat", "sum")
"""How an ensemble joins its members: the portable ``Ensemble`` module's own list (``COMBINE_CHOICES``)."""


# ---------------------------------------------------------------------------------------------------- stages
def _warmup(which: str) -> Callable[[PipelineRun, Path], dict]:
    def run(r: PipelineRun, folder: Path) -> dict:
        c = r.config
        tower, pairs = (c.tower_a, c.pairs_a) if which == "a" else (c.tower_b, c.pairs_b)
        seed, settings = (c.seed, c.warmup) if which == "a" else (c.seed + 1, c.warmup_b)
        return train_simcse(tower, c.corpus, folder, pairs_file=pairs, pooling=c.pooling, device=r.device,
                            settings=r.settings(settings, seed), dev_file=r.dev_for(settings))  # fmt: skip

    return run


def _probe(r: PipelineRun, folder: Path) -> dict:
    from jtcse.evaluation.sts import cosine_spearman
    from jtcse.modeling.loading import load_model

    scores = {}
    for lr in r.config.probe.learning_rates:
        lr_folder = folder / f"lr_{lr:g}"
        r.train_twin_into(lr_folder, learning_rate=lr, max_steps=r.config.probe.max_steps, plot=False)
        scores[f"{lr:g}"] = cosine_spearman(load_model(lr_folder, role="encode", device=r.device), r.selection)
    best = max(r.config.probe.learning_rates, key=lambda lr: scores[f"{lr:g}"])
    return {"selection_spearman": scores, "learning_rate": best}


def _twin(r: PipelineRun, folder: Path) -> dict:
    probed = r.summaries.get("probe")
    return r.train_twin_into(folder, **({"learning_rate": probed["learning_rate"]} if probed else {}))


def _ensemble(r: PipelineRun, folder: Path) -> dict:
    from jtcse.training.ensemble import save_ensemble
    from jtcse.training.selection import choose_weights

    with tempfile.TemporaryDirectory() as towers:  # the twin's towers as members: exported, then copied in
        sources = r.member_sources
        if r.config.ensemble.twin_towers and r.twin:
            from jtcse.modeling.loading import load_model

            exported = load_model(r.path("twin"), device=r.device)[0].export_towers(towers)
            sources = exported + sources[len(exported) :]  # in the places the twin held twice
        weights, scores = r.weights, None
        if r.choose:  # the start at 1, the trained members at the one weight best on the selection file
            weights, scores = choose_weights(sources, r.start_index, r.selection, device=r.device,
                                             combine=r.config.ensemble.combine)  # fmt: skip
        # a folder without a finished record is left from an interrupted save: replaced
        model = save_ensemble(sources, folder, combine=r.config.ensemble.combine, weights=weights, overwrite=True)
    return {"members": r.members, "weights": model[0].weights, "combine": r.config.ensemble.combine,
            "selection_spearman": {f"{w:g}": v for w, v in scores.items()} if scores else None,
            "dimension": model.get_embedding_dimension()}  # fmt: skip


def _distill(r: PipelineRun, folder: Path) -> dict:
    c = r.config
    return distill(str(r.teacher), r.student, c.corpus, folder, device=r.device, dev_file=r.dev_for(c.distill),
                   settings=r.settings(c.distill, c.seed))  # fmt: skip


def _eval(r: PipelineRun, folder: Path) -> dict:
    from jtcse.evaluation.sts import ALL_GENRES
    from jtcse.training.pipeline_report import dev_scores

    models = {**r.starting, **{name: r.path(name) for name in r.evaluated}}
    genres = dev_scores(r.config.dev_file, models, r.device)
    return {"dev_file": r.config.dev_file, "dev_spearman": {label: g[ALL_GENRES] for label, g in genres.items()},
            "dev_spearman_by_genre": {label: {k: v for k, v in g.items() if k != ALL_GENRES}
                                      for label, g in genres.items()}}  # fmt: skip


@dataclass(frozen=True)
class Stage:
    """One step of the pipeline. ``name``: its row in the summary; ``folder``: where it writes, under the
    run's output; ``until``: the ``--until`` value that stops after it (both warm-ups: ``warmup``); ``table``: its
    settings' table in a recipe (the eval stage has none); ``run``: does the work into the folder and returns its
    summary; ``trainer``: the folder is a trainer's run, which the trainer itself judges finished or not (else the
    pipeline records the stage's summary there, and ``rerun`` says a finished one with other settings is run again
    rather than refused)."""

    name: str
    folder: str
    until: str
    table: str | None
    what: str
    run: Callable[[PipelineRun, Path], dict]
    trainer: bool = True
    rerun: bool = False


STAGES = (
    Stage("warmup_a", "tower_a", "warmup", "warmup", "SimCSE of tower I (positives from pairs_a when given)",
          _warmup("a")),
    Stage("warmup_b", "tower_b", "warmup", "warmup_b", "SimCSE of tower II (pairs_b; seed + 1; [warmup_b]: what "
          "differs from tower I's), so the towers differ", _warmup("b")),
    Stage("probe", "probe", "probe", "probe", "short twins at each probe learning rate, scored on the selection "
          "file; the best trains the twin", _probe, trainer=False),
    Stage("twin", "twin", "twin", "twin", "the JTCSE twin of the two warm-ups", _twin),
    Stage("ensemble", "ensemble", "ensemble", "ensemble", "the twin (else the two warm-ups) with the starting "
          "model and/or other models, one checkpoint (UC)", _ensemble, trainer=False),
    Stage("distill", "distilled", "distill", "distill", "the ensemble (else the twin) taught to the student (UCD, "
          "JTCSE-D)", _distill),
    Stage("eval", "eval", "eval", None, "dev Spearman, all pairs and per genre, of every model and of the starting "
          "model(s)", _eval, trainer=False, rerun=True),
)  # fmt: skip
"""The pipeline's stages, in order: the one list the folders, ``--until`` values and recipe tables come from."""
UNTIL = tuple(dict.fromkeys(stage.until for stage in STAGES))


# ---------------------------------------------------------------------------------------------------- settings
@dataclass(frozen=True)
class ProbeSettings:
    """Short twins at each learning rate; the best on the selection file trains the twin."""

    enabled: bool = setting(
        False, "Probe the twin's learning rate on the selection file (probe/): its choice replaces [twin] "
        "learning_rate.", switch=True,
    )  # fmt: skip
    learning_rates: tuple[float, ...] = setting((1e-5, 3e-5, 1e-4), "The twin learning rates the probe tries.",
                                                 check=every(positive))  # fmt: skip
    max_steps: int = setting(100, "Steps of each probe twin.", check=at_least(1))

    def __post_init__(self) -> None:
        validate(self)


@dataclass(frozen=True)
class TwinStage(TwinSettings):
    enabled: bool | None = setting(
        None, "Train the JTCSE twin on the two warm-ups (twin/); without it the ensemble holds the warm-ups. On "
        "the embedded MiniLM, measured on STS-B train (3 seeds) with --twin-batch-size 128 --twin-mini-batch-size "
        "32 --twin-hard-negatives --twin-max-steps 50: the twin alone 81.42 (warm-ups 81.15), its ensemble with "
        "the start 81.07 vs the warm-ups' 81.00 at the weights that keep the start's genres, for 1.9 times the "
        "pipeline's wall time (25 steps: 81.02, 1.46 times).",
        switch=True, unset="off when tower I starts from a sentence-transformers model that joins the ensemble "
        "(on the MiniLM it gained 0.07 on the selection split for 1.9 times the wall time, evaluation/DEFAULTS.md); "
        "on from a plain transformers model",
    )  # fmt: skip


@dataclass(frozen=True)
class EnsembleSettings:
    """The teacher of the distillation: the twin (else the two warm-ups) with the starting model (UC)."""

    enabled: bool | None = setting(
        None, "Join the twin (else the two warm-ups) and the model tower I started from in an ensemble that "
        "teaches the student (UCD).", switch=True, unset="on when tower I starts from a sentence-transformers "
        "model and no other members are named",
    )  # fmt: skip
    models: tuple[str, ...] = setting(
        (), "A model joined to the trained twin in the ensemble (JTCSE+UC), repeatable; with it the starting model "
        "is a member only when enabled is set.", key="with", repeat=True, metavar="MODEL",
    )  # fmt: skip
    weights: tuple[float, ...] | None = setting(
        None, "One positive weight per member (the twin's, else the two warm-ups', first).", check=every(positive),
        unset="chosen on the selection file; without one 0.4,0.4,1 for (warm-up I, warm-up II, start) or (tower "
        "I, tower II, start) and 0.6,1 for (twin, start), the weights that keep the start's genres; else all 1",
    )  # fmt: skip
    combine: str = setting("concat", "How the ensemble joins its members' embeddings: concat or sum.",
                           check=one_of(*COMBINES))  # fmt: skip
    twin_towers: bool = setting(
        False, "With a twin: its two towers are two members (each weighted like the warm-ups), not its summed "
        "embedding; ICTM pulls the towers apart, which an ensemble wants.",
    )  # fmt: skip

    def __post_init__(self) -> None:
        validate(self)
        if self.enabled is False and self.models:
            raise JTCSEError("enabled = false (--no-ensemble) and models to ensemble with contradict each other.")


@dataclass(frozen=True)
class DistillStage(DistillSettings):
    student: str | None = setting(None, "The distillation student, kept with its own pooling.",
                                  unset="the model tower I started from (tower_a)")  # fmt: skip


_SET_FOR_EVERY_STAGE = ("seed", "precision")


@dataclass(frozen=True)
class PipelineConfig:
    """Every setting of one pipeline run (a recipe file holds these keys; ``jtcse pipeline --help`` lists them)."""

    NOT_KEYS: ClassVar[dict[str, str]] = {
        "device": "where a run happens is not one of its settings; give --device on the command line",
        "output": "the folder a run writes is not one of its settings; give -o/--output on the command line",
    }

    tower_a: str | None = setting(None, "Tower I's starting model: a sentence-transformers or transformers folder, "
                                  "or a Hub name.", unset="the embedded MiniLM")  # fmt: skip
    tower_b: str | None = setting(None, "Tower II's starting model.", unset="the embedded MiniLM")
    corpus: str | None = setting(None, "UTF-8 text file, one sentence per line.", metavar="FILE",
                                 unset="the embedded stdlib prose")  # fmt: skip
    pairs_a: str | None = setting(None, "RTT pairs (original<TAB>paraphrase) for tower I's warm-up.",
                                  metavar="FILE", unset="dropout views only")  # fmt: skip
    pairs_b: str | None = setting(None, "RTT pairs for tower II's warm-up (another pivot language).",
                                  metavar="FILE", unset="dropout views only")  # fmt: skip
    dev_file: str | None = setting(
        None, "STS-B-format file reported by the eval stage (all pairs and per genre), and the one a stage with "
        "checkpoint = best-dev keeps its best checkpoint by; read only by those.", metavar="FILE", unset="none",
    )  # fmt: skip
    selection_file: str | None = setting(
        None, "STS-B-format labelled file to choose on (e.g. STS-B train): the ensemble's weights, and with --probe "
        "the twin's learning rate. Pairs it shares with the dev file are left out; a file that largely is the dev "
        "file is refused.", metavar="FILE", unset="none: nothing is chosen while running",
    )  # fmt: skip
    pooling: str | None = setting(None, TOWER_POOLING_HELP, check=POOLING, unset=TOWER_POOLING_UNSET)
    seed: int = setting(
        42, "Seed of warm-up I, the twin and the distillation; warm-up II uses seed + 1.", check=seed_range(1)
    )
    precision: str | None = setting(None, "Precision of every training stage: auto, fp32, fp16 (CUDA) or bf16.",
                                    check=PRECISION, unset="each stage's own")  # fmt: skip
    until: str = setting("eval", f"Last stage to run: {', '.join(UNTIL)}.", check=one_of(*UNTIL))
    warmup: WarmupSettings = section(WarmupSettings(), "Each tower's SimCSE warm-up (tower_a/, tower_b/).",
                                     exclude=_SET_FOR_EVERY_STAGE)  # fmt: skip
    warmup_b: WarmupSettings = section(
        WarmupSettings(), "What differs for tower II's warm-up (tower_b/): a key left out is [warmup]'s.",
        exclude=_SET_FOR_EVERY_STAGE, base="warmup",
    )  # fmt: skip
    probe: ProbeSettings = section(ProbeSettings(), "The twin's learning-rate probe (probe/).")
    twin: TwinStage = section(TwinStage(), "The JTCSE twin (twin/).", exclude=_SET_FOR_EVERY_STAGE)
    ensemble: EnsembleSettings = section(EnsembleSettings(), "The ensemble that teaches the student (ensemble/).")
    distill: DistillStage = section(DistillStage(), "The distillation into one student (distilled/).",
                                    exclude=_SET_FOR_EVERY_STAGE)  # fmt: skip

    def __post_init__(self) -> None:
        validate(self)

    @classmethod
    def from_values(cls, values: dict[str, Any], where: str = "pipeline settings") -> PipelineConfig:
        """A config from the values a recipe holds (``{"tower_a": ..., "twin": {"max_steps": 2}}``)."""
        return build(cls, [Layer(values, where=where)])

    def values(self) -> dict[str, Any]:
        return to_mapping(self)


# ---------------------------------------------------------------------------------------------------- a run
def is_sentence_encoder(source) -> bool:
    """Whether ``source`` (``None``: the embedded MiniLM) is a pre-trained sentence encoder, i.e. a
    sentence-transformers checkpoint with its own modules, rather than a plain ``transformers`` model."""
    from jtcse.modeling.loading import has_own_modules, resolve_source

    return has_own_modules(resolve_source(source))


class PipelineRun:
    """One run's decisions, all made before anything is written: which stages run (the twin? an ensemble?),
    the ensemble's members and weights, the files the stages read (a file no stage reads is not required).
    ``device``: where every stage trains and evaluates (``None``: the best here), checked with each stage's
    precision first; where a run happens is not one of its settings."""

    def __init__(self, output_dir: str | Path, config: PipelineConfig, device: str | None = None):
        from jtcse.modeling.loading import describe_source, resolve_source
        from jtcse.training.pipeline_report import starting_models
        from jtcse.training.stage import training_device

        c = self.config = config
        self.output_dir, self.device = Path(output_dir), device
        for stage_settings in (c.warmup, c.warmup_b, c.twin, c.distill):  # a device or precision this machine lacks
            training_device(device, c.precision or stage_settings.training.precision)
        encoder_start = is_sentence_encoder(c.tower_a)
        with_start = c.ensemble.enabled if c.ensemble.enabled is not None else not c.ensemble.models and encoder_start
        self.twin = c.twin.enabled if c.twin.enabled is not None else not (encoder_start and with_start)
        towers = self.twin and c.ensemble.twin_towers
        trained = [self.path("twin")] * (2 if towers else 1) if self.twin else [self.path("warmup_a"), self.path("warmup_b")]  # fmt: skip
        extra = ([c.tower_a] if with_start else []) + list(c.ensemble.models)
        self.member_sources = [*map(str, trained), *(str(resolve_source(m)) for m in extra)] if (extra or not self.twin) else []  # fmt: skip
        labels = [f"{self.path('twin')}/{t}" for t in ("tower_1", "tower_2")] if towers else list(map(str, trained))
        self.members = [*labels, *map(describe_source, extra)] if self.member_sources else []
        self.start_index = len(trained)
        self.choose = with_start and c.ensemble.weights is None and c.selection_file is not None
        self.weights = c.ensemble.weights
        if with_start and not c.ensemble.models and self.weights is None and not self.choose:
            self.weights = ENSEMBLE_WEIGHTS["twin_towers" if towers else "twin" if self.twin else "warmups"]
        if c.probe.enabled and c.selection_file is None:
            raise JTCSEError("the probe scores its twins on a selection file: give --selection-file, or --no-probe.")
        included = {"probe": self.twin and c.probe.enabled, "twin": self.twin, "ensemble": bool(self.member_sources)}
        available = [s for s in STAGES if included.get(s.name, True)]
        self.stages = available[: _last_index(available, c.until, self)]
        names = {s.name for s in self.stages}
        self.evaluated = [s.name for s in self.stages if s.name not in ("probe", "eval")]
        self.student = c.distill.student if c.distill.student is not None else c.tower_a
        self.teacher = self.path("ensemble" if self.member_sources else "twin")
        self.starting = starting_models(c.tower_a, c.tower_b, self.student)
        if self.member_sources:
            from jtcse.modeling.ensemble import check_weights

            check_weights(self.weights, len(self.member_sources))  # before any training: the ensemble comes late
        elif c.ensemble.weights is not None:
            raise JTCSEError("ensemble weights were given without models to ensemble with ([ensemble] with).")
        self.summaries: dict[str, dict] = {}
        self._selection = None
        self._check_files(names)

    def _check_files(self, names: set[str]) -> None:
        """Every file a stage of this run reads is given and there; a file none reads is not required."""
        c = self.config
        trained_with = {
            "warmup": c.warmup,
            "warmup_b": c.warmup_b,
            "probe": c.twin,
            "twin": c.twin,
            "distill": c.distill,
        }
        best_dev = [s.table for s in self.stages if s.table in trained_with and trained_with[s.table].training.best_dev]
        if c.dev_file is None and "eval" in names:
            raise JTCSEError("the eval stage reports on a dev file: give --dev-file (dev_file, an STS-B-format file), "
                             "or stop earlier with --until.")  # fmt: skip
        if c.dev_file is None and best_dev:
            table = "twin" if best_dev[0] == "probe" else best_dev[0]
            flag = table.replace("_", "-")
            raise JTCSEError(f"[{table}] checkpoint = best-dev keeps the best checkpoint by the dev file: give "
                             f"--dev-file, or keep the last step (--{flag}-checkpoint last).")  # fmt: skip
        reads = {"dev file": ("eval" in names or bool(best_dev), c.dev_file),
                 "selection file": ("probe" in names or self.choose, c.selection_file)}  # fmt: skip
        for label, (read, path) in reads.items():
            if read and path is not None and not Path(path).is_file():
                raise JTCSEError(f"{label} not found: {path}")
        if reads["selection file"][0]:
            _ = self.selection  # read and checked against the dev file now

    @property
    def selection(self):
        """The selection file's pairs less those of the dev file (:func:`~jtcse.training.selection.selection_pairs`)."""
        if self._selection is None:
            from jtcse.training.selection import selection_pairs

            self._selection = selection_pairs(self.config.selection_file, self.config.dev_file)
        return self._selection

    def folder(self, stage: Stage) -> Path:
        return self.output_dir / stage.folder

    def path(self, name: str) -> Path:
        """The folder of the stage called ``name``."""
        return self.folder(next(s for s in STAGES if s.name == name))

    def settings(self, settings: Any, seed: int) -> Any:
        """A stage's settings with the run's seed (and precision, when one is given for every stage)."""
        precision = self.config.precision or settings.training.precision
        return replace(settings, training=replace(settings.training, seed=seed, precision=precision))

    def dev_for(self, settings: Any) -> str | None:
        """The dev file for a trainer that keeps its best checkpoint by it; the others keep their last step."""
        return self.config.dev_file if settings.training.best_dev else None

    def train_twin_into(self, folder: Path, **keys: Any) -> dict:
        c = self.config
        towers = [str(self.path("warmup_a")), str(self.path("warmup_b"))]
        settings = self.settings(c.twin, c.seed)
        return train_twin(*towers, c.corpus, folder, pooling=c.pooling, device=self.device, dev_file=self.dev_for(c.twin),
                          settings=settings, **keys)  # fmt: skip

    def record(self, stage: Stage) -> dict[str, Any]:
        """The settings a stage the pipeline records itself is compared on when rerun."""
        from jtcse.modeling.loading import describe_source
        from jtcse.training.teacher_cache import model_fingerprint

        c = self.config
        warmups = [model_fingerprint(self.path(n), missing_ok=True) for n in ("warmup_a", "warmup_b")]
        if stage.name == "probe":
            twin = {k: v for k, v in to_mapping(c.twin).items() if k not in ("enabled", "learning_rate")}
            return {"selection_file": c.selection_file, "probe": to_mapping(c.probe), "twin": twin, "towers": warmups,
                    "corpus": c.corpus, "pooling": c.pooling, "seed": c.seed}  # fmt: skip
        if stage.name == "ensemble":
            return {"members": [model_fingerprint(m, missing_ok=True) for m in self.member_sources],
                    "twin_towers": c.ensemble.twin_towers, "weights": self.weights, "combine": c.ensemble.combine,
                    "selection_file": c.selection_file if self.choose else None}  # fmt: skip
        models = {name: model_fingerprint(self.path(name)) for name in self.evaluated}
        starting = [describe_source(m) for m in self.starting.values()]
        return {"dev_file": c.dev_file, "models": models, "starting": starting}

    def execute(self, stage: Stage) -> dict[str, Any]:
        """Run ``stage`` unless its folder holds a finished run of the same settings; its summary row."""
        folder = self.folder(stage)
        started = time.perf_counter()
        if stage.trainer:  # the trainer judges its folder: the same finished run is returned as it is
            before = finished_summary(folder)
            summary = stage.run(self, folder)
            done = before is not None and before == summary
        else:
            record = self.record(stage)
            summary = finished_run(folder, record, model=stage.name == "ensemble", rerun=stage.rerun)
            done = summary is not None
            if not done:
                folder.mkdir(parents=True, exist_ok=True)
                summary = {"stage": stage.name, **stage.run(self, folder), "config": record}
                atomic_write_json(folder / "run_summary.json", summary)
        self.summaries[stage.name] = summary
        seconds = 0.0 if done else round(time.perf_counter() - started, 2)
        return {"stage": stage.name, "output": str(folder), "status": "skipped (done)" if done else "ran",
                "seconds": seconds, "summary": summary}  # fmt: skip


def _last_index(available: list[Stage], until: str, run: PipelineRun) -> int:
    """How many of the ``available`` stages run to stop after ``until``; one line naming the valid values of
    this run, and why a stage it lacks is off, otherwise."""
    ends = {s.until: i + 1 for i, s in enumerate(available)}
    if until in ends:
        return ends[until]
    why = {
        "twin": "the twin is off for this run (tower I starts from a sentence-transformers model that joins the "
        "ensemble); turn it on with --twin ([twin] enabled = true)",
        "probe": "the probe runs with --probe (and a twin)",
        "ensemble": "this run has no ensemble: it needs --ensemble-with or a sentence-transformers start",
    }  # fmt: skip
    raise JTCSEError(f"--until {until}: {why.get(until, 'not a stage')}; this run stops after one of "
                     f"{', '.join(ends)}.")  # fmt: skip


@locks_output("output_dir")  # one pipeline per folder; each stage's trainer also locks its own folder
def run_pipeline(
    output_dir: str | Path,
    config: PipelineConfig | None = None,
    *,
    device: str | None = None,
    recipe: dict | None = None,
) -> dict:
    """Run (or finish) the pipeline of ``config`` (default: every default) in ``output_dir``, each stage of
    :data:`STAGES` in turn up to ``config.until``, on ``device`` (``None``: the best here); every check that needs no
    training comes first. ``recipe``:
    where the settings came from (``jtcse pipeline --recipe``), recorded as it is. Returns the summary, also
    written as ``pipeline_summary.json`` and ``.md``."""
    from jtcse.training.pipeline_report import format_table, summary_table

    run = PipelineRun(output_dir, config or PipelineConfig(), device)
    run.output_dir.mkdir(parents=True, exist_ok=True)
    rows = [run.execute(stage) for stage in run.stages]
    table = summary_table(rows, run.starting, run.summaries.get("eval", {}))
    result = {
        "output_dir": str(run.output_dir),
        "until": run.config.until,
        "config": run.config.values(),
        **({"recipe": recipe} if recipe is not None else {}),
        "table": table,
        "stages": {row["stage"]: row["summary"] for row in rows},
    }
    atomic_write_json(run.output_dir / "pipeline_summary.json", result)
    atomic_write_text(run.output_dir / "pipeline_summary.md", format_table(table))
    return result
