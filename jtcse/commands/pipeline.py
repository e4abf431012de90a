"""``jtcse pipeline``: warm-up of two towers → twin → (ensemble) → distillation → dev evaluation, resumable.

Its options are generated from :class:`~jtcse.pipeline.settings.PipelineConfig` (``jtcse/commands/_settings.py``):
the top-level keys as ``--KEY``, each stage's as ``--STAGE-KEY``. The settings of a run are the declared
defaults, then the recipe file (``--recipe``, with what it extends), then the options typed, each layer checked
where it is given; the command parses them into one config and makes one library call
(:func:`~jtcse.pipeline.run.run_pipeline`), or prints the config as a recipe (``--dump-recipe``).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import typer

from jtcse.commands import _options as opts
from jtcse.commands._settings import Options, flags, given, with_settings
from jtcse.errors import JTCSEError
from jtcse.pipeline.settings import PipelineConfig
from jtcse.pipeline.stages import STAGES, TRAINED
from jtcse.schema import Layer, build, sections

SHORT_HELP = "Whole recipe: warm up two towers, train the twin, ensemble, distil, evaluate (resumable)."
HELP = (
    "Run the JTCSE recipe end to end in OUTPUT, one folder a stage: "
    + "; ".join(f"{m.name} ({m.folder}/): {m.description}" for m in (s.metadata for s in STAGES)).replace("[", "\\[")
    + ". A stage whose folder holds a finished run of the same settings (whoever ran it) is skipped, one that "
    "finished with other settings is refused (remove its folder to run it again), an interrupted one resumes from "
    "its checkpoints. Before any stage trains, every file a stage will read is read and checked; OUTPUT is a "
    "folder of the pipeline's own (jtcse_outputs.json lists what it wrote there; any other file is refused). One "
    "summary table is printed and written to OUTPUT/pipeline_summary.md (and .json).\n\n"
    "By default the twin trains (--no-twin skips it) and, from a sentence-transformers model, the ensemble holds "
    "the twin and the starting model (what that gains and costs on the embedded MiniLM: evaluation/DEFAULTS.md). "
    "By default every stage keeps its last step and the dev file "
    "is only reported; --STAGE-checkpoint best-dev keeps a stage's best checkpoint by the dev file, as the "
    "paper's recipes do. What is chosen (the ensemble's weights; with --probe, the twin's learning rate) is "
    "chosen on --selection-file.\n\n"
    "Time: the default run on wiki12k (12k sentences) takes about 35 minutes at one thread on a CPU with native "
    "bf16 (AVX512-BF16 or AMX), where auto is bf16; 58 with --precision fp32, side by side (docs/speed.md). A "
    "stage's line says what it has left as it runs.\n\n"
    "Each stage's options default to its trainer's (jtcse simcse, train, distill: the CPU recipe measured on the "
    "embedded MiniLM, shown below). --recipe FILE reads the settings from a TOML file (models/*/recipe.toml; "
    "the paper's recipes are there) and the options given override it; --dump-recipe prints the settings a "
    "command line stands for, as such a file.\n\n"
    "Example: jtcse pipeline -o runs/ucd --corpus wiki12k.txt --dev-file sts-dev.csv\n\n"
    "Example: jtcse pipeline --recipe models/jtcse-bert-base/recipe.toml -o runs/jtcse-bert-base --twin-max-steps 200"
)

TOP = Options(PipelineConfig, PipelineConfig(), panel="The run")
STAGE_OPTIONS = tuple(
    Options(
        table.cls,
        getattr(PipelineConfig(), name),
        prefix=name,
        exclude=table.exclude,
        panel=f"[{name}] {table.help}",
        same_as=table.base,
    )
    for name, table in sections(PipelineConfig).items()
)


def command_line_layer(arguments: dict[str, Any]) -> tuple[Layer, dict[str, dict[str, Any]]]:
    """The values typed on the command line, as a layer over the recipe (``--batch-size`` / ``--eval-steps`` in
    every trained stage whose own option is not typed), and ``{table: {key: value}}`` of what was typed."""
    typed = {options.prefix: given(options, arguments) for options in (TOP, *STAGE_OPTIONS)}
    values: dict[str, Any] = dict(typed[""])
    labels: dict[tuple[str, str], str] = {}
    for options in STAGE_OPTIONS:
        table = dict(typed[options.prefix])
        for shortcut in ("batch_size", "eval_steps"):
            if arguments.get(shortcut) is not None and options.prefix in TRAINED and shortcut not in table:
                table[shortcut] = arguments[shortcut]
                labels[(options.prefix, shortcut)] = f"--{shortcut.replace('_', '-')}"
        if table:
            values[options.prefix] = table
    named = flags((TOP, *STAGE_OPTIONS))

    def label(table: str, key: str) -> str:
        return labels.get((table, key)) or named[(table, key)]

    return Layer(values, where="", label=label), typed


def pipeline_config(arguments: dict[str, Any]) -> tuple[PipelineConfig, dict[str, Any] | None]:
    """The config a command line stands for (defaults, ``--recipe``, options typed) and, with a recipe, what the
    summary records of it (the files, their sha256 and each option typed over it)."""
    from jtcse.pipeline.recipe import read_recipe, recipe_layers, recipe_record

    files = read_recipe(arguments["recipe"]) if arguments.get("recipe") is not None else []
    typed_layer, typed = command_line_layer(arguments)
    config = build(PipelineConfig, [*recipe_layers(files), typed_layer])
    if not files:
        return config, None
    in_recipe: dict[str, Any] = {}
    for _, values in files:
        for key, value in values.items():
            if isinstance(value, dict):
                in_recipe.setdefault(key, {}).update(value)
            else:
                in_recipe[key] = value
    overrides = {}
    for options in (TOP, *STAGE_OPTIONS):
        recipe_table = in_recipe if not options.prefix else in_recipe.get(options.prefix, {})
        for key, value in typed[options.prefix].items():
            entry = {"value": value}
            if key in recipe_table:
                entry["recipe"] = recipe_table[key]
            overrides[options.flag(key)] = entry
    return config, {**recipe_record(files), "overrides": overrides}


@with_settings(TOP, *STAGE_OPTIONS)
def pipeline(
    output: Path | None = opts.output_option("all stages and the pipeline summary", None),
    output_dir_alias: Path | None = opts.old_output_option("--output-dir"),
    recipe: Path | None = typer.Option(
        None,
        "--recipe",
        metavar="FILE",
        help="A TOML file of this command's settings (models/*/recipe.toml): its values replace the defaults, and "
        "options given on the command line override them; the summary records the file, its sha256 and each "
        "override.",
    ),
    dump_recipe: bool = typer.Option(
        False, "--dump-recipe", help="Print the settings this command line stands for as a recipe file, and stop."
    ),
    batch_size: int | None = typer.Option(
        None,
        "--batch-size",
        show_default="each stage's own",
        help="Batch size of every trained stage whose --STAGE-batch-size is not given.",
    ),
    device: str | None = opts.device_option(),
    eval_steps: int | None = typer.Option(
        None,
        "--eval-steps",
        show_default="each stage's own",
        help="Checkpoint (and score a dev file) every N steps, in every trained stage whose --STAGE-eval-steps is "
        "not given.",
    ),
    **options,
) -> None:
    from jtcse.pipeline.recipe import dump_recipe as as_recipe
    from jtcse.pipeline.report import format_table
    from jtcse.pipeline.run import run_pipeline

    config, record = pipeline_config({"recipe": recipe, "batch_size": batch_size, "eval_steps": eval_steps, **options})
    if dump_recipe:
        typer.echo(as_recipe(config), nl=False)
        return
    if output is None:
        raise JTCSEError("give the folder to run in: -o/--output OUT (or --dump-recipe to print the settings).")
    result = run_pipeline(output, config, device=device, recipe=record)
    typer.echo(format_table(result["table"]))
    typer.echo(f"Summary: {output / 'pipeline_summary.md'} and {output / 'pipeline_summary.json'}")


def register(app: typer.Typer) -> None:
    app.command("pipeline", short_help=SHORT_HELP, help=HELP)(pipeline)
