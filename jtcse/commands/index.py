"""``jtcse index``: build a faiss index over a text file, search it, mine hard negatives."""

from __future__ import annotations

from dataclasses import asdict
from pathlib import Path

import typer

from jtcse.commands import _options as opts
from jtcse.locking import json_text

index_app = typer.Typer(
    name="index",
    help="Semantic search: build a faiss index over a text file (flat, or IVF for large corpora), "
    "query it, and mine hard negatives for training pairs.",
    no_args_is_help=True,
)


def register(app: typer.Typer) -> None:
    app.add_typer(index_app, name="index")


@index_app.command("build")
def build(
    model: str | None = opts.model_argument(),
    input: Path | None = typer.Option(None, "--input", "-i", help=f"The texts: {opts.TEXT_INPUTS}."),
    text_column: str | None = opts.text_column_option(),
    embeddings: Path | None = typer.Option(
        None,
        "--embeddings",
        help="Build from precomputed vectors instead of -i: a `jtcse encode` output, a shards folder, or a folder of them.",
    ),
    output: Path = opts.output_option("the index"),
    index_alias: Path | None = opts.old_output_option("--index"),
    normalize: bool = typer.Option(True, "--normalize/--no-normalize", help="Unit vectors (scores are cosines)."),
    ivf_threshold: int = typer.Option(50_000, help="Corpora with more vectors than this get an IVF index."),
    nlist: int | None = typer.Option(None, help="IVF lists. Default: about 4*sqrt(vectors)."),
    nprobe: int | None = typer.Option(
        None, help="IVF lists searched per query. Default: calibrated to --target-recall."
    ),
    target_recall: float = typer.Option(0.95, help="Recall@10 vs exact search that the calibrated nprobe must reach."),
    train_size: int | None = typer.Option(None, help="Vectors sampled to train the IVF. Default: 64*nlist."),
    batch_size: int = opts.inference_batch_size_option(64),
    chunk_size: int = opts.chunk_size_option(),
    gpu: bool | None = typer.Option(
        None, "--gpu/--cpu", help="faiss on GPU or CPU. Default: GPU when faiss-gpu sees one."
    ),
    device: str | None = opts.device_option(),
    devices: str | None = opts.devices_option(),
    processes: int | None = opts.processes_option(),
    keep_embeddings: bool = typer.Option(
        False, "--keep-embeddings", help="Keep OUTPUT/embeddings.npy (the raw vectors) after building."
    ),
    overwrite: bool = opts.overwrite_option(),
    progress: bool = opts.progress_option(),
    precision: str = typer.Option(
        "float32",
        help="Stored precision: float32; int8 (1/4 the memory); binary (1 bit/dim: 1/32 the memory, plus int8 rescoring vectors kept on disk). Quantized indexes are exact.",
    ),
    rescore_multiplier: int | None = typer.Option(
        None, help="binary: Hamming candidates fetched per hit (k x this) and rescored in float. Default: 50."
    ),
) -> None:
    """Encode a text file (or take precomputed --embeddings) and write a searchable index directory.

    The directory holds manifest.json (model, dimension, normalisation, index kind, nlist/nprobe, precision, format version), index.faiss, texts.txt (a copy of the sentences) and rows.npy (source line numbers), so it can be moved and searched without the source file; jtcse_outputs.json lists them. OUTPUT is a folder of the build's own: one holding a file the build did not write is refused, --overwrite or not.

    Up to --ivf-threshold vectors the index is exact (flat); past it, IVF with nprobe calibrated to --target-recall. An interrupted build resumes where encoding stopped.

    --precision binary keeps 1 bit per dimension in memory and int8 vectors on disk (rescore.npy, memory-mapped): a search fetches --rescore-multiplier x k candidates by Hamming distance and rescores them with the float query. --precision int8 is faiss's 8-bit scalar quantizer, all in memory.

    --embeddings DIR builds from vectors made earlier (e.g. by `jtcse encode --engine ray -o DIR`), a block at a time: an IVF index is trained on a sample and filled block by block, its lists on disk (index.ivfdata), so memory holds the sample and one block, not the corpus.

    Example: jtcse index build ./my-model -i corpus.txt -o corpus.idx --precision binary
    """
    from jtcse.errors import JTCSEError
    from jtcse.modeling.loading import resolve_source
    from jtcse.search.build import build_index, build_index_from_embeddings

    shared = dict(
        normalize=normalize, ivf_threshold=ivf_threshold, nlist=nlist, nprobe=nprobe, target_recall=target_recall,
        train_size=train_size, use_gpu=gpu, overwrite=overwrite, precision=precision,
        **({} if rescore_multiplier is None else {"rescore_multiplier": rescore_multiplier}),
    )  # fmt: skip
    if (input is None) == (embeddings is None):
        raise JTCSEError("Give the text file to encode (-i) or precomputed vectors (--embeddings), one of the two.")
    if embeddings is not None:
        encoding = {"MODEL": model, "--device": device, "--devices": devices, "--processes": processes,
                    "--keep-embeddings": keep_embeddings or None}  # fmt: skip
        if given := [name for name, value in encoding.items() if value is not None]:
            raise JTCSEError(f"--embeddings are already encoded (the model is theirs): drop {', '.join(given)}.")
        built = build_index_from_embeddings(embeddings, output, **shared)
    else:
        built = build_index(
            resolve_source(model), input, output, batch_size=batch_size, chunk_size=chunk_size, device=device,
            devices=devices, processes=processes, keep_embeddings=keep_embeddings, show_progress=progress,
            text_column=text_column, **shared,
        )  # fmt: skip
    typer.echo(json_text(built.manifest.to_dict()), nl=False)


@index_app.command("search")
def search(
    index: Path = typer.Option(..., "--index", help="Index directory made by `jtcse index build`."),
    query: list[str] = typer.Option([], "--query", "-q", help="A query sentence (repeat for several)."),
    queries_file: Path | None = typer.Option(None, help="File of queries, one per line (or a table: its text column)."),
    k: int = typer.Option(10, "-k", help="Results per query."),
    model: str | None = typer.Option(None, help="Query encoder. Default: the model the index was built with."),
    allow_other_model: bool = typer.Option(
        False, "--allow-other-model", help="Accept a query model other than the index's (same dimension)."
    ),
    nprobe: int | None = typer.Option(
        None, help="IVF lists to search (more: slower, higher recall). Default: the index's."
    ),
    rescore_multiplier: int | None = typer.Option(
        None, help="Binary indexes: candidates rescored per hit (more: slower, higher recall). Default: the index's."
    ),
    gpu: bool | None = typer.Option(
        None, "--gpu/--cpu", help="faiss on GPU or CPU. Default: GPU when faiss-gpu sees one."
    ),
    output: Path | None = opts.output_option(
        "the results as JSON lines (they are printed either way)", None, folder=False
    ),
) -> None:
    """Print the k nearest sentences of each query, with score and source line number.

    With -o the results are written as JSON lines, recorded in OUTPUT.json beside them; an existing OUTPUT that
    such a record does not list is never replaced.

    Example: jtcse index search --index corpus.idx -q "a man plays the guitar" -k 5
    """
    from jtcse.corpus import read_texts
    from jtcse.errors import JTCSEError
    from jtcse.output_paths import FileOutput
    from jtcse.search.index import SearchIndex

    out = FileOutput(output, "jtcse index search", inputs=[index, queries_file]) if output is not None else None
    if out is not None:
        out.check()  # before the index loads
    queries = list(query)
    if queries_file is not None:
        queries += read_texts(queries_file, what="queries file").sentences  # a text file, or a table's text column
    if not queries:
        raise JTCSEError("Give a query with --query or --queries-file.")
    loaded = SearchIndex(index, use_gpu=gpu)
    results = loaded.search(
        queries,
        k,
        model=model,
        allow_other_model=allow_other_model,
        nprobe=nprobe,
        rescore_multiplier=rescore_multiplier,
    )
    records = [{"query": q, "hits": [asdict(hit) for hit in hits]} for q, hits in zip(queries, results, strict=True)]
    for record in records:
        typer.echo(f"query: {record['query']}")
        for hit in record["hits"]:
            typer.echo(f"  {hit['rank']:>3}  {hit['score']:.4f}  line {hit['line']}: {hit['text']}")
    if out is not None:
        with out.writing():
            out.add()  # OUTPUT.json, the record, first
            with out.atomic() as tmp:
                tmp.write_text("".join(json_text(r, indent=None) + "\n" for r in records), encoding="utf-8")


@index_app.command("mine")
def mine(
    model: str | None = opts.model_argument(),
    pairs: Path = typer.Option(
        ..., "--pairs", "-i", help="(anchor, positive) pairs: .csv/.tsv with header, .jsonl or .parquet."
    ),
    output: Path = opts.output_option("the mined set: .jsonl, .parquet, .csv or .tsv", folder=False),
    corpus: Path | None = typer.Option(None, help="Extra candidate negatives, one sentence per line."),
    anchor_column: str | None = typer.Option(None, help="Anchor column. Default: the first."),
    positive_column: str | None = typer.Option(None, help="Positive column. Default: the second."),
    num_negatives: int = typer.Option(3, help="Negatives per anchor."),
    range_min: int = typer.Option(0, help="Skip this many nearest candidates (guards against unlabelled positives)."),
    range_max: int | None = typer.Option(None, help="Consider only this many nearest candidates."),
    max_score: float | None = typer.Option(None, help="Drop candidates scoring above this."),
    min_score: float | None = typer.Option(None, help="Drop candidates scoring below this."),
    absolute_margin: float | None = typer.Option(
        None, help="Keep a negative only if score <= positive score - margin."
    ),
    relative_margin: float | None = typer.Option(
        None, help="Keep a negative only if score <= positive score * (1 - margin); 0.05 is the NV-Retriever choice."
    ),
    sampling: str = typer.Option("top", help="'top' (nearest valid candidates) or 'random' (random valid ones)."),
    output_format: str = typer.Option("triplet", help="triplet, n-tuple, labeled-pair or labeled-list."),
    batch_size: int = opts.inference_batch_size_option(64),
    device: str | None = opts.device_option(),
) -> None:
    """Add hard negatives to (anchor, positive) pairs with sentence-transformers' mine_hard_negatives.

    Candidates are the positives (plus --corpus); each anchor's nearest candidates other than its own positive become its negatives. A summary is printed and written to OUTPUT.json.

    Example: jtcse index mine -i nli_pairs.tsv -o nli_triplets.jsonl --num-negatives 1 --range-min 5 --relative-margin 0.05
    """
    from jtcse.modeling.loading import resolve_source
    from jtcse.search.mining import mine_hard_negatives_file

    summary = mine_hard_negatives_file(
        resolve_source(model),
        pairs,
        output,
        corpus_path=corpus,
        anchor_column=anchor_column,
        positive_column=positive_column,
        num_negatives=num_negatives,
        range_min=range_min,
        range_max=range_max,
        max_score=max_score,
        min_score=min_score,
        absolute_margin=absolute_margin,
        relative_margin=relative_margin,
        sampling_strategy=sampling,
        output_format=output_format,
        batch_size=batch_size,
        device=device,
    )
    typer.echo(json_text(summary), nl=False)
