"""Warm-up positives other than dropout and corpus parts (jtcse/training/positives.py): each kind does what it says
on the words of a sentence, the same again for the same seed; parts split a corpus without overlap."""

from __future__ import annotations

import math
from collections import Counter

import pytest

from jtcse.errors import JTCSEError
from jtcse.training.positives import POSITIVES, corpus_part, part_problem, positive_of

SENTENCE = "the quick brown fox jumps over the lazy dog near the quiet river bank today"
WORDS = SENTENCE.split()


def _is_subsequence(short, long):
    it = iter(long)
    return all(word in it for word in short)


def test_each_kind_changes_the_words_as_it_says_and_again_alike_for_the_seed():
    for kind in POSITIVES:
        assert positive_of(SENTENCE, kind, 3) == positive_of(SENTENCE, kind, 3), kind
    assert positive_of(SENTENCE, "dropout", 3) == SENTENCE
    changed = {kind: [positive_of(SENTENCE, kind, seed).split() for seed in range(20)] for kind in POSITIVES}
    for words in changed["deletion"]:
        assert 1 <= len(words) <= len(WORDS) and _is_subsequence(words, WORDS)
    assert any(len(w) < len(WORDS) for w in changed["deletion"])
    span = math.ceil(0.1 * len(WORDS))
    for words in changed["cutoff"]:
        assert len(words) == len(WORDS) - span
        assert any(words == WORDS[:i] + WORDS[i + span :] for i in range(len(WORDS) - span + 1))
    for words in changed["repetition"]:
        extra = len(words) - len(WORDS)
        assert 0 <= extra <= int(0.32 * len(WORDS)) and _is_subsequence(WORDS, words)
        assert all(Counter(words)[w] >= Counter(WORDS)[w] for w in WORDS)
    assert any(len(w) > len(WORDS) for w in changed["repetition"])
    for words in changed["reorder"]:
        assert Counter(words) == Counter(WORDS)
        assert sum(a != b for a, b in zip(words, WORDS, strict=True)) in (0, 2)  # 0: two equal words swapped
    assert positive_of("alone", "deletion", 1) == "alone"
    assert len({positive_of(SENTENCE, "deletion", seed) for seed in range(20)}) > 5  # the seed matters


def test_a_corpus_part_is_one_of_n_contiguous_parts_that_cover_it():
    sentences = [f"s{i}" for i in range(11)]
    parts = [corpus_part(sentences, f"{k}/3") for k in (1, 2, 3)]
    assert sum(parts, []) == sentences and [len(p) for p in parts] == [3, 4, 4]
    assert corpus_part(sentences, "all") == sentences
    assert part_problem("1/2") is None and part_problem("all") is None
    for bad in ("0/2", "3/2", "half", "1/0"):
        assert part_problem(bad) is not None, bad


def test_the_warmup_settings_take_the_kind_and_the_part():
    from jtcse.training.settings import WarmupSettings
    from jtcse.training.simcse import simcse_rows

    with pytest.raises(
        JTCSEError, match=r"^positives: Input should be 'dropout', 'deletion', 'cutoff', 'repetition' or 'reorder'$"
    ):
        WarmupSettings(positives="shuffle")
    with pytest.raises(JTCSEError, match=r"^corpus_part: must be all or K/N"):
        WarmupSettings(corpus_part="2/1")
    anchors, positives, counts = simcse_rows([SENTENCE, "a b c d e f g h i j"], None, "cutoff", 5)
    assert anchors == [SENTENCE, "a b c d e f g h i j"]
    assert positives == [positive_of(a, "cutoff", 5) for a in anchors] and counts["dropout_only_rows"] == 2
