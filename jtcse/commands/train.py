"""``jtcse train``: train a JTCSE twin (two towers, cross-attention, ICNCE + ICTM) on a text file."""

from __future__ import annotations

from pathlib import Path

import typer

from jtcse.commands import _options as opts
from jtcse.training.twin import TWIN_SETTINGS as PRESET
from jtcse.training.twin import train_twin

SHORT_HELP = "Train a JTCSE twin (two towers, cross-attention, ICNCE + ICTM) on a corpus."
HELP = """Train a JTCSE twin-tower sentence encoder on a corpus (one sentence per line).

Both towers read every sentence twice (dropout makes the two views) and learn with InfoNCE inside each tower, ICNCE between the towers (on the primitive and the cross-attention stream) and the tensor-modulus term ICTM. The result in OUTPUT is a SentenceTransformer checkpoint whose encode() returns the sum of the two towers' pooled vectors (--pooling: CLS or mean, by default the towers' own); open it with jtcse.modeling.loading.load_model(path) or SentenceTransformer(path, trust_remote_code=True).

With no options it runs offline: two copies of the embedded MiniLM-L6 tower, trained on English prose from Python's standard library. Blank lines are skipped (and counted), duplicate lines are dropped, sentences longer than --max-seq-length tokens are truncated. Rerunning the same command resumes an interrupted run (even one killed with kill -9) from the newest complete checkpoint in OUTPUT/checkpoints, ending with the same model as an uninterrupted run; for a finished run it does nothing. One process at a time writes OUTPUT.

Writes OUTPUT/run_summary.json (settings, data counts, loss terms, dev scores) and OUTPUT/training_curves.png.

Example:

jtcse train --tower-a towers/rtt_de --tower-b towers/rtt_fr --corpus wiki1m.txt --dev-file stsbenchmark/sts-dev.csv -o runs/jtcse-bert

On 4 GPUs, with the negatives of all 4 x 64 sentences per step (docs/distributed.md):

torchrun --nproc_per_node 4 -m jtcse train --gather-across-devices --tower-a towers/rtt_de --tower-b towers/rtt_fr --corpus wiki1m.txt -o runs/jtcse-bert"""


def train(
    output: Path = opts.output_option("the twin, its run summary and checkpoints", Path("runs/jtcse")),
    output_dir_alias: Path | None = opts.old_output_option("--output-dir"),
    tower_a: str | None = opts.tower_option("a"),
    tower_b: str | None = opts.tower_option("b"),
    corpus: Path | None = opts.corpus_option(),
    cael_every: int = opts.cael_every_option(),
    pooling: str | None = opts.pooling_option(training=True),
    batch_size: int = opts.batch_size_option(PRESET.batch_size),
    max_seq_length: int = opts.max_seq_length_option(PRESET.max_seq_length),
    learning_rate: float = opts.learning_rate_option(PRESET.learning_rate),
    lr_alias: float | None = opts.lr_alias_option(),
    epochs: float = opts.epochs_option(PRESET.epochs),
    max_steps: int = opts.max_steps_option(PRESET.max_steps),
    seed: int = opts.seed_option(PRESET.seed),
    dev_file: Path | None = opts.dev_file_option(),
    eval_steps: int = opts.eval_steps_option(PRESET.eval_steps),
    resume: bool = opts.resume_option(),
    overwrite: bool = opts.overwrite_option(),
    keep_checkpoints: bool = opts.keep_checkpoints_option(PRESET.keep_checkpoints),
    temperature: float = opts.temperature_option(opts.declared_default(train_twin, "temperature")),
    nce_weight: float = opts.twin_weight_option("nce"),
    icnce_weight: float = opts.twin_weight_option("icnce"),
    ictm_weight: float = opts.twin_weight_option("ictm"),
    regularizer: list[str] = opts.regularizer_option(),
    logging_steps: int | None = opts.logging_steps_option(PRESET.logging_steps),
    device: str | None = opts.device_option(),
    precision: str = opts.precision_option(PRESET.precision),
    gradient_checkpointing: bool = opts.gradient_checkpointing_option(PRESET.gradient_checkpointing),
    gather_across_devices: bool = opts.gather_across_devices_option(),
    mini_batch_size: int | None = opts.mini_batch_size_option(),
) -> None:
    settings = opts.training_settings(locals())
    summary = train_twin(
        tower_a,
        tower_b,
        corpus,
        output,
        settings=settings,
        cael_every=cael_every or None,
        pooling=pooling,
        dev_file=dev_file,
        resume=resume,
        overwrite=overwrite,
        temperature=temperature,
        nce_weight=nce_weight,
        icnce_weight=icnce_weight,
        ictm_weight=ictm_weight,
        regularizers=regularizer,
        device=device,
        gather_across_devices=gather_across_devices,
        mini_batch_size=mini_batch_size,
    )
    opts.echo_summary(summary, Path(summary["output_dir"]), "Twin")


def register(app: typer.Typer) -> None:
    app.command("train", short_help=SHORT_HELP, help=HELP)(train)
