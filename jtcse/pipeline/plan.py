"""A pipeline run's decisions, all made before anything is written: :func:`make_plan` turns a
:class:`~jtcse.pipeline.settings.PipelineConfig` into a frozen :class:`Plan`, one small function a decision.

Whether the starting model joins an ensemble follows from what tower I starts from (a sentence-transformers model
or a plain ``transformers`` one); the ensemble's members (the twin, on by default, else the warm-ups) and weights,
the stages up to ``--until``, the student and the teacher, the rows to beat, and the files the stages read (a file
no stage reads is not required) follow from those and ``[twin] enabled``. Every check that needs no training is made here, so a mistake costs nothing.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from jtcse.errors import JTCSEError, SettingError
from jtcse.pipeline.settings import ENSEMBLE_WEIGHTS, PipelineConfig, stage_error
from jtcse.pipeline.stages import ENSEMBLE, STAGES, TRAINED, TWIN, WARMUP_A, WARMUP_B, Stage


@dataclass(frozen=True)
class Plan:
    """What one run does. ``twin``: the twin trains; ``probe``: its learning rate is probed first; ``members``: the
    ensemble's members as its stage opens them (none: no ensemble), ``member_labels`` as the summary names them,
    the first ``start_index`` of them trained by this run; ``weights``: theirs (``None``: all 1) unless
    ``choose``: chosen on the selection file; ``stages``: those that run, in order; ``student``/``teacher``: of the
    distillation; ``starting``: the models the run started from (``{row label: model}``, the rows to beat);
    ``dev_file`` / ``selection_files``: the files the stages read (``None`` / none: not read; the selection inputs
    by the probe, a choice of weights and the eval stage, which scores every model on them), read and checked in
    ``selection`` (``{spec: input}``, :func:`~jtcse.training.selection.selection_sets`)."""

    output_dir: Path
    twin: bool
    probe: bool
    members: tuple[str, ...]
    member_labels: tuple[str, ...]
    start_index: int
    weights: tuple[float, ...] | None
    choose: bool
    student: str | None
    teacher: Path
    starting: Mapping[str, Any]
    stages: tuple[Stage, ...] = ()
    dev_file: str | None = None
    selection_files: tuple[str, ...] = ()
    selection: Mapping[str, Any] = field(default_factory=dict, compare=False, repr=False)

    @property
    def evaluated(self) -> tuple[Stage, ...]:
        """The stages whose models the eval stage scores."""
        return tuple(stage for stage in self.stages if stage.metadata.evaluated)

    def folder(self, stage: Stage) -> Path:
        return self.output_dir / stage.metadata.folder


def is_sentence_encoder(source) -> bool:
    """Whether ``source`` (``None``: the embedded MiniLM) is a pre-trained sentence encoder, i.e. a
    sentence-transformers checkpoint with its own modules, rather than a plain ``transformers`` model."""
    from jtcse.modeling.loading import has_own_modules, resolve_source

    return has_own_modules(resolve_source(source))


def make_plan(config: PipelineConfig, output_dir: str | Path, device: str | None = None) -> Plan:
    """The plan of ``config`` run in ``output_dir`` on ``device`` (``None``: the best here), every check that needs
    no training made: a device or precision this machine lacks, a probe without a selection file, an ``--until``
    this run has no stage for, weights that do not count the members, every file a stage reads (read and checked
    now: its format, its scores, the corpus's text), and the twin's ``cael_every`` against the towers' layers. The
    seed (and warm-up II's seed + 1) is checked where it is given (:class:`PipelineConfig`)."""
    output_dir = Path(output_dir)
    _check_devices(config, device)
    encoder_start = is_sentence_encoder(config.tower_a)
    with_start = _start_joins(config, encoder_start)
    twin = _twin_trains(config)
    members, labels, start_index = _members(config, output_dir, twin, with_start)
    choose = _weights_chosen(config, with_start)
    _check_probe(config)
    student = config.distill.student if config.distill.student is not None else config.tower_a
    plan = Plan(
        output_dir=output_dir,
        twin=twin,
        probe=twin and config.probe.enabled,
        members=members,
        member_labels=labels,
        start_index=start_index,
        weights=_weights(config, twin, with_start, choose),
        choose=choose,
        student=student,
        teacher=output_dir / (ENSEMBLE if members else TWIN).metadata.folder,
        starting=starting_models(config.tower_a, config.start_b, student),
    )
    plan = replace(plan, stages=_stages(plan, config.until))
    _check_weights(plan, config)
    plan = _with_files(plan, config)
    _check_files_read(plan, config)
    _check_cael_every(plan, config)
    return plan


def _check_devices(config: PipelineConfig, device: str | None) -> None:
    """``device`` and each trained stage's precision, checked with :func:`~jtcse.training.trainer_run.training_device`."""
    from jtcse.training.trainer_run import training_device

    for table in TRAINED:
        training_device(device, config.precision or getattr(config, table).training.precision)


def _start_joins(config: PipelineConfig, encoder_start: bool) -> bool:
    """Whether the starting model is a member of the ensemble: as ``[ensemble] enabled`` says, else when tower I
    starts from a sentence encoder and no other members are named."""
    if config.ensemble.enabled is not None:
        return config.ensemble.enabled
    return not config.ensemble.models and encoder_start


def _twin_trains(config: PipelineConfig) -> bool:
    """Whether the twin trains: as ``[twin] enabled`` says (on by default, from any start)."""
    return config.twin.enabled


def _members(
    config: PipelineConfig, output_dir: Path, twin: bool, with_start: bool
) -> tuple[tuple[str, ...], tuple[str, ...], int]:
    """The ensemble's members (none without one), their labels, and how many of them this run trains: the twin
    (its two towers with ``twin_towers``), else the two warm-ups; then the starting model when it joins, then the
    models named."""
    from jtcse.modeling.loading import describe_source, resolve_source

    twin_folder = output_dir / TWIN.metadata.folder
    towers = twin and config.ensemble.twin_towers
    trained = (
        [twin_folder] * (2 if towers else 1) if twin else [output_dir / s.metadata.folder for s in (WARMUP_A, WARMUP_B)]
    )
    extra = ([config.tower_a] if with_start else []) + list(config.ensemble.models)
    if not extra and twin:
        return (), (), len(trained)
    sources = (*map(str, trained), *(str(resolve_source(m)) for m in extra))
    labels = [f"{twin_folder}/{t}" for t in ("tower_1", "tower_2")] if towers else list(map(str, trained))
    return sources, (*labels, *map(describe_source, extra)), len(trained)


def _weights_chosen(config: PipelineConfig, with_start: bool) -> bool:
    """Whether the weights are chosen on the selection files: the start a member, no weights given, a file given."""
    return with_start and config.ensemble.weights is None and bool(config.selection_files)


def _weights(config: PipelineConfig, twin: bool, with_start: bool, choose: bool) -> tuple[float, ...] | None:
    """The weights given, else with the start and no other members named :data:`ENSEMBLE_WEIGHTS` (unless
    chosen), else ``None`` (all 1)."""
    if with_start and not config.ensemble.models and config.ensemble.weights is None and not choose:
        return ENSEMBLE_WEIGHTS.of(twin, towers=twin and config.ensemble.twin_towers)
    return config.ensemble.weights


def _check_probe(config: PipelineConfig) -> None:
    if config.probe.enabled and not config.selection_files:
        raise JTCSEError("the probe scores its twins on selection files: give --selection-file, or --no-probe.")


def _stages(plan: Plan, until: str) -> tuple[Stage, ...]:
    """The stages ``plan`` includes, up to the last one ``until`` names; one line naming the values this run
    can stop after, and why a stage it lacks is left out, otherwise."""
    included = [stage for stage in STAGES if stage.left_out(plan) is None]
    ends = {stage.metadata.until: i + 1 for i, stage in enumerate(included)}
    if until not in ends:
        reasons = (stage.left_out(plan) for stage in STAGES if stage.metadata.until == until)
        why = next((reason for reason in reasons if reason), "not a stage")
        raise JTCSEError(f"--until {until}: {why}; this run stops after one of {', '.join(ends)}.")
    return tuple(included[: ends[until]])


def _check_weights(plan: Plan, config: PipelineConfig) -> None:
    """The weights count the members (before any training: the ensemble comes late); none without members."""
    from jtcse.training.ensemble import member_weights

    if plan.members:
        try:
            member_weights(plan.weights, len(plan.members))
        except SettingError as err:
            raise stage_error(err, ENSEMBLE.metadata.table) from None
    elif config.ensemble.weights is not None:
        raise SettingError(
            "{weights} were given without models to ensemble with ({with}).",
            {"weights": "ensemble weights", "with": "[ensemble] with"},
            table=ENSEMBLE.metadata.table,
        )


def _with_files(plan: Plan, config: PipelineConfig) -> Plan:
    """``plan`` with the files its stages read, each given (each stage that needs one says so) and there (a file none
    reads is not required); the selection inputs read and checked against the dev file (by the probe, a choice of
    weights, and the eval stage: with weights given they are scored and reported, not chosen on)."""
    from jtcse.training.selection import selection_sets

    dev_files = []
    for stage in plan.stages:  # each stage that needs the dev file says so
        try:
            dev_files.append(stage.dev_file(config))
        except SettingError as err:
            raise stage_error(err, stage.trains_with) from None
    reads_dev = any(dev_files)
    reads_selection = any(stage.reads_selection(plan) for stage in plan.stages)
    if reads_dev and config.dev_file is not None and not _is_there(config.dev_file):
        raise JTCSEError(f"dev file not found: {config.dev_file}")
    return replace(
        plan,
        dev_file=config.dev_file if reads_dev else None,
        selection_files=config.selection_files if reads_selection else (),
        selection=selection_sets(config.selection_files, config.dev_file) if reads_selection else {},
    )


def _is_there(dev_file: str) -> bool:
    """Whether a dev file is there: a file, a ``save_to_disk`` folder, or an ``hf:`` name (read, and so checked, by
    :func:`_check_files_read`)."""
    from jtcse.text_inputs import HF_PREFIX

    return Path(dev_file).exists() or str(dev_file).startswith(HF_PREFIX)


def _check_files_read(plan: Plan, config: PipelineConfig) -> None:
    """Read every file the planned stages read, as they will read it, so that a bad one costs nothing: the dev file
    (STS-B text or a table, a finite number for every score, scores to correlate with: not all one), the corpus (UTF-8,
    some sentences) and each warm-up's pairs file. (The selection inputs are read and checked by
    :func:`~jtcse.training.selection.selection_sets`, in :func:`_with_files`.)"""
    from jtcse.corpus import read_texts
    from jtcse.evaluation.sts import check_correlatable, read_sts_input
    from jtcse.training.paraphrase_pairs import read_paraphrase_pairs

    if plan.dev_file is not None:
        check_correlatable(read_sts_input(plan.dev_file), plan.dev_file)
    if config.corpus is not None:
        read_texts(config.corpus, config.text_column)
    for pairs_file in dict.fromkeys(path for path in (config.pairs_a, config.pairs_b) if path is not None):
        read_paraphrase_pairs(pairs_file)


def _check_cael_every(plan: Plan, config: PipelineConfig) -> None:
    """The twin's (and the probe's twins') ``cael_every`` divides the towers' layer count, read from tower I's
    config alone (the warm-ups keep its layers; nothing is loaded)."""
    from jtcse.modeling.build import cael_every_setting
    from jtcse.modeling.loading import layer_count

    trains_twins = any(stage.trains_with == TWIN.trains_with for stage in plan.stages)
    layers = layer_count(config.tower_a) if trains_twins and config.twin.cael_every else None
    if layers is not None:
        try:
            cael_every_setting(config.twin.cael_every, layers)
        except SettingError as err:
            raise stage_error(err, TWIN.trains_with) from None


def starting_models(tower_a, tower_b, student) -> dict[str, Any]:
    """``{row label: model}`` of the distinct models the run started from: ``start`` is tower I's (the row to
    beat), then tower II's and the student's when they are other models (``None``: the embedded MiniLM)."""
    from jtcse.modeling.loading import describe_source

    out: dict[str, Any] = {}
    for label, model in (("start", tower_a), ("start_b", tower_b), ("start_student", student)):
        if describe_source(model) not in map(describe_source, out.values()):
            out[label] = model
    return out
