"""``jtcse pipeline``: warm-up of two towers → twin → distillation → dev evaluation, resumable."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer

from jtcse.commands import _options as opts


SHORT_HELP = "Whole recipe: warm up two towers, train the twin, distil, evaluate (resumable)."
HELP = (
    "Run the JTCSE recipe end to end in OUTPUT_DIR: SimCSE warm-up of tower I (tower_a/) and tower II "
    "(tower_b/, another seed; each with its own RTT pairs when given), JTCSE twin training on them "
    "(twin/), distillation of the twin into warmed-up tower I (distilled/), and STS-B dev Spearman of "
    "every model (eval/). A stage that has finished (stage_done.json in its folder) is skipped on "
    "rerun; an interrupted stage resumes from its checkpoints. One summary table is printed and "
    "written to OUTPUT_DIR/pipeline_summary.md (and .json). Every stage uses --batch-size, --eval-steps and "
    "--seed (tower II's warm-up: seed+1); the eval stage needs --dev-file.\n\n"
    "Example: jtcse pipeline -o runs/recipe --corpus wiki1m.txt --pairs-a rtt_de.tsv --pairs-b rtt_fr.tsv "
    "--dev-file sts-dev.csv"
)


def pipeline(
    output_dir: Path = opts.output_dir_option("all stages and the pipeline summary"),
    tower_a: Optional[str] = opts.tower_option("a"),
    tower_b: Optional[str] = opts.tower_option("b"),
    corpus: Optional[Path] = opts.corpus_option(),
    pairs_a: Optional[Path] = typer.Option(None, help="RTT pairs (original<TAB>paraphrase) for tower I."),
    pairs_b: Optional[Path] = typer.Option(None, help="RTT pairs for tower II (another pivot language)."),
    dev_file: Optional[Path] = opts.dev_file_option(),
    until: str = typer.Option("eval", help="Last stage to run: warmup, twin, distill or eval."),
    warmup_steps: int = typer.Option(-1, help="Max steps per warm-up (-1: one epoch)."),
    twin_steps: int = typer.Option(-1, help="Max steps of twin training (-1: one epoch)."),
    distill_steps: int = typer.Option(-1, help="Max steps of distillation (-1: one epoch)."),
    batch_size: int = opts.batch_size_option(),
    eval_steps: int = opts.eval_steps_option(125),
    seed: int = opts.seed_option(),
) -> None:
    from jtcse.training.pipeline import format_table, run_pipeline

    common = {"batch_size": batch_size, "eval_steps": eval_steps}
    result = run_pipeline(
        output_dir,
        tower_a=tower_a,
        tower_b=tower_b,
        corpus=corpus,
        pairs_a=pairs_a,
        pairs_b=pairs_b,
        dev_file=dev_file,
        until=until,
        seed=seed,
        warmup_settings={**common, "max_steps": warmup_steps},
        twin_settings={**common, "max_steps": twin_steps},
        distill_settings={**common, "max_steps": distill_steps},
    )
    typer.echo(format_table(result["table"]))
    typer.echo(f"Summary: {output_dir / 'pipeline_summary.md'} and {output_dir / 'pipeline_summary.json'}")


def register(app: typer.Typer) -> None:
    app.command("pipeline", short_help=SHORT_HELP, help=HELP)(pipeline)
