"""``jtcse encode``: embed a one-sentence-per-line file into .npy, .parquet or parquet shards, streaming and resumable."""

from __future__ import annotations

from pathlib import Path

import typer

from jtcse.commands import _options as opts
from jtcse.locking import json_text

ENGINES = ("local", "ray")


def register(app: typer.Typer) -> None:
    app.command("encode")(encode)


def encode(
    model: str | None = opts.model_argument(),
    input: Path = opts.input_file_option(),
    text_column: str | None = opts.text_column_option(),
    output: Path = opts.output_option(
        "the embeddings: FILE.npy, FILE.parquet, or a folder without a suffix for parquet shards", folder=False
    ),
    batch_size: int = opts.inference_batch_size_option(64),
    chunk_size: int = opts.chunk_size_option(),
    normalize: bool = typer.Option(False, "--normalize/--no-normalize", help="Scale every vector to unit length."),
    fp16: bool = typer.Option(False, "--fp16", help="Store float16 instead of float32 (half the size)."),
    device: str | None = opts.device_option(),
    devices: str | None = opts.devices_option(),
    processes: int | None = opts.processes_option(),
    engine: str = typer.Option(
        "local", "--engine", help="local (this machine) or ray (a Ray cluster: RAY_ADDRESS, or a local Ray)."
    ),
    actors: int | None = typer.Option(
        None,
        "--actors",
        help="--engine ray: actors encoding at once. Default: as many as the cluster's resources allow.",
    ),
    gpus_per_actor: float = typer.Option(
        0.0, "--gpus-per-actor", help="--engine ray: GPUs each actor reserves (e.g. 1, or 0.5 to share one)."
    ),
    cpus_per_actor: float = typer.Option(
        1.0, "--cpus-per-actor", help="--engine ray: CPUs each actor reserves (its torch threads)."
    ),
    overwrite: bool = opts.overwrite_option(),
    progress: bool = opts.progress_option(),
) -> None:
    """Embed every non-empty line of a text file.

    The file is streamed CHUNK-SIZE lines at a time, so memory stays bounded whatever its size.

    Row i of the output is the i-th non-empty line. For .npy, STEM.rows.npy holds each row's 1-based line number and byte offset; .parquet and a shards folder (part-<first row>.parquet files) have columns row, line, offset, text, embedding.

    OUT.json (a shards folder: OUT/_jtcse.json) records model, settings, progress and the files this encode writes: if a run is interrupted, run the same command again and it resumes after the last finished chunk. A file no such record lists (a STEM.rows.npy of yours) is never replaced, --overwrite or not.

    Every device of a machine: --devices cuda:0,cuda:1, or --processes N on the CPU. A Ray cluster: --engine ray (it needs the ray extra of jtcse, i.e. Ray Data).

    Example: jtcse encode ./my-model -i corpus.txt -o corpus.npy --normalize --fp16
    """
    from jtcse.errors import JTCSEError
    from jtcse.modeling.loading import resolve_source
    from jtcse.search.encode import RayEngine, encode_file, result_dict

    if engine not in ENGINES:
        raise JTCSEError(f"--engine must be one of {', '.join(ENGINES)}, not {engine!r}.")
    ray_flags = actors is not None or gpus_per_actor != 0.0 or cpus_per_actor != 1.0
    if engine == "local" and ray_flags:
        raise JTCSEError("--actors, --gpus-per-actor and --cpus-per-actor go with --engine ray.")
    result = encode_file(
        resolve_source(model),
        input,
        output,
        batch_size=batch_size,
        chunk_size=chunk_size,
        normalize=normalize,
        fp16=fp16,
        device=device,
        devices=devices,
        processes=processes,
        engine=RayEngine(actors, gpus_per_actor, cpus_per_actor) if engine == "ray" else None,
        overwrite=overwrite,
        show_progress=progress,
        text_column=text_column,
    )
    summary = result_dict(result)
    if result.resumed_from:
        typer.echo(f"Resumed after row {result.resumed_from}.", err=True)
    typer.echo(json_text(summary), nl=False)
