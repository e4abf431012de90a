"""Writing an index directory (:mod:`jtcse.search.index`): from a text file, or from precomputed embeddings.

:func:`build_index` encodes the file into ``INDEX/embeddings.npy`` (:func:`jtcse.search.encode.encode_file`, so
an interrupted build resumes), then builds from those vectors; :func:`build_index_from_embeddings` builds from
vectors made earlier (:mod:`jtcse.search.shards`: one ``jtcse encode`` output, a shards folder, or a folder of
them). Both then write the same directory the same way, reading the vectors a block at a time:

* ``texts.txt`` and ``rows.npy`` from the shards' texts (block by block);
* up to ``ivf_threshold`` rows: an exact flat index (:func:`~jtcse.search.faiss_index.build_faiss_index`);
* past it, IVF-Flat with its inverted lists on disk (``index.ivfdata``, faiss's ``OnDiskInvertedLists``): the
  k-means is trained on a sample, every block of rows is added to an empty copy of the trained index and
  written out, and faiss's ``merge_ondisk`` joins them into ``index.ivfdata``, memory-mapped when searched.
  Memory holds the sample and one block, not the corpus; ``nprobe`` is calibrated as for the in-memory index;
* ``int8`` / ``binary``: the quantized exact indexes (1/4 and 1/32 of float32, held in memory).

The manifest is written last: a directory without one is not (yet) an index.
"""

from __future__ import annotations

import shutil
import time
from pathlib import Path
from typing import Any

import numpy as np

from jtcse.errors import JTCSEError
from jtcse.locking import locks_output
from jtcse.output_paths import FolderOutput, write_errors
from jtcse.search.encode import encode_file, output_files
from jtcse.search.faiss_index import (
    DEFAULT_IVF_THRESHOLD,
    DEFAULT_RESCORE_MULTIPLIER,
    DEFAULT_TARGET_RECALL,
    BuiltIndex,
    build_faiss_index,
    build_quantized_index,
    check_nlist,
    check_precision,
    choose_nprobe,
    import_faiss,
    train_ivf,
    want_gpu,
)
from jtcse.search.index import (
    EMBEDDINGS_FILE,
    INDEX_FILE,
    IVF_DATA_FILE,
    MANIFEST,
    RANGES_FILE,
    RESCORE_FILE,
    ROWS_FILE,
    TEXTS_FILE,
    IndexManifest,
    SearchIndex,
    file_digest,
    write_rescore_vectors,
)
from jtcse.search.lines import ROW_DTYPE, count_rows
from jtcse.search.model_identity import resolve_model
from jtcse.search.shards import Shard, ShardVectors, find_shards, iter_texts
from jtcse.text_inputs import input_name, is_table

_PARTS_FOLDER = ".ivf-parts"


def index_output(index_dir: str | Path, inputs=()) -> FolderOutput:
    """``index_dir`` as what ``jtcse index build`` writes (:class:`~jtcse.output_paths.FolderOutput`): a folder of its
    own (``jtcse_outputs.json`` lists each file), never one of ``inputs`` nor a folder holding one, built beside the
    old one (``INDEX.tmp``) and swapped in once complete (:meth:`~jtcse.output_paths.FolderOutput.replacing`)."""
    return FolderOutput(index_dir, "jtcse index build", inputs=inputs, whole=True)


def _kept(out: FolderOutput, resume: bool):
    """An ``OSError`` while building as one line: the old index is kept (:func:`~jtcse.output_paths.write_errors`)."""
    old = f"{out.path} is as it was" if (out.path / MANIFEST).exists() else "Nothing was replaced"
    then = f" ({out.path}.tmp), and the same command goes on from the vectors it finished there" if resume else ""
    return write_errors(out.path, f"{old}: the new index was being built beside it{then}.")


def build_ivf_on_disk(
    vectors: Any,
    folder: Path,
    *,
    nlist: int | None = None,
    nprobe: int | None = None,
    target_recall: float = DEFAULT_TARGET_RECALL,
    train_size: int | None = None,
    seed: int = 0,
    use_gpu: bool | None = None,
    block_rows: int = 65_536,
) -> BuiltIndex:
    """IVF-Flat over ``vectors`` (any ``(rows, dim)`` array-like read by slices) with its lists in
    ``folder/index.ivfdata``; see the module docstring. The index returned must be written to ``folder``."""
    from faiss.contrib.ondisk import merge_ondisk

    faiss = import_faiss()
    rows, dim = vectors.shape
    nlist = check_nlist(nlist, rows)
    gpu = want_gpu(use_gpu)
    index = faiss.IndexIVFFlat(faiss.IndexFlatIP(dim), dim, nlist, faiss.METRIC_INNER_PRODUCT)
    if gpu:  # pragma: no cover - no GPU in CI
        trainer = faiss.index_cpu_to_all_gpus(index)
        sample = train_ivf(trainer, vectors, nlist, train_size=train_size, seed=seed)
        index = faiss.index_gpu_to_cpu(trainer)
    else:
        sample = train_ivf(index, vectors, nlist, train_size=train_size, seed=seed)
    trained = faiss.serialize_index(index)
    parts_dir = folder / _PARTS_FOLDER
    shutil.rmtree(parts_dir, ignore_errors=True)
    parts_dir.mkdir(parents=True)
    parts = []
    for start in range(0, rows, block_rows):
        part = faiss.deserialize_index(trained)
        block = np.ascontiguousarray(vectors[start : start + block_rows], dtype=np.float32)
        part.add_with_ids(block, np.arange(start, start + len(block), dtype=np.int64))
        parts.append(str(parts_dir / f"{start:012d}.index"))
        faiss.write_index(part, parts[-1])
        del part, block
    (folder / IVF_DATA_FILE).unlink(missing_ok=True)
    merge_ondisk(index, parts, str(folder / IVF_DATA_FILE))
    shutil.rmtree(parts_dir)
    nprobe, calibration = choose_nprobe(
        index, vectors, nlist, nprobe, target_recall=target_recall, seed=seed, sample=sample, gpu=gpu
    )
    return BuiltIndex(index=index, kind="ivf", nlist=nlist, nprobe=nprobe, calibration=calibration)


def _write_texts(shards: list[Shard], index_dir: Path, rows: int) -> None:
    """texts.txt (every row's sentence, one per line) and rows.npy (source line, offset in texts.txt)."""
    from numpy.lib.format import open_memmap

    table = open_memmap(index_dir / ROWS_FILE, mode="w+", dtype=ROW_DTYPE, shape=(rows,))
    done = position = 0
    with (index_dir / TEXTS_FILE).open("wb") as out:
        for texts, lines in iter_texts(shards):
            # a table's text may hold line breaks: texts.txt keeps one row a line (its copy joins them with spaces)
            encoded = [(text.replace("\n", " ") + "\n").encode("utf-8") for text in texts]
            lengths = np.fromiter((len(b) for b in encoded), dtype=np.int64, count=len(encoded))
            if done + len(encoded) > rows:
                break
            block = table[done : done + len(encoded)]
            block["line"] = lines
            block["offset"] = position + np.concatenate(([0], np.cumsum(lengths)[:-1]))
            out.write(b"".join(encoded))
            position += int(lengths.sum())
            done += len(encoded)
    if done != rows:
        raise JTCSEError(
            f"The texts of {shards[0].path} changed while the index was being built; build again with --overwrite."
        )
    table.flush()
    del table


def _prepare(out: FolderOutput, overwrite: bool, check_input=None) -> None:
    """Refuse to build over an index without ``overwrite``; with it, the old index stays until the new one, built
    beside it, replaces it whole (only what the old build's record lists is removed then)."""
    out.check()
    if (out.path / MANIFEST).exists():
        if not overwrite:
            raise JTCSEError(f"{out.path} already holds an index; pass --overwrite to rebuild it.")
        if check_input is not None:
            check_input()  # a bad input must not cost the user the old index


def _write_index(
    shards: list[Shard],
    out: FolderOutput,
    *,
    model: str,
    source: str,
    normalize: bool,
    ivf_threshold: int,
    nlist: int | None,
    nprobe: int | None,
    target_recall: float,
    train_size: int | None,
    use_gpu: bool | None,
    seed: int,
    precision: str,
    rescore_multiplier: int,
    started: float,
) -> IndexManifest:
    """Everything but the encoding: texts, the faiss index at ``precision``, then the manifest; each file entered
    in the output's record before it is written."""
    faiss = import_faiss()
    index_dir = out.path
    vectors = ShardVectors(shards, normalize=normalize)
    rows, dim = vectors.shape
    out.add(TEXTS_FILE, ROWS_FILE, INDEX_FILE)
    _write_texts(shards, index_dir, rows)
    texts_bytes, texts_sha256 = file_digest(index_dir / TEXTS_FILE)
    if precision != "float32":
        built = BuiltIndex(index=build_quantized_index(vectors, precision, seed=seed), kind="flat")
        if precision == "binary":
            faiss.write_index_binary(built.index, str(index_dir / INDEX_FILE))
            out.add(RANGES_FILE, RESCORE_FILE)
            np.save(index_dir / RANGES_FILE, write_rescore_vectors(vectors, index_dir / RESCORE_FILE))
        else:
            faiss.write_index(built.index, str(index_dir / INDEX_FILE))
    else:
        if rows <= ivf_threshold:
            built = build_faiss_index(vectors, ivf_threshold=ivf_threshold, seed=seed, use_gpu=use_gpu)
        else:
            out.add(IVF_DATA_FILE, _PARTS_FOLDER)
            built = build_ivf_on_disk(
                vectors,
                index_dir,
                nlist=nlist,
                nprobe=nprobe,
                target_recall=target_recall,
                train_size=train_size,
                seed=seed,
                use_gpu=use_gpu,
            )
        faiss.write_index(built.index, str(index_dir / INDEX_FILE))
    manifest = IndexManifest(
        model=model,
        dim=dim,
        normalized=normalize or all(shard.normalized for shard in shards),
        kind=built.kind,
        rows=rows,
        nlist=built.nlist,
        nprobe=built.nprobe,
        source=source,
        empty_lines=sum(shard.empty_lines for shard in shards),
        precision=precision,
        rescore_multiplier=int(rescore_multiplier) if precision == "binary" else None,
        rescore_precision="int8" if precision == "binary" else None,
        texts_bytes=texts_bytes,
        texts_sha256=texts_sha256,
        calibration={**built.calibration, "build_seconds": round(time.perf_counter() - started, 3)},
    )
    out.write_json(MANIFEST, manifest.to_dict())
    return manifest


def _check_options(precision: str, rescore_multiplier: int) -> None:
    check_precision(precision)
    if rescore_multiplier < 1:
        raise JTCSEError(f"rescore_multiplier must be at least 1, not {rescore_multiplier}")


@locks_output("index_dir")  # one build per index folder
def build_index(
    model: Any,
    input_path: str | Path,
    index_dir: str | Path,
    *,
    model_name: str | None = None,
    normalize: bool = True,
    batch_size: int = 64,
    chunk_size: int = 8192,
    ivf_threshold: int = DEFAULT_IVF_THRESHOLD,
    nlist: int | None = None,
    nprobe: int | None = None,
    target_recall: float = DEFAULT_TARGET_RECALL,
    train_size: int | None = None,
    use_gpu: bool | None = None,
    device: str | None = None,
    devices: str | list[str] | None = None,
    processes: int | None = None,
    keep_embeddings: bool = False,
    overwrite: bool = False,
    show_progress: bool = True,
    seed: int = 0,
    precision: str = "float32",
    rescore_multiplier: int = DEFAULT_RESCORE_MULTIPLIER,
    text_column: str | None = None,
) -> SearchIndex:
    """Encode ``input_path`` (one sentence per line, or a table or dataset by its ``text_column``:
    :mod:`jtcse.text_inputs`) and write a searchable index directory.

    The index is built beside ``index_dir`` (``INDEX.tmp``) and swapped in when complete, so the old one stays until
    then. Encoding goes to ``INDEX.tmp/embeddings.npy`` through :func:`encode_file` (``reuse=True``; ``device``, or
    ``devices``/``processes`` for several worker processes), so an interrupted build resumes and finished
    embeddings are not encoded again; that file is removed at the end unless ``keep_embeddings``.
    ``precision`` "int8"/"binary" quantizes the corpus (exact search; binary rescores ``rescore_multiplier × k``
    Hamming candidates with the float query against their int8 vectors in ``rescore.npy``).
    """
    _check_options(precision, rescore_multiplier)
    started = time.perf_counter()
    input_path = Path(input_path)
    if not is_table(input_path) and not input_path.is_file():
        raise JTCSEError(f"Input file not found: {input_path}")
    out = index_output(index_dir, [input_path, model])
    out.check()  # before the model loads
    pooled = devices is not None or processes is not None
    model, identity = resolve_model(model, model_name, None if pooled else device)
    _prepare(out, overwrite, lambda: count_rows(input_path, text_column))
    with _kept(out, resume=True), out.replacing(resume=True) as new:
        embeddings = new.path / EMBEDDINGS_FILE
        working = [path.name for path in output_files(embeddings)]
        new.add(*working)
        # An earlier, interrupted build left embeddings beside the index: encode_file reuses them if finished,
        # resumes them if not, and starts over only if they were made with other settings or from other inputs.
        encode_file(
            model,
            input_path,
            embeddings,
            batch_size=batch_size,
            chunk_size=chunk_size,
            normalize=normalize,
            show_progress=show_progress,
            model_name=identity,
            reuse=True,
            devices=devices,
            processes=processes,
            text_column=text_column,
        )
        _write_index(
            find_shards(embeddings),
            new,
            model=identity,
            source=input_name(input_path),
            normalize=normalize,
            ivf_threshold=ivf_threshold,
            nlist=nlist,
            nprobe=nprobe,
            target_recall=target_recall,
            train_size=train_size,
            use_gpu=use_gpu,
            seed=seed,
            precision=precision,
            rescore_multiplier=rescore_multiplier,
            started=started,
        )
        if not keep_embeddings:
            new.remove(*working)
    index = SearchIndex(out.path, use_gpu=use_gpu)
    index._models[identity] = model
    return index


@locks_output("index_dir")
def build_index_from_embeddings(
    embeddings: str | Path,
    index_dir: str | Path,
    *,
    normalize: bool = True,
    ivf_threshold: int = DEFAULT_IVF_THRESHOLD,
    nlist: int | None = None,
    nprobe: int | None = None,
    target_recall: float = DEFAULT_TARGET_RECALL,
    train_size: int | None = None,
    use_gpu: bool | None = None,
    overwrite: bool = False,
    seed: int = 0,
    precision: str = "float32",
    rescore_multiplier: int = DEFAULT_RESCORE_MULTIPLIER,
) -> SearchIndex:
    """Write an index directory over precomputed ``embeddings`` (:func:`jtcse.search.shards.find_shards`), reading
    them a block at a time. The model recorded is the shards' own; ``normalize`` scales unnormalised vectors."""
    _check_options(precision, rescore_multiplier)
    started = time.perf_counter()
    out = index_output(index_dir, [embeddings])
    out.check()
    shards = find_shards(embeddings)
    _prepare(out, overwrite)
    with _kept(out, resume=False), out.replacing() as new:
        _write_index(
            shards,
            new,
            model=shards[0].model,
            source=str(Path(embeddings).resolve()),
            normalize=normalize,
            ivf_threshold=ivf_threshold,
            nlist=nlist,
            nprobe=nprobe,
            target_recall=target_recall,
            train_size=train_size,
            use_gpu=use_gpu,
            seed=seed,
            precision=precision,
            rescore_multiplier=rescore_multiplier,
            started=started,
        )
    return SearchIndex(out.path, use_gpu=use_gpu)
