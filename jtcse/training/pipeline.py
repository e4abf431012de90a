"""The whole JTCSE recipe, resumable: warm up two towers → train the twin → distil it → evaluate.

Each stage writes into its own folder under the pipeline's output directory and, once it has finished,
a ``stage_done.json`` there; a rerun skips every stage that has one (and a stage that was interrupted
resumes from its own trainer checkpoints). The last stage scores every model on an STS-B-format dev file
and one table sums up the run (``pipeline_summary.json`` / ``pipeline_summary.md``).

Stages and folders:

=========  ==============  ==========================================================================
stage      folder          what
=========  ==============  ==========================================================================
warmup_a   ``tower_a/``    SimCSE on tower I (positives from ``pairs_a`` when given)
warmup_b   ``tower_b/``    SimCSE on tower II (``pairs_b``; another seed), so the towers differ
twin       ``twin/``       JTCSE twin training on the two warmed-up towers
distill    ``distilled/``  tower I's warm-up initialises the student; the twin teaches it (MSE)
eval       ``eval/``       dev Spearman of every model built above
=========  ==============  ==========================================================================
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from jtcse.errors import JTCSEError
from jtcse.locking import locks_output

STAGES = ("warmup_a", "warmup_b", "twin", "distill", "eval")
STAGE_DONE = "stage_done.json"


def _stage_done(folder: Path) -> dict[str, Any] | None:
    """The stage's summary when it has finished: its marker, or a finished trainer run without one
    (a crash between saving the model and writing the marker)."""
    from jtcse.training.common import RUN_SUMMARY_NAME, is_finished

    for marker in (folder / STAGE_DONE, folder / RUN_SUMMARY_NAME):
        if marker.is_file() and (marker.name == STAGE_DONE or is_finished(folder)):
            return json.loads(marker.read_text(encoding="utf-8"))
    return None


def _mark_done(folder: Path, summary: dict[str, Any]) -> None:
    tmp = folder / (STAGE_DONE + ".tmp")
    tmp.write_text(json.dumps(summary, indent=2, default=str), encoding="utf-8")
    tmp.replace(folder / STAGE_DONE)


def run_once(folder: str | Path, run: Callable[[], dict[str, Any]]) -> dict[str, Any]:
    """Run one stage into ``folder`` unless it has finished there before; mark it done.

    ``run`` trains (through :func:`jtcse.training.stage.run_stage`, which resumes an interrupted run
    from its checkpoints) and returns the stage summary. Returns ``{"output", "status", "seconds",
    "summary"}`` with status ``ran`` or ``skipped (done)``.
    """
    folder = Path(folder)
    done = _stage_done(folder)
    if done is not None:
        return {"output": str(folder), "status": "skipped (done)", "seconds": 0.0, "summary": done}
    start = time.perf_counter()
    summary = run()
    seconds = round(time.perf_counter() - start, 2)
    folder.mkdir(parents=True, exist_ok=True)
    _mark_done(folder, summary)
    return {"output": str(folder), "status": "ran", "seconds": seconds, "summary": summary}


@locks_output("output_dir")  # one pipeline per folder; each stage's trainer also locks its own folder
def run_pipeline(
    output_dir: str | Path,
    *,
    tower_a: str | None = None,
    tower_b: str | None = None,
    corpus: str | Path | None = None,
    pairs_a: str | Path | None = None,
    pairs_b: str | Path | None = None,
    dev_file: str | Path | None = None,
    until: str = "eval",
    seed: int = 42,
    warmup_settings: dict[str, Any] | None = None,
    twin_settings: dict[str, Any] | None = None,
    distill_settings: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """Run (or finish) the pipeline in ``output_dir`` up to and including stage ``until``.

    ``tower_a`` / ``tower_b``: starting encoders (``None``: the embedded MiniLM). ``corpus``: one sentence a
    line (``None``: embedded prose). ``*_settings`` are passed to :func:`~jtcse.training.simcse.train_simcse`,
    ``train_twin`` and :func:`~jtcse.training.distill.distill` (e.g. ``{"max_steps": 100}``); the student
    is warmed-up tower I unless ``distill_settings["student"]`` names another.
    Returns the summary (also written as ``pipeline_summary.json`` and ``.md``).
    """
    from jtcse.training.distill import distill
    from jtcse.training.simcse import train_simcse

    if until not in STAGES and until != "warmup":
        raise JTCSEError(f"--until must be one of warmup, {', '.join(STAGES)} (got {until!r}).")
    last = STAGES.index("warmup_b" if until == "warmup" else until)
    if "eval" in STAGES[: last + 1] and dev_file is None:
        raise JTCSEError("the eval stage needs --dev-file (an STS-B-format file); or stop earlier with --until.")
    if dev_file is not None and not Path(dev_file).is_file():
        raise JTCSEError(f"dev file not found: {dev_file}")
    output_dir = Path(output_dir)
    output_dir.mkdir(parents=True, exist_ok=True)
    folders = {
        "warmup_a": output_dir / "tower_a",
        "warmup_b": output_dir / "tower_b",
        "twin": output_dir / "twin",
        "distill": output_dir / "distilled",
        "eval": output_dir / "eval",
    }
    corpus_arg = str(corpus) if corpus is not None else None
    warmup = {"dev_file": dev_file, **(warmup_settings or {})}

    def run_warmup_a() -> dict:
        return train_simcse(tower_a, corpus_arg, folders["warmup_a"], pairs_file=pairs_a, seed=seed, **warmup)

    def run_warmup_b() -> dict:
        return train_simcse(tower_b, corpus_arg, folders["warmup_b"], pairs_file=pairs_b, seed=seed + 1, **warmup)

    def run_twin() -> dict:
        from jtcse.training.twin import train_twin

        return train_twin(
            str(folders["warmup_a"]),
            str(folders["warmup_b"]),
            corpus_arg,
            str(folders["twin"]),
            seed=seed,
            dev_file=dev_file,
            resume=True,
            **(twin_settings or {}),
        )

    def run_distill() -> dict:
        settings = dict(distill_settings or {})
        student = settings.pop("student", str(folders["warmup_a"]))
        return distill(
            str(folders["twin"]), student, corpus_arg, folders["distill"], seed=seed, dev_file=dev_file, **settings
        )

    def run_eval() -> dict:
        from jtcse.evaluation.sts import cosine_spearman, read_stsb_file
        from jtcse.modeling.loading import load_model as load_sentence_transformer

        pairs = read_stsb_file(dev_file)
        folders["eval"].mkdir(parents=True, exist_ok=True)
        scores = {}
        for stage in ("warmup_a", "warmup_b", "twin", "distill"):
            scores[stage] = cosine_spearman(load_sentence_transformer(folders[stage], role="encode"), pairs)
        return {"dev_file": str(dev_file), "dev_spearman": scores}

    runners = {
        "warmup_a": run_warmup_a,
        "warmup_b": run_warmup_b,
        "twin": run_twin,
        "distill": run_distill,
        "eval": run_eval,
    }
    rows = [{"stage": stage, **run_once(folders[stage], runners[stage])} for stage in STAGES[: last + 1]]

    eval_scores = next((row["summary"]["dev_spearman"] for row in rows if row["stage"] == "eval"), {})
    table = [
        {
            "stage": row["stage"],
            "status": row["status"],
            "seconds": row["seconds"],
            "output": row["output"],
            "dev_spearman": eval_scores.get(row["stage"], row["summary"].get("final_dev_spearman")),
        }
        for row in rows
    ]
    result = {
        "output_dir": str(output_dir),
        "until": until,
        "table": table,
        "stages": {row["stage"]: row["summary"] for row in rows},
    }
    (output_dir / "pipeline_summary.json").write_text(json.dumps(result, indent=2, default=str), encoding="utf-8")
    (output_dir / "pipeline_summary.md").write_text(format_table(table), encoding="utf-8")
    return result


def format_table(table: list[dict[str, Any]]) -> str:
    """The summary table as Markdown (dev Spearman ×100, as papers report it)."""
    lines = ["| stage | status | seconds | dev Spearman ×100 | output |", "| --- | --- | ---: | ---: | --- |"]
    for row in table:
        score = row["dev_spearman"]
        shown = f"{100 * score:.2f}" if isinstance(score, (int, float)) else "–"
        lines.append(f"| {row['stage']} | {row['status']} | {row['seconds']:.1f} | {shown} | {row['output']} |")
    return "\n".join(lines) + "\n"
