"""The pipeline's stages: :data:`STAGES`, the one list of them. Each stage is a class, as an mteb task is: one
:class:`StageMetadata` that says what it is (its name, and the folder, ``--until`` value and recipe table that
follow from it), and the methods of :class:`Stage` it overrides for what it does. The plan
(:mod:`jtcse.pipeline.plan`) and the run (:mod:`jtcse.pipeline.run`) ask the stages; no other module names one.
"""

from __future__ import annotations

import tempfile
from abc import ABC, abstractmethod
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

from jtcse.errors import JTCSEError

if TYPE_CHECKING:  # the plan and the run import the stages
    from jtcse.pipeline.plan import Plan
    from jtcse.pipeline.run import PipelineRun
    from jtcse.pipeline.settings import PipelineConfig
    from jtcse.training.settings import TrainingSettings


@dataclass(frozen=True)
class StageMetadata:
    """What a stage is. ``name``: its row in the summary, and its ``folder`` (under the run's output), ``until``
    value and recipe ``table`` unless one is given (``table=None``: it has no settings of its own);
    ``description``: its line in ``jtcse pipeline --help``; ``evaluated``: it makes a model, which the eval stage
    scores; ``rerun``: a finished run with other settings is run again rather than refused; ``made_by``: the command
    whose record its folder carries when the pipeline records the stage (:mod:`jtcse.output_paths`)."""

    name: str
    description: str
    folder: str = ""
    until: str = ""
    table: str | None = ""
    evaluated: bool = True
    rerun: bool = False
    made_by: str = "jtcse pipeline"

    def __post_init__(self) -> None:
        for field in ("folder", "until", "table"):
            if getattr(self, field) == "":
                object.__setattr__(self, field, self.name)


class Stage(ABC):
    """One step of the pipeline: its :attr:`metadata` and the methods a stage overrides, each with the rule most
    stages follow: it always runs (:meth:`left_out`), trains nothing (:attr:`trains_with`), reads no selection file
    (:meth:`reads_selection`) and is judged finished by the trainer that ran it (:meth:`record`). :meth:`run` does
    its work."""

    metadata: ClassVar[StageMetadata]

    def left_out(self, plan: Plan) -> str | None:
        """Why ``plan`` runs without this stage; ``None``: it runs it."""
        return None

    @abstractmethod
    def run(self, r: PipelineRun, folder: Path) -> dict:
        """Do the stage's work into ``folder``; its summary."""

    def record(self, r: PipelineRun) -> dict[str, Any] | None:
        """What the pipeline records in the stage's folder and judges it finished by; ``None``: a trainer's run,
        which the trainer itself judges finished or not."""
        return None

    @property
    def trains_with(self) -> str | None:
        """The table whose settings it trains with (``None``: it trains nothing)."""
        return None

    def reads_selection(self, plan: Plan) -> bool:
        """Whether it reads the selection files."""
        return False

    def settings(self, config: PipelineConfig) -> Any:
        """The settings it trains with (a trainer's settings class), or ``None``."""
        return getattr(config, self.trains_with) if self.trains_with else None

    def training(self, config: PipelineConfig) -> TrainingSettings | None:
        """Its :class:`~jtcse.training.settings.TrainingSettings`, or ``None``."""
        settings = self.settings(config)
        return settings.training if settings is not None else None

    def dev_file(self, config: PipelineConfig) -> str | None:
        """The dev file it reads: a stage kept by dev (``checkpoint`` best-dev) reads ``dev_file``, which must then
        be given (a :class:`~jtcse.errors.SettingError` about its settings' keys); the others read none."""
        training = self.training(config)
        if training is None:
            return None
        training.check_dev_file(config.dev_file)
        return training.kept_by(config.dev_file)

    def seeded(self, config: PipelineConfig, seed: int) -> Any:
        """Its settings with the run's ``seed`` and ``report_to`` (and precision, when one is given for every
        stage)."""
        settings = self.settings(config)
        precision = config.precision or settings.training.precision
        return settings.replace(seed=seed, precision=precision, report_to=config.report_to)


class TrainedStage(Stage):
    """A stage a jtcse trainer runs into its folder with its table's settings."""

    @property
    def trains_with(self) -> str | None:
        return self.metadata.table


# ---------------------------------------------------------------------------------------------------- the stages
def _warm_up(r: PipelineRun, folder: Path, stage: Stage, tower: str | None, pairs: str | None, seed: int) -> dict:
    from jtcse.training.simcse import train_simcse

    c = r.config
    settings = stage.seeded(c, seed)
    return train_simcse(
        tower,
        c.corpus,
        folder,
        text_column=c.text_column,
        pairs_file=pairs,
        pooling=c.pooling,
        device=r.device,
        settings=settings,
        dev_file=stage.dev_file(c),
        callbacks=r.callbacks,
    )


class WarmupA(TrainedStage):
    metadata = StageMetadata(
        name="warmup_a",
        description="SimCSE of tower I (positives from pairs_a when given)",
        folder="tower_a",
        until="warmup",
        table="warmup",
    )

    def run(self, r: PipelineRun, folder: Path) -> dict:
        return _warm_up(r, folder, self, r.config.tower_a, r.config.pairs_a, r.config.seed)


class WarmupB(TrainedStage):
    metadata = StageMetadata(
        name="warmup_b",
        description="SimCSE of tower II (pairs_b; seed + 1; [warmup_b]: what differs from tower I's), so the "
        "towers differ",
        folder="tower_b",
        until="warmup",
    )

    def run(self, r: PipelineRun, folder: Path) -> dict:
        return _warm_up(r, folder, self, r.config.start_b, r.config.pairs_b, r.config.seed + 1)


def _train_twin(r: PipelineRun, folder: Path, **keys: Any) -> dict:
    """A twin of the two warm-ups, with the twin's settings (``keys`` on top)."""
    from jtcse.training.twin import train_twin

    c = r.config
    towers = [str(r.folder(WARMUP_A)), str(r.folder(WARMUP_B))]
    settings = TWIN.seeded(c, c.seed)
    return train_twin(
        *towers,
        c.corpus,
        folder,
        text_column=c.text_column,
        pooling=c.pooling,
        device=r.device,
        dev_file=TWIN.dev_file(c),
        settings=settings,
        callbacks=r.callbacks,
        **keys,
    )


def _warmup_fingerprints(r: PipelineRun) -> list:
    from jtcse.output_paths import WORKING_FOLDERS, fingerprint

    return [fingerprint(r.folder(stage), ignore=WORKING_FOLDERS, missing_ok=True) for stage in (WARMUP_A, WARMUP_B)]


class Probe(Stage):
    """Short twins at each learning rate; the one with the best mean over the selection files
    (:func:`~jtcse.training.selection.best_by_total`) trains the twin; the starting model is scored for the report."""

    metadata = StageMetadata(
        name="probe",
        description="short twins at each probe learning rate, scored on the selection file; the best trains the twin",
        evaluated=False,
    )

    def left_out(self, plan: Plan) -> str | None:
        return None if plan.probe else "the probe runs with --probe (and a twin)"

    @property
    def trains_with(self) -> str | None:
        return TWIN.trains_with

    def reads_selection(self, plan: Plan) -> bool:
        return True

    def run(self, r: PipelineRun, folder: Path) -> dict:
        from jtcse.training.selection import best_by_total, overall, selection_scores

        probe, selection = r.config.probe, r.plan.selection
        scores = {}
        for lr in probe.learning_rates:
            lr_folder = folder / f"lr_{lr:g}"
            r.stage_output(self).add(lr_folder.name)  # entered in the probe folder's record before it is written
            _train_twin(r, lr_folder, learning_rate=lr, max_steps=probe.max_steps, plot=False)
            scores[f"{lr:g}"] = selection_scores(lr_folder, selection, device=r.device)
        start = selection_scores(r.config.tower_a, selection, device=r.device)
        best = best_by_total({lr: overall(s) for lr, s in scores.items()})
        return {"selection_scores": scores, "start_selection_scores": start, "learning_rate": float(best)}

    def record(self, r: PipelineRun) -> dict[str, Any]:
        from jtcse.output_paths import fingerprint
        from jtcse.schema import to_mapping
        from jtcse.training.selection import selection_fingerprint

        c = r.config
        twin = {k: v for k, v in to_mapping(c.twin).items() if k not in ("enabled", "learning_rate")}
        return {  # the files read by their content: one edited in place is another input
            "selection_files": [selection_fingerprint(spec) for spec in c.selection_files],
            self.metadata.table: to_mapping(c.probe),
            TWIN.metadata.table: twin,
            "towers": _warmup_fingerprints(r),
            "corpus": fingerprint(c.corpus),
            "pooling": c.pooling,
            "seed": c.seed,
        }


class Twin(TrainedStage):
    metadata = StageMetadata(name="twin", description="the JTCSE twin of the two warm-ups")

    def left_out(self, plan: Plan) -> str | None:
        return None if plan.twin else "the twin is off for this run (--no-twin, [twin] enabled = false)"

    def run(self, r: PipelineRun, folder: Path) -> dict:
        probed = r.summaries.get(PROBE.metadata.name)
        return _train_twin(r, folder, **({"learning_rate": probed["learning_rate"]} if probed else {}))


class Ensemble(Stage):
    metadata = StageMetadata(
        name="ensemble",
        description="the twin (else the two warm-ups) with the starting model and/or other models, one checkpoint (UC)",
        made_by="jtcse ensemble",
    )

    def left_out(self, plan: Plan) -> str | None:
        if plan.members:
            return None
        return "this run has no ensemble: it needs --ensemble-with or a sentence-transformers start"

    def reads_selection(self, plan: Plan) -> bool:
        return plan.choose

    def run(self, r: PipelineRun, folder: Path) -> dict:
        from jtcse.training.ensemble import save_ensemble
        from jtcse.training.selection import choose_weights

        plan, combine = r.plan, r.config.ensemble.combine
        with tempfile.TemporaryDirectory() as towers:  # the twin's towers as members: exported, then copied in
            sources = list(plan.members)
            if r.config.ensemble.twin_towers and plan.twin:
                from jtcse.modeling.loading import load_model

                exported = load_model(r.folder(TWIN), device=r.device)[0].export_towers(towers)
                sources = exported + sources[len(exported) :]  # in the places the twin held twice
            weights, scores, start = plan.weights, None, None
            if plan.choose:  # the start at 1, the trained members at the one weight chosen on the selection files
                weights, scores, start = choose_weights(
                    sources, plan.start_index, plan.selection, device=r.device, combine=combine
                )
            # a folder without a finished record is left from an interrupted save: replaced
            model = save_ensemble(sources, folder, combine=combine, weights=weights, overwrite=True)
        chosen = {f"{w:g}": v for w, v in scores.items()} if scores else None
        return {
            "members": list(plan.member_labels),
            "weights": model[0].weights,
            "combine": combine,
            "selection_scores": chosen,
            "start_selection_scores": start,
            "dimension": model.get_embedding_dimension(),
        }

    def record(self, r: PipelineRun) -> dict[str, Any]:
        from jtcse.output_paths import WORKING_FOLDERS, fingerprint
        from jtcse.training.selection import selection_fingerprint

        c, plan = r.config, r.plan
        return {
            "members": [fingerprint(m, ignore=WORKING_FOLDERS, missing_ok=True) for m in plan.members],
            "twin_towers": c.ensemble.twin_towers,
            "weights": plan.weights,
            "combine": c.ensemble.combine,
            "selection_files": [selection_fingerprint(spec) for spec in c.selection_files] if plan.choose else [],
        }


class Distill(TrainedStage):
    metadata = StageMetadata(
        name="distill",
        description="the ensemble (else the twin) taught to the student (UCD, JTCSE-D)",
        folder="distilled",
    )

    def run(self, r: PipelineRun, folder: Path) -> dict:
        from jtcse.training.distill import distill

        c = r.config
        return distill(
            str(r.plan.teacher),
            r.plan.student,
            c.corpus,
            folder,
            text_column=c.text_column,
            device=r.device,
            dev_file=self.dev_file(c),
            settings=self.seeded(c, c.seed),
            callbacks=r.callbacks,
        )


class Eval(Stage):
    metadata = StageMetadata(
        name="eval",
        description="dev Spearman (all pairs and per genre) of every model and of the starting model(s), and with "
        "selection inputs each model's score on each, their mean and the share of its teachers' gain the student keeps",
        table=None,
        evaluated=False,
        rerun=True,
    )

    def reads_selection(self, plan: Plan) -> bool:
        """It reports every model's scores on the selection inputs given (none: nothing is read)."""
        return True

    def dev_file(self, config: PipelineConfig) -> str | None:
        """It reports on the dev file, which must be given."""
        if config.dev_file is None:
            raise JTCSEError(
                "the eval stage reports on a dev file: give --dev-file (dev_file, an STS-B file or table), or stop "
                "earlier with --until."
            )
        return config.dev_file

    def run(self, r: PipelineRun, folder: Path) -> dict:
        from jtcse.devices import check_precision
        from jtcse.evaluation.sts import ALL_GENRES
        from jtcse.pipeline.report import dev_scores

        models = {**r.plan.starting, **{stage.metadata.name: r.folder(stage) for stage in r.plan.evaluated}}
        precision = check_precision(r.config.precision or "auto", r.device)  # the run's, as the trainers resolve it
        genres = dev_scores(r.config.dev_file, models, r.device, precision)
        return {
            "dev_file": r.config.dev_file,
            "precision": precision,
            "dev_spearman": {label: g[ALL_GENRES] for label, g in genres.items()},
            "dev_spearman_by_genre": {
                label: {k: v for k, v in g.items() if k != ALL_GENRES} for label, g in genres.items()
            },
            **(self._selection_report(r, models) if r.plan.selection else {}),
        }

    @staticmethod
    def _selection_report(r: PipelineRun, models: dict) -> dict:
        """Every model's scores on the selection inputs, and the share of each teacher's gain (the twin's, the
        ensemble's) over the start that the student keeps."""
        from jtcse.pipeline.report import selection_report

        evaluated = r.plan.evaluated
        teachers = [stage.metadata.name for stage in (TWIN, ENSEMBLE) if stage in evaluated]
        student = DISTILL.metadata.name if DISTILL in evaluated else None
        return selection_report(r.plan.selection, models, r.device, student=student, teachers=teachers)

    def record(self, r: PipelineRun) -> dict[str, Any]:
        from jtcse.modeling.loading import describe_source
        from jtcse.output_paths import WORKING_FOLDERS, fingerprint

        models = {
            stage.metadata.name: fingerprint(r.folder(stage), ignore=WORKING_FOLDERS) for stage in r.plan.evaluated
        }
        starting = [  # by content: another model saved at a starting model's path is another input
            fingerprint(m, ignore=WORKING_FOLDERS, missing_ok=True) or describe_source(m)
            for m in r.plan.starting.values()
        ]
        record = {"dev_file": fingerprint(r.config.dev_file), "models": models, "starting": starting}
        if r.plan.selection:  # (a run without selection inputs records what it always did)
            from jtcse.training.selection import selection_fingerprint

            record["selection_files"] = [selection_fingerprint(spec) for spec in r.plan.selection]
        return record


STAGES = (WarmupA(), WarmupB(), Probe(), Twin(), Ensemble(), Distill(), Eval())
"""The pipeline's stages, in order: the one list of them (their folders, ``--until`` values and recipe tables)."""
WARMUP_A, WARMUP_B, PROBE, TWIN, ENSEMBLE, DISTILL, EVAL = STAGES
UNTIL = tuple(dict.fromkeys(stage.metadata.until for stage in STAGES))
"""The values of ``--until``, in order."""
TRAINED = tuple(dict.fromkeys(stage.trains_with for stage in STAGES if stage.trains_with))
"""The tables of the stages that train (``--batch-size`` and ``--eval-steps`` set them all at once)."""
