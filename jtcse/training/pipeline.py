"""The whole JTCSE recipe, resumable: warm up two towers → train the twin → (ensemble it with other models)
→ distil into the model you started from → evaluate every model against that starting model.

Each stage writes into its own folder under the pipeline's output directory and, once it has finished,
a ``stage_done.json`` there; a rerun skips every stage that has one (and a stage that was interrupted
resumes from its own trainer checkpoints). A finished stage asked to run again with other settings is an
error rather than a silent skip. The last stage scores every model, and the starting model with its own
pooling (the row to beat), on an STS-B-format dev file; one table sums up the run (``pipeline_summary.json``
/ ``pipeline_summary.md``).

Stages and folders:

=========  ==============  ==========================================================================
stage      folder          what
=========  ==============  ==========================================================================
warmup_a   ``tower_a/``    SimCSE on tower I (positives from ``pairs_a`` when given)
warmup_b   ``tower_b/``    SimCSE on tower II (``pairs_b``; another seed), so the towers differ
twin       ``twin/``       JTCSE twin training on the two warmed-up towers
ensemble   ``ensemble/``   only with ``ensemble_with``: the twin + those models in one checkpoint (JTCSE+UC)
distill    ``distilled/``  the ensemble (else the twin) teaches the student: by default the model tower I
                           started from, with its own pooling (UCD; JTCSE-D for a twin teacher)
eval       ``eval/``       dev Spearman of every model above and of the starting model(s)
=========  ==============  ==========================================================================
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from jtcse.errors import JTCSEError
from jtcse.locking import atomic_write_json, locks_output

STAGES = ("warmup_a", "warmup_b", "twin", "ensemble", "distill", "eval")
FOLDERS = {"warmup_a": "tower_a", "warmup_b": "tower_b", "twin": "twin", "ensemble": "ensemble", "distill": "distilled",
           "eval": "eval"}
PLAN_KEY = "pipeline_plan"
"""Key of a finished stage's marker holding the settings it ran with, compared on rerun."""
STAGE_DONE = "stage_done.json"


def _stage_done(folder: Path) -> dict[str, Any] | None:
    """The stage's summary when it has finished: its marker, or a finished trainer run without one
    (a crash between saving the model and writing the marker)."""
    from jtcse.training.run_dir import RUN_SUMMARY_NAME, is_finished

    for marker in (folder / STAGE_DONE, folder / RUN_SUMMARY_NAME):
        if marker.is_file() and (marker.name == STAGE_DONE or is_finished(folder)):
            return json.loads(marker.read_text(encoding="utf-8"))
    return None


def _mark_done(folder: Path, summary: dict[str, Any]) -> None:
    atomic_write_json(folder / STAGE_DONE, summary)


def run_once(
    folder: str | Path,
    run: Callable[[], dict[str, Any]],
    plan: dict[str, Any] | None = None,
    *,
    rerun_if_changed: bool = False,
) -> dict[str, Any]:
    """Run one stage into ``folder`` unless it has finished there before; mark it done.

    ``run`` trains (through :func:`jtcse.training.stage.run_stage`, which resumes an interrupted run
    from its checkpoints) and returns the stage summary. ``plan``: the stage's settings (JSON-able); a stage
    that finished with another plan is an error, not a skip (or, ``rerun_if_changed``, for a stage that
    only reads other stages' models, run again). Returns ``{"output", "status", "seconds",
    "summary"}`` with status ``ran`` or ``skipped (done)``.
    """
    folder = Path(folder)
    plan = json.loads(json.dumps(plan, default=str)) if plan is not None else None
    done = _stage_done(folder)
    changed_plan = done is not None and plan is not None and done.get(PLAN_KEY, plan) != plan
    if changed_plan and rerun_if_changed:
        done = None
    if done is not None:
        recorded = done.get(PLAN_KEY)
        if changed_plan:
            changed = sorted(k for k in set(plan) | set(recorded) if plan.get(k) != recorded.get(k))
            raise JTCSEError(
                f"{folder} finished with other settings ({', '.join(changed)} differ); remove that folder to "
                "run the stage again, or use another -o/--output."
            )
        return {"output": str(folder), "status": "skipped (done)", "seconds": 0.0, "summary": done}
    start = time.perf_counter()
    summary = run()
    seconds = round(time.perf_counter() - start, 2)
    folder.mkdir(parents=True, exist_ok=True)
    if plan is not None:
        summary = {**summary, PLAN_KEY: plan}
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
    ensemble_with: Sequence[str] = (),
    ensemble_weights: Sequence[float] | None = None,
    ensemble_combine: str = "concat",
    student: str | None = None,
    student_pooling: str | None = None,
) -> dict[str, Any]:
    """Run (or finish) the pipeline in ``output_dir`` up to and including stage ``until``.

    ``tower_a`` / ``tower_b``: starting encoders (``None``: the embedded MiniLM). ``corpus``: one sentence a
    line (``None``: embedded prose). ``*_settings`` are passed to :func:`~jtcse.training.simcse.train_simcse`,
    :func:`~jtcse.training.twin.train_twin` and :func:`~jtcse.training.distill.distill` (e.g.
    ``{"max_steps": 100, "learning_rate": 3e-5}``; ``cael_every`` and the loss weights for the twin,
    ``objective`` for the distillation). ``ensemble_with``: models joined to the trained twin in an ensemble
    stage (weights: the twin's first, then one per model; ``None``: all 1), which then teaches the student.
    ``student``: the distillation student (``None``: ``tower_a``, i.e. the model tower I started from), kept with
    its own pooling unless ``student_pooling`` says otherwise.
    Returns the summary (also written as ``pipeline_summary.json`` and ``.md``).
    """
    from jtcse.modeling.loading import describe_source
    from jtcse.training.distill import distill
    from jtcse.training.simcse import train_simcse

    stages = [stage for stage in STAGES if stage != "ensemble" or ensemble_with]
    if until not in stages and until != "warmup":
        hint = " (the ensemble stage needs --ensemble-with)" if until == "ensemble" else ""
        raise JTCSEError(f"--until must be one of warmup, {', '.join(stages)} (got {until!r}){hint}.")
    stages = stages[: stages.index("warmup_b" if until == "warmup" else until) + 1]
    if "eval" in stages and dev_file is None:
        raise JTCSEError("the eval stage needs --dev-file (an STS-B-format file); or stop earlier with --until.")
    if dev_file is not None and not Path(dev_file).is_file():
        raise JTCSEError(f"dev file not found: {dev_file}")
    if ensemble_with:
        from jtcse.modeling.ensemble import check_combine, check_weights

        check_weights(ensemble_weights, 1 + len(ensemble_with))  # both before any training: the ensemble comes late
        check_combine(ensemble_combine)
    elif ensemble_weights is not None:
        raise JTCSEError("ensemble weights were given without models to ensemble with (--ensemble-with).")
    output_dir = Path(output_dir)
    output_dir.mkdir(parents=True, exist_ok=True)
    folders = {stage: output_dir / name for stage, name in FOLDERS.items()}
    corpus_arg = str(corpus) if corpus is not None else None
    warmup = {"dev_file": dev_file, **(warmup_settings or {})}
    twin_kwargs = {"seed": seed, "dev_file": dev_file, **(twin_settings or {})}
    distill_kwargs = {"seed": seed, "dev_file": dev_file, "student_pooling": student_pooling, **(distill_settings or {})}
    student_source = student if student is not None else tower_a
    teacher = folders["ensemble"] if ensemble_with else folders["twin"]
    starting = _starting_models(tower_a, tower_b, student_source)
    ensemble_plan = {"members": [str(folders["twin"]), *map(str, ensemble_with)], "weights": ensemble_weights,
                     "combine": ensemble_combine}
    plans = {
        "warmup_a": {"model": describe_source(tower_a), "corpus": corpus_arg, "pairs": pairs_a, "seed": seed, **warmup},
        "warmup_b": {"model": describe_source(tower_b), "corpus": corpus_arg, "pairs": pairs_b, "seed": seed + 1, **warmup},
        "twin": {"corpus": corpus_arg, **twin_kwargs},
        "ensemble": ensemble_plan,
        "distill": {"teacher": str(teacher), "student": describe_source(student_source), "corpus": corpus_arg, **distill_kwargs},
        "eval": {"dev_file": str(dev_file), "models": [s for s in stages if s != "eval"],
                 "starting": [describe_source(m) for m in starting.values()]},
    }

    def run_warmup_a() -> dict:
        return train_simcse(tower_a, corpus_arg, folders["warmup_a"], pairs_file=pairs_a, seed=seed, **warmup)

    def run_warmup_b() -> dict:
        return train_simcse(tower_b, corpus_arg, folders["warmup_b"], pairs_file=pairs_b, seed=seed + 1, **warmup)

    def run_twin() -> dict:
        from jtcse.training.twin import train_twin

        return train_twin(
            str(folders["warmup_a"]), str(folders["warmup_b"]), corpus_arg, str(folders["twin"]), resume=True,
            **twin_kwargs,
        )

    def run_ensemble() -> dict:
        from jtcse.training.ensemble import save_ensemble

        # an ensemble folder without a stage marker is left from an interrupted save: replaced
        model = save_ensemble(
            ensemble_plan["members"], folders["ensemble"], combine=ensemble_combine, weights=ensemble_weights,
            overwrite=True,
        )
        return {"stage": "ensemble", **ensemble_plan, "weights": model[0].weights,
                "dimension": model.get_embedding_dimension()}

    def run_distill() -> dict:
        return distill(str(teacher), student_source, corpus_arg, folders["distill"], **distill_kwargs)

    def run_eval() -> dict:
        return {"dev_file": str(dev_file), "dev_spearman": _dev_scores(dev_file, folders, stages, starting)}

    runners = {
        "warmup_a": run_warmup_a,
        "warmup_b": run_warmup_b,
        "twin": run_twin,
        "ensemble": run_ensemble,
        "distill": run_distill,
        "eval": run_eval,
    }
    rows = [
        {"stage": stage, **run_once(folders[stage], runners[stage], plans[stage], rerun_if_changed=stage == "eval")}
        for stage in stages
    ]

    eval_scores = next((row["summary"]["dev_spearman"] for row in rows if row["stage"] == "eval"), {})
    table = [
        {"stage": label, "status": "starting model (its own pooling)", "seconds": 0.0,
         "output": describe_source(model), "dev_spearman": eval_scores.get(label)}
        for label, model in starting.items()
        if label in eval_scores
    ]
    table += [
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


def _starting_models(tower_a, tower_b, student) -> dict[str, Any]:
    """``{row label: model}`` of the distinct models the run started from: ``start`` is tower I's (the row to
    beat), then tower II's and the student's when they are other models (``None``: the embedded MiniLM)."""
    from jtcse.modeling.loading import describe_source

    out: dict[str, Any] = {}
    for label, model in (("start", tower_a), ("start_b", tower_b), ("start_student", student)):
        if describe_source(model) not in map(describe_source, out.values()):
            out[label] = model
    return out


def _dev_scores(dev_file, folders: dict[str, Path], stages: list[str], starting: dict[str, Any]) -> dict[str, float]:
    """Dev Spearman of each starting model as it is (its own pooling) and of every model the stages built."""
    from jtcse.evaluation.sts import cosine_spearman, read_stsb_file
    from jtcse.modeling.loading import load_model

    pairs = read_stsb_file(dev_file)
    scores = {}
    for label, model in starting.items():
        scores[label] = cosine_spearman(load_model(model, role="encode"), pairs)
    for stage in stages:
        if stage != "eval":
            scores[stage] = cosine_spearman(load_model(folders[stage], role="encode"), pairs)
    return scores


def format_table(table: list[dict[str, Any]]) -> str:
    """The summary table as Markdown (dev Spearman ×100, as papers report it; Δ against the ``start`` row)."""
    base = next((row["dev_spearman"] for row in table if row["stage"] == "start"), None)
    lines = [
        "| stage | status | seconds | dev Spearman ×100 | Δ vs start | output |",
        "| --- | --- | ---: | ---: | ---: | --- |",
    ]
    for row in table:
        score = row["dev_spearman"]
        scored = isinstance(score, (int, float))
        shown = f"{100 * score:.2f}" if scored else "–"
        delta = f"{100 * (score - base):+.2f}" if scored and isinstance(base, (int, float)) and row["stage"] != "start" else "–"
        lines.append(f"| {row['stage']} | {row['status']} | {row['seconds']:.1f} | {shown} | {delta} | {row['output']} |")
    return "\n".join(lines) + "\n"
