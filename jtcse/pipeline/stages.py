"""The pipeline's stages: :data:`STAGES`, the one list of them, each a :class:`Stage` that holds what differs from
stage to stage.

A stage says its name (its row in the summary), its folder, the ``--until`` value that stops after it, its
settings' table in a recipe and the table it trains with, whether a run includes it (:meth:`Stage.include`) and why
not (:meth:`Stage.off_reason`), what the pipeline records to judge it finished (``record``; a trainer's folder is
judged by the trainer), whether the eval stage scores its model (``evaluated``) and its work (``run``). The plan
(:mod:`jtcse.pipeline.plan`) and the run (:mod:`jtcse.pipeline.run`) ask the stages; no other module names one.
"""

from __future__ import annotations

import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

PipelineRun = Any
"""A :class:`jtcse.pipeline.run.PipelineRun` (its config, plan, device, folders and the summaries so far): what a
stage's work and record read. Named, not imported: the run imports the stages."""
Plan = Any
"""A :class:`jtcse.pipeline.plan.Plan`: what decides whether a stage runs."""


def _always(plan: Plan) -> bool:
    return True


@dataclass(frozen=True)
class Stage:
    """One step of the pipeline. ``name``: its row in the summary; ``folder``: where it writes, under the run's
    output; ``until``: the ``--until`` value that stops after it (both warm-ups: ``warmup``); ``table``: its settings'
    table in a recipe (the eval stage has none); ``trains_with``: the table whose settings it trains with (the
    probe's twins: ``twin``); ``what``: its line in ``jtcse pipeline --help``; ``run``: does the work into the folder
    and returns its summary; ``included``: whether a plan runs it, ``why_off`` saying why not; ``record``: the
    settings the pipeline records in the stage's folder and judges it finished by (``None``: a trainer's run, which
    the trainer itself judges finished or not); ``evaluated``: it makes a model, which the eval stage scores;
    ``rerun``: a finished run with other settings is run again rather than refused; ``made_by``: the command
    whose record its folder carries, when the pipeline records the stage (:mod:`jtcse.output_paths`)."""

    name: str
    folder: str
    until: str
    table: str | None
    trains_with: str | None
    what: str
    run: Callable[[PipelineRun, Path], dict]
    included: Callable[[Plan], bool] = _always
    why_off: str = ""
    record: Callable[[PipelineRun], dict] | None = None
    evaluated: bool = True
    rerun: bool = False
    made_by: str = "jtcse pipeline"

    def include(self, plan: Plan) -> bool:
        return self.included(plan)

    def off_reason(self, plan: Plan) -> str | None:
        """Why ``plan`` runs without this stage (``None``: it runs it)."""
        return None if self.include(plan) else self.why_off

    def settings(self, config) -> Any:
        """The settings it trains with (a trainer's settings class), or ``None``."""
        return getattr(config, self.trains_with) if self.trains_with else None

    def training(self, config) -> Any:
        """Its :class:`~jtcse.training.settings.TrainingSettings`, or ``None``."""
        settings = self.settings(config)
        return settings.training if settings is not None else None

    def dev_file(self, config) -> str | None:
        """The dev file its trainer reads: only a stage that keeps its best checkpoint by it (``checkpoint``
        best-dev) gets one; the others keep their last step, and the eval stage reports the dev file."""
        training = self.training(config)
        return training.kept_by(config.dev_file) if training is not None else None

    def seeded(self, config, seed: int) -> Any:
        """Its settings with the run's ``seed`` (and precision, when one is given for every stage)."""
        settings = self.settings(config)
        precision = config.precision or settings.training.precision
        return settings.replace(seed=seed, precision=precision)


# ---------------------------------------------------------------------------------------------------- the work
def _warm_up(r: PipelineRun, folder: Path, stage: Stage, tower: str | None, pairs: str | None, seed: int) -> dict:
    from jtcse.training.simcse import train_simcse

    c = r.config
    settings = stage.seeded(c, seed)
    return train_simcse(
        tower,
        c.corpus,
        folder,
        pairs_file=pairs,
        pooling=c.pooling,
        device=r.device,
        settings=settings,
        dev_file=stage.dev_file(c),
    )


def _warmup_a(r: PipelineRun, folder: Path) -> dict:
    return _warm_up(r, folder, WARMUP_A, r.config.tower_a, r.config.pairs_a, r.config.seed)


def _warmup_b(r: PipelineRun, folder: Path) -> dict:
    return _warm_up(r, folder, WARMUP_B, r.config.start_b, r.config.pairs_b, r.config.seed + 1)


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
        pooling=c.pooling,
        device=r.device,
        dev_file=TWIN.dev_file(c),
        settings=settings,
        **keys,
    )


def _probe(r: PipelineRun, folder: Path) -> dict:
    """Short twins at each learning rate; the one with the best mean over the selection files
    (:func:`~jtcse.training.selection.best_by_total`) trains the twin; the starting model is scored for the report."""
    from jtcse.modeling.loading import load_model
    from jtcse.training.selection import best_by_total, model_scores, overall

    probe, selection = r.config.probe, r.plan.selection
    scores = {}
    for lr in probe.learning_rates:
        lr_folder = folder / f"lr_{lr:g}"
        r.stage_output(PROBE).add(lr_folder.name)  # entered in the probe folder's record before it is written
        _train_twin(r, lr_folder, learning_rate=lr, max_steps=probe.max_steps, plot=False)
        scores[f"{lr:g}"] = model_scores(load_model(lr_folder, role="encode", device=r.device), selection)
    start = model_scores(load_model(r.config.tower_a, role="encode", device=r.device), selection)
    best = best_by_total({lr: overall(s) for lr, s in scores.items()})
    return {"selection_spearman": scores, "start_selection_spearman": start, "learning_rate": float(best)}


def _twin(r: PipelineRun, folder: Path) -> dict:
    probed = r.summaries.get(PROBE.name)
    return _train_twin(r, folder, **({"learning_rate": probed["learning_rate"]} if probed else {}))


def _ensemble(r: PipelineRun, folder: Path) -> dict:
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
        "selection_spearman": chosen,
        "start_selection_spearman": start,
        "dimension": model.get_embedding_dimension(),
    }


def _distill(r: PipelineRun, folder: Path) -> dict:
    from jtcse.training.distill import distill

    c = r.config
    return distill(
        str(r.plan.teacher),
        r.plan.student,
        c.corpus,
        folder,
        device=r.device,
        dev_file=DISTILL.dev_file(c),
        settings=DISTILL.seeded(c, c.seed),
    )


def _eval(r: PipelineRun, folder: Path) -> dict:
    from jtcse.evaluation.sts import ALL_GENRES
    from jtcse.pipeline.report import dev_scores

    models = {**r.plan.starting, **{stage.name: r.folder(stage) for stage in r.plan.evaluated}}
    genres = dev_scores(r.config.dev_file, models, r.device)
    return {
        "dev_file": r.config.dev_file,
        "dev_spearman": {label: g[ALL_GENRES] for label, g in genres.items()},
        "dev_spearman_by_genre": {
            label: {k: v for k, v in g.items() if k != ALL_GENRES} for label, g in genres.items()
        },
    }


# ---------------------------------------------------------------------------------------------------- records
def _warmup_fingerprints(r: PipelineRun) -> list:
    from jtcse.output_paths import WORKING_FOLDERS, fingerprint

    return [fingerprint(r.folder(stage), ignore=WORKING_FOLDERS, missing_ok=True) for stage in (WARMUP_A, WARMUP_B)]


def _probe_record(r: PipelineRun) -> dict[str, Any]:
    from jtcse.output_paths import fingerprint
    from jtcse.schema import to_mapping

    c = r.config
    twin = {k: v for k, v in to_mapping(c.twin).items() if k not in ("enabled", "learning_rate")}
    return {  # the files read by their content: one edited in place is another input
        "selection_files": [fingerprint(path) for path in c.selection_files],
        PROBE.table: to_mapping(c.probe),
        TWIN.table: twin,
        "towers": _warmup_fingerprints(r),
        "corpus": fingerprint(c.corpus),
        "pooling": c.pooling,
        "seed": c.seed,
    }


def _ensemble_record(r: PipelineRun) -> dict[str, Any]:
    from jtcse.output_paths import WORKING_FOLDERS, fingerprint

    c, plan = r.config, r.plan
    return {
        "members": [fingerprint(m, ignore=WORKING_FOLDERS, missing_ok=True) for m in plan.members],
        "twin_towers": c.ensemble.twin_towers,
        "weights": plan.weights,
        "combine": c.ensemble.combine,
        "selection_files": [fingerprint(path) for path in c.selection_files] if plan.choose else [],
    }


def _eval_record(r: PipelineRun) -> dict[str, Any]:
    from jtcse.modeling.loading import describe_source
    from jtcse.output_paths import WORKING_FOLDERS, fingerprint

    models = {stage.name: fingerprint(r.folder(stage), ignore=WORKING_FOLDERS) for stage in r.plan.evaluated}
    starting = [
        fingerprint(m, ignore=WORKING_FOLDERS, missing_ok=True) or describe_source(m) for m in r.plan.starting.values()
    ]
    return {"dev_file": fingerprint(r.config.dev_file), "models": models, "starting": starting}


# ---------------------------------------------------------------------------------------------------- the stages
WARMUP_A = Stage(
    name="warmup_a",
    folder="tower_a",
    until="warmup",
    table="warmup",
    trains_with="warmup",
    what="SimCSE of tower I (positives from pairs_a when given)",
    run=_warmup_a,
)
WARMUP_B = Stage(
    name="warmup_b",
    folder="tower_b",
    until="warmup",
    table="warmup_b",
    trains_with="warmup_b",
    what="SimCSE of tower II (pairs_b; seed + 1; [warmup_b]: what differs from tower I's), so the towers differ",
    run=_warmup_b,
)
PROBE = Stage(
    name="probe",
    folder="probe",
    until="probe",
    table="probe",
    trains_with="twin",
    what="short twins at each probe learning rate, scored on the selection file; the best trains the twin",
    run=_probe,
    included=lambda plan: plan.probe,
    why_off="the probe runs with --probe (and a twin)",
    record=_probe_record,
    evaluated=False,
)
TWIN = Stage(
    name="twin",
    folder="twin",
    until="twin",
    table="twin",
    trains_with="twin",
    what="the JTCSE twin of the two warm-ups",
    run=_twin,
    included=lambda plan: plan.twin,
    why_off="the twin is off for this run (--no-twin, [twin] enabled = false)",
)
ENSEMBLE = Stage(
    name="ensemble",
    folder="ensemble",
    until="ensemble",
    table="ensemble",
    trains_with=None,
    what="the twin (else the two warm-ups) with the starting model and/or other models, one checkpoint (UC)",
    run=_ensemble,
    included=lambda plan: bool(plan.members),
    why_off="this run has no ensemble: it needs --ensemble-with or a sentence-transformers start",
    record=_ensemble_record,
    made_by="jtcse ensemble",
)
DISTILL = Stage(
    name="distill",
    folder="distilled",
    until="distill",
    table="distill",
    trains_with="distill",
    what="the ensemble (else the twin) taught to the student (UCD, JTCSE-D)",
    run=_distill,
)
EVAL = Stage(
    name="eval",
    folder="eval",
    until="eval",
    table=None,
    trains_with=None,
    what="dev Spearman, all pairs and per genre, of every model and of the starting model(s)",
    run=_eval,
    record=_eval_record,
    evaluated=False,
    rerun=True,
)

STAGES = (WARMUP_A, WARMUP_B, PROBE, TWIN, ENSEMBLE, DISTILL, EVAL)
"""The pipeline's stages, in order: the one list of them (their folders, ``--until`` values and recipe tables)."""
UNTIL = tuple(dict.fromkeys(stage.until for stage in STAGES))
"""The values of ``--until``, in order."""
TRAINED = tuple(dict.fromkeys(stage.trains_with for stage in STAGES if stage.trains_with))
"""The tables of the stages that train (``--batch-size`` and ``--eval-steps`` set them all at once)."""


def check_tables(config_cls: type) -> None:
    """Every stage's table, and every table a stage trains with (a trainer's settings: its ``training``), is a
    section of ``config_cls``, and every section is a stage's table; a ``TypeError`` otherwise (raised when the
    config is declared, on import)."""
    from jtcse.schema import sections
    from jtcse.training.settings import TrainingSettings

    tables = sections(config_cls)
    named = {stage.table for stage in STAGES} | set(TRAINED)
    wrong = sorted(name for name in named - set(tables) if name is not None)
    unread = sorted(set(tables) - named)
    untrained = sorted(
        t
        for t in TRAINED
        if t in tables and not isinstance(getattr(tables[t][0](), "training", None), TrainingSettings)
    )
    if wrong or unread or untrained:
        raise TypeError(
            f"the stages' tables and {config_cls.__name__}'s sections disagree: not a section {wrong}, no stage's "
            f"table {unread}, trained with but no training settings {untrained}"
        )
