"""``jtcse distill``: distil a teacher encoder (a JTCSE twin, an ensemble, any encoder) into one student."""

from __future__ import annotations

from pathlib import Path

import typer

from jtcse.commands import _options as opts
from jtcse.commands._settings import Options, settings_from, with_settings
from jtcse.training.distill import distill as run_distill
from jtcse.training.settings import DistillSettings

OPTIONS = Options(DistillSettings, DistillSettings())

SHORT_HELP = "Distil a teacher (a twin, an ensemble, any encoder) into one student encoder (JTCSE-D, UCD)."
HELP = (
    "Distil a teacher (a JTCSE twin, an ensemble from jtcse ensemble, any encoder) into one student: the "
    "student is trained to reproduce the teacher on unlabeled sentences (JTCSE-D; UCD when the teacher is an "
    "ensemble). Teacher embeddings are computed once and cached in OUTPUT/teacher_cache, reused on rerun. "
    "The student keeps its own architecture, pooling and width (default: the embedded MiniLM with its mean "
    "pooling; --student-pooling cls for a CLS tower), tokenizes for itself (teacher and student tokenizers "
    "may differ) and loads with plain sentence-transformers. --objective similarity (default) matches the "
    "in-batch cosine-similarity matrices, so any teacher width works; mse, mse-normalized and cosine compare "
    "vectors, through a training-only projection (not saved) when the widths differ; a sum such as "
    "similarity+mse trains on its terms at once, each logged. --passage-sentences 3 teaches on passages of three "
    "consecutive corpus lines instead of single lines. An interrupted run "
    "resumes; --overwrite keeps the teacher cache. With --dev-file the dev Spearman is scored every "
    "--eval-steps; --checkpoint best-dev keeps the best checkpoint by it, the default the last step.\n\n"
    "Example: jtcse distill --teacher runs/ensemble --student all-MiniLM-L6-v2-dir --corpus wiki1m.txt "
    "--dev-file sts-dev.csv -o runs/ucd"
)


@with_settings(OPTIONS)
def distill(
    teacher: str = typer.Option(
        ..., "--teacher", "-t", help="Teacher model dir: a twin, an ensemble (jtcse ensemble) or any encoder."
    ),
    output: Path = opts.output_option("the student, its run summary and the teacher cache"),
    output_dir_alias: Path | None = opts.old_output_option("--output-dir"),
    student: str | None = typer.Option(
        None,
        "--student",
        "-s",
        help="Student initialisation (any single encoder, kept with its own pooling). Default: embedded MiniLM.",
    ),
    corpus: Path | None = opts.corpus_option(),
    text_column: str | None = opts.text_column_option(),
    train_file_alias: Path | None = opts.alias_option("--train-file", "--corpus"),
    dev_file: Path | None = opts.dev_file_option(),
    resume: bool = opts.resume_option(),
    overwrite: bool = opts.overwrite_option(),
    device: str | None = opts.device_option(),
    **options,
) -> None:
    summary = run_distill(
        teacher,
        student,
        corpus,
        output,
        settings=settings_from(OPTIONS, options),
        text_column=text_column,
        dev_file=dev_file,
        resume=resume,
        overwrite=overwrite,
        device=device,
    )
    opts.echo_summary(summary, output, "Student")


def register(app: typer.Typer) -> None:
    app.command("distill", short_help=SHORT_HELP, help=HELP)(distill)
