"""``jtcse pipeline``: warm-up of two towers → twin → (ensemble) → distillation → dev evaluation, resumable."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer

from jtcse.commands import _options as opts
from jtcse.training.pipeline import format_table, run_pipeline
from jtcse.training.stage import TrainingSettings


SHORT_HELP = "Whole recipe: warm up two towers, train the twin, ensemble, distil, evaluate (resumable)."
HELP = (
    "Run the JTCSE recipe end to end in OUTPUT: SimCSE warm-up of tower I (tower_a/) and tower II "
    "(tower_b/, another seed; each with its own RTT pairs when given), JTCSE twin training on them "
    "(twin/), with --ensemble-with an ensemble of the twin and those models (ensemble/, JTCSE+UC), "
    "distillation of the ensemble (else the twin) into the model tower I started from, which keeps its own "
    "pooling (distilled/; --student and --student-pooling choose another), and STS-B dev Spearman of every "
    "model and of the starting model as it is, the row to beat (eval/). A stage that has finished "
    "(stage_done.json in its folder) is skipped on rerun, and refused if its settings changed; an "
    "interrupted stage resumes from its checkpoints. One summary table is printed and written to "
    "OUTPUT/pipeline_summary.md (and .json).\n\n"
    "Each stage has its own --{warmup,twin,distill}-{steps,learning-rate,batch-size,max-seq-length} "
    "(unset: --batch-size, and each trainer's own default lr and length); --eval-steps and --seed are "
    "shared (tower II's warm-up: seed+1); the eval stage needs --dev-file.\n\n"
    "Example: jtcse pipeline -o runs/recipe --corpus wiki1m.txt --dev-file sts-dev.csv "
    "--twin-learning-rate 3e-5 --twin-steps 200 --ensemble-with all-MiniLM-L6-v2-dir"
)


def _stage_option(stage: str, what: str, kind: str):
    helps = {
        "steps": "Max steps of the {stage} (-1: one epoch).",
        "learning-rate": "AdamW learning rate of the {stage} (default: its trainer's).",
        "batch-size": "Batch size of the {stage} (default: --batch-size).",
        "max-seq-length": "Training length in tokens of the {stage} (default: its trainer's).",
    }
    default = -1 if what == "steps" else None
    return typer.Option(default, f"--{stage}-{what}", help=helps[what].format(stage=kind))


def _settings(steps: int, learning_rate, batch_size, max_seq_length, shared_batch: int, eval_steps: int) -> dict:
    """One stage's trainer settings: the options given, the shared ones otherwise (unset ones left to the trainer)."""
    settings = {"max_steps": steps, "batch_size": batch_size or shared_batch, "eval_steps": eval_steps}
    if learning_rate is not None:
        settings["learning_rate"] = learning_rate
    if max_seq_length is not None:
        settings["max_seq_length"] = max_seq_length
    return settings


def pipeline(
    output: Path = opts.output_option("all stages and the pipeline summary"),
    output_dir_alias: Optional[Path] = opts.old_output_option("--output-dir"),
    tower_a: Optional[str] = opts.tower_option("a"),
    tower_b: Optional[str] = opts.tower_option("b"),
    corpus: Optional[Path] = opts.corpus_option(),
    pairs_a: Optional[Path] = typer.Option(None, help="RTT pairs (original<TAB>paraphrase) for tower I."),
    pairs_b: Optional[Path] = typer.Option(None, help="RTT pairs for tower II (another pivot language)."),
    dev_file: Optional[Path] = opts.dev_file_option(),
    until: str = typer.Option("eval", help="Last stage to run: warmup, twin, ensemble, distill or eval."),
    warmup_steps: int = _stage_option("warmup", "steps", "warm-ups"),
    warmup_learning_rate: Optional[float] = _stage_option("warmup", "learning-rate", "warm-ups"),
    warmup_batch_size: Optional[int] = _stage_option("warmup", "batch-size", "warm-ups"),
    warmup_max_seq_length: Optional[int] = _stage_option("warmup", "max-seq-length", "warm-ups"),
    twin_steps: int = _stage_option("twin", "steps", "twin training"),
    twin_learning_rate: Optional[float] = _stage_option("twin", "learning-rate", "twin training"),
    twin_batch_size: Optional[int] = _stage_option("twin", "batch-size", "twin training"),
    twin_max_seq_length: Optional[int] = _stage_option("twin", "max-seq-length", "twin training"),
    twin_cael_every: int = opts.cael_every_option("twin-"),
    twin_nce_weight: float = opts.twin_weight_option("nce", "twin-"),
    twin_icnce_weight: float = opts.twin_weight_option("icnce", "twin-"),
    twin_ictm_weight: float = opts.twin_weight_option("ictm", "twin-"),
    ensemble_with: list[str] = typer.Option(
        [], "--ensemble-with", metavar="MODEL",
        help="Repeatable: a model joined to the trained twin in an ensemble (JTCSE+UC), which then teaches the student.",
    ),  # fmt: skip
    ensemble_weights: Optional[str] = opts.ensemble_weights_option("--ensemble-weights"),
    student: Optional[str] = typer.Option(
        None, "--student", help="Distillation student. Default: the model tower I started from (--tower-a)."
    ),
    student_pooling: Optional[str] = opts.student_pooling_option(),
    distill_steps: int = _stage_option("distill", "steps", "distillation"),
    distill_learning_rate: Optional[float] = _stage_option("distill", "learning-rate", "distillation"),
    distill_batch_size: Optional[int] = _stage_option("distill", "batch-size", "distillation"),
    distill_max_seq_length: Optional[int] = _stage_option("distill", "max-seq-length", "distillation"),
    objective: str = opts.objective_option(),
    batch_size: int = opts.batch_size_option(TrainingSettings.batch_size),
    eval_steps: int = opts.eval_steps_option(125),
    seed: int = opts.seed_option(opts.declared_default(run_pipeline, "seed")),
) -> None:
    twin = _settings(twin_steps, twin_learning_rate, twin_batch_size, twin_max_seq_length, batch_size, eval_steps)
    twin.update(cael_every=twin_cael_every or None, nce_weight=twin_nce_weight, icnce_weight=twin_icnce_weight,
                ictm_weight=twin_ictm_weight)  # fmt: skip
    distill = _settings(
        distill_steps, distill_learning_rate, distill_batch_size, distill_max_seq_length, batch_size, eval_steps
    )
    result = run_pipeline(
        output,
        tower_a=tower_a,
        tower_b=tower_b,
        corpus=corpus,
        pairs_a=pairs_a,
        pairs_b=pairs_b,
        dev_file=dev_file,
        until=until,
        seed=seed,
        warmup_settings=_settings(
            warmup_steps, warmup_learning_rate, warmup_batch_size, warmup_max_seq_length, batch_size, eval_steps
        ),
        twin_settings=twin,
        distill_settings={**distill, "objective": objective},
        ensemble_with=ensemble_with,
        ensemble_weights=opts.parse_weights(ensemble_weights, "--ensemble-weights"),
        student=student,
        student_pooling=student_pooling,
    )
    typer.echo(format_table(result["table"]))
    typer.echo(f"Summary: {output / 'pipeline_summary.md'} and {output / 'pipeline_summary.json'}")


def register(app: typer.Typer) -> None:
    app.command("pipeline", short_help=SHORT_HELP, help=HELP)(pipeline)
