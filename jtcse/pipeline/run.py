"""Carrying a pipeline run out: :func:`run_pipeline` checks its output, plans it
(:func:`~jtcse.pipeline.plan.make_plan`), runs each stage of the plan in turn under the output's lock, and writes the
summary.

Each stage writes into its own folder; a rerun skips a stage whose folder holds a finished run of the same
settings, refuses one that finished with others, and resumes one that was interrupted. One rule decides
(:func:`jtcse.training.run_dir.finished_run`): a trainer's folder is judged by the trainer itself from its
``run_summary.json``, whoever ran it (the pipeline, or ``jtcse simcse`` by hand), and the stages the pipeline
records itself (:meth:`~jtcse.pipeline.stages.Stage.record`) are judged the same way. Each trainer starts from
fingerprints of the models it reads, so a retrained upstream stage never leaves a stale model downstream.

The run's folder is an output of ``jtcse pipeline`` (:class:`~jtcse.output_paths.FolderOutput`): never an input nor
a folder holding one, its record (``jtcse_outputs.json``) lists the stage folders and the summaries; a file there
that it does not list is refused before anything is read. The summaries of an earlier run go before the first stage
runs, so a rerun that fails half-way leaves none that would describe other models than the folders hold.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from jtcse.errors import SettingError
from jtcse.output_paths import FolderOutput
from jtcse.pipeline.plan import Plan, make_plan
from jtcse.pipeline.progress import RunProgress, planned_work
from jtcse.pipeline.settings import PipelineConfig, stage_error
from jtcse.pipeline.stages import EVAL, STAGES, Stage

logger = logging.getLogger(__name__)

MADE_BY = "jtcse pipeline"
SUMMARY_JSON, SUMMARY_MD = "pipeline_summary.json", "pipeline_summary.md"


class PipelineRun:
    """One run under way: its ``config``, its ``plan``, the ``device`` every stage trains and evaluates on
    (``None``: the best here), its ``output`` (the run's folder) and the ``summaries`` of the stages done so far
    (``{stage name: summary}``)."""

    def __init__(
        self,
        config: PipelineConfig,
        plan: Plan,
        output: FolderOutput,
        device: str | None = None,
        progress: RunProgress | None = None,
    ):
        self.config, self.plan, self.output, self.device = config, plan, output, device
        self.progress = progress
        self.summaries: dict[str, dict] = {}

    @property
    def callbacks(self) -> list:
        """The trainer callbacks of the stage under way: its clock, timing its first steps for :attr:`progress`."""
        if self.progress is None:
            return []
        from jtcse.training.step_clock import StepClock

        return [StepClock(self.progress.measured)]

    def folder(self, stage: Stage) -> Path:
        return self.plan.folder(stage)

    def stage_output(self, stage: Stage) -> FolderOutput:
        """The folder of a stage the pipeline records (:meth:`Stage.record`), as an output of its ``made_by``."""
        return FolderOutput(self.folder(stage), stage.metadata.made_by, earlier=_written_before_records)

    def execute(self, stage: Stage) -> dict[str, Any]:
        """Run ``stage`` unless its folder holds a finished run of the same settings; its summary row. An error
        about a setting names it as the stage's table has it (``[twin] cael_every``), and one about the stage's
        folder says what to do in a pipeline (remove the folder: the pipeline has no ``--overwrite``)."""
        from jtcse.training.run_dir import RERUN, finished_summary

        folder, name = self.folder(stage), stage.metadata.name
        started = time.perf_counter()
        if self.progress is not None:
            self.progress.started(stage, folder)
        self.output.add(stage.metadata.folder)  # entered in the run's record before it is written
        try:
            record = stage.record(self)
            if record is None:  # the trainer judges its folder: the same finished run is returned as it is
                before = finished_summary(folder)
                summary = stage.run(self, folder)
                done = before is not None and before == summary
            else:
                summary, done = self._recorded(stage, folder, record)
        except SettingError as err:
            again = {RERUN: f"remove {folder} to run the stage again"}
            raise stage_error(err, stage.trains_with or stage.metadata.table).renamed(again.get) from None
        self.summaries[name] = summary
        seconds = 0.0 if done else round(time.perf_counter() - started, 2)
        status = "skipped (done)" if done else "ran"
        row = {"stage": name, "output": str(folder), "status": status, "seconds": seconds, "summary": summary}
        row["stage_seconds"] = summary.get("seconds", None if done else seconds)  # a trainer's: as its run recorded it
        if self.progress is not None:
            self.progress.ended(stage, row)
        return row

    def _recorded(self, stage: Stage, folder: Path, record: dict[str, Any]) -> tuple[dict, bool]:
        """``(summary, done)`` of a stage the pipeline records: its finished run of the same ``record``, else the
        stage run again (a folder missing a file its run wrote is not finished, and says so)."""
        from jtcse.training.run_dir import RUN_SUMMARY_NAME, finished_run, unfinished_because

        meta = stage.metadata
        summary = finished_run(folder, record, model=meta.evaluated, rerun=meta.rerun)
        if summary is not None:
            return summary, True
        if (damage := unfinished_because(folder)) is not None:
            logger.warning("%s is not a finished run: %s; running the stage again.", folder, damage)
        out = self.stage_output(stage)
        out.check()  # nothing there that jtcse did not write
        summary = {"stage": meta.name, **stage.run(self, folder), "config": record}
        out.write_json(RUN_SUMMARY_NAME, summary)  # entered in the record (of the folder the stage may have replaced)
        return summary, False


def pipeline_output(output_dir: str | Path, config: PipelineConfig, recipe: dict | None = None) -> FolderOutput:
    """The run's folder as an output of ``jtcse pipeline``, apart from every file and model it reads (``config``'s,
    the ``recipe`` files); each stage's folder in it is an output of its own (checked by what writes it)."""
    recipe_files = [recipe["path"], *recipe.get("extends", {})] if recipe else []
    models = [config.tower_a, config.start_b, *config.ensemble.models, config.distill.student]
    models = [model for model in models if not _made_here(model, output_dir)]  # e.g. --ensemble-with OUT/tower_a
    from jtcse.evaluation.mteb_local_tasks import parse_task_spec

    selection = [parse_task_spec(spec)[1] for spec in config.selection_files]  # TYPE:PATH reads PATH
    files = [config.corpus, config.pairs_a, config.pairs_b, config.dev_file, *selection, *recipe_files]
    inputs = [*models, *files]
    return FolderOutput(
        output_dir,
        MADE_BY,
        inputs=inputs,
        parts=[stage.metadata.folder for stage in STAGES],
        earlier=_written_before_records,
    )


def _made_here(model: str | None, output_dir: str | Path) -> bool:
    """Whether ``model`` is (in) one of the run's own stage folders: what the run makes, not an input of it."""
    if model is None:
        return False
    path = Path(model).expanduser().resolve()
    folders = (Path(output_dir) / stage.metadata.folder for stage in STAGES)
    return any(path.is_relative_to(folder.expanduser().resolve()) for folder in folders)


def _written_before_records(folder: Path) -> list[str] | None:
    """What a pipeline of jtcse before records were kept wrote into ``folder`` (the run's, or a stage's it records):
    its summaries, and the trainers' runs in it (the probe's twins); ``None`` when it holds none of them."""
    from jtcse.training.run_dir import CHECKPOINTS_SUBDIR, RUN_SUMMARY_NAME

    def summary(path: Path, key: str) -> bool:
        try:
            return key in json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError, TypeError):
            return False

    names = [name for name in (SUMMARY_JSON, SUMMARY_MD) if summary(folder / SUMMARY_JSON, "stages")]
    names += [RUN_SUMMARY_NAME] if summary(folder / RUN_SUMMARY_NAME, "stage") else []
    runs = [p.name for p in folder.iterdir() if (p / RUN_SUMMARY_NAME).is_file() or (p / CHECKPOINTS_SUBDIR).is_dir()]
    return [name for name in names if (folder / name).exists()] + runs if names else None


def run_pipeline(
    output_dir: str | Path,
    config: PipelineConfig | None = None,
    *,
    device: str | None = None,
    recipe: dict | None = None,
    say: Callable[[str], None] | None = None,
) -> dict:
    """Run (or finish) the pipeline of ``config`` (default: every default) in ``output_dir``, each stage of its plan
    in turn up to ``config.until``, on ``device`` (``None``: the best here); the output is checked, then every check
    that needs no training comes (:func:`~jtcse.pipeline.plan.make_plan`: every file a stage reads is read), all
    before anything is written. ``recipe``: where the settings came from (``jtcse pipeline --recipe``), recorded as
    it is. Returns the summary, also written as ``pipeline_summary.json`` and ``.md``; an earlier run's are removed
    before the first stage runs. As it runs it says where it is, one line at a time, to ``say`` (default: above
    the trainers' progress bars; :class:`~jtcse.pipeline.progress.RunProgress`)."""
    from jtcse.pipeline.report import format_table, summary_table

    config = config or PipelineConfig()
    out = pipeline_output(output_dir, config, recipe)
    out.check()  # -o a file, an input, a folder holding one or a file of the user's: refused before anything is read
    plan = make_plan(config, output_dir, device)
    progress = _progress(plan, config, say)
    with out.writing():  # one pipeline per folder; each stage's trainer also locks its own folder
        out.remove(SUMMARY_JSON, SUMMARY_MD)  # from now on the stage folders may hold other models than they say
        run = PipelineRun(config, plan, out, device, progress)
        rows = [run.execute(stage) for stage in plan.stages]
        table = summary_table(rows, plan.starting, run.summaries.get(EVAL.metadata.name, {}))
        result = {
            "output_dir": str(plan.output_dir),
            "until": config.until,
            "config": config.values(),
            **({"recipe": recipe} if recipe is not None else {}),
            "table": table,
            "stages": {row["stage"]: row["summary"] for row in rows},
        }
        out.write_json(SUMMARY_JSON, result)
        out.write_text(SUMMARY_MD, format_table(table))
    return result


def _progress(plan: Plan, config: PipelineConfig, say: Callable[[str], None] | None) -> RunProgress:
    """The run's progress lines, with each training stage's work planned over the corpus's sentences; under a
    multi-process launch rank 0 alone says them."""
    from jtcse.corpus import read_training_sentences
    from jtcse.modeling.loading import layer_count
    from jtcse.processes import is_main_process

    if not is_main_process():
        say = _silent
    rows = len(read_training_sentences(config.corpus, text_column=config.text_column)[0])
    return RunProgress(plan.stages, planned_work(plan.stages, config, rows, layer_count(config.tower_a)), say)


def _silent(line: str) -> None:
    """Says nothing (a rank other than 0)."""
