"""``jtcse data fetch NAME -o DIR`` (download a dataset of ``data/manifest.toml``, checked) and ``jtcse data list``."""

from __future__ import annotations

from pathlib import Path

import typer

from jtcse.commands import _options as opts

data_app = typer.Typer(
    name="data",
    help="Get the data the paper's recipes name (Wiki1M, SentEval STS, STS-B): resumable, checksummed downloads.",
    no_args_is_help=True,
)


def _manifest_option():
    return typer.Option(None, "--manifest", help="Manifest to read (default: data/manifest.toml of this checkout).")


@data_app.command("fetch")
def fetch(
    name: str = typer.Argument(..., help="Dataset: wiki1m, senteval-sts or stsb (`jtcse data list` shows them all)."),
    output: Path = opts.output_option("the dataset (also --to DIR)", also=("--to",)),
    overwrite: bool = typer.Option(
        False, "--overwrite", help="Replace a folder that an earlier fetch made (a folder of yours never is)."
    ),
    allow_unpinned: bool = typer.Option(
        False,
        "--allow-unpinned",
        help="Also download files the manifest has no sha256 for; prints the sha256 computed, to pin it.",
    ),  # fmt: skip
    manifest: Path | None = _manifest_option(),
    progress: bool = typer.Option(True, "--progress/--no-progress", help="Show a download progress bar."),
) -> None:
    """Download dataset NAME into the folder DIR, checked against data/manifest.toml.

    \b
    wiki1m        SimCSE's unsupervised corpus, 1M Wikipedia sentences (120 MB)
                  -> DIR/wiki1m_for_simcse.txt, for --corpus
    senteval-sts  STS12-16, STS-B, SICK in the SentEval layout (90 MB download)
                  -> DIR/STS/, DIR/SICK/, for jtcse eval sts --data-dir DIR
    stsb          STS Benchmark train/dev/test, raw text (0.4 MB)
                  -> DIR/sts-train.csv, sts-dev.csv (--dev-file), sts-test.csv
    rtt-pairs     not released with the JTCSE paper: make them with jtcse rtt

    Licences: data/README.md. A download that breaks off resumes where it
    stopped when the same command runs again. A file whose sha256 is not the
    manifest's is deleted and the command fails, leaving DIR as it was.
    senteval-sts and stsb have no published sha256 yet: --allow-unpinned
    fetches them and prints the digest to pin. A DIR that already holds the
    same dataset is left alone; one holding another fetch is replaced only
    with --overwrite. A folder holding a file no fetch wrote (its
    jtcse_outputs.json does not list it: a notes.txt you added), the working
    directory, a folder holding it and the home folder are never replaced.

    Example: jtcse data fetch wiki1m -o data/wiki1m
    """
    from jtcse.fetch import fetch_dataset

    result = fetch_dataset(
        name, output, manifest=manifest, overwrite=overwrite, allow_unpinned=allow_unpinned, progress=progress
    )
    if result.status == "already":
        typer.echo(f"{name} is already in {output} (its jtcse_data.json matches the manifest); nothing to do.")
        return
    typer.echo(f"{name} written to {output}: {', '.join(result.entries)}")
    for file_name in result.unpinned:
        typer.echo(f'  {file_name}: sha256 = "{result.sha256[file_name]}"  (not pinned; add it to the manifest)')


@data_app.command("list")
def list_datasets(manifest: Path | None = _manifest_option()) -> None:
    """List the datasets of the manifest: name, download size, whether every file has a pinned sha256, licence.

    Example: jtcse data list
    """
    from jtcse.fetch import load_manifest

    loaded = load_manifest(manifest)
    for entry in loaded.datasets.values():
        if not entry.available:
            typer.echo(f"{entry.name:14} not available: {entry.reason}")
            continue
        pinned = "pinned" if not entry.unpinned else "needs --allow-unpinned"
        typer.echo(f"{entry.name:14} {entry.approx_size or '?'} ({pinned})\n{'':14} {entry.summary}\n"
                   f"{'':14} -> {entry.layout}\n{'':14} licence: {entry.licence}")  # fmt: skip


def register(app: typer.Typer) -> None:
    app.add_typer(data_app, name="data")
