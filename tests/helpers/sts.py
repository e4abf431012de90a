"""Tiny STS data for tests: an STS-B-format file (six scored pairs) for a dev or test set, and a whole SentEval
data folder (:func:`write_senteval_dir`) whose every Spearman is computable by hand with :class:`LetterCounts`."""

from __future__ import annotations

from pathlib import Path

import numpy as np

DEV_PAIRS = [
    ("A man is playing a guitar.", "A man plays the guitar.", 4.8),
    ("A woman is slicing an onion.", "Someone is cutting an onion.", 4.2),
    ("A dog runs in the park.", "A cat sleeps on the sofa.", 0.6),
    ("The stock market fell today.", "Shares dropped sharply on Monday.", 3.4),
    ("Kids are playing football.", "Children play soccer outside.", 4.0),
    ("A plane is taking off.", "A man is eating pasta.", 0.1),
]


def write_stsb(path: Path) -> Path:
    """Write :data:`DEV_PAIRS` to ``path`` in the STS-B layout; returns ``path``."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(
        "".join(f"main-captions\tMSRvid\t2012test\t{i:04d}\t{s}\t{a}\t{b}\n" for i, (a, b, s) in enumerate(DEV_PAIRS)),
        encoding="utf-8",
    )
    return path


LETTERS = "abcdefgh"


class LetterCounts:
    """A transparent encoder: letter counts, so every cosine is computable by hand. Records its calls."""

    def __init__(self):
        self.calls: list[list[str]] = []

    def encode(self, sentences, **_):
        self.calls.append(list(sentences))
        return np.array([[s.count(c) for c in LETTERS] for s in sentences], dtype=np.float32)


def letter_cos(a: str, b: str) -> float:
    u = np.array([a.count(c) for c in LETTERS], dtype=np.float64)
    v = np.array([b.count(c) for c in LETTERS], dtype=np.float64)
    return float(u @ v / np.sqrt((u @ u) * (v @ v)))


# Per year, per subset: (raw input line, gold line). Gold "" = skipped pair. Raw lines carry the
# irregular whitespace and extra tab columns the reader must handle.
def year_rows(year: int) -> dict[str, list[tuple[str, str]]]:
    from jtcse.evaluation.senteval_data import STS_YEAR_SUBSETS  # imports torch: not at conftest time

    rng = np.random.default_rng(year)
    rows = {}
    for subset in STS_YEAR_SUBSETS[f"STS{year}"]:
        lines = []
        for _ in range(4):
            a = "".join(rng.choice(list(LETTERS), size=rng.integers(2, 7)))
            b = "".join(rng.choice(list(LETTERS), size=rng.integers(2, 7)))
            lines.append((f"{a}  x\t {b} y", f"{rng.uniform(0, 5):.2f}"))
        lines.append((f"{a} z\t{a} z\tsource-a\tsource-b", "5.0"))  # extra columns are ignored
        lines.append(("cab\tbad", ""))  # blank gold: the pair is dropped
        rows[subset] = lines
    return rows


def expected_all(rows: dict[str, list[tuple[str, str]]]) -> float:
    from scipy.stats import spearmanr

    cos, gold = [], []
    for lines in rows.values():
        for pair, score in lines:
            if not score:
                continue
            s1, s2 = pair.split("\t")[:2]
            cos.append(letter_cos(" ".join(s1.split()), " ".join(s2.split())))
            gold.append(float(score))
    return float(spearmanr(cos, gold).statistic)


STSB_ROWS = [
    ("abc d", "abd", 4.2),
    ("aaa", "hhh", 0.4),
    ("bcd", "bce", 3.1),
    ("ggg ff", "ff ggg", 4.8),
    ("ab", "gh", 1.0),
]
SICK_ROWS = [("a b c", "a b d", 4.1), ("e f", "g h", 1.2), ("a a", "a b", 3.3), ("h h h", "h g", 2.5)]


def write_senteval_dir(root, years=(12, 13, 14, 15, 16), original_names=(16,)):
    """STS12-16 (the years in ``original_names`` with the SemEval 2016 file names), STS-B test and SICK test
    under ``root`` in the SentEval layout; returns each task's Spearman for :class:`LetterCounts`."""
    from scipy.stats import spearmanr

    expected = {}
    for year in years:
        rows = year_rows(year)
        d = root / "STS" / f"STS{year}-en-test"
        d.mkdir(parents=True)
        prefix = f"STS20{year}" if year in original_names else "STS"
        for subset, lines in rows.items():
            (d / f"{prefix}.input.{subset}.txt").write_text("".join(p + "\n" for p, _ in lines), encoding="utf-8")
            (d / f"{prefix}.gs.{subset}.txt").write_text("".join(g + "\n" for _, g in lines), encoding="utf-8")
        expected[f"STS{year}"] = expected_all(rows)
    stsb = root / "STS" / "STSBenchmark"
    stsb.mkdir(parents=True)
    (stsb / "sts-test.csv").write_text(
        "".join(f"main-news\tf\t2012\t{i}\t{s}\t{a}\t{b}\textra\tcols\n" for i, (a, b, s) in enumerate(STSB_ROWS)),
        encoding="utf-8",
    )
    expected["STSB"] = float(
        spearmanr([letter_cos(a, b) for a, b, _ in STSB_ROWS], [s for *_, s in STSB_ROWS]).statistic
    )
    sick = root / "SICK"
    sick.mkdir()
    (sick / "SICK_test_annotated.txt").write_text(
        "pair_ID\tsentence_A\tsentence_B\trelatedness_score\tentailment_judgment\n"
        + "".join(f"{i}\t{a}\t{b}\t{s}\tNEUTRAL\n" for i, (a, b, s) in enumerate(SICK_ROWS)),
        encoding="utf-8",
    )
    expected["SICKR"] = float(
        spearmanr([letter_cos(a, b) for a, b, _ in SICK_ROWS], [s for *_, s in SICK_ROWS]).statistic
    )
    return expected
