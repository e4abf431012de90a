"""Streaming encode, faiss index build/search (float32, int8, binary) and hard-negative mining (jtcse.search)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from helpers.cli import invoke_cli

from jtcse.errors import JTCSEError
from jtcse.output_paths import FolderOutput
from jtcse.search.build import build_index
from jtcse.search.encode import encode_file, meta_path_for, rows_path_for
from jtcse.search.faiss_index import (
    DEFAULT_RESCORE_MULTIPLIER,
    build_faiss_index,
    calibrate_nprobe,
    default_nlist,
    exact_search,
    gpu_available,
    recall_at_k,
)
from jtcse.search.index import INDEX_FORMAT_VERSION, MANIFEST, RESCORE_FILE, SearchIndex, read_manifest
from jtcse.search.lines import count_rows, iter_chunks, read_line_at

SENTENCES = [
    "A man is playing a guitar on the stage.",
    "The cat sleeps on the warm windowsill.",
    "Stock markets fell sharply on Monday.",
    "She baked bread for the whole family.",
    "Rain is expected across the north tonight.",
    "The committee approved the new budget.",
    "Two children are building a sandcastle.",
    "A train departs from platform nine every hour.",
    "Scientists discovered a new species of frog.",
    "He repaired the bicycle with an old wrench.",
    "Café owners complained about the new tax.",
]


def write_corpus(path: Path) -> list[str]:
    """SENTENCES with blank/whitespace lines, a CRLF ending and padding; returns the file's lines."""
    lines = ["", SENTENCES[0], "   ", SENTENCES[1] + "\r", SENTENCES[2], "", ""]
    lines += [f"  {s}  " if i % 3 == 0 else s for i, s in enumerate(SENTENCES[3:])] + [""]
    path.write_bytes("\n".join(lines).encode("utf-8"))
    return lines


@pytest.fixture()
def corpus(tmp_path) -> Path:
    path = tmp_path / "corpus.txt"
    write_corpus(path)
    return path


@pytest.fixture(scope="module")
def tiny_model(tiny_bert):
    from sentence_transformers import SentenceTransformer

    return SentenceTransformer(tiny_bert, device="cpu")


# ------------------------------------------------------------------ lines


def test_chunks_skip_blank_lines_and_offsets_find_each_sentence(corpus):
    lines = corpus.read_bytes().decode("utf-8").split("\n")
    expected_lines = [i + 1 for i, line in enumerate(lines) if line.strip()]
    chunks = list(iter_chunks(corpus, 4))
    assert [len(c.texts) for c in chunks] == [4, 4, 3]
    texts = [t for c in chunks for t in c.texts]
    rows = np.concatenate([c.rows for c in chunks])
    assert texts == SENTENCES
    assert rows["line"].tolist() == expected_lines
    with corpus.open("rb") as handle:
        assert [read_line_at(handle, off) for off in rows["offset"]] == SENTENCES
    # Restarting after the first chunk gives exactly the rest.
    rest = list(iter_chunks(corpus, 4, start_byte=chunks[0].end_byte, start_line=chunks[0].next_line))
    assert [t for c in rest for t in c.texts] == SENTENCES[4:]
    assert np.concatenate([c.rows for c in rest]).tolist() == rows[4:].tolist()
    count = count_rows(corpus)
    assert (count.rows, count.empty_lines) == (len(SENTENCES), 4)  # the final "" is no line


def test_line_reading_errors(tmp_path):
    with pytest.raises(JTCSEError, match="not found"):
        count_rows(tmp_path / "missing.txt")
    for content in (b"", b"\n \n\t\n"):
        (tmp_path / "empty.txt").write_bytes(content)
        with pytest.raises(JTCSEError, match="no sentences"):
            count_rows(tmp_path / "empty.txt")
    (tmp_path / "bad.txt").write_bytes(b"fine\n\nbad \xfe here\n")
    with pytest.raises(JTCSEError, match="line 3 is not valid UTF-8"):
        count_rows(tmp_path / "bad.txt")
    with pytest.raises(JTCSEError, match="chunk size"):
        list(iter_chunks(tmp_path / "bad.txt", 0))


# ------------------------------------------------------------------ encode


def test_encode_npy_in_chunks_equals_direct_encode(corpus, tmp_path, tiny_model, monkeypatch):
    seen_batches: list[int] = []
    real_encode = tiny_model.encode

    def spy(sentences, **kwargs):
        seen_batches.append(len(sentences))
        return real_encode(sentences, **kwargs)

    monkeypatch.setattr(tiny_model, "encode", spy)
    out = tmp_path / "emb.npy"
    result = encode_file(tiny_model, corpus, out, chunk_size=3, normalize=True, model_name="tiny", show_progress=False)
    # The file is larger than a chunk: it was read and encoded 3 sentences at a time.
    assert seen_batches == [3, 3, 3, 2] and result.chunks_encoded == 4
    assert (result.rows, result.empty_lines, result.dim, result.resumed_from) == (11, 4, 32, 0)
    expected = real_encode(SENTENCES, normalize_embeddings=True)
    vectors = np.load(out)
    assert vectors.dtype == np.float32 and vectors.shape == (11, 32)
    np.testing.assert_allclose(vectors, expected, atol=1e-5)
    np.testing.assert_allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)
    rows = np.load(rows_path_for(out))
    with corpus.open("rb") as handle:
        assert [read_line_at(handle, off) for off in rows["offset"]] == SENTENCES
    meta = json.loads(meta_path_for(out).read_text())
    assert meta["complete"] and meta["model"] == "tiny" and meta["normalized"] and meta["rows_done"] == 11


def test_encode_reuse_returns_a_finished_output_and_restarts_one_with_other_settings(
    corpus, tmp_path, tiny_model, monkeypatch
):
    out = tmp_path / "emb.npy"
    first = encode_file(tiny_model, corpus, out, normalize=True, model_name="tiny", show_progress=False)
    with pytest.raises(JTCSEError, match="already complete"):  # without reuse a finished output is refused
        encode_file(tiny_model, corpus, out, normalize=True, model_name="tiny", show_progress=False)
    encoded: list[str] = []
    real_encode = tiny_model.encode
    monkeypatch.setattr(tiny_model, "encode", lambda s, **kw: encoded.extend(s) or real_encode(s, **kw))
    again = encode_file(tiny_model, corpus, out, normalize=True, model_name="tiny", show_progress=False, reuse=True)
    assert encoded == [] and (again.rows, again.dim, again.resumed_from, again.chunks_encoded) == (11, 32, 11, 0)
    assert again.output == first.output and again.meta == first.meta
    # other settings (no normalisation): started over, not refused and not reused
    other = encode_file(tiny_model, corpus, out, normalize=False, model_name="tiny", show_progress=False, reuse=True)
    assert encoded == SENTENCES and other.resumed_from == 0 and not other.normalized
    np.testing.assert_allclose(np.load(out), real_encode(SENTENCES), atol=1e-5)
    # a stray output without a progress file is started over too
    meta_path_for(out).unlink()
    encoded.clear()
    encode_file(tiny_model, corpus, out, model_name="tiny", show_progress=False, reuse=True)
    assert encoded == SENTENCES and json.loads(meta_path_for(out).read_text())["complete"]


def test_encode_parquet_fp16(corpus, tmp_path, tiny_model, tiny_bert):
    import pyarrow.parquet as pq

    out = tmp_path / "emb.parquet"
    result = encode_file(tiny_bert, corpus, out, chunk_size=4, fp16=True, show_progress=False)
    assert result.dtype == "float16" and result.chunks_encoded == 3
    table = pq.read_table(out)
    assert table.column_names == ["row", "line", "offset", "text", "embedding"]
    assert table.column("row").to_pylist() == list(range(11))
    assert str(table.schema.field("embedding").type.value_type) == "halffloat"
    recorded = json.loads(table.schema.metadata[b"jtcse"])  # the file says what made it, wherever it is copied
    assert recorded == {"model": str(Path(tiny_bert).resolve()), "normalized": False, "input": str(corpus.resolve()),
                        "dim": 32, "dtype": "float16"}  # fmt: skip
    assert table.column("text").to_pylist() == SENTENCES
    vectors = np.asarray(table.column("embedding").to_pylist(), dtype=np.float32)
    np.testing.assert_allclose(vectors, tiny_model.encode(SENTENCES), rtol=2e-3, atol=2e-3)
    assert not out.with_name(out.name + ".parts").exists()
    assert json.loads(meta_path_for(out).read_text())["model"] == str(Path(tiny_bert).resolve())


class Interrupt(Exception):
    pass


@pytest.mark.parametrize("suffix", [".npy", ".parquet"])
def test_interrupted_encode_resumes_after_last_chunk(corpus, tmp_path, tiny_bert, suffix):
    out = tmp_path / f"emb{suffix}"

    def stop_after_two_chunks(done, total):
        if done >= 6:
            raise Interrupt

    with pytest.raises(Interrupt):
        encode_file(tiny_bert, corpus, out, chunk_size=3, show_progress=False, on_chunk=stop_after_two_chunks)
    meta = json.loads(meta_path_for(out).read_text())
    assert (meta["complete"], meta["rows_done"]) == (False, 6)

    resumed = encode_file(tiny_bert, corpus, out, chunk_size=3, show_progress=False)
    assert (resumed.resumed_from, resumed.chunks_encoded, resumed.rows) == (6, 2, 11)
    fresh = encode_file(tiny_bert, corpus, tmp_path / f"fresh{suffix}", chunk_size=3, show_progress=False)
    assert fresh.resumed_from == 0
    if suffix == ".npy":
        np.testing.assert_allclose(np.load(out), np.load(tmp_path / "fresh.npy"), atol=1e-6)
        assert np.array_equal(np.load(rows_path_for(out)), np.load(rows_path_for(tmp_path / "fresh.npy")))
    else:
        import pyarrow.parquet as pq

        a, b = pq.read_table(out), pq.read_table(tmp_path / "fresh.parquet")
        assert a.column("text").to_pylist() == SENTENCES and a.column("line").equals(b.column("line"))
        np.testing.assert_allclose(
            np.asarray(a.column("embedding").to_pylist()), np.asarray(b.column("embedding").to_pylist()), atol=1e-6
        )


def test_encode_refuses_bad_input_and_conflicting_outputs(corpus, tmp_path, tiny_bert, tiny_model):
    empty = tmp_path / "empty.txt"
    empty.write_text("\n   \n\n", encoding="utf-8")
    with pytest.raises(JTCSEError, match="no sentences"):
        encode_file(tiny_bert, empty, tmp_path / "e.npy", show_progress=False)
    with pytest.raises(JTCSEError, match="must end in .npy or .parquet, or be a folder name without a suffix"):
        encode_file(tiny_bert, corpus, tmp_path / "e.txt", show_progress=False)
    with pytest.raises(JTCSEError, match="not found"):
        encode_file(tiny_bert, tmp_path / "nope.txt", tmp_path / "e.npy", show_progress=False)
    with pytest.raises(JTCSEError, match="model_name"):
        encode_file(tiny_model, corpus, tmp_path / "e.npy", show_progress=False)
    with pytest.raises(JTCSEError, match="model not found"):
        encode_file(str(tmp_path / "no-model"), corpus, tmp_path / "e.npy", show_progress=False)

    out = tmp_path / "emb.npy"
    with pytest.raises(Interrupt):
        encode_file(
            tiny_bert,
            corpus,
            out,
            chunk_size=3,
            show_progress=False,
            on_chunk=lambda d, t: (_ for _ in ()).throw(Interrupt()),
        )
    with pytest.raises(JTCSEError, match="normalized: False then, True now"):
        encode_file(tiny_bert, corpus, out, chunk_size=3, normalize=True, show_progress=False)
    encode_file(tiny_bert, corpus, out, normalize=True, overwrite=True, show_progress=False)
    with pytest.raises(JTCSEError, match="already complete"):
        encode_file(tiny_bert, corpus, out, normalize=True, show_progress=False)
    foreign = tmp_path / "foreign.npy"
    np.save(foreign, np.zeros(3))
    for overwrite in (False, True):  # no progress file lists it: jtcse did not write it, so it is never replaced
        with pytest.raises(JTCSEError, match=r"foreign\.npy was not written by jtcse encode \(foreign\.npy\.json"):
            encode_file(tiny_bert, corpus, foreign, overwrite=overwrite, show_progress=False)


# ------------------------------------------------------------------ faiss pieces


def test_recall_and_exact_search_against_hand_and_numpy():
    truth = np.array([[1, 2, 3], [4, 5, -1]])
    found = np.array([[3, 9, 1], [5, 7, 8]])
    assert recall_at_k(found, truth) == pytest.approx((2 / 3 + 1 / 2) / 2)
    assert [default_nlist(n) for n in (10, 1000, 100_000)] == [1, 25, 1265]

    rng = np.random.default_rng(0)
    base = rng.standard_normal((1000, 8)).astype(np.float32)
    queries = rng.standard_normal((5, 8)).astype(np.float32)
    scores, ids = exact_search(queries, base, 4, chunk_rows=128)  # crosses chunk borders
    naive = queries @ base.T
    assert np.array_equal(ids, np.argsort(-naive, axis=1)[:, :4])
    np.testing.assert_allclose(scores, np.sort(naive, axis=1)[:, ::-1][:, :4], rtol=1e-5)


def test_ivf_past_threshold_reaches_calibrated_recall():
    rng = np.random.default_rng(1)
    centres = rng.standard_normal((40, 16))
    data = (centres[rng.integers(0, 40, 4000)] + 0.3 * rng.standard_normal((4000, 16))).astype(np.float32)
    data /= np.linalg.norm(data, axis=1, keepdims=True)
    flat = build_faiss_index(data, ivf_threshold=5000)
    assert flat.kind == "flat" and flat.nprobe is None
    built = build_faiss_index(data, ivf_threshold=1000, target_recall=0.95)
    assert built.kind == "ivf" and built.nlist == default_nlist(4000) and 1 <= built.nprobe <= built.nlist
    assert built.calibration["recall"] >= 0.95
    # Fresh queries (not corpus rows) see about the calibrated recall against exact search.
    queries = (centres[rng.integers(0, 40, 200)] + 0.3 * rng.standard_normal((200, 16))).astype(np.float32)
    queries /= np.linalg.norm(queries, axis=1, keepdims=True)
    _, truth = flat.index.search(queries, 10)
    _, found = built.index.search(queries, 10)
    assert recall_at_k(found, truth) >= 0.9
    # nprobe = nlist visits every list: IVF-Flat is then exact.
    nprobe, info = calibrate_nprobe(built.index, data, built.nlist, target_recall=1.01)
    assert nprobe == built.nlist and info["recall"] == pytest.approx(1.0)
    assert build_faiss_index(data, ivf_threshold=1000, nprobe=3).nprobe == 3


# ------------------------------------------------------------------ index directory


@pytest.fixture(scope="module")
def built_index(tmp_path_factory, tiny_bert):
    root = tmp_path_factory.mktemp("index")
    write_corpus(root / "corpus.txt")
    build_index(tiny_bert, root / "corpus.txt", root / "idx", chunk_size=4, show_progress=False)
    return root


def test_index_directory_and_search_match_brute_force(built_index, tiny_bert, tiny_model):
    index = SearchIndex(built_index / "idx")
    manifest = read_manifest(built_index / "idx")
    assert (manifest.model, manifest.dim, manifest.normalized, manifest.kind, manifest.rows) == (
        str(Path(tiny_bert).resolve()),
        32,
        True,
        "flat",
        11,
    )
    assert manifest.format_version == INDEX_FORMAT_VERSION and manifest.empty_lines == 4
    assert sorted(p.name for p in (built_index / "idx").iterdir()) == [
        "index.faiss",
        "jtcse_outputs.json",
        "manifest.json",
        "rows.npy",
        "texts.txt",
    ]

    queries = [SENTENCES[4], "a cat on a windowsill"]
    results = index.search(queries, k=5)
    corpus_vectors = tiny_model.encode(SENTENCES, normalize_embeddings=True)
    query_vectors = tiny_model.encode(queries, normalize_embeddings=True)
    naive = query_vectors @ corpus_vectors.T
    file_lines = (built_index / "corpus.txt").read_bytes().decode("utf-8").split("\n")
    for hits, scores in zip(results, naive, strict=True):
        # the top 5 scores, each the brute-force score of the row it names (near-ties may swap rows)
        np.testing.assert_allclose([h.score for h in hits], np.sort(scores)[::-1][:5], atol=1e-5)
        np.testing.assert_allclose([scores[h.row] for h in hits], [h.score for h in hits], atol=1e-5)
        for hit in hits:
            assert hit.text == SENTENCES[hit.row] == file_lines[hit.line - 1].strip()
    assert results[0][0].text == SENTENCES[4] and results[0][0].score == pytest.approx(1.0, abs=1e-5)
    # More results asked than vectors exist: only real hits come back.
    assert len(index.search("frog", k=50)[0]) == 11
    # The directory is self-contained: the source may go away.
    moved = built_index / "moved_idx"
    import shutil

    shutil.copytree(built_index / "idx", moved)
    (built_index / "corpus_gone.txt").write_text("x")
    assert SearchIndex(moved).search(SENTENCES[7], k=1)[0][0].text == SENTENCES[7]


def test_ivf_index_directory_end_to_end(tmp_path, tiny_bert, tiny_model):
    corpus = tmp_path / "c.txt"
    write_corpus(corpus)
    index = build_index(tiny_bert, corpus, tmp_path / "ivf", ivf_threshold=5, nlist=3, nprobe=2, show_progress=False)
    assert (index.manifest.kind, index.manifest.nlist, index.manifest.nprobe) == ("ivf", 3, 2)
    reloaded = SearchIndex(tmp_path / "ivf")
    exact = reloaded.search(SENTENCES[2], k=11, nprobe=3)[0]  # all lists: exact
    assert sorted(h.row for h in exact) == list(range(11)) and exact[0].row == 2
    assert reloaded.search_vectors(tiny_model.encode([SENTENCES[2]]), k=1)[1][0, 0] == 2


def test_interrupted_build_resumes_and_overwrite_keeps_index_on_bad_input(tmp_path, tiny_bert, tiny_model, monkeypatch):
    corpus = tmp_path / "c.txt"
    write_corpus(corpus)
    index_dir = tmp_path / "idx"
    name = str(Path(tiny_bert).resolve())
    building = tmp_path / "idx.tmp"  # where build_index builds, beside the index, until it is complete
    FolderOutput(building, "jtcse index build").add("embeddings.npy", "embeddings.npy.json", "embeddings.rows.npy")
    with pytest.raises(Interrupt):  # a build that died after encoding 4 of 11 sentences
        encode_file(
            tiny_model,
            corpus,
            building / "embeddings.npy",
            chunk_size=4,
            normalize=True,
            model_name=name,
            show_progress=False,
            on_chunk=lambda done, total: (_ for _ in ()).throw(Interrupt()),
        )
    encoded: list[str] = []
    real_encode = tiny_model.encode
    monkeypatch.setattr(tiny_model, "encode", lambda s, **kw: encoded.extend(s) or real_encode(s, **kw))
    index = build_index(tiny_model, corpus, index_dir, model_name=name, chunk_size=4, show_progress=False)
    assert encoded == SENTENCES[4:]  # only the rest was encoded
    assert index.search(SENTENCES[1], k=1, model=tiny_model, model_name=name)[0][0].row == 1
    assert not (index_dir / "embeddings.npy").exists() and not building.exists()

    empty = tmp_path / "empty.txt"
    empty.write_text("\n", encoding="utf-8")
    with pytest.raises(JTCSEError, match="no sentences"):
        build_index(tiny_bert, empty, index_dir, overwrite=True, show_progress=False)
    assert SearchIndex(index_dir).manifest.rows == 11  # the old index is untouched


def test_index_bad_inputs(built_index, tmp_path, tiny_bert, tiny_roberta, minilm_path):
    index_dir = built_index / "idx"
    index = SearchIndex(index_dir)
    with pytest.raises(JTCSEError, match=r"Query vectors are 384-d but index .* holds 32-d"):
        index.search_vectors(np.zeros((1, 384), dtype=np.float32))
    with pytest.raises(JTCSEError, match="k must be at least 1"):
        index.search_vectors(np.ones((1, 32), dtype=np.float32), k=0)
    with pytest.raises(JTCSEError, match="flat"):
        index.search_vectors(np.ones((1, 32), dtype=np.float32), nprobe=4)
    with pytest.raises(JTCSEError, match="non-empty query"):
        index.search(["  "])
    # Another model: refused, naming both; even when allowed, its dimension must match.
    with pytest.raises(JTCSEError) as err:
        index.search("x", model=tiny_roberta)
    assert str(Path(tiny_bert).resolve()) in str(err.value) and str(Path(tiny_roberta).resolve()) in str(err.value)
    assert len(index.search("x", k=2, model=tiny_roberta, allow_other_model=True)[0]) == 2  # same 32-d
    with pytest.raises(JTCSEError, match="makes 384-d vectors but index .* holds 32-d"):
        index.search("x", model=minilm_path, allow_other_model=True)

    # Newer format, foreign or missing manifest, missing files.
    newer = tmp_path / "newer"
    import shutil

    shutil.copytree(index_dir, newer)
    manifest = json.loads((newer / MANIFEST).read_text())
    (newer / MANIFEST).write_text(json.dumps({**manifest, "format_version": INDEX_FORMAT_VERSION + 1}))
    with pytest.raises(JTCSEError, match=f"format version {INDEX_FORMAT_VERSION + 1}; this jtcse reads versions up to"):
        SearchIndex(newer)
    (newer / MANIFEST).write_text(json.dumps({"something": "else"}))
    with pytest.raises(JTCSEError, match="not a jtcse index manifest"):
        SearchIndex(newer)
    with pytest.raises(JTCSEError, match="not a jtcse index directory"):
        SearchIndex(tmp_path)
    (newer / MANIFEST).write_text(json.dumps(manifest))
    (newer / "index.faiss").write_bytes(b"not an index")
    with pytest.raises(JTCSEError, match="corrupt or truncated"):
        SearchIndex(newer)
    (newer / "texts.txt").unlink()
    with pytest.raises(JTCSEError, match="missing texts.txt"):
        SearchIndex(newer)

    # Building over an existing index, or from an empty file.
    with pytest.raises(JTCSEError, match="already holds an index"):
        build_index(tiny_bert, built_index / "corpus.txt", index_dir, show_progress=False)
    empty = tmp_path / "empty.txt"
    empty.write_text("\n\n", encoding="utf-8")
    with pytest.raises(JTCSEError, match="no sentences"):
        build_index(tiny_bert, empty, tmp_path / "empty_idx", show_progress=False)
    assert not (tmp_path / "empty_idx" / MANIFEST).exists()
    if not gpu_available():
        with pytest.raises(JTCSEError, match="GPU"):
            build_faiss_index(np.ones((3, 4), dtype=np.float32), use_gpu=True)


# ------------------------------------------------------------------ hard negatives


PAIRS = [
    ("A man plays a guitar.", "Someone is playing music."),
    ("A dog runs in the park.", "An animal is running outside."),
    ("The chef cooks pasta.", "Food is being prepared."),
    ('A child reads a "book".', "A kid is reading."),
    ("Two people ride bikes.", "Cyclists are on the road."),
    ("The orchestra tunes up.", "Musicians get ready to play."),
]


def test_mining_file_wiring_matches_the_library(tmp_path, tiny_model, tiny_bert):
    from datasets import Dataset
    from sentence_transformers.util import mine_hard_negatives

    from jtcse.search.mining import mine_hard_negatives_file, read_pairs

    pairs = tmp_path / "pairs.tsv"
    pairs.write_text("query\tanswer\n" + "".join(f"{a}\t{p}\n" for a, p in PAIRS), encoding="utf-8")
    extra = tmp_path / "extra.txt"
    extra.write_text("A violin concert.\n\nA cat in the sun.\n", encoding="utf-8")
    out = tmp_path / "mined.tsv"
    summary = mine_hard_negatives_file(tiny_bert, pairs, out, corpus_path=extra, num_negatives=2, verbose=False)
    assert (summary["rows_in"], summary["rows_out"], summary["columns"]) == (6, 12, ["query", "answer", "negative"])
    assert json.loads(out.with_name("mined.tsv.json").read_text())["rows_out"] == 12
    mined = read_pairs(out)
    rows = list(zip(mined["query"], mined["answer"], read_pairs(out, "query", "negative")["negative"], strict=True))
    assert {(a, p) for a, p, _ in rows} == set(PAIRS)  # quotes survive the round trip
    candidates = {p for _, p in PAIRS} | {"A violin concert.", "A cat in the sun."}
    assert all(n in candidates and n != p for _, p, n in rows)

    direct = mine_hard_negatives(
        Dataset.from_dict({"query": [a for a, _ in PAIRS], "answer": [p for _, p in PAIRS]}),
        tiny_model,
        corpus=["A violin concert.", "A cat in the sun."],
        num_negatives=2,
        use_faiss=True,
        verbose=False,
    )
    assert direct["negative"] == [n for *_, n in rows]

    listed = mine_hard_negatives_file(
        tiny_bert, pairs, tmp_path / "m.jsonl", output_format="labeled-list", verbose=False
    )
    assert listed["columns"] == ["query", "answer", "labels"]
    first = json.loads((tmp_path / "m.jsonl").read_text().splitlines()[0])
    assert first["labels"][0] == 1 and first["answer"][0] == PAIRS[0][1]


def test_mining_bad_inputs(tmp_path, tiny_bert):
    from jtcse.search.mining import mine_hard_negatives_file, read_pairs

    pairs = tmp_path / "pairs.jsonl"
    pairs.write_text("".join(json.dumps({"a": a, "p": p}) + "\n" for a, p in PAIRS), encoding="utf-8")
    with pytest.raises(JTCSEError, match=r"no positive column 'pos'; its columns are \['a', 'p'\]"):
        read_pairs(pairs, "a", "pos")
    (tmp_path / "empty.csv").write_text("")
    with pytest.raises(JTCSEError, match="is empty"):
        read_pairs(tmp_path / "empty.csv")
    (tmp_path / "header.csv").write_text("a,p\n")
    with pytest.raises(JTCSEError, match="no rows"):
        read_pairs(tmp_path / "header.csv")
    (tmp_path / "one.csv").write_text("a\nx\n")
    with pytest.raises(JTCSEError, match="needs an anchor and a positive"):
        read_pairs(tmp_path / "one.csv")
    (tmp_path / "pairs.txt").write_text("a\tp\n")
    with pytest.raises(JTCSEError, match="must end in one of"):
        read_pairs(tmp_path / "pairs.txt")
    with pytest.raises(JTCSEError, match="not found"):
        read_pairs(tmp_path / "missing.tsv")
    with pytest.raises(JTCSEError, match="must end in one of"):
        mine_hard_negatives_file(tiny_bert, pairs, tmp_path / "out.txt", verbose=False)
    with pytest.raises(JTCSEError, match="num_negatives must be at least 1"):
        mine_hard_negatives_file(tiny_bert, pairs, tmp_path / "out.jsonl", num_negatives=0, verbose=False)
    with pytest.raises(JTCSEError, match="hold lists"):
        mine_hard_negatives_file(tiny_bert, pairs, tmp_path / "out.tsv", output_format="labeled-list", verbose=False)


# ------------------------------------------------------------------ CLI


@pytest.mark.slow
def test_cli_encode_build_search(tmp_path, corpus, tiny_bert):
    from typer.testing import CliRunner

    from jtcse.cli import app

    runner = CliRunner()
    out = tmp_path / "cli.npy"
    result = runner.invoke(
        app, ["encode", tiny_bert, "-i", str(corpus), "-o", str(out), "--chunk-size", "5", "--no-progress", "--fp16"]
    )
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["rows"] == 11 and np.load(out).dtype == np.float16

    idx = tmp_path / "idx"
    result = runner.invoke(app, ["index", "build", tiny_bert, "-i", str(corpus), "-o", str(idx), "--no-progress"])
    assert result.exit_code == 0, result.output
    hits_file = tmp_path / "hits.jsonl"
    result = runner.invoke(
        app, ["index", "search", "--index", str(idx), "-q", SENTENCES[3], "-k", "2", "-o", str(hits_file)]
    )
    assert result.exit_code == 0, result.output
    assert SENTENCES[3] in result.stdout
    record = json.loads(hits_file.read_text())
    assert record["query"] == SENTENCES[3] and record["hits"][0]["text"] == SENTENCES[3] and len(record["hits"]) == 2


@pytest.mark.cli
def test_cli_reports_user_mistakes_in_one_line(tmp_path):
    proc = invoke_cli("index", "search", "--index", tmp_path, "-q", "hello")
    assert proc.returncode == 2
    assert proc.stderr.strip().splitlines() == [
        f"Error: {tmp_path} is not a jtcse index directory (no manifest.json); build one with `jtcse index build`."
    ]


# ------------------------------------------------------------------ precision and texts check


def test_quantized_indexes_rescore_like_a_naive_reference(tmp_path, tiny_bert, tiny_model):
    corpus = tmp_path / "c.txt"
    write_corpus(corpus)
    vectors = tiny_model.encode(SENTENCES, normalize_embeddings=True)
    queries = [SENTENCES[4], "a cat on a windowsill"]
    q = tiny_model.encode(queries, normalize_embeddings=True)
    # Binary: sign bits in memory (1 bit per dimension); int8 vectors on disk, quantized over each dimension's
    # min..max in 256 steps and rescored at the middle of their step. 5 x 50 >= 11 rows: every row is rescored.
    binary = build_index(tiny_bert, corpus, tmp_path / "bin", precision="binary", show_progress=False)
    manifest = binary.manifest
    assert (manifest.precision, manifest.rescore_multiplier, manifest.rescore_precision, manifest.kind) == (
        "binary",
        DEFAULT_RESCORE_MULTIPLIER,
        "int8",
        "flat",
    )
    assert binary.index.code_size == 32 // 8
    low, high = vectors.min(axis=0), vectors.max(axis=0)
    steps = (high - low) / 255
    codes = np.clip(np.floor((vectors - low) / steps), 0, 255)
    dequantized = (codes + 0.5) * steps + low
    assert np.all(np.abs(dequantized - vectors) <= steps / 2 + 1e-6)
    assert isinstance(binary.rescore[0], np.memmap)  # read from disk per candidate, not held in memory
    for hits, scores in zip(binary.search(queries, k=5), q @ dequantized.T, strict=True):
        np.testing.assert_allclose([h.score for h in hits], np.sort(scores)[::-1][:5], atol=1e-5)
        assert all(h.text == SENTENCES[h.row] for h in hits)
    # Fewer candidates than rows: only the k x multiplier nearest by Hamming distance are rescored.
    bits = vectors > 0
    hamming = (bits[None, :, :] != (q > 0)[:, None, :]).sum(axis=2)
    _, rows = binary.search_vectors(q, k=2, rescore_multiplier=2)
    for row_ids, distances in zip(rows, hamming, strict=True):
        assert set(row_ids) <= set(np.flatnonzero(distances <= np.sort(distances)[3]))
    with pytest.raises(JTCSEError, match="--rescore-multiplier must be at least 1"):
        binary.search_vectors(q, k=2, rescore_multiplier=0)
    # int8: 1 byte per dimension, 256 steps between each dimension's min and max; scores use the decoded vectors.
    int8 = build_index(tiny_bert, corpus, tmp_path / "i8", precision="int8", show_progress=False)
    assert int8.manifest.precision == "int8" and int8.manifest.rescore_multiplier is None
    assert int8.index.code_size == 32
    decoded = int8.index.reconstruct_n(0, len(SENTENCES))
    steps = (vectors.max(axis=0) - vectors.min(axis=0)) / 255
    assert np.all(np.abs(decoded - vectors) <= steps + 1e-6)  # within one step of the float vectors
    for hits, scores in zip(int8.search(queries, k=5), q @ decoded.T, strict=True):
        np.testing.assert_allclose([h.score for h in hits], np.sort(scores)[::-1][:5], atol=1e-5)
    assert int8.search(queries[0], k=1)[0][0].text == SENTENCES[4]
    # Reloaded from disk, the same hits.
    again = SearchIndex(tmp_path / "bin").search(queries, k=5)
    assert [[h.row for h in hits] for hits in again] == [[h.row for h in hits] for hits in binary.search(queries, k=5)]
    with pytest.raises(JTCSEError, match="nprobe applies to IVF"):
        binary.search_vectors(q, k=3, nprobe=2)
    with pytest.raises(JTCSEError, match="rescore-multiplier applies to binary indexes"):
        int8.search_vectors(q, k=3, rescore_multiplier=2)
    with pytest.raises(JTCSEError, match="valid ones: float32, int8, binary"):
        build_index(tiny_bert, corpus, tmp_path / "bad", precision="int4", show_progress=False)
    # A binary index without its rescoring vectors (as older versions wrote them) is refused with the fix.
    (tmp_path / "bin" / RESCORE_FILE).unlink()
    with pytest.raises(JTCSEError, match=r"no rescore\.npy .* --precision binary --overwrite"):
        SearchIndex(tmp_path / "bin")


def test_texts_file_checked_against_manifest_and_old_manifests_load(built_index, tmp_path):
    import shutil

    manifest = read_manifest(built_index / "idx")
    texts = (built_index / "idx" / "texts.txt").read_bytes()
    assert manifest.texts_bytes == len(texts) and len(manifest.texts_sha256) == 64
    truncated = tmp_path / "truncated"
    shutil.copytree(built_index / "idx", truncated)
    (truncated / "texts.txt").write_bytes(texts[: len(texts) // 2])
    with pytest.raises(JTCSEError, match=r"texts.txt is \d+ bytes but was \d+ when built \(truncated"):
        SearchIndex(truncated)
    edited = tmp_path / "edited"
    shutil.copytree(built_index / "idx", edited)
    (edited / "texts.txt").write_bytes(texts.replace(b"cat", b"dog"))
    with pytest.raises(JTCSEError, match="does not match the checksum"):
        SearchIndex(edited)
    # A format-1 manifest (no precision, no checksum) still loads as a float32 index.
    old = tmp_path / "old"
    shutil.copytree(built_index / "idx", old)
    data = json.loads((old / MANIFEST).read_text())
    for key in ("precision", "rescore_multiplier", "texts_bytes", "texts_sha256"):
        data.pop(key)
    data["format_version"] = 1
    (old / MANIFEST).write_text(json.dumps(data))
    loaded = SearchIndex(old)
    assert loaded.manifest.precision == "float32" and loaded.search(SENTENCES[7], k=1)[0][0].text == SENTENCES[7]


@pytest.mark.cli
def test_cli_unknown_precision_is_one_line(tmp_path, tiny_bert):
    from helpers.cli import invoke_cli, one_error_line

    corpus = tmp_path / "c.txt"
    write_corpus(corpus)
    line = one_error_line(
        invoke_cli("index", "build", tiny_bert, "-i", corpus, "-o", tmp_path / "idx", "--precision", "int4")
    )
    assert "float32, int8, binary" in line
