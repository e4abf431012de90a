"""``jtcse encode``: embed a one-sentence-per-line file into .npy or .parquet, streaming and resumable."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Optional

import typer

from jtcse.commands import _options as opts


def register(app: typer.Typer) -> None:
    app.command("encode")(encode)


def encode(
    model: Optional[str] = opts.model_argument(),
    input: Path = opts.input_file_option(),
    output: Path = opts.output_option("the embeddings: FILE.npy or FILE.parquet", folder=False),
    batch_size: int = opts.batch_size_option(64),
    chunk_size: int = opts.chunk_size_option(),
    normalize: bool = typer.Option(False, "--normalize/--no-normalize", help="Scale every vector to unit length."),
    fp16: bool = typer.Option(False, "--fp16", help="Store float16 instead of float32 (half the size)."),
    device: Optional[str] = opts.device_option(),
    overwrite: bool = opts.overwrite_option(),
    progress: bool = opts.progress_option(),
) -> None:
    """Embed every non-empty line of a text file.

    The file is streamed CHUNK-SIZE lines at a time, so memory stays bounded whatever its size.

    Row i of the output is the i-th non-empty line. For .npy, STEM.rows.npy holds each row's 1-based line number and byte offset; .parquet has columns line, offset, text, embedding.

    OUT.json records model, settings and progress: if a run is interrupted, run the same command again and it resumes after the last finished chunk.

    Example: jtcse encode ./my-model -i corpus.txt -o corpus.npy --normalize --fp16
    """
    from jtcse.modeling.loading import resolve_source
    from jtcse.search.encode import encode_file, result_dict

    result = encode_file(
        resolve_source(model),
        input,
        output,
        batch_size=batch_size,
        chunk_size=chunk_size,
        normalize=normalize,
        fp16=fp16,
        device=device,
        overwrite=overwrite,
        show_progress=progress,
    )
    summary = result_dict(result)
    if result.resumed_from:
        typer.echo(f"Resumed after row {result.resumed_from}.", err=True)
    typer.echo(json.dumps(summary, indent=2))
