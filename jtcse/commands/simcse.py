"""``jtcse simcse``: warm up one tower with unsupervised SimCSE (optionally with RTT paraphrase positives)."""

from __future__ import annotations

from pathlib import Path

import typer

from jtcse.commands import _options as opts
from jtcse.training.simcse import SIMCSE_SETTINGS as PRESET
from jtcse.training.simcse import train_simcse

SHORT_HELP = "Warm up one tower with SimCSE (dropout or RTT-paraphrase positives)."
HELP = (
    "Warm up one tower with unsupervised SimCSE: two dropout views of each sentence, in-batch "
    "negatives (MultipleNegativesRankingLoss, τ=0.05). With --pairs-file (original<TAB>paraphrase, as "
    "`jtcse rtt` writes), a sentence's positive is its round-trip paraphrase; identical pairs are "
    "counted and dropped. The output is a plain sentence-transformers checkpoint that `jtcse train` "
    "accepts as a tower; it keeps the model's own pooling and modules (MiniLM: mean pooling + Normalize; a "
    "plain transformers model: CLS) unless --pooling asks for cls or mean. With --dev-file the checkpoint "
    "with the best STS-B dev Spearman is kept. An interrupted run resumes from its last checkpoint.\n\n"
    "Example: jtcse simcse --model bert-base-uncased --corpus wiki1m.txt --pairs-file rtt_de.tsv "
    "--dev-file sts-dev.csv -o runs/tower_de\n\n"
    "On 4 GPUs with the negatives of all ranks (docs/distributed.md): torchrun --nproc_per_node 4 -m jtcse "
    "simcse --gather-across-devices --corpus wiki1m.txt -o runs/tower"
)


def simcse(
    output: Path = opts.output_option("the warmed-up tower and its run summary"),
    output_dir_alias: Path | None = opts.old_output_option("--output-dir"),
    model: str | None = typer.Option(
        None, "--model", "-m", help="Tower to start from (sentence-transformers dir). Default: embedded MiniLM."
    ),
    pooling: str | None = opts.pooling_option(training=True),
    corpus: Path | None = opts.corpus_option(),
    pairs_file: Path | None = typer.Option(
        None,
        "--pairs-file",
        callback=opts.given_once,
        help="TSV original<TAB>paraphrase (as `jtcse rtt` writes); the paraphrase becomes the sentence's positive.",
    ),
    pairs_alias: Path | None = opts.alias_option("--pairs", "--pairs-file"),
    dev_file: Path | None = opts.dev_file_option(),
    batch_size: int = opts.batch_size_option(PRESET.batch_size),
    max_seq_length: int = opts.max_seq_length_option(PRESET.max_seq_length),
    learning_rate: float = opts.learning_rate_option(PRESET.learning_rate),
    epochs: float = opts.epochs_option(PRESET.epochs),
    max_steps: int = opts.max_steps_option(PRESET.max_steps),
    eval_steps: int = opts.eval_steps_option(PRESET.eval_steps),
    save_steps: int | None = opts.save_steps_option(PRESET.save_steps),
    logging_steps: int | None = opts.logging_steps_option(PRESET.logging_steps),
    temperature: float = opts.temperature_option(opts.declared_default(train_simcse, "temperature")),
    seed: int = opts.seed_option(PRESET.seed),
    regularizer: list[str] = opts.regularizer_option(),
    resume: bool = opts.resume_option(),
    overwrite: bool = opts.overwrite_option(),
    keep_checkpoints: bool = opts.keep_checkpoints_option(PRESET.keep_checkpoints),
    device: str | None = opts.device_option(),
    precision: str = opts.precision_option(PRESET.precision),
    gradient_checkpointing: bool = opts.gradient_checkpointing_option(PRESET.gradient_checkpointing),
    gather_across_devices: bool = opts.gather_across_devices_option(),
    mini_batch_size: int | None = opts.mini_batch_size_option(),
) -> None:
    summary = train_simcse(
        model,
        corpus,
        output,
        settings=opts.training_settings(locals()),
        pairs_file=pairs_file,
        pooling=pooling,
        temperature=temperature,
        dev_file=dev_file,
        regularizers=regularizer,
        resume=resume,
        overwrite=overwrite,
        gather_across_devices=gather_across_devices,
        mini_batch_size=mini_batch_size,
        device=device,
    )
    opts.echo_summary(summary, output, "Tower")


def register(app: typer.Typer) -> None:
    app.command("simcse", short_help=SHORT_HELP, help=HELP)(simcse)
