"""``jtcse train``: train a JTCSE twin (two towers, cross-attention, ICNCE + ICTM) on a text file."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer

from jtcse.commands._trainer_options import echo_summary, gradient_checkpointing_option, precision_option
from jtcse.losses.registry import REGULARIZER_HELP

HELP = """Train a JTCSE twin-tower sentence encoder on a corpus (one sentence per line).

Both towers read every sentence twice (dropout makes the two views) and learn with InfoNCE inside each tower, ICNCE between the towers (on the primitive and the cross-attention stream) and the tensor-modulus term ICTM. The result in OUTPUT_DIR is a SentenceTransformer checkpoint whose encode() returns the sum of the two towers' CLS vectors; open it with jtcse.modeling.loading.load_model(path) or SentenceTransformer(path, trust_remote_code=True).

With no options it runs offline: two copies of the embedded MiniLM-L6 tower, trained on English prose from Python's standard library. Blank lines are skipped (and counted), duplicate lines are dropped, sentences longer than --max-seq-length tokens are truncated. Rerunning the same command resumes from the last checkpoint in OUTPUT_DIR/checkpoints.

Writes OUTPUT_DIR/run_summary.json (settings, data counts, loss terms, dev scores) and OUTPUT_DIR/training_curves.png.

Example:

jtcse train --tower-a towers/rtt_de --tower-b towers/rtt_fr --corpus wiki1m.txt --dev-file stsbenchmark/sts-dev.csv --output-dir runs/jtcse-bert"""


def train(
    output_dir: Path = typer.Option(Path("runs/jtcse"), "--output-dir", "-o", help="Where the twin, the summary and checkpoints go."),
    tower_a: Optional[str] = typer.Option(None, help="Tower I: a sentence-transformers or transformers model dir, or a hub name. Default: the embedded MiniLM."),
    tower_b: Optional[str] = typer.Option(None, help="Tower II (same architecture, layer count and tokenizer as tower I). Default: the embedded MiniLM."),
    corpus: Optional[Path] = typer.Option(None, help="UTF-8 text file, one sentence per line. Default: the standard library's prose (~1,700 sentences)."),
    cael_every: int = typer.Option(2, help="A cross-attention encoder layer every k layers (k must divide the layer count; the last layer is always one). 0 = no cross-attention (TNCSE)."),
    batch_size: int = typer.Option(64, help="Sentences per step (each encoded twice by each tower)."),
    max_seq_length: int = typer.Option(64, help="Tokens per sentence; longer sentences are truncated."),
    lr: float = typer.Option(1.3e-6, "--lr", help="AdamW learning rate (the reference recipe's 1.3e-6 suits towers warmed up with SimCSE)."),
    epochs: float = typer.Option(1.0, help="Passes over the corpus (ignored when --max-steps is set)."),
    max_steps: int = typer.Option(-1, help="Stop after this many steps; -1 = train for --epochs."),
    seed: int = typer.Option(42, help="Seed for data order, dropout and the ICNCE direction draw."),
    dev_file: Optional[Path] = typer.Option(None, help="STS-B-format dev file (tab-separated genre, file, year, id, score, s1, s2); the checkpoint with the best dev Spearman is kept."),
    eval_steps: int = typer.Option(100, help="Evaluate on the dev file and save a checkpoint every N steps."),
    resume: bool = typer.Option(True, "--resume/--no-resume", help="Continue from the last checkpoint in OUTPUT_DIR/checkpoints if there is one (also to train a finished run longer: raise --max-steps). The other settings must match the earlier run."),
    overwrite: bool = typer.Option(False, "--overwrite", help="Replace a finished run in OUTPUT_DIR (otherwise refused when there is nothing to resume)."),
    temperature: float = typer.Option(0.05, help="Temperature of InfoNCE and ICNCE."),
    nce_weight: float = typer.Option(1.0, help="Weight of InfoNCE inside each tower (0 = off)."),
    icnce_weight: float = typer.Option(1.0, help="Weight of ICNCE between the towers (0 = off)."),
    ictm_weight: float = typer.Option(0.5, help="Weight of the tensor-modulus term ICTM (0 = off)."),
    regularizer: list[str] = typer.Option([], "--regularizer", "-r", metavar="SPEC", help=REGULARIZER_HELP),
    logging_steps: Optional[int] = typer.Option(None, help="Log the loss terms every N steps (default: about ten times per run, at most every 50)."),
    device: Optional[str] = typer.Option(None, help="cpu, cuda, cuda:1, ... Default: the best available."),
    precision: str = precision_option("fp32"),
    gradient_checkpointing: bool = gradient_checkpointing_option(),
) -> None:
    from jtcse.training.twin import train_twin

    summary = train_twin(
        tower_a,
        tower_b,
        corpus,
        output_dir,
        cael_every=cael_every or None,
        batch_size=batch_size,
        max_seq_length=max_seq_length,
        learning_rate=lr,
        epochs=epochs,
        max_steps=max_steps,
        seed=seed,
        dev_file=dev_file,
        eval_steps=eval_steps,
        resume=resume,
        overwrite=overwrite,
        temperature=temperature,
        nce_weight=nce_weight,
        icnce_weight=icnce_weight,
        ictm_weight=ictm_weight,
        regularizers=regularizer,
        logging_steps=logging_steps,
        device=device,
        precision=precision,
        gradient_checkpointing=gradient_checkpointing,
    )
    echo_summary(summary, Path(summary["output_dir"]), "Twin")


def register(app: typer.Typer) -> None:
    app.command("train", help=HELP, no_args_is_help=False)(train)
