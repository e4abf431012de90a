"""How a study scores a model: its main score on each of the study's ``[splits]``, a fraction as mteb gives it, by
jtcse's selection scoring (:mod:`jtcse.evaluation.selection_scoring`: one ``CachedEncoder`` a model, so a text two
splits share is encoded once).

A split's ``file`` is what ``--selection-file`` takes, in the data folder (``PATH`` or ``TYPE:PATH``): an STS file
(row fields ``<split>_spearman``, over all pairs, and ``<split>_genres``), a classification folder (accuracy on a
held-out half of its train split), a BEIR folder or ``retrieval-pairs:FILE`` (nDCG@10) (``<split>_score``). ``limit``
scores the first lines of each of its files (a copy in ``<work>/splits/SPLIT``; a smoke run's). An STS split may
take a fixed random ``sample`` of its pairs (drawn once with seed 0, kept in file order), drop the pairs another file
has (``without``, in either order) or keep ``pairs`` of them spread over the file (every k-th: all genres); its
cosines are cached (``<work>/cos/ROW.SPLIT.npy``) so that an ensemble of scored rows is scored exactly without
encoding again (:func:`jtcse.training.selection.concat_cosine`).
"""

from __future__ import annotations

import dataclasses
import time
from pathlib import Path

import numpy as np

from jtcse.locking import atomic_write_text


def main_score(row: dict, split: str) -> float:
    """A row's main score on ``split``: an STS split's Spearman, any other's ``<split>_score``."""
    return row[f"{split}_spearman"] if f"{split}_spearman" in row else row[f"{split}_score"]


def _first_lines(path: Path, out: Path, limit: int) -> Path:
    """A copy of ``path`` (a file, or each file of a folder) in ``out`` holding the first ``limit`` lines."""
    files = sorted(p for p in path.iterdir() if p.is_file()) if path.is_dir() else [path]
    out.mkdir(parents=True, exist_ok=True)
    for file in files:
        lines = file.read_text(encoding="utf-8").splitlines(keepends=True)[:limit]
        atomic_write_text(out / file.name, "".join(lines))  # another process of the study may read it
    return out if path.is_dir() else out / path.name


def read_split(data: Path, work: Path, name: str, spec: dict):
    """The selection input (:func:`jtcse.training.selection.selection_input`) of a split spec (module docstring)."""
    from jtcse.evaluation.mteb_local_tasks import parse_task_spec
    from jtcse.evaluation.sts import read_stsb_file, without_pairs_of
    from jtcse.training.selection import selection_input

    kind, path = parse_task_spec(spec["file"])
    path = (data / path).resolve()
    path = _first_lines(path, work.resolve() / "splits" / name, spec["limit"]) if spec.get("limit") else path
    item = selection_input(f"{kind}:{path}" if kind else path)
    if item.pairs is None:
        if {"sample", "without", "pairs"} & {key for key, value in spec.items() if value}:
            raise ValueError(f"split {name}: sample, without and pairs take the pairs of an STS file only.")
        return item
    pairs = item.pairs
    if spec.get("sample"):
        drawn = np.random.default_rng(0).choice(len(pairs), size=min(spec["sample"], len(pairs)), replace=False)
        pairs = pairs.take(np.sort(drawn))
    if spec.get("without"):
        pairs, _ = without_pairs_of(pairs, read_stsb_file(data / spec["without"]))
    if spec.get("pairs"):
        pairs = pairs.take(range(0, len(pairs), max(1, len(pairs) // spec["pairs"])))
    return dataclasses.replace(item, pairs=pairs)


class Scorer:
    """The study's splits (``specs``: name -> resolved spec) read from ``data``, scored at ``max_seq_length``,
    cosines cached under ``work/cos`` (and, for the splits ``embed`` names, embeddings under ``work/emb``);
    ``pairs`` holds the STS splits' pairs, ``specs`` each split as a ``--selection-file`` spec (as scored)."""

    def __init__(self, work: Path, data: Path, specs: dict[str, dict], max_seq_length: int, embed=()):
        self.work, self.max_seq_length, self.embed = work, max_seq_length, tuple(embed)
        self.inputs = {name: read_split(data, work, name, spec) for name, spec in specs.items()}
        self.pairs = {name: item.pairs for name, item in self.inputs.items() if item.pairs is not None}
        self.specs = {name: item.spec for name, item in self.inputs.items()}
        for folder in ("cos", "emb"):
            (work / folder).mkdir(parents=True, exist_ok=True)

    def cos_path(self, name: str, split: str) -> Path:
        return self.work / "cos" / f"{name}.{split}.npy"

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

    def encoder(self, model):
        """``model`` at the study's length, as every split encodes it (each text once)."""
        from jtcse.evaluation.selection_scoring import CachedEncoder

        model.max_seq_length = self.max_seq_length
        return CachedEncoder(model)

    def score(self, name: str, encoder, split: str) -> dict:
        """Row ``name``'s fields on ``split`` (``encoder``: :meth:`encoder`), its cosines (and embeddings) cached,
        and the ``seconds`` it took."""
        from jtcse.evaluation.selection_scoring import score_input
        from jtcse.evaluation.sts import paired_cosine

        started, item = time.perf_counter(), self.inputs[split]
        if item.pairs is None:
            fields = {f"{split}_score": score_input(encoder, item)["all"]}
        else:
            unique = sorted(dict.fromkeys(item.pairs.sentences1 + item.pairs.sentences2), key=len)  # little padding
            table = dict(zip(unique, encoder.vectors(unique, item.task.metadata), strict=True))
            np.save(self.cos_path(name, split), cosines := paired_cosine(table, item.pairs))
            if split in self.embed:
                np.save(self.work / "emb" / f"{name}.npy", np.stack([table[s] for s in sorted(table)]))
            fields = self.fields({split: cosines})
        return {**fields, "seconds": time.perf_counter() - started}

    def ensemble(self, members: list[str], weights) -> dict:
        """Fields of the concat ensemble of the scored rows ``members`` at ``weights``, from their cosines."""
        from jtcse.training.selection import concat_cosine

        if other := sorted(set(self.inputs) - set(self.pairs)):
            raise ValueError(f"an ensemble of scored rows is scored from their STS cosines; {other} are no STS split.")
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
            out["cka"] = linear_cka(*(np.load(self.work / "emb" / f"{name}.npy") for name in (a, b)))
        return out
