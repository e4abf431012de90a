"""``jtcse train``: train a JTCSE twin (two towers, cross-attention, ICNCE + ICTM) on a text file."""

from __future__ import annotations

from pathlib import Path

import typer

from jtcse.commands import _options as opts
from jtcse.commands._settings import Options, settings_from, with_settings
from jtcse.training.settings import TwinSettings
from jtcse.training.twin import train_twin

OPTIONS = Options(TwinSettings, TwinSettings())

SHORT_HELP = "Train a JTCSE twin (two towers, cross-attention, ICNCE + ICTM) on a corpus."
HELP = """Train a JTCSE twin-tower sentence encoder on a corpus (one sentence per line).

Both towers read every sentence twice (dropout makes the two views) and learn with InfoNCE inside each tower, ICNCE between the towers (on the primitive and the cross-attention stream) and the tensor-modulus term ICTM. The result in OUTPUT is a SentenceTransformer checkpoint whose encode() returns the sum of the two towers' pooled vectors (--pooling: CLS or mean, by default the towers' own); open it with jtcse.modeling.loading.load_model(path) or SentenceTransformer(path, trust_remote_code=True).

With no options it runs offline: two copies of the embedded MiniLM-L6 tower, trained on English prose from Python's standard library. Blank lines are skipped (and counted), duplicate lines are dropped, sentences longer than --max-seq-length tokens are truncated. Rerunning the same command resumes an interrupted run (even one killed with kill -9) from the newest complete checkpoint in OUTPUT/checkpoints, ending with the same model as an uninterrupted run; for a finished run it does nothing. One process at a time writes OUTPUT.

With --dev-file the dev Spearman is scored every --eval-steps; --checkpoint best-dev keeps the best checkpoint by it (the paper's protocol), the default keeps the last step.

Writes OUTPUT/run_summary.json (settings, data counts, loss terms, dev scores) and OUTPUT/training_curves.png.

Example:

jtcse train --tower-a towers/rtt_de --tower-b towers/rtt_fr --corpus wiki1m.txt --dev-file stsbenchmark/sts-dev.csv --checkpoint best-dev -o runs/jtcse-bert

On 4 GPUs, with the negatives of all 4 x 64 sentences per step (docs/distributed.md):

torchrun --nproc_per_node 4 -m jtcse train --gather-across-devices --tower-a towers/rtt_de --tower-b towers/rtt_fr --corpus wiki1m.txt -o runs/jtcse-bert"""


@with_settings(OPTIONS)
def train(
    output: Path = opts.output_option("the twin, its run summary and checkpoints", Path("runs/jtcse")),
    output_dir_alias: Path | None = opts.old_output_option("--output-dir"),
    tower_a: str | None = opts.tower_option("a"),
    tower_b: str | None = opts.tower_option("b"),
    corpus: Path | None = opts.corpus_option(),
    text_column: str | None = opts.text_column_option(),
    pooling: str | None = opts.pooling_option(training=True),
    dev_file: Path | None = opts.dev_file_option(),
    resume: bool = opts.resume_option(),
    overwrite: bool = opts.overwrite_option(),
    device: str | None = opts.device_option(),
    **options,
) -> None:
    summary = train_twin(
        tower_a,
        tower_b,
        corpus,
        output,
        settings=settings_from(OPTIONS, options),
        text_column=text_column,
        pooling=pooling,
        dev_file=dev_file,
        resume=resume,
        overwrite=overwrite,
        device=device,
    )
    opts.echo_summary(summary, Path(summary["output_dir"]), "Twin")


def register(app: typer.Typer) -> None:
    app.command("train", short_help=SHORT_HELP, help=HELP)(train)
