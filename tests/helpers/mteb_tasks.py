"""Tiny local MTEB tasks of every type, written to disk in the layouts ``jtcse eval mteb --local-task`` reads, and
the same data as Python values for building the reference task with mteb's own classes in the test."""

from __future__ import annotations

import json
from pathlib import Path

CORPUS = {
    "d1": ("A cat sits on the mat.", "Cats"),
    "d2": ("Stocks fell sharply on Monday.", ""),
    "d3": ("The dog runs in the park.", "Dogs"),
    "d4": ("Heavy rain is expected tomorrow.", ""),
    "d5": ("The orchestra played a symphony.", ""),
}
QUERIES = {"q1": "Where is the cat?", "q2": "What did the market do?", "q3": "weather forecast", "q4": "dog walk"}
QRELS = {"q1": {"d1": 1}, "q2": {"d2": 1}, "q3": {"d4": 1}, "q4": {"d3": 1, "d1": 0}}

TRAIN = [
    ("I love this film", "pos"),
    ("Great movie, great cast", "pos"),
    ("Wonderful acting all round", "pos"),
    ("Terrible plot and worse dialogue", "neg"),
    ("I hated every minute", "neg"),
    ("Boring and far too slow", "neg"),
]
TEST = [("Loved it", "pos"), ("Awful, just awful", "neg"), ("A delight", "pos"), ("Dull", "neg"), ("Superb", "pos")]

PAIRS = [
    ("A man plays the guitar.", "A person is playing a guitar.", 1),
    ("A cat sleeps on the sofa.", "Stock prices rose today.", 0),
    ("Kids play in the park.", "Children are playing outside.", 1),
    ("It is raining heavily.", "The sun is shining brightly.", 0),
    ("He reads a book.", "A man is reading a novel.", 1),
]

STS = [
    ("A man plays the guitar.", "A person is playing a guitar.", 4.6),
    ("A cat sleeps on the sofa.", "Stock prices rose today.", 0.2),
    ("Kids play in the park.", "Children are playing outside.", 4.2),
    ("It is raining heavily.", "The sun is shining brightly.", 1.0),
    ("He reads a book.", "A man is reading a novel.", 3.6),
    ("A cat sleeps on the sofa.", "A cat is asleep on a couch.", 4.8),
]


def _jsonl(path: Path, rows) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(row) + "\n" for row in rows), encoding="utf-8")
    return path


def write_beir(folder: Path) -> Path:
    """A BEIR folder: ``corpus.jsonl``, ``queries.jsonl``, ``qrels/test.tsv``."""
    _jsonl(folder / "corpus.jsonl", [{"_id": k, "title": title, "text": text} for k, (text, title) in CORPUS.items()])
    _jsonl(folder / "queries.jsonl", [{"_id": k, "text": text} for k, text in QUERIES.items()])
    (folder / "qrels").mkdir()
    lines = [f"{q}\t{d}\t{s}\n" for q, docs in QRELS.items() for d, s in docs.items()]
    (folder / "qrels" / "test.tsv").write_text("query-id\tcorpus-id\tscore\n" + "".join(lines), encoding="utf-8")
    return folder


def write_classification(path: Path) -> Path:
    """One JSONL file of ``text``, ``label``, ``split`` rows."""
    rows = [{"text": t, "label": label, "split": "train"} for t, label in TRAIN]
    rows += [{"text": t, "label": label, "split": "test"} for t, label in TEST]
    return _jsonl(path, rows)


def write_pairs(path: Path) -> Path:
    """A TSV of ``sentence1``, ``sentence2``, ``label`` (0/1)."""
    body = "".join(f"{a}\t{b}\t{label}\n" for a, b, label in PAIRS)
    path.write_text("sentence1\tsentence2\tlabel\n" + body, encoding="utf-8")
    return path


def write_sts(path: Path) -> Path:
    """A TSV of ``sentence1``, ``sentence2``, ``score``."""
    body = "".join(f"{a}\t{b}\t{score}\n" for a, b, score in STS)
    path.write_text("sentence1\tsentence2\tscore\n" + body, encoding="utf-8")
    return path


#: :data:`STS` read as retrieval (pairs scoring 4 or more), worked out by hand: the corpus is every distinct sentence
#: (first sentences first, in order of appearance), the queries are the close pairs' first sentences.
STS_CORPUS = [
    "A man plays the guitar.",  # s0
    "A cat sleeps on the sofa.",  # s1
    "Kids play in the park.",  # s2
    "It is raining heavily.",  # s3
    "He reads a book.",  # s4
    "A person is playing a guitar.",  # s5
    "Stock prices rose today.",  # s6
    "Children are playing outside.",  # s7
    "The sun is shining brightly.",  # s8
    "A man is reading a novel.",  # s9
    "A cat is asleep on a couch.",  # s10
]
STS_QRELS = {"s0": {"s5": 1}, "s2": {"s7": 1}, "s1": {"s10": 1}}  # 4.6, 4.2, 4.8; 3.6 and below ask nothing
