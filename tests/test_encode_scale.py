"""Encoding past one process (issue 23): the multi-process pool, the Ray Data engine, shard folders, and an
index built from precomputed shards. Every path is checked against the plain one-process vectors."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest
from helpers.cli import invoke_cli, one_error_line, run_cli, run_python

from jtcse.errors import JTCSEError
from jtcse.search.build import build_index, build_index_from_embeddings
from jtcse.search.encode import RayEngine, encode_file, meta_path_for
from jtcse.search.index import IVF_DATA_FILE, SearchIndex
from jtcse.search.lines import count_rows, iter_chunks, plan_chunks
from jtcse.search.sinks import PartWriter

SENTENCES = [
    f"Sentence {i} is about {['rivers', 'markets', 'music', 'frogs', 'trains'][i % 5]} and item {i}." for i in range(29)
]


def write_corpus(path: Path, sentences=SENTENCES) -> Path:
    """The sentences with blank and padded lines between them and no final newline."""
    lines = []
    for i, sentence in enumerate(sentences):
        lines += ["", "  "] if i % 7 == 3 else []
        lines.append(f"  {sentence} " if i % 4 == 0 else sentence)
    path.write_text("\n".join(lines + ["", ""]), encoding="utf-8")
    return path


@pytest.fixture
def corpus(tmp_path) -> Path:
    return write_corpus(tmp_path / "corpus.txt")


@pytest.fixture(scope="module")
def ensemble_dir(twin_dir, tiny_roberta, tmp_path_factory) -> str:
    """A concat ensemble of the shared twin (conftest) and a RoBERTa tower: 64-d vectors."""
    from jtcse.training.ensemble import save_ensemble

    out = tmp_path_factory.mktemp("ensemble") / "ens"
    save_ensemble([twin_dir, tiny_roberta], out, device="cpu")
    return str(out)


def read_table(path: Path):
    """A parquet output (file or shards folder) in row order: (vectors, pyarrow table)."""
    import pyarrow.parquet as pq

    table = pq.read_table(path).sort_by("row")
    return np.stack(table.column("embedding").to_numpy(zero_copy_only=False)).astype(np.float32), table


def one_process(model: str, corpus: Path, out: Path, **kwargs) -> tuple[np.ndarray, np.ndarray]:
    """The reference: plain one-process encode into .npy; (vectors, row table)."""
    encode_file(model, corpus, out, chunk_size=4, show_progress=False, **kwargs)
    return np.load(out), np.load(out.with_name(out.stem + ".rows.npy"))


# ------------------------------------------------------------------ chunk spans


def test_chunk_spans_read_back_as_one_sequential_reader(corpus):
    spans, counted = plan_chunks(corpus, 4)
    chunks = list(iter_chunks(corpus, 4))
    assert counted == count_rows(corpus) and counted.rows == len(SENTENCES)
    assert [span.rows for span in spans] == [len(c.texts) for c in chunks]
    assert [span.start_row for span in spans] == list(range(0, len(SENTENCES), 4))
    for span, chunk in zip(reversed(spans), reversed(chunks), strict=True):  # any order, each on its own
        again = span.read(corpus)
        assert again.texts == chunk.texts and np.array_equal(again.rows, chunk.rows)
    corpus.write_text(corpus.read_text().replace("Sentence 5 ", "Sentence five "), encoding="utf-8")
    with pytest.raises(JTCSEError, match="changed while it was being encoded"):
        spans[1].read(corpus)


# ------------------------------------------------------------------ several processes on one machine


@pytest.mark.slow  # two worker processes import torch
def test_two_processes_give_the_one_process_vectors_in_order(twin_dir, corpus, tmp_path):
    expected, rows = one_process(twin_dir, corpus, tmp_path / "one.npy")
    result = encode_file(twin_dir, corpus, tmp_path / "two", chunk_size=4, processes=2, show_progress=False)
    assert (result.rows, result.dim, result.chunks_encoded) == (29, 32, 8)
    vectors, table = read_table(tmp_path / "two")
    np.testing.assert_allclose(vectors, expected, atol=1e-6)
    assert table.column("row").to_pylist() == list(range(29)) and table.column("text").to_pylist() == SENTENCES
    assert np.array_equal(table.column("line").to_numpy(), rows["line"])
    assert np.array_equal(table.column("offset").to_numpy(), rows["offset"])


def test_device_lists_are_checked_before_anything_runs(tiny_bert, corpus, tmp_path):
    out = tmp_path / "v.npy"
    with pytest.raises(ValueError, match="'cuda:7' asked for, but"):
        encode_file(tiny_bert, corpus, out, devices="cpu,cuda:7", show_progress=False)
    with pytest.raises(ValueError, match="unknown device 'tpu9'"):
        encode_file(tiny_bert, corpus, out, devices=["cpu", "tpu9"], show_progress=False)
    with pytest.raises(JTCSEError, match="--processes must be at least 1"):
        encode_file(tiny_bert, corpus, out, processes=0, show_progress=False)
    with pytest.raises(JTCSEError, match="not both"):
        encode_file(tiny_bert, corpus, out, devices="cpu,cpu", processes=2, show_progress=False)
    with pytest.raises(JTCSEError, match="not both"):
        encode_file(tiny_bert, corpus, out, device="cpu", processes=2, show_progress=False)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["corpus.txt"]  # nothing written


@pytest.mark.cli
def test_cli_device_that_does_not_exist_is_one_line(tiny_bert, corpus, tmp_path):
    line = one_error_line(
        invoke_cli("encode", tiny_bert, "-i", corpus, "-o", tmp_path / "v.npy", "--devices", "cpu,cuda:3")
    )
    assert "'cuda:3' asked for, but" in line


# ------------------------------------------------------------------ Ray Data


@pytest.fixture(scope="module")
def ray_local():
    """A local Ray instance with 2 CPUs for this module's Ray tests (shut down after them)."""
    ray = pytest.importorskip("ray")
    ray.init(num_cpus=2, include_dashboard=False, logging_level="ERROR", log_to_driver=False)
    yield ray
    ray.shutdown()


# the tests using ray_local run on one xdist worker, so the run starts one local Ray (about 6 s), not one per worker
ON_ONE_RAY = pytest.mark.xdist_group("ray")


@pytest.mark.slow  # Ray actors import torch
@ON_ONE_RAY
def test_ray_twin_shards_match_one_process_in_order_and_value(ray_local, twin_dir, corpus, tmp_path):
    expected, rows = one_process(twin_dir, corpus, tmp_path / "one.npy")
    out = tmp_path / "shards"
    result = encode_file(twin_dir, corpus, out, chunk_size=4, engine=RayEngine(actors=2), show_progress=False)
    assert (result.rows, result.dim, result.empty_lines, result.chunks_encoded) == (
        29,
        32,
        count_rows(corpus).empty_lines,
        8,
    )
    assert sorted(p.name for p in out.iterdir()) == ["_jtcse.json"] + [
        f"part-{s:012d}.parquet" for s in range(0, 29, 4)
    ]
    vectors, table = read_table(out)
    np.testing.assert_allclose(vectors, expected, atol=1e-6)
    assert table.column("row").to_pylist() == list(range(29)) and table.column("text").to_pylist() == SENTENCES
    assert np.array_equal(table.column("line").to_numpy(), rows["line"])
    meta = json.loads(meta_path_for(out).read_text())
    assert (meta["complete"], meta["rows_done"], meta["parts_done"]) == (True, 29, 8)
    with pytest.raises(JTCSEError, match="already complete"):
        encode_file(twin_dir, corpus, out, chunk_size=4, engine=RayEngine(actors=2), show_progress=False)


@pytest.mark.slow  # Ray actors import torch
@ON_ONE_RAY
def test_ray_ensemble_to_one_parquet_file(ray_local, ensemble_dir, corpus, tmp_path):
    expected, _ = one_process(ensemble_dir, corpus, tmp_path / "one.npy", normalize=True)
    out = tmp_path / "ens.parquet"
    encode_file(
        ensemble_dir, corpus, out, chunk_size=8, normalize=True, engine=RayEngine(actors=1), show_progress=False
    )
    vectors, table = read_table(out)
    assert vectors.shape == (29, 64) and not out.with_name("ens.parquet.parts").exists()
    np.testing.assert_allclose(vectors, expected, atol=1e-6)


@pytest.mark.slow  # Ray actors import torch
@ON_ONE_RAY
def test_ray_reads_an_hf_dataset_as_one_process_does(ray_local, tiny_bert, tmp_path):
    """Ray actors read a table or dataset through jtcse.text_inputs as one process does (row ``i``: its row ``i``),
    an ``hf:`` name too: each actor opens it by name (not as a path)."""
    from datasets import Dataset

    (tmp_path / "hub").mkdir()
    Dataset.from_dict({"id": list(range(29)), "text": SENTENCES}).to_parquet(tmp_path / "hub" / "train.parquet")
    text = tmp_path / "corpus.txt"
    text.write_text("".join(f"{sentence}\n" for sentence in SENTENCES), encoding="utf-8")
    expected, _ = one_process(tiny_bert, text, tmp_path / "one.npy")
    out = tmp_path / "hf.parquet"
    result = encode_file(tiny_bert, f"hf:{tmp_path / 'hub'}", out, chunk_size=8, engine=RayEngine(actors=1),
                         show_progress=False)  # fmt: skip
    assert (result.rows, result.chunks_encoded) == (29, 4)
    vectors, table = read_table(out)
    np.testing.assert_allclose(vectors, expected, atol=1e-6)
    assert table.column("text").to_pylist() == SENTENCES


@pytest.mark.slow  # Ray actors import torch
@ON_ONE_RAY
def test_ray_keeps_the_parts_an_interrupted_run_wrote(ray_local, tiny_bert, corpus, tmp_path):
    out = tmp_path / "shards"

    class Stop(Exception):
        pass

    def stop(done, total):
        if done >= 8:
            raise Stop

    with pytest.raises(Stop):  # the local engine wrote 2 parts, then stopped
        encode_file(tiny_bert, corpus, out, chunk_size=4, show_progress=False, on_chunk=stop)
    first_parts = {p.name: p.stat().st_mtime_ns for p in out.glob("part-*")}
    resumed = encode_file(tiny_bert, corpus, out, chunk_size=4, engine=RayEngine(actors=2), show_progress=False)
    assert (resumed.resumed_from, resumed.chunks_encoded) == (8, 6)
    assert {p.name: p.stat().st_mtime_ns for p in out.glob("part-*") if p.name in first_parts} == first_parts
    expected, _ = one_process(tiny_bert, corpus, tmp_path / "one.npy")
    np.testing.assert_allclose(read_table(out)[0], expected, atol=1e-6)


@pytest.mark.slow  # Ray actors import torch
@ON_ONE_RAY
def test_a_failed_ray_job_is_loud_and_never_marked_finished(ray_local, corpus, tmp_path):
    not_a_model = tmp_path / "not-a-model"
    not_a_model.mkdir()
    out = tmp_path / "shards"
    with pytest.raises(JTCSEError, match=r"The Ray job failed \(.*cannot load the model .*not-a-model"):
        encode_file(str(not_a_model), corpus, out, chunk_size=4, engine=RayEngine(actors=1), show_progress=False)
    assert json.loads(meta_path_for(out).read_text())["complete"] is False and not list(out.glob("part-*"))


def test_ray_engine_requests_that_cannot_work(tiny_bert, corpus, tmp_path):
    with pytest.raises(JTCSEError, match="--engine ray writes parquet"):
        encode_file(tiny_bert, corpus, tmp_path / "v.npy", engine=RayEngine(), show_progress=False)
    with pytest.raises(JTCSEError, match="--actors and --gpus-per-actor, not --device"):
        encode_file(tiny_bert, corpus, tmp_path / "v", engine=RayEngine(), processes=2, show_progress=False)
    with pytest.raises(JTCSEError, match="--actors must be at least 1"):
        RayEngine(actors=0)
    with pytest.raises(JTCSEError, match="model not found"):
        encode_file(str(tmp_path / "gone"), corpus, tmp_path / "v", engine=RayEngine(), show_progress=False)


@pytest.mark.cli
def test_cli_engine_ray_without_ray_names_the_extra(tiny_bert, corpus, tmp_path):
    blocked = (
        "import sys\n"
        "class NoRay:\n"
        "    def find_spec(self, name, path=None, target=None):\n"
        "        if name.split('.')[0] == 'ray':\n"
        "            raise ModuleNotFoundError(f'No module named {name!r}', name=name)\n"
        "sys.meta_path.insert(0, NoRay())\n"
        "from jtcse.cli import main\n"
        f"sys.argv = ['jtcse', 'encode', {tiny_bert!r}, '-i', {str(corpus)!r}, '-o', {str(tmp_path / 'v')!r}, '--engine', 'ray']\n"
        "main()\n"
    )
    line = one_error_line(run_python(blocked))
    assert line == "Error: --engine ray needs Ray Data: pip install 'jtcse[ray]' (ray[data])."


@pytest.mark.cli
@pytest.mark.slow
def test_cli_ray_worker_killed_mid_run_is_retried(tiny_bert, corpus, tmp_path):
    """A real `jtcse encode --engine ray` (its own local Ray); the first actor to finish a chunk SIGKILLs itself."""
    pytest.importorskip("ray")
    marker = tmp_path / "crashed"
    out = tmp_path / "shards"
    env = {"JTCSE_CRASH_AT": "encode-chunk:1", "JTCSE_CRASH_ONCE": marker}
    args = (
        "encode",
        tiny_bert,
        "-i",
        corpus,
        "-o",
        out,
        "--chunk-size",
        4,
        "--engine",
        "ray",
        "--actors",
        2,
        "--no-progress",
    )
    done = run_cli(*args, **env)
    assert done.returncode == 0, done.stderr[-3000:]
    assert marker.exists()  # a worker did die
    assert json.loads(done.stdout)["rows"] == 29 and json.loads(meta_path_for(out).read_text())["complete"] is True
    expected, _ = one_process(tiny_bert, corpus, tmp_path / "one.npy")
    np.testing.assert_allclose(read_table(out)[0], expected, atol=1e-6)


# ------------------------------------------------------------------ index from shards


@pytest.mark.slow  # two encodes, two IVF indexes
def test_index_from_shards_is_the_index_from_text(tiny_bert, corpus, tmp_path):
    encode_file(tiny_bert, corpus, tmp_path / "shards", chunk_size=4, normalize=True, show_progress=False)
    settings = dict(ivf_threshold=10, nlist=3, nprobe=2)  # IVF, its lists on disk
    from_text = build_index(tiny_bert, corpus, tmp_path / "text.idx", chunk_size=4, show_progress=False, **settings)
    from_shards = build_index_from_embeddings(tmp_path / "shards", tmp_path / "shards.idx", **settings)
    a, b = from_text.manifest, from_shards.manifest
    assert (b.kind, b.rows, b.dim, b.model, b.normalized, b.empty_lines) == (
        "ivf",
        29,
        32,
        a.model,
        True,
        a.empty_lines,
    )
    assert b.source == str((tmp_path / "shards").resolve()) and b.texts_sha256 == a.texts_sha256
    assert (tmp_path / "shards.idx" / IVF_DATA_FILE).is_file()
    for query in (SENTENCES[3], "a train to the market"):
        hits_a, hits_b = from_text.search(query, k=29, nprobe=3)[0], from_shards.search(query, k=29, nprobe=3)[0]
        assert [(h.row, h.line, h.text) for h in hits_a] == [(h.row, h.line, h.text) for h in hits_b]
        np.testing.assert_allclose([h.score for h in hits_a], [h.score for h in hits_b], atol=1e-6)
    assert sorted(h.row for h in hits_b) == list(range(29))  # every list visited: every row found once
    moved = tmp_path / "elsewhere" / "moved.idx"  # the lists file is found beside index.faiss, wherever it goes
    moved.parent.mkdir()
    shutil.move(tmp_path / "shards.idx", moved)
    assert SearchIndex(moved).search(SENTENCES[20], k=1)[0][0].text == SENTENCES[20]
    (moved / IVF_DATA_FILE).unlink()
    with pytest.raises(JTCSEError, match=f"missing {IVF_DATA_FILE}"):
        SearchIndex(moved)


@pytest.fixture(scope="module")
def three_encodings(tiny_bert, tmp_path_factory) -> Path:
    """Three corpora encoded three ways (a.npy, b.parquet, shards folder c), not normalised; read-only."""
    root = tmp_path_factory.mktemp("three")
    parts = [SENTENCES[:9], SENTENCES[9:20], SENTENCES[20:]]
    for name, sentences in zip(("a.npy", "b.parquet", "c"), parts, strict=True):
        source = write_corpus(root / f"{name.split('.')[0]}.txt", sentences)
        encode_file(tiny_bert, source, root / "vectors" / name, chunk_size=4, show_progress=False)
    return root


@pytest.mark.parametrize("precision", ["float32", "int8", "binary"])
def test_index_from_a_folder_of_npy_parquet_and_shards(precision, three_encodings, tmp_path):
    """Three corpora encoded three ways, indexed as one: rows in name order, each with its own text and line."""
    index = build_index_from_embeddings(three_encodings / "vectors", tmp_path / "idx", precision=precision)
    assert (index.manifest.rows, index.manifest.normalized, index.manifest.precision) == (29, True, precision)
    sources = [three_encodings / f"{name}.txt" for name in "abc"]
    for row in (0, 8, 9, 19, 20, 28):
        hits = index.search(SENTENCES[row], k=29)[0]
        assert sorted(hit.row for hit in hits) == list(range(29))
        if precision == "float32":  # (random tiny towers: quantized scores cannot rank these near-twins)
            assert hits[0].row == row
        for hit in hits:  # each row keeps its own sentence and its line in its own source
            source = sources[0 if hit.row < 9 else 1 if hit.row < 20 else 2]
            assert hit.text == SENTENCES[hit.row] == source.read_text().split("\n")[hit.line - 1].strip()


@pytest.mark.slow  # four encodes and an ensemble
def test_shards_that_do_not_belong_together_are_refused_by_name(
    tiny_bert, tiny_roberta, ensemble_dir, corpus, tmp_path
):
    folder = tmp_path / "vectors"
    encode_file(tiny_bert, corpus, folder / "a.parquet", show_progress=False)
    encode_file(ensemble_dir, corpus, folder / "b.parquet", show_progress=False)
    with pytest.raises(JTCSEError, match=r"Shards disagree: .*b\.parquet \(64-d.*vs .*a\.parquet \(32-d"):
        build_index_from_embeddings(folder, tmp_path / "idx")
    (folder / "b.parquet").unlink()
    (folder / "b.parquet.json").unlink()
    encode_file(tiny_roberta, corpus, folder / "b.npy", show_progress=False)  # 32-d too, another model
    with pytest.raises(JTCSEError, match=rf"Shards disagree: .*b\.npy \(32-d, not normalised, model {tiny_roberta}\)"):
        build_index_from_embeddings(folder, tmp_path / "idx")
    encode_file(tiny_bert, corpus, folder / "b.npy", normalize=True, overwrite=True, show_progress=False)
    with pytest.raises(JTCSEError, match=r"Shards disagree: .*b\.npy \(32-d, normalised"):
        build_index_from_embeddings(folder, tmp_path / "idx")
    assert not (tmp_path / "idx" / "manifest.json").exists()


def test_unfinished_changed_or_foreign_shards_are_refused(tiny_bert, corpus, tmp_path):
    with pytest.raises(JTCSEError, match="Embeddings not found"):
        build_index_from_embeddings(tmp_path / "nothing", tmp_path / "idx")
    (tmp_path / "empty").mkdir()
    with pytest.raises(JTCSEError, match="holds no embeddings"):
        build_index_from_embeddings(tmp_path / "empty", tmp_path / "idx")

    with pytest.raises(RuntimeError):  # a run stopped after its first chunk
        encode_file(tiny_bert, corpus, tmp_path / "half", chunk_size=4, show_progress=False,
                    on_chunk=lambda done, total: (_ for _ in ()).throw(RuntimeError()))  # fmt: skip
    with pytest.raises(JTCSEError, match=r"half is unfinished \(4 of 29 rows\); run its `jtcse encode` again"):
        build_index_from_embeddings(tmp_path / "half", tmp_path / "idx")

    encode_file(tiny_bert, corpus, tmp_path / "v.npy", show_progress=False)
    corpus.write_text(corpus.read_text() + "\nOne more line.\n", encoding="utf-8")
    with pytest.raises(JTCSEError, match=r"v\.npy holds no text and its input .*corpus\.txt is gone or changed"):
        build_index_from_embeddings(tmp_path / "v.npy", tmp_path / "idx")

    foreign = tmp_path / "foreign.parquet"
    import pyarrow as pa
    import pyarrow.parquet as pq

    pq.write_table(pa.table({"text": ["a"], "embedding": [[0.0, 1.0]]}), foreign)
    with pytest.raises(JTCSEError, match="does not say which model made it"):
        build_index_from_embeddings(foreign, tmp_path / "idx")
    # a part of a shards folder carries its own model, wherever it is copied
    chunk = next(iter_chunks(corpus, 3))
    PartWriter(tmp_path, 16, "float32", {"model": "m16", "normalized": False}).write(0, chunk, np.ones((3, 16)))
    lone = build_index_from_embeddings(tmp_path / "part-000000000000.parquet", tmp_path / "idx")
    assert (lone.manifest.model, lone.manifest.dim, lone.manifest.rows) == ("m16", 16, 3)


def _cut(path: Path) -> None:
    path.write_bytes(path.read_bytes()[: path.stat().st_size // 2])


# (output, what is damaged, how, the error it makes, rows kept, chunks encoded again)
DAMAGE = [
    ("shards", "part-000000000004.parquet", _cut, r"part-000000000004\.parquet is damaged .*\(Parquet magic", 4, 1),
    ("shards", "part-000000000012.parquet", Path.unlink, r"shards has no part holding row 12 \(the next is", 12, 1),
    # a single-file output is encoded again whole (8 chunks): in the full suite only
    pytest.param("v.npy", "v.npy", _cut, r"v\.npy is damaged or missing \(mmap length", 0, 8, marks=pytest.mark.slow),
    pytest.param(
        "v.parquet", "v.parquet", _cut, r"v\.parquet is damaged or not a parquet file", 0, 8, marks=pytest.mark.slow
    ),
]


@pytest.mark.parametrize("name, damaged, damage, error, kept, again", DAMAGE, ids=["cut", "deleted", "npy", "parquet"])
def test_a_damaged_or_missing_part_is_named_and_the_same_encode_mends_just_it(
    name, damaged, damage, error, kept, again, tiny_bert, corpus, tmp_path
):
    """A shard cut short made index build say "Parquet magic bytes not found in footer" (no file named); a deleted
    one made it say "run again", and the encode run again answered "already complete". Now the file is named
    with what to do, and doing it re-encodes just the rows missing: the output is then byte for byte the first. A file
    cut short is no longer what jtcse wrote (issue 42): the encode refuses to replace it, naming it, until it is
    deleted."""
    out = tmp_path / name
    encode_file(tiny_bert, corpus, out, chunk_size=4, show_progress=False)
    files = (
        sorted(out.iterdir())
        if out.is_dir()
        else [out, out.with_name(out.stem + ".rows.npy")][: 1 + (out.suffix == ".npy")]
    )
    first = {path.name: path.read_bytes() for path in files}
    damage(tmp_path / name / damaged if out.is_dir() else tmp_path / damaged)
    with pytest.raises(
        JTCSEError, match=error + r".*; delete a damaged file, then run the `jtcse encode` that wrote it again"
    ):
        build_index_from_embeddings(out, tmp_path / "idx")
    broken = tmp_path / name / damaged if out.is_dir() else tmp_path / damaged
    if broken.exists():
        with pytest.raises(JTCSEError, match=rf"{damaged} is not what jtcse encode wrote there: its content changed"):
            encode_file(tiny_bert, corpus, out, chunk_size=4, show_progress=False)
        broken.unlink()
    mended = encode_file(tiny_bert, corpus, out, chunk_size=4, show_progress=False)
    assert (mended.resumed_from, mended.chunks_encoded) == (kept, again)
    assert {path.name: path.read_bytes() for path in files} == first
    assert build_index_from_embeddings(out, tmp_path / "idx").manifest.rows == 29
    with pytest.raises(JTCSEError, match="is already complete"):
        encode_file(tiny_bert, corpus, out, chunk_size=4, show_progress=False)


@pytest.mark.slow
def test_cli_index_build_from_embeddings(tiny_bert, corpus, tmp_path):
    from typer.testing import CliRunner

    from jtcse.cli import app

    encode_file(tiny_bert, corpus, tmp_path / "shards", chunk_size=4, show_progress=False)
    runner = CliRunner()
    result = runner.invoke(app, ["index", "build", "--embeddings", str(tmp_path / "shards"), "-o", str(tmp_path / "idx"),
                                 "--precision", "int8"])  # fmt: skip
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["rows"] == 29 and json.loads(result.stdout)["precision"] == "int8"
    for args, message in (
        (["-i", str(corpus), "--embeddings", str(tmp_path / "shards")], "one of the two"),
        ([tiny_bert, "--embeddings", str(tmp_path / "shards")], "drop MODEL"),
        (["--embeddings", str(tmp_path / "shards"), "--processes", "2"], "drop --processes"),
    ):
        result = runner.invoke(app, ["index", "build", *args, "-o", str(tmp_path / "idx2")])
        assert isinstance(result.exception, JTCSEError) and message in str(result.exception), result.output
    assert not (tmp_path / "idx2").exists()
