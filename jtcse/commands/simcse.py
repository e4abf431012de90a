"""``jtcse simcse``: warm up one tower with unsupervised SimCSE (optionally with RTT paraphrase positives)."""

from __future__ import annotations

from pathlib import Path

import typer

from jtcse.commands import _options as opts
from jtcse.commands._settings import Options, settings_from, with_settings
from jtcse.training.settings import WarmupSettings
from jtcse.training.simcse import train_simcse

OPTIONS = Options(WarmupSettings, WarmupSettings())

SHORT_HELP = "Warm up one tower with SimCSE (dropout or RTT-paraphrase positives)."
HELP = (
    "Warm up one tower with unsupervised SimCSE: two dropout views of each sentence, in-batch "
    "negatives (MultipleNegativesRankingLoss, τ=0.05). With --pairs-file (original<TAB>paraphrase, as "
    "`jtcse rtt` writes), a sentence's positive is its round-trip paraphrase; identical pairs are "
    "counted and dropped. The output is a plain sentence-transformers checkpoint that `jtcse train` "
    "accepts as a tower; it keeps the model's own pooling and modules (MiniLM: mean pooling + Normalize; a "
    "plain transformers model: CLS) unless --pooling asks for cls or mean. With --dev-file the dev Spearman is "
    "scored every --eval-steps; with --checkpoint best-dev the best checkpoint by it is kept (the papers' "
    "protocol), else the last step. An interrupted run resumes from its last checkpoint.\n\n"
    "Example: jtcse simcse --model bert-base-uncased --corpus wiki1m.txt --pairs-file rtt_de.tsv "
    "--dev-file sts-dev.csv --checkpoint best-dev -o runs/tower_de\n\n"
    "On 4 GPUs with the negatives of all ranks (docs/distributed.md): torchrun --nproc_per_node 4 -m jtcse "
    "simcse --gather-across-devices --corpus wiki1m.txt -o runs/tower"
)


@with_settings(OPTIONS)
def simcse(
    output: Path = opts.output_option("the warmed-up tower and its run summary"),
    output_dir_alias: Path | None = opts.old_output_option("--output-dir"),
    model: str | None = typer.Option(
        None, "--model", "-m", help="Tower to start from (sentence-transformers dir). Default: embedded MiniLM."
    ),
    pooling: str | None = opts.pooling_option(training=True),
    corpus: Path | None = opts.corpus_option(),
    text_column: str | None = opts.text_column_option(),
    pairs_file: Path | None = typer.Option(
        None,
        "--pairs-file",
        callback=opts.given_once,
        help="TSV original<TAB>paraphrase (as `jtcse rtt` writes), or a table or dataset of pairs (--columns); the "
        "paraphrase becomes the sentence's positive.",
    ),
    columns: str | None = typer.Option(
        None,
        "--columns",
        help="The two columns of a pairs table, e.g. sentence1,sentence2. Default: sentence1,sentence2; "
        "anchor,positive; or original,paraphrase, the first pair it has.",
    ),
    pairs_alias: Path | None = opts.alias_option("--pairs", "--pairs-file"),
    dev_file: Path | None = opts.dev_file_option(),
    resume: bool = opts.resume_option(),
    overwrite: bool = opts.overwrite_option(),
    device: str | None = opts.device_option(),
    **options,
) -> None:
    summary = train_simcse(
        model,
        corpus,
        output,
        settings=settings_from(OPTIONS, options),
        text_column=text_column,
        pairs_file=pairs_file,
        pair_columns=columns,
        pooling=pooling,
        dev_file=dev_file,
        resume=resume,
        overwrite=overwrite,
        device=device,
    )
    opts.echo_summary(summary, output, "Tower")


def register(app: typer.Typer) -> None:
    app.command("simcse", short_help=SHORT_HELP, help=HELP)(simcse)
