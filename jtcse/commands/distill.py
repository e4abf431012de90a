"""``jtcse distill``: distil a teacher encoder (a JTCSE twin, an ensemble, any encoder) into one student."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer

from jtcse.commands import _options as opts


SHORT_HELP = "Distil a teacher (a twin, an ensemble, any encoder) into one student encoder (JTCSE-D, UCD)."
HELP = (
    "Distil a teacher (a JTCSE twin, an ensemble from jtcse ensemble, any encoder) into one student: the "
    "student is trained to reproduce the teacher on unlabeled sentences (JTCSE-D; UCD when the teacher is an "
    "ensemble). Teacher embeddings are computed once and cached in OUTPUT_DIR/teacher_cache, reused on rerun. "
    "The student keeps its own architecture, pooling and width (default: the embedded MiniLM with its mean "
    "pooling; --student-pooling cls for a CLS tower), tokenizes for itself (teacher and student tokenizers "
    "may differ) and loads with plain sentence-transformers. --objective similarity (default) matches the "
    "in-batch cosine-similarity matrices, so any teacher width works; mse, mse-normalized and cosine compare "
    "vectors, through a training-only projection (not saved) when the widths differ. An interrupted run "
    "resumes; --overwrite keeps the teacher cache.\n\n"
    "Example: jtcse distill --teacher runs/ensemble --student all-MiniLM-L6-v2-dir --corpus wiki1m.txt "
    "--dev-file sts-dev.csv --output-dir runs/ucd"
)


def distill(
    teacher: str = typer.Option(
        ..., "--teacher", "-t", help="Teacher model dir: a twin, an ensemble (jtcse ensemble) or any encoder."
    ),
    output_dir: Path = opts.output_dir_option("the student, its run summary and the teacher cache"),
    student: Optional[str] = typer.Option(
        None, "--student", "-s",
        help="Student initialisation (any single encoder, kept with its own pooling). Default: embedded MiniLM.",
    ),
    corpus: Optional[Path] = opts.corpus_option(),
    train_file_alias: Optional[Path] = opts.alias_option("--train-file", "--corpus"),
    dev_file: Optional[Path] = opts.dev_file_option(),
    batch_size: int = opts.batch_size_option(),
    teacher_batch_size: int = typer.Option(128, help="Batch size for the one-off teacher encoding."),
    max_seq_length: int = opts.max_seq_length_option(64),
    learning_rate: float = opts.learning_rate_option(5e-5),
    epochs: float = opts.epochs_option(),
    max_steps: int = opts.max_steps_option(),
    eval_steps: int = opts.eval_steps_option(250),
    save_steps: Optional[int] = opts.save_steps_option(),
    logging_steps: int = opts.logging_steps_option(),
    objective: str = opts.objective_option(),
    student_pooling: Optional[str] = opts.student_pooling_option(),
    seed: int = opts.seed_option(),
    resume: bool = opts.resume_option(),
    overwrite: bool = opts.overwrite_option(),
    keep_checkpoints: bool = opts.keep_checkpoints_option(),
    precision: str = opts.precision_option(),
    gradient_checkpointing: bool = opts.gradient_checkpointing_option(),
) -> None:
    from jtcse.training.distill import distill as run_distill

    corpus = opts.pick_alias(corpus, train_file_alias, what="corpus", new="--corpus", old="--train-file")
    summary = run_distill(
        teacher,
        student,
        corpus,
        output_dir,
        settings=opts.training_settings(locals()),
        dev_file=dev_file,
        teacher_batch_size=teacher_batch_size,
        objective=objective,
        student_pooling=student_pooling,
        resume=resume,
        overwrite=overwrite,
    )
    opts.echo_summary(summary, output_dir, "Student")


def register(app: typer.Typer) -> None:
    app.command("distill", short_help=SHORT_HELP, help=HELP)(distill)
