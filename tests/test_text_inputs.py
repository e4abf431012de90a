"""Text inputs as tables and datasets (issue 46): jsonl, csv, tsv, parquet, a ``save_to_disk`` folder and ``hf:`` names
read through ``datasets`` give the sentences of the same text file; columns are chosen by name or by a clear
default, and a wrong one is one line naming the columns found. A tiny ``jtcse simcse`` trains on each (the same
model as from the text file), and ``encode`` and ``index build`` give the same vectors."""

from __future__ import annotations

import json

import numpy as np
import pytest
from helpers.cli import invoke_cli

from jtcse.corpus import read_texts, read_training_sentences
from jtcse.errors import JTCSEError

pytestmark = pytest.mark.slow  # datasets (its import and its json/csv builders) costs seconds before the first row

SENTENCES = [
    f"Sentence {i} says something about topic {i % 5}, at length {'word ' * (i % 4)}.".strip() for i in range(24)
]
FORMATS = ("jsonl", "csv", "tsv", "parquet", "saved")


def write_inputs(folder, sentences=SENTENCES) -> dict:
    """The sentences as a text file and as each table format (beside an ``id`` column), written by ``datasets``."""
    from datasets import Dataset

    folder.mkdir(parents=True, exist_ok=True)
    paths = {"text": folder / "corpus.txt"}
    paths["text"].write_text("".join(s + "\n" for s in sentences), encoding="utf-8")
    table = Dataset.from_dict({"id": list(range(len(sentences))), "text": sentences})
    paths["jsonl"], paths["csv"], paths["tsv"] = folder / "c.jsonl", folder / "c.csv", folder / "c.tsv"
    paths["parquet"], paths["saved"] = folder / "c.parquet", folder / "saved"
    table.to_json(paths["jsonl"])
    table.to_csv(paths["csv"], index=False)
    table.to_csv(paths["tsv"], index=False, sep="\t")
    table.to_parquet(paths["parquet"])
    table.save_to_disk(paths["saved"])
    return paths


@pytest.fixture(scope="module")
def inputs(tmp_path_factory):
    return write_inputs(tmp_path_factory.mktemp("inputs"))


@pytest.mark.parametrize("kind", FORMATS)
def test_each_format_reads_the_sentences_of_the_text_file(inputs, kind):
    assert read_texts(inputs[kind]).sentences == read_texts(inputs["text"]).sentences == SENTENCES
    _, counts = read_training_sentences(inputs[kind])
    assert counts["sentences"] == len(SENTENCES) and counts["skipped_blank_lines"] == 0


def test_hf_names_load_through_datasets_offline(tmp_path):
    """``hf:NAME`` is ``datasets.load_dataset(NAME)``: a local dataset folder stands in for a cached Hub name."""
    from datasets import Dataset

    folder = tmp_path / "my_dataset"
    folder.mkdir()
    Dataset.from_dict({"sentence": SENTENCES}).to_parquet(folder / "train.parquet")
    assert read_texts(f"hf:{folder}").sentences == SENTENCES
    assert read_texts(f"hf:{folder}::train").sentences == SENTENCES
    with pytest.raises(JTCSEError, match=r"cannot read corpus hf:.*no_such: "):
        read_texts(f"hf:{tmp_path / 'no_such'}")


def test_the_text_column_by_name_by_default_and_a_clear_error(tmp_path):
    from datasets import Dataset

    path = tmp_path / "t.parquet"
    Dataset.from_dict({"id": [1, 2], "body": ["one", "two"], "title": ["a", "b"]}).to_parquet(path)
    assert read_texts(path, "title").sentences == ["a", "b"]
    with pytest.raises(JTCSEError) as which:
        read_texts(path)
    assert str(which.value) == (
        f"{path}: which column holds the text? Its columns are id (int64), body (string), title (string); name one "
        "with --text-column (without it: the first of text, sentence, sentence1, anchor, query, or the only string "
        "column)."
    )
    with pytest.raises(JTCSEError, match=r"has no column 'txt'; its columns are id \(int64\), body \(string\)"):
        read_texts(path, "txt")
    only = tmp_path / "only.jsonl"
    only.write_text('{"n": 1, "body": "one"}\n{"n": 2, "body": "two"}\n', encoding="utf-8")
    assert read_texts(only).sentences == ["one", "two"]  # the only string column
    with pytest.raises(JTCSEError, match="names a column, but .* is a text file"):
        read_texts(tmp_path / "plain.txt", "text")


def test_pairs_as_a_table_by_columns(tmp_path):
    from datasets import Dataset

    from jtcse.training.paraphrase_pairs import read_paraphrase_pairs

    path = tmp_path / "pairs.jsonl"
    Dataset.from_dict({"anchor": ["A cat sits.", "Same."], "positive": ["A cat is sitting.", "same."]}).to_json(path)
    pairs = read_paraphrase_pairs(path)
    assert (pairs.originals, pairs.paraphrases, pairs.dropped_identical) == (["A cat sits."], ["A cat is sitting."], 1)
    assert read_paraphrase_pairs(path, "positive,anchor").originals == ["A cat is sitting."]
    with pytest.raises(JTCSEError, match=r"which two columns hold the pairs\? Its columns are a \(string\)"):
        Dataset.from_dict({"a": ["x"]}).to_json(tmp_path / "bad.jsonl")
        read_paraphrase_pairs(tmp_path / "bad.jsonl")


@pytest.fixture(scope="module")
def from_text(inputs, tiny_bert, tmp_path_factory):
    """The text file's run: a tiny SimCSE warm-up, its encoding and its index (the vectors to match)."""
    return _run_all(inputs["text"], tiny_bert, tmp_path_factory.mktemp("text"))


def _run_all(corpus, tower, out) -> dict:
    train = invoke_cli("simcse", "--model", tower, "--corpus", corpus, "-o", out / "tower", "--max-steps", "2",
                       "--batch-size", "8", "--max-seq-length", "16")  # fmt: skip
    assert train.returncode == 0, train.stderr
    encode = invoke_cli("encode", out / "tower", "-i", corpus, "-o", out / "vectors.npy", "--no-progress")
    assert encode.returncode == 0, encode.stderr
    index = invoke_cli("index", "build", out / "tower", "-i", corpus, "-o", out / "index", "--keep-embeddings",
                       "--no-progress")  # fmt: skip
    assert index.returncode == 0, index.stderr
    summary = json.loads((out / "tower" / "run_summary.json").read_text())
    return {
        "data": summary["config"]["data"],
        "weights": (out / "tower" / "model.safetensors").read_bytes(),
        "vectors": np.load(out / "vectors.npy"),
        "index": np.load(out / "index" / "embeddings.npy"),
        "texts": (out / "index" / "texts.txt").read_text(encoding="utf-8").splitlines(),
    }


@pytest.mark.slow
@pytest.mark.parametrize("kind", ["jsonl", "csv", "parquet", "saved"])
def test_a_table_trains_encodes_and_indexes_as_its_text_file(inputs, kind, from_text, tiny_bert, tmp_path):
    run = _run_all(inputs[kind], tiny_bert, tmp_path)
    assert run["data"] == from_text["data"]  # the same sentences, by content
    assert run["weights"] == from_text["weights"]  # the same training: the same model, byte for byte
    np.testing.assert_array_equal(run["vectors"], from_text["vectors"])
    np.testing.assert_array_equal(run["index"], from_text["index"])
    assert run["texts"] == from_text["texts"] == SENTENCES


def test_a_saved_dataset_is_fingerprinted_by_content(inputs, tmp_path):
    """'done' and resume compare inputs by content: a saved dataset's files, wherever the folder is."""
    import shutil

    from jtcse.output_paths import fingerprint

    copy = tmp_path / "copy"
    shutil.copytree(inputs["saved"], copy)
    assert fingerprint(copy) == fingerprint(inputs["saved"]) != fingerprint(inputs["parquet"])
    write_inputs(tmp_path / "other", SENTENCES[:-1])
    assert fingerprint(tmp_path / "other" / "saved") != fingerprint(copy)
