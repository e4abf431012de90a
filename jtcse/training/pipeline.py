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
warmup_a   ``tower_a/``    SimCSE on tower I (positives from ``pairs_a`` when given), its own pooling kept
warmup_b   ``tower_b/``    SimCSE on tower II (``pairs_b``; another seed), so the towers differ
probe      ``probe/``      with a twin and ``selection_file``: short twins at each of ``probe_learning_rates``,
                           scored on that file; the best learning rate trains the twin
twin       ``twin/``       JTCSE twin training on the two warmed-up towers (by default not for a sentence-
                           transformers start, whose ensemble holds the warm-ups instead)
ensemble   ``ensemble/``   the twin (else the two warm-ups) + the starting model (on by default when that is a
                           sentence-transformers model) and/or ``ensemble_with``, in one checkpoint (UC)
distill    ``distilled/``  the ensemble (else the twin) teaches the student: by default the model tower I
                           started from, with its own pooling (UCD; JTCSE-D for a twin teacher)
eval       ``eval/``       dev Spearman (all pairs and per genre) of every model above and of the starting model(s)
=========  ==============  ==========================================================================

Defaults (:mod:`jtcse.training.pipeline_settings`: each stage's is its trainer's preset, the ensemble's weights,
the probe's learning rates) are the CPU recipe measured in ``evaluation/DEFAULTS.md`` (``scripts/repro_default.py``);
each stage's settings given by the caller go on top. The paper's recipes are in ``models/``. The dev file is only
reported: every trainer keeps its last step, and what is chosen (the probe's learning rate, the ensemble's
weights) is chosen on the selection file (:mod:`jtcse.training.selection`).
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict
from pathlib import Path
from typing import Any

from jtcse.errors import JTCSEError
from jtcse.locking import atomic_write_json, locks_output
from jtcse.training.distill import distill
from jtcse.training.pipeline_report import dev_scores, format_table, starting_models
from jtcse.training.pipeline_settings import ENSEMBLE_WEIGHTS, PROBE_LEARNING_RATES, PROBE_STEPS, check_settings
from jtcse.training.selection import choose_weights, selection_pairs
from jtcse.training.simcse import train_simcse
from jtcse.training.stage import training_device
from jtcse.training.twin import train_twin

logger = logging.getLogger(__name__)

STAGES = ("warmup_a", "warmup_b", "probe", "twin", "ensemble", "distill", "eval")
FOLDERS = {
    "warmup_a": "tower_a",
    "warmup_b": "tower_b",
    "probe": "probe",
    "twin": "twin",
    "ensemble": "ensemble",
    "distill": "distilled",
    "eval": "eval",
}
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


def is_sentence_encoder(source) -> bool:
    """Whether ``source`` (``None``: the embedded MiniLM) is a pre-trained sentence encoder, i.e. a
    sentence-transformers checkpoint with its own modules, rather than a plain ``transformers`` model."""
    from jtcse.modeling.loading import has_own_modules, resolve_source

    return has_own_modules(resolve_source(source))


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
    pooling: str | None = None,
    warmup_settings: dict[str, Any] | None = None,
    twin_settings: dict[str, Any] | None = None,
    distill_settings: dict[str, Any] | None = None,
    twin: bool | None = None,
    ensemble: bool | None = None,
    ensemble_with: Sequence[str] = (),
    ensemble_weights: Sequence[float] | None = None,
    ensemble_combine: str = "concat",
    selection_file: str | Path | None = None,
    probe_learning_rates: Sequence[float] = PROBE_LEARNING_RATES,
    probe_steps: int = PROBE_STEPS,
    student: str | None = None,
    student_pooling: str | None = None,
    device: str | None = None,
    recipe: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """Run (or finish) the pipeline in ``output_dir`` up to and including stage ``until``.

    ``tower_a`` / ``tower_b``: starting encoders (``None``: the embedded MiniLM). ``corpus``: one sentence a
    line (``None``: embedded prose). ``pooling`` (``cls`` | ``mean``; ``None``: the starting model's own, CLS
    for a plain ``transformers`` model) is kept by the warm-ups and used by the twin. ``*_settings`` go to
    :func:`~jtcse.training.simcse.train_simcse`, :func:`~jtcse.training.twin.train_twin` and
    :func:`~jtcse.training.distill.distill` on top of the trainers' presets
    (:data:`~jtcse.training.pipeline_settings.STAGE_DEFAULTS`), e.g. ``{"max_steps": 100}`` (``cael_every`` and
    the loss weights for the twin, ``objective`` for the distillation);
    every stage's settings are checked, with ``device`` and each stage's precision
    (:func:`~jtcse.training.stage.training_device`), before the first stage runs.
    ``dev_file`` is only reported (the eval stage): the trainers keep their last step.

    ``twin``: train the JTCSE twin on the two warm-ups. ``None``: off when the start is a pre-trained sentence
    encoder (:func:`is_sentence_encoder`) that joins the ensemble, which then holds the two warm-ups instead
    (on a pre-trained encoder the twin stage measured no better than the warm-ups it starts from,
    ``evaluation/DEFAULTS.md``); on otherwise (the paper's recipe for BERT/RoBERTa, and JTCSE-D).
    ``ensemble``: put the starting model (``tower_a``) in the ensemble that teaches the student (UCD); ``None``:
    on for a sentence-encoder start unless ``ensemble_with`` names the members. The ensemble holds the twin (or,
    without a twin, the two warm-ups), then the start, then ``ensemble_with``; ``ensemble=False`` with
    ``ensemble_with`` is an error. Without a twin there is always an ensemble (the warm-ups at least).
    ``ensemble_weights``: one per member in that order; ``None``: chosen on ``selection_file`` when given
    (:func:`~jtcse.training.selection.choose_weights`), else :data:`ENSEMBLE_WEIGHTS` for the default members,
    else all 1.
    ``selection_file``: an STS-B-format labelled file (e.g. STS-B train), checked against ``dev_file``
    (:func:`~jtcse.training.selection.selection_pairs`); with a twin, a probe stage trains one for ``probe_steps``
    at each of ``probe_learning_rates`` and the best on this file trains the twin (not with a twin
    ``learning_rate`` given); with an ensemble of the start, the weights are chosen on it.
    ``student``: the distillation student (``None``: ``tower_a``, i.e. the model tower I started from), kept
    with its own pooling unless ``student_pooling`` says otherwise. ``device``: where every stage trains and
    evaluates (``None``: the best device here). ``recipe``: where the settings came from (``jtcse pipeline
    --recipe``: the file, its sha256 and the options given on top), recorded in the summary as it is.
    Returns the summary (also written as ``pipeline_summary.json`` and ``.md``).
    """
    from jtcse.modeling.loading import describe_source

    settings = check_settings(
        until=until, pooling=pooling, warmup_settings=warmup_settings, twin_settings=twin_settings,
        distill_settings=distill_settings, twin=twin, ensemble=ensemble, ensemble_with=ensemble_with,
        probe_learning_rates=probe_learning_rates, probe_steps=probe_steps, selection_file=selection_file,
        student_pooling=student_pooling,
    )  # fmt: skip
    for stage_training, _ in settings.values():  # a device or precision this machine lacks: before any stage runs
        training_device(device, stage_training.precision)
    encoder_start = is_sentence_encoder(tower_a)
    if ensemble is None:  # the default: the start joins, unless the caller named the members
        ensemble = not ensemble_with and encoder_start
    if twin is None:  # the measured default: a sentence-encoder start in the ensemble takes the twin's place
        twin = not (encoder_start and ensemble)
    if selection_file is not None and twin and (twin_settings or {}).get("learning_rate") is not None:
        raise JTCSEError("a twin learning rate was given and a selection file to probe for one; give one of them.")
    output_dir = Path(output_dir)
    folders = {stage: output_dir / name for stage, name in FOLDERS.items()}
    trained = [folders["twin"]] if twin else [folders["warmup_a"], folders["warmup_b"]]
    extra = ([tower_a] if ensemble else []) + list(ensemble_with)  # the start, then the named models
    members = [*map(str, trained), *map(describe_source, extra)] if (extra or not twin) else []
    choose = bool(ensemble) and ensemble_weights is None and selection_file is not None
    if ensemble and not ensemble_with and ensemble_weights is None and not choose:
        ensemble_weights = list(ENSEMBLE_WEIGHTS["twin" if twin else "warmups"])

    skip = set() if members else {"ensemble"}
    if not twin:
        skip |= {"probe", "twin"}
    elif selection_file is None:
        skip.add("probe")
    stages = [stage for stage in STAGES if stage not in skip]
    if until not in stages and until != "warmup":
        hint = (
            " (the ensemble stage needs --ensemble-with or a sentence-transformers start)"
            if until == "ensemble"
            else ""
        )
        raise JTCSEError(
            f"--until must be one of warmup, {', '.join(s for s in stages if s != 'probe')} (got {until!r}){hint}."
        )
    stages = stages[: stages.index("warmup_b" if until == "warmup" else until) + 1]
    if "eval" in stages and dev_file is None:
        raise JTCSEError("the eval stage needs --dev-file (an STS-B-format file); or stop earlier with --until.")
    if dev_file is not None and not Path(dev_file).is_file():
        raise JTCSEError(f"dev file not found: {dev_file}")
    chosen_on = selection_pairs(selection_file, dev_file) if selection_file is not None else None
    if members:
        from jtcse.modeling.ensemble import check_combine, check_weights

        check_weights(ensemble_weights, len(members))  # both before any training: the ensemble comes late
        check_combine(ensemble_combine)
    elif ensemble_weights is not None:
        raise JTCSEError("ensemble weights were given without models to ensemble with (--ensemble-with).")
    output_dir.mkdir(parents=True, exist_ok=True)
    corpus_arg = str(corpus) if corpus is not None else None
    (warmup_training, warmup_extra), (twin_training, twin_extra), (distill_training, distill_extra) = settings.values()
    # no dev_file for the trainers: they keep their last step, the dev file is reported by the eval stage only
    warmup = {"pooling": pooling, "device": device, **warmup_extra}
    twin_kwargs = {"pooling": pooling, "device": device, **twin_extra}
    distill_kwargs = {"student_pooling": student_pooling, "device": device, **distill_extra}
    # what a finished stage is compared on (the device is not: a run may finish elsewhere)
    recorded = {
        name: {**{k: v for k, v in kwargs.items() if k != "device"}, **asdict(training)}
        for name, kwargs, training in (
            ("warmup", warmup, warmup_training),
            ("twin", twin_kwargs, twin_training),
            ("distill", distill_kwargs, distill_training),
        )
    }
    student_source = student if student is not None else tower_a
    teacher = folders["ensemble"] if members else folders["twin"]
    starting = starting_models(tower_a, tower_b, student_source)
    ensemble_plan = {
        "members": members,
        "weights": ensemble_weights,
        "combine": ensemble_combine,
        "selection_file": str(selection_file) if choose else None,
    }
    probe_plan = {
        "selection_file": str(selection_file),
        "learning_rates": list(probe_learning_rates),
        "steps": probe_steps,
        "corpus": corpus_arg,
        **{k: v for k, v in recorded["twin"].items() if k != "learning_rate"},
        "seed": seed,
    }
    plans = {
        "warmup_a": {
            "model": describe_source(tower_a),
            "corpus": corpus_arg,
            "pairs": pairs_a,
            **recorded["warmup"],
            "seed": seed,
        },
        "warmup_b": {
            "model": describe_source(tower_b),
            "corpus": corpus_arg,
            "pairs": pairs_b,
            **recorded["warmup"],
            "seed": seed + 1,
        },
        "probe": probe_plan,
        "twin": {"corpus": corpus_arg, **recorded["twin"], "seed": seed},
        "ensemble": ensemble_plan,
        "distill": {
            "teacher": str(teacher),
            "student": describe_source(student_source),
            "corpus": corpus_arg,
            **recorded["distill"],
            "seed": seed,
        },
        "eval": {
            "dev_file": str(dev_file),
            "models": [s for s in stages if s != "eval"],
            "starting": [describe_source(m) for m in starting.values()],
        },
    }

    def run_warmup_a() -> dict:
        return train_simcse(
            tower_a, corpus_arg, folders["warmup_a"], pairs_file=pairs_a, settings=warmup_training, seed=seed, **warmup
        )

    def run_warmup_b() -> dict:
        return train_simcse(
            tower_b,
            corpus_arg,
            folders["warmup_b"],
            pairs_file=pairs_b,
            settings=warmup_training,
            seed=seed + 1,
            **warmup,
        )

    def train_twin_into(folder: Path, **overrides) -> dict:
        return train_twin(
            str(folders["warmup_a"]),
            str(folders["warmup_b"]),
            corpus_arg,
            str(folder),
            resume=True,
            settings=twin_training,
            seed=seed,
            **{**twin_kwargs, **overrides},
        )

    def run_probe() -> dict:
        from jtcse.evaluation.sts import cosine_spearman
        from jtcse.modeling.loading import load_model

        pairs = chosen_on
        scores = {}
        for lr in probe_learning_rates:
            folder = folders["probe"] / f"lr_{lr:g}"
            train_twin_into(folder, learning_rate=lr, max_steps=probe_steps, plot=False)
            scores[f"{lr:g}"] = cosine_spearman(load_model(folder, role="encode", device=device), pairs)
        best = max(probe_learning_rates, key=lambda lr: scores[f"{lr:g}"])
        return {
            "stage": "probe",
            "selection_file": str(selection_file),
            "selection_spearman": scores,
            "learning_rate": best,
            "steps": probe_steps,
        }

    def run_twin() -> dict:
        probed = rows_by_stage.get("probe")
        overrides = {"learning_rate": probed["summary"]["learning_rate"]} if probed else {}
        return train_twin_into(folders["twin"], **overrides)

    def run_ensemble() -> dict:
        from jtcse.modeling.loading import resolve_source
        from jtcse.training.ensemble import save_ensemble

        sources = [*map(str, trained), *(str(resolve_source(m)) for m in extra)]
        weights, scores = ensemble_weights, None
        if choose:  # the start at 1, the trained members at the one weight best on the selection file
            weights, scores = choose_weights(sources, len(trained), chosen_on, device=device)
        # an ensemble folder without a stage marker is left from an interrupted save: replaced
        model = save_ensemble(sources, folders["ensemble"], combine=ensemble_combine, weights=weights, overwrite=True)
        return {
            "stage": "ensemble",
            **ensemble_plan,
            "weights": model[0].weights,
            "selection_spearman": {f"{w:g}": v for w, v in scores.items()} if scores else None,
            "dimension": model.get_embedding_dimension(),
        }

    def run_distill() -> dict:
        return distill(
            str(teacher),
            student_source,
            corpus_arg,
            folders["distill"],
            settings=distill_training,
            seed=seed,
            **distill_kwargs,
        )

    def run_eval() -> dict:
        from jtcse.evaluation.sts import ALL_GENRES

        genres = dev_scores(dev_file, folders, stages, starting, device)
        return {
            "dev_file": str(dev_file),
            "dev_spearman": {label: g[ALL_GENRES] for label, g in genres.items()},
            "dev_spearman_by_genre": {
                label: {k: v for k, v in g.items() if k != ALL_GENRES} for label, g in genres.items()
            },
        }

    runners = {
        "warmup_a": run_warmup_a,
        "warmup_b": run_warmup_b,
        "probe": run_probe,
        "twin": run_twin,
        "ensemble": run_ensemble,
        "distill": run_distill,
        "eval": run_eval,
    }
    rows_by_stage: dict[str, dict[str, Any]] = {}
    for stage in stages:
        plan = plans[stage]
        if stage == "twin" and "probe" in rows_by_stage:
            plan = {**plan, "learning_rate": rows_by_stage["probe"]["summary"]["learning_rate"]}
        rows_by_stage[stage] = {
            "stage": stage,
            **run_once(folders[stage], runners[stage], plan, rerun_if_changed=stage == "eval"),
        }
    rows = list(rows_by_stage.values())

    evaluated = next((row["summary"] for row in rows if row["stage"] == "eval"), {})
    eval_scores = evaluated.get("dev_spearman", {})
    eval_genres = evaluated.get("dev_spearman_by_genre", {})
    table = [
        {
            "stage": label,
            "status": "starting model (its own pooling)",
            "seconds": 0.0,
            "output": describe_source(model),
            "dev_spearman": eval_scores.get(label),
            "dev_genres": eval_genres.get(label),
        }
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
            "dev_genres": eval_genres.get(row["stage"]),
        }
        for row in rows
    ]
    result = {
        "output_dir": str(output_dir),
        "until": until,
        **({"recipe": dict(recipe)} if recipe is not None else {}),
        "table": table,
        "stages": {row["stage"]: row["summary"] for row in rows},
    }
    (output_dir / "pipeline_summary.json").write_text(json.dumps(result, indent=2, default=str), encoding="utf-8")
    (output_dir / "pipeline_summary.md").write_text(format_table(table), encoding="utf-8")
    return result
