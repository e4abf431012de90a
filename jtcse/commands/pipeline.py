"""``jtcse pipeline``: warm-up of two towers → twin → (ensemble) → distillation → dev evaluation, resumable;
its settings from the options, or from a recipe file (``--recipe``) that the options override."""

from __future__ import annotations

import inspect
from pathlib import Path
from typing import Any

import typer

from jtcse.commands import _options as opts
from jtcse.commands._recipe import recipe_option, recipe_record
from jtcse.training.pipeline import run_pipeline
from jtcse.training.pipeline_report import format_table
from jtcse.training.pipeline_settings import ENSEMBLE_WEIGHTS, PROBE_LEARNING_RATES, PROBE_STEPS, STAGE_DEFAULTS, UNTIL

SHORT_HELP = "Whole recipe: warm up two towers, train the twin, ensemble, distil, evaluate (resumable)."
HELP = (
    "Run the JTCSE recipe end to end in OUTPUT: SimCSE warm-up of tower I (tower_a/) and tower II "
    "(tower_b/, another seed; each with its own RTT pairs when given), JTCSE twin training on them "
    "(twin/; with --selection-file, a short probe of twin learning rates scored on that file chooses its lr), "
    "an ensemble of the twin and the model tower I started from (ensemble/, JTCSE+UC; on by default when that "
    "is a sentence-transformers model, --no-ensemble turns it off, --ensemble-with names other members), "
    "distillation of the ensemble (else the twin) into the model tower I started from, which keeps its own "
    "pooling (distilled/; --student and --student-pooling choose another), and STS-B dev Spearman, over all "
    "pairs and per genre, of every model and of the starting model as it is, the row to beat (eval/). A stage "
    "that has finished (stage_done.json in its folder) is skipped on rerun, and refused if its settings "
    "changed; an interrupted stage resumes from its checkpoints. One summary table is printed and written to "
    "OUTPUT/pipeline_summary.md (and .json).\n\n"
    "From a sentence-transformers model the default skips the twin (--twin turns it on): the ensemble holds "
    "the two warm-ups and the starting model, which measured better on the selection split than the twin "
    "does on a pre-trained encoder (evaluation/DEFAULTS.md). The dev file is only reported; what is chosen "
    "(the twin's learning rate, the ensemble's weights) is chosen on --selection-file.\n\n"
    "Defaults: each stage's --STAGE-{steps,learning-rate,batch-size,max-seq-length,eval-steps} default to its "
    "trainer's "
    "(jtcse simcse, train, distill: the CPU recipe measured on the embedded MiniLM, shown below); --batch-size "
    "and --eval-steps set every stage at once. --recipe FILE reads the settings from a TOML file "
    "(models/*/recipe.toml; the paper's recipes are there) and the options given override it.\n\n"
    "Example: jtcse pipeline -o runs/ucd --corpus wiki12k.txt --dev-file sts-dev.csv\n\n"
    "Example: jtcse pipeline --recipe models/jtcse-bert-base/recipe.toml -o runs/jtcse-bert-base --twin-steps 200"
)

STAGE_NAMES = {"warmup": "the warm-ups", "twin": "the twin", "distill": "the distillation"}
_STAGE_FIELDS = {"steps": "max_steps", "learning-rate": "learning_rate", "batch-size": "batch_size",
                 "max-seq-length": "max_seq_length", "eval-steps": "eval_steps"}  # fmt: skip
RECIPE_SECTIONS = ("warmup", "probe", "twin", "ensemble", "distill")
RECIPE_RENAMED = {"twin": ("twin", "enabled"), "ensemble": ("ensemble", "enabled"), "student": ("distill", "student"),
                  "student_pooling": ("distill", "student_pooling"), "objective": ("distill", "objective")}  # fmt: skip
"""Options that belong to a recipe stage under another name (the others are named for their stage, or shared)."""


def _shown(value: Any) -> str:
    return f"{value:g}" if isinstance(value, float) else str(value)


def _stage_option(stage: str, what: str):
    """``--STAGE-WHAT``, unset by default: the stage's trainer preset (:data:`STAGE_DEFAULTS`) applies, shown in --help."""
    helps = {
        "steps": "Max steps of {stage} (-1: {epochs:g} pass(es) over the corpus).",
        "learning-rate": "AdamW learning rate of {stage}.",
        "batch-size": "Batch size of {stage} (overrides --batch-size).",
        "max-seq-length": "Training length in tokens of {stage}.",
        "eval-steps": "Checkpoint every N steps of {stage} (overrides --eval-steps).",
    }
    preset = getattr(STAGE_DEFAULTS[stage], _STAGE_FIELDS[what])
    return typer.Option(
        None,
        f"--{stage}-{what}",
        show_default=_shown(preset),
        help=helps[what].format(stage=STAGE_NAMES[stage], epochs=STAGE_DEFAULTS[stage].epochs),
    )


def _stage_settings(values: dict[str, Any], stage: str) -> dict[str, Any]:
    """One stage's settings among the command's ``values``: those given, the shared ones otherwise (the rest is
    the trainer's preset)."""
    settings = {
        "batch_size": values["batch_size"],
        "eval_steps": values["eval_steps"],
        "precision": values["precision"],
    }
    for what, field in _STAGE_FIELDS.items():
        given = values[f"{stage}_{what.replace('-', '_')}"]
        settings[field] = given if given is not None else settings.get(field)
    return {key: value for key, value in settings.items() if value is not None}


def pipeline_arguments(values: dict[str, Any]) -> dict[str, Any]:
    """:func:`run_pipeline`'s keywords (all but the output folder) from the command's option ``values``."""
    twin = _stage_settings(values, "twin")
    twin.update(cael_every=values["twin_cael_every"] or None, nce_weight=values["twin_nce_weight"],
                icnce_weight=values["twin_icnce_weight"], ictm_weight=values["twin_ictm_weight"])  # fmt: skip
    shared = ("tower_a", "tower_b", "corpus", "pairs_a", "pairs_b", "dev_file", "until", "seed", "pooling", "twin", "ensemble",
              "selection_file", "probe_steps", "student", "student_pooling", "device")  # fmt: skip
    return {
        **{name: values[name] for name in shared},
        "warmup_settings": _stage_settings(values, "warmup"),
        "twin_settings": twin,
        "distill_settings": {**_stage_settings(values, "distill"), "objective": values["objective"]},
        "ensemble_with": list(values["ensemble_with"] or ()),
        "ensemble_weights": opts.parse_weights(values["ensemble_weights"], "--ensemble-weights"),
        "ensemble_combine": values["ensemble_combine"],
        "probe_learning_rates": opts.parse_weights(values["probe_learning_rates"], "--probe-learning-rates"),
    }


def check_values(values: dict[str, Any]) -> None:
    """Every option's value (a recipe's on top of the defaults) checked as the pipeline checks its settings before
    anything is read or loaded (:func:`jtcse.training.pipeline_settings.check_settings`)."""
    from jtcse.training.pipeline_settings import check_settings

    arguments = pipeline_arguments(values)
    wanted = inspect.signature(check_settings).parameters
    check_settings(**{name: value for name, value in arguments.items() if name in wanted})


def pipeline(
    ctx: typer.Context,
    output: Path = opts.output_option("all stages and the pipeline summary"),
    output_dir_alias: Path | None = opts.old_output_option("--output-dir"),
    recipe: Path | None = recipe_option(RECIPE_SECTIONS, RECIPE_RENAMED, check_values),
    tower_a: str | None = opts.tower_option("a"),
    tower_b: str | None = opts.tower_option("b"),
    corpus: Path | None = opts.corpus_option(),
    pairs_a: Path | None = typer.Option(None, help="RTT pairs (original<TAB>paraphrase) for tower I."),
    pairs_b: Path | None = typer.Option(None, help="RTT pairs for tower II (another pivot language)."),
    dev_file: Path | None = opts.dev_file_option(),
    selection_file: Path | None = typer.Option(
        None,
        "--selection-file",
        help="STS-B-format labelled file to choose on (e.g. STS-B train): the ensemble's weights, and with a twin "
        "its learning rate (a probe stage trains short twins at each --probe-learning-rates; the best on this file "
        "trains the twin; not with --twin-learning-rate). Pairs it shares with --dev-file (the file that is "
        "reported) are left out; a file that largely is the dev file is refused.",
    ),  # fmt: skip
    pooling: str | None = opts.pooling_option(training=True),
    until: str = typer.Option("eval", help=f"Last stage to run: {', '.join(UNTIL)}."),
    warmup_steps: int | None = _stage_option("warmup", "steps"),
    warmup_learning_rate: float | None = _stage_option("warmup", "learning-rate"),
    warmup_batch_size: int | None = _stage_option("warmup", "batch-size"),
    warmup_max_seq_length: int | None = _stage_option("warmup", "max-seq-length"),
    warmup_eval_steps: int | None = _stage_option("warmup", "eval-steps"),
    probe_learning_rates: str = typer.Option(
        ",".join(f"{lr:g}" for lr in PROBE_LEARNING_RATES),
        "--probe-learning-rates",
        metavar="LR1,LR2,...",
        help="With --selection-file: the twin learning rates the probe tries, comma-separated.",
    ),  # fmt: skip
    probe_steps: int = typer.Option(
        PROBE_STEPS, "--probe-steps", help="With --selection-file: steps of each probe twin."
    ),
    twin_steps: int | None = _stage_option("twin", "steps"),
    twin_learning_rate: float | None = _stage_option("twin", "learning-rate"),
    twin_batch_size: int | None = _stage_option("twin", "batch-size"),
    twin_max_seq_length: int | None = _stage_option("twin", "max-seq-length"),
    twin_eval_steps: int | None = _stage_option("twin", "eval-steps"),
    twin_cael_every: int = opts.cael_every_option("twin-"),
    twin_nce_weight: float = opts.twin_weight_option("nce", "twin-"),
    twin_icnce_weight: float = opts.twin_weight_option("icnce", "twin-"),
    twin_ictm_weight: float = opts.twin_weight_option("ictm", "twin-"),
    twin: bool | None = typer.Option(
        None,
        "--twin/--no-twin",
        show_default="off when tower I starts from a sentence-transformers model in the ensemble",
        help="Train the JTCSE twin on the two warm-ups (twin/). Without it the ensemble holds the warm-ups.",
    ),  # fmt: skip
    ensemble: bool | None = typer.Option(
        None,
        "--ensemble/--no-ensemble",
        show_default="on when tower I starts from a sentence-transformers model",
        help="Join the twin (else the two warm-ups) and the model tower I started from in an ensemble that teaches "
        "the student (UCD).",
    ),  # fmt: skip
    ensemble_with: list[str] = typer.Option(
        [],
        "--ensemble-with",
        metavar="MODEL",
        help="Repeatable: a model joined to the trained twin in the ensemble (JTCSE+UC), which then teaches the "
        "student; without --ensemble the starting model is then not a member. Not with --no-ensemble.",
    ),  # fmt: skip
    ensemble_weights: str | None = typer.Option(
        None,
        "--ensemble-weights",
        metavar="W1,W2,...",
        show_default="chosen on --selection-file; without one "
        + "; ".join(
            f"{','.join(f'{w:g}' for w in weights)} for ({'twin' if kind == 'twin' else 'warm-up I, warm-up II'}, start)"
            for kind, weights in ENSEMBLE_WEIGHTS.items()
        )
        + "; else all 1",
        help="One positive weight per ensemble member (the twin's, else the two warm-ups', first), comma-separated.",
    ),  # fmt: skip
    ensemble_combine: str = typer.Option(
        opts.declared_default(run_pipeline, "ensemble_combine"),
        "--ensemble-combine",
        help="How the ensemble joins its members' embeddings: concat or sum.",
    ),  # fmt: skip
    student: str | None = typer.Option(
        None, "--student", help="Distillation student. Default: the model tower I started from (--tower-a)."
    ),
    student_pooling: str | None = opts.student_pooling_option(),
    objective: str = opts.objective_option(),
    distill_steps: int | None = _stage_option("distill", "steps"),
    distill_learning_rate: float | None = _stage_option("distill", "learning-rate"),
    distill_batch_size: int | None = _stage_option("distill", "batch-size"),
    distill_max_seq_length: int | None = _stage_option("distill", "max-seq-length"),
    distill_eval_steps: int | None = _stage_option("distill", "eval-steps"),
    batch_size: int | None = typer.Option(
        None,
        "--batch-size",
        show_default="each stage's own",
        help="Batch size of every stage whose --STAGE-batch-size is not given.",
    ),  # fmt: skip
    eval_steps: int | None = typer.Option(
        None,
        "--eval-steps",
        show_default="each trainer's own",
        help="Checkpoint every N steps, in every stage whose --STAGE-eval-steps is not given.",
    ),  # fmt: skip
    seed: int = opts.seed_option(opts.declared_default(run_pipeline, "seed")),
    device: str | None = opts.device_option(),
    precision: str | None = typer.Option(
        None,
        "--precision",
        show_default="each trainer's own",
        help="Precision of every training stage: auto, fp32, fp16 (CUDA only) or bf16; checked against --device "
        "before anything runs.",
    ),  # fmt: skip
) -> None:
    values = dict(ctx.params)

    def typed(name: str) -> bool:  # given on the command line (not by a recipe, not a default)
        return ctx.get_parameter_source(name).name == "COMMANDLINE"

    for shared in ("batch_size", "eval_steps"):  # typed for every stage: above a recipe's per-stage values
        for stage in STAGE_NAMES:
            if typed(shared) and not typed(f"{stage}_{shared}"):
                values[f"{stage}_{shared}"] = None
    if selection_file is not None and not typed("twin_learning_rate"):
        values["twin_learning_rate"] = None  # a recipe's twin learning rate is a default: the probe chooses instead
    arguments = pipeline_arguments(values)
    result = run_pipeline(output, **arguments, recipe=recipe_record(ctx))
    typer.echo(format_table(result["table"]))
    typer.echo(f"Summary: {output / 'pipeline_summary.md'} and {output / 'pipeline_summary.json'}")


def register(app: typer.Typer) -> None:
    app.command("pipeline", short_help=SHORT_HELP, help=HELP)(pipeline)
