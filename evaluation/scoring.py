"""How a study scores a model: Spearman ×1 of its pair cosines on each of the study's ``[splits]``, over all pairs and
per genre, the cosines cached (``<work>/cos/ROW.SPLIT.npy``) so that an ensemble of scored rows is scored exactly
without encoding again (:func:`jtcse.training.selection.concat_cosine`).

A split is an STS-B-format file of the data folder (``file``), optionally a fixed random ``sample`` of its pairs
(drawn once with seed 0, kept in file order), ``without`` the pairs another file has (in either order), its first
``limit`` pairs, or ``pairs`` of them spread over the file (every k-th: all genres).
"""

from __future__ import annotations

import time
from pathlib import Path

import numpy as np


def read_split(data: Path, spec: dict):
    """The pairs of a split spec (see the module docstring)."""
    from jtcse.evaluation.sts import read_stsb_file, without_pairs_of

    pairs = read_stsb_file(data / spec["file"])
    if spec.get("sample"):
        drawn = np.random.default_rng(0).choice(len(pairs), size=min(spec["sample"], len(pairs)), replace=False)
        pairs = pairs.take(np.sort(drawn))
    if spec.get("without"):
        pairs, _ = without_pairs_of(pairs, read_stsb_file(data / spec["without"]))
    if spec.get("limit"):
        pairs = pairs.take(range(min(spec["limit"], len(pairs))))
    if spec.get("pairs"):
        pairs = pairs.take(range(0, len(pairs), max(1, len(pairs) // spec["pairs"])))
    return pairs


class Scorer:
    """The study's splits (``specs``: name -> resolved spec) read from ``data``, scored at ``max_seq_length``,
    cosines cached under ``work/cos`` (and, for the splits ``embed`` names, embeddings under ``work/emb``)."""

    def __init__(self, work: Path, data: Path, specs: dict[str, dict], max_seq_length: int, embed=()):
        self.work, self.max_seq_length, self.embed = work, max_seq_length, tuple(embed)
        self.pairs = {name: read_split(data, spec) for name, spec in specs.items()}
        for folder in ("cos", "emb"):
            (work / folder).mkdir(parents=True, exist_ok=True)

    def cos_path(self, name: str, split: str) -> Path:
        return self.work / "cos" / f"{name}.{split}.npy"

    def cached(self, name: str) -> bool:
        return all(self.cos_path(name, split).exists() for split in self.pairs)

    def cosines(self, name: str, split: str) -> np.ndarray:
        return np.load(self.cos_path(name, split))

    def fields(self, cosines: dict[str, np.ndarray]) -> dict:
        """Row fields of ``{split: cosines}``: ``<split>_spearman`` (all pairs) and ``<split>_genres``."""
        from jtcse.evaluation.sts import ALL_GENRES, spearman_by_genre

        out = {}
        for split, cos in cosines.items():
            genres = spearman_by_genre(cos, self.pairs[split])
            out[f"{split}_spearman"] = genres.pop(ALL_GENRES)
            out[f"{split}_genres"] = genres
        return out

    def score(self, name: str, model) -> dict:
        """Score ``model`` (row ``name``) on every split, caching its cosines (and embeddings): the row's fields."""
        from jtcse.evaluation.sts import encode_unique, paired_cosine

        model.max_seq_length = self.max_seq_length
        started, cosines = time.perf_counter(), {}
        for split, pairs in self.pairs.items():
            table = encode_unique(model, pairs.sentences1 + pairs.sentences2, 64)
            cosines[split] = paired_cosine(table, pairs)
            np.save(self.cos_path(name, split), cosines[split])
            if split in self.embed:
                np.save(self.work / "emb" / f"{name}.npy", np.stack([table[s] for s in sorted(table)]))
        return {**self.fields(cosines), "eval_seconds": round(time.perf_counter() - started, 2)}

    def ensemble(self, members: list[str], weights) -> dict:
        """Fields of the concat ensemble of the scored rows ``members`` at ``weights``, from their cosines."""
        from jtcse.training.selection import concat_cosine

        return self.fields(
            {split: concat_cosine([self.cosines(m, split) for m in members], weights) for split in self.pairs}
        )

    def diversity(self, a: str, b: str, split: str) -> dict:
        """How differently rows ``a`` and ``b`` err on ``split`` (rank-error agreement) and, when its embeddings are
        cached, how alike they embed it (linear CKA)."""
        from jtcse.evaluation.diversity import error_agreement, linear_cka

        gold = np.asarray(self.pairs[split].scores)
        out = {"error_agreement": error_agreement(self.cosines(a, split), self.cosines(b, split), gold)}
        if split in self.embed:
            out["cka"] = linear_cka(*(np.load(self.work / "emb" / f"{n}.npy") for n in (a, b)))
        return out
