"""Defaults, corpus reading and the STS-B reader: the ground every command stands on."""

from __future__ import annotations

import numpy as np
import pytest

from jtcse.corpus import read_corpus
from jtcse.defaults import default_corpus_sentences
from jtcse.errors import JTCSEError
from jtcse.evaluation.sts import cosine_spearman, read_stsb_file


def test_default_corpus_is_prose():
    sentences = default_corpus_sentences()
    assert len(sentences) > 1000
    assert len(set(sentences)) == len(sentences)
    assert all(s[0].isupper() and s.endswith(".") for s in sentences)


def test_read_corpus_skips_and_counts_blank_lines(tmp_path):
    path = tmp_path / "c.txt"
    path.write_text("first sentence\n\n   \nsecond one\n", encoding="utf-8")
    corpus = read_corpus(path)
    assert corpus.sentences == ["first sentence", "second one"]
    assert corpus.skipped_empty == 2
    assert corpus.skipped_lines == [2, 3]


def test_read_corpus_errors(tmp_path):
    with pytest.raises(JTCSEError, match="not found"):
        read_corpus(tmp_path / "missing.txt")
    empty = tmp_path / "empty.txt"
    empty.write_text("\n  \n", encoding="utf-8")
    with pytest.raises(JTCSEError, match="no sentences"):
        read_corpus(empty)
    bad = tmp_path / "bad.txt"
    bad.write_bytes(b"fine line\nbad \xff byte\n")
    with pytest.raises(JTCSEError, match="line 2 is not valid UTF-8"):
        read_corpus(bad)


def test_stsb_reader_on_shared_dev(shared_data):
    pairs = read_stsb_file(shared_data / "stsbenchmark" / "sts-dev.csv")
    assert len(pairs) == 1500
    assert pairs.scores.min() >= 0 and pairs.scores.max() <= 5


class _BagOfLetters:
    """A transparent 'model': letter counts, so the expected Spearman is computable by hand."""

    def encode(self, sentences, **_):
        return np.array([[s.count(c) for c in "abcde"] for s in sentences], dtype=np.float32)


def test_cosine_spearman_matches_direct_computation(tmp_path):
    from scipy.stats import spearmanr

    rows = [("aab", "aab", 5.0), ("abc", "cde", 1.0), ("aaa", "aab", 4.0), ("bbb", "ddd", 0.0)]
    path = tmp_path / "sts.csv"
    path.write_text("".join(f"g\tf\ty\t{i}\t{s}\t{a}\t{b}\n" for i, (a, b, s) in enumerate(rows)), encoding="utf-8")
    pairs = read_stsb_file(path)
    model = _BagOfLetters()
    ea, eb = model.encode(pairs.sentences1), model.encode(pairs.sentences2)
    cos = (ea * eb).sum(1) / np.linalg.norm(ea, axis=1) / np.linalg.norm(eb, axis=1)
    assert cosine_spearman(model, pairs) == pytest.approx(spearmanr(cos, pairs.scores).statistic)


def test_a_byte_order_mark_does_not_start_the_first_sentence(tmp_path):
    """Every sentence file is read by jtcse.corpus.decode_line: a BOM (U+FEFF, which str.strip keeps) stayed in the
    first text encode stored, the first corpus sentence and the first STS-B genre."""
    from jtcse.evaluation.mteb_local_tasks import read_sts_pairs
    from jtcse.search.lines import iter_chunks, plan_chunks

    bom = "\ufeff".encode()
    corpus = tmp_path / "corpus.txt"
    corpus.write_bytes(bom + b"First sentence.\nSecond one.\n")
    assert read_corpus(corpus).sentences == ["First sentence.", "Second one."]
    assert next(iter_chunks(corpus, 8)).texts == ["First sentence.", "Second one."]
    spans, _ = plan_chunks(corpus, 1)
    assert spans[0].read(corpus).texts == ["First sentence."] and spans[0].start_byte == 0
    stsb = tmp_path / "sts.csv"
    stsb.write_bytes(bom + b"main-news\tf\t2012\t0001\t4.0\tA cat.\tA dog.\n")
    assert read_stsb_file(stsb).genres == ["main-news"]
    local = tmp_path / "local.tsv"
    local.write_bytes(bom + b"sentence1\tsentence2\tscore\nA cat.\tA dog.\t4.0\n")
    assert read_sts_pairs(local) == (["A cat."], ["A dog."], [4.0])
