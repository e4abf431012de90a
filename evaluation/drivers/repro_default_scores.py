"""How the defaults driver scores a model: STS-B dev and the selection split, over all pairs and per genre, from
pair cosines it caches (``<work>/cos/<row>.<split>.npy``), so that an ensemble is scored without encoding again."""

from __future__ import annotations

import json
import time
from pathlib import Path

from evaluation.drivers.cli import DATA
from evaluation.drivers.grid import TrainingGrid, training_record
from evaluation.drivers.repro_default_settings import SHIPPED, SPLITS
from evaluation.drivers.splits import dev_and_selection


class ScoredGrid(TrainingGrid):
    """:class:`~evaluation.drivers.grid.TrainingGrid` with the selection split, per-genre scores and cached pair
    cosines: every row of the defaults driver is scored on both splits, per genre (a driver scoring other splits
    names them in ``split_names`` and returns their pairs from :meth:`pairs`)."""

    split_names = SPLITS

    def __init__(self, work: Path, cfg: dict, threads: int, data: Path = DATA):
        super().__init__(work, cfg, threads, data)
        self.splits = dev_and_selection(data, cfg["select_pairs"], cfg["dev_pairs"])
        self.dev, self.select = self.splits.dev, self.splits.select
        (work / "cos").mkdir(parents=True, exist_ok=True)

    def pairs(self, split: str):
        return self.dev if split == "dev" else self.select

    # -- rows and scores ---------------------------------------------------------------------------
    def cos_path(self, name: str, split: str) -> Path:
        return self.work / "cos" / f"{name}.{split}.npy"

    def cosines(self, name: str, split: str):
        """A model's cosines on ``split``; selection cosines saved for the whole sample (before the pairs it
        shares with dev were left out) are cut to the selection split."""
        import numpy as np

        cos = np.load(self.cos_path(name, split))
        return self.splits.selection_cosines(cos) if split == "select" else cos

    def rescore(self) -> None:
        """Recompute every scored row's fields from its saved cosines (after the selection split changed)."""
        for path in sorted((self.work / "results").glob("*.json")):
            row = json.loads(path.read_text(encoding="utf-8"))
            name = row["name"]
            if all(f"{s}_spearman" in row and self.cos_path(name, s).exists() for s in self.split_names):
                fresh = self.scores_from({split: self.cosines(name, split) for split in self.split_names})
                if any(row.get(k) != v for k, v in fresh.items()):
                    path.write_text(
                        json.dumps({**row, **fresh, "select_pairs": len(self.select)}, indent=2, default=str),
                        encoding="utf-8",
                    )

    def scores_from(self, cos: dict) -> dict:
        """Row fields from ``{split: cosines}``: ``<split>_spearman`` (all pairs) and ``<split>_genres``."""
        from jtcse.evaluation.sts import ALL_GENRES, spearman_by_genre

        out = {}
        for split, c in cos.items():
            genres = spearman_by_genre(c, self.pairs(split))
            out[f"{split}_spearman"] = genres.pop(ALL_GENRES)
            out[f"{split}_genres"] = genres
        return out

    def score(self, name: str, load, **record) -> dict:
        """Score a saved model (both splits, per genre), cache its cosines, save row ``name`` (merged)."""
        import numpy as np

        from jtcse.evaluation.sts import encode_unique, paired_cosine

        row = self.row(name) or {}
        if all(f"{s}_spearman" in row and self.cos_path(name, s).exists() for s in self.split_names):
            return row
        model = load()
        model.max_seq_length = self.cfg["eval_max_seq_length"]
        started = time.perf_counter()
        cos = {}
        for split in self.split_names:
            pairs = self.pairs(split)
            cos[split] = paired_cosine(encode_unique(model, pairs.sentences1 + pairs.sentences2, 64), pairs)
            np.save(self.cos_path(name, split), cos[split])
        row = {k: v for k, v in row.items() if k not in ("name", "threads")}
        return self.save(
            name,
            {
                **row,
                **record,
                **self.scores_from(cos),
                "select_pairs": len(self.select),
                "eval_seconds": round(time.perf_counter() - started, 2),
            },
        )

    def trained(self, name: str, run, load, **record) -> dict:
        """Train row ``name`` into ``work/name`` once (resumable, :func:`~evaluation.drivers.grid.training_record`),
        then score it."""
        row = self.row(name)
        if row is not None and "train_seconds" in row:
            return self.score(name, load)
        record.update(training_record(self.work / name, run))
        self.save(name, {**(row or {}), **record})
        return self.score(name, load)

    def pipeline_student(self, name: str, out: Path, copies: dict[str, str], config, **record) -> None:
        """Row ``name``: ``jtcse pipeline`` of ``config`` in ``out``, the rows' folders ``copies`` (``{stage folder:
        row}``) copied in first (with their files' times: the same models, so those stages are skipped as done),
        its student scored; nothing is done for a row already saved."""
        import shutil

        from sentence_transformers import SentenceTransformer

        from jtcse.pipeline.run import run_pipeline
        from jtcse.pipeline.stages import DISTILL

        if self.done(name):
            return
        for folder, row in copies.items():
            if not (out / folder).exists():
                shutil.copytree(self.work / row, out / folder, ignore=shutil.ignore_patterns("checkpoints"))
        self.trained(name, lambda: run_pipeline(out, config, device="cpu")["stages"][DISTILL.metadata.name],
                     lambda: SentenceTransformer(str(out / DISTILL.metadata.folder), device="cpu"),
                     group="student", settings=config.values(), **record)  # fmt: skip

    def chosen(self, names: dict, stage: str, genre_safe: bool = False):
        """The key of ``names`` (key -> row name) best on the selection split (``genre_safe``: among those losing
        no selection genre to the shipped MiniLM, :meth:`genre_safe_best`); a missing row stops the driver."""
        best = super().chosen(names, stage)
        return self.genre_safe_best({key: self.row(name) for key, name in names.items()}) if genre_safe else best

    def genre_safe(self, row: dict) -> bool:
        """Whether ``row`` scores at least the shipped MiniLM's on every genre of the selection split."""
        shipped = self.row(SHIPPED)["select_genres"]
        return all(row["select_genres"][g] >= v for g, v in shipped.items())

    def genre_safe_best(self, options: dict):
        """The key of ``options`` (key -> row) best on the selection split among those that lose no genre of it to
        the shipped MiniLM (the recipe must not trade one kind of text for another); the best overall if none is."""
        safe = [k for k, row in options.items() if self.genre_safe(row)]
        return max(safe or list(options), key=lambda k: options[k]["select_spearman"])
