"""Carrying a pipeline run out: :func:`run_pipeline` plans it (:func:`~jtcse.pipeline.plan.make_plan`), runs each
stage of the plan in turn under the output's lock, and writes the summary.

Each stage writes into its own folder; a rerun skips a stage whose folder holds a finished run of the same
settings, refuses one that finished with others, and resumes one that was interrupted. One rule decides
(:func:`jtcse.training.run_dir.finished_run`): a trainer's folder is judged by the trainer itself from its
``run_summary.json``, whoever ran it (the pipeline, or ``jtcse simcse`` by hand), and the stages the pipeline
records itself (``Stage.record``) are judged the same way. Each trainer starts from fingerprints of the models it
reads, so a retrained upstream stage never leaves a stale model downstream.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from jtcse.errors import SettingError
from jtcse.locking import atomic_write_json, atomic_write_text, locks_output
from jtcse.pipeline.plan import Plan, make_plan
from jtcse.pipeline.settings import PipelineConfig, stage_error
from jtcse.pipeline.stages import EVAL, Stage


class PipelineRun:
    """One run under way: its ``config``, its ``plan``, the ``device`` every stage trains and evaluates on
    (``None``: the best here) and the ``summaries`` of the stages done so far (``{stage name: summary}``)."""

    def __init__(self, config: PipelineConfig, plan: Plan, device: str | None = None):
        self.config, self.plan, self.device = config, plan, device
        self.summaries: dict[str, dict] = {}

    def folder(self, stage: Stage) -> Path:
        return self.plan.folder(stage)

    def execute(self, stage: Stage) -> dict[str, Any]:
        """Run ``stage`` unless its folder holds a finished run of the same settings; its summary row. An error
        about a setting names it as the stage's table has it (``[twin] cael_every``)."""
        from jtcse.training.run_dir import finished_run, finished_summary

        folder = self.folder(stage)
        started = time.perf_counter()
        try:
            if stage.record is None:  # the trainer judges its folder: the same finished run is returned as it is
                before = finished_summary(folder)
                summary = stage.run(self, folder)
                done = before is not None and before == summary
            else:
                record = stage.record(self)
                summary = finished_run(folder, record, model=stage.evaluated, rerun=stage.rerun)
                done = summary is not None
                if not done:
                    folder.mkdir(parents=True, exist_ok=True)
                    summary = {"stage": stage.name, **stage.run(self, folder), "config": record}
                    atomic_write_json(folder / "run_summary.json", summary)
        except SettingError as err:
            raise stage_error(err, stage.trains_with or stage.table) from None
        self.summaries[stage.name] = summary
        seconds = 0.0 if done else round(time.perf_counter() - started, 2)
        status = "skipped (done)" if done else "ran"
        return {"stage": stage.name, "output": str(folder), "status": status, "seconds": seconds, "summary": summary}


@locks_output("output_dir")  # one pipeline per folder; each stage's trainer also locks its own folder
def run_pipeline(
    output_dir: str | Path,
    config: PipelineConfig | None = None,
    *,
    device: str | None = None,
    recipe: dict | None = None,
) -> dict:
    """Run (or finish) the pipeline of ``config`` (default: every default) in ``output_dir``, each stage of its plan
    in turn up to ``config.until``, on ``device`` (``None``: the best here); every check that needs no training
    comes first (:func:`~jtcse.pipeline.plan.make_plan`). ``recipe``: where the settings came from
    (``jtcse pipeline --recipe``), recorded as it is. Returns the summary, also written as
    ``pipeline_summary.json`` and ``.md``."""
    from jtcse.pipeline.report import format_table, summary_table

    config = config or PipelineConfig()
    run = PipelineRun(config, make_plan(config, output_dir, device), device)
    run.plan.output_dir.mkdir(parents=True, exist_ok=True)
    rows = [run.execute(stage) for stage in run.plan.stages]
    table = summary_table(rows, run.plan.starting, run.summaries.get(EVAL.name, {}))
    result = {
        "output_dir": str(run.plan.output_dir),
        "until": config.until,
        "config": config.values(),
        **({"recipe": recipe} if recipe is not None else {}),
        "table": table,
        "stages": {row["stage"]: row["summary"] for row in rows},
    }
    atomic_write_json(run.plan.output_dir / "pipeline_summary.json", result)
    atomic_write_text(run.plan.output_dir / "pipeline_summary.md", format_table(table))
    return result
