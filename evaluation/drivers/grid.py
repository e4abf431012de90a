"""A resumable grid of training runs scored on STS-B dev: the row files and shared inputs of every driver.

A *row* is one result, written to ``<work>/results/<name>.json`` as soon as it exists; a rerun skips the rows
already there, so an interrupted grid resumes. A trained row calls a trainer (``train_simcse``, ``train_twin``,
``distill``) into ``<work>/<name>`` with its default ``resume=True``: a finished training there returns its
summary at once, an interrupted one resumes from its checkpoints.

The grid's settings ``cfg`` (a dict) it reads: ``corpus_lines`` (the training corpus: the first lines of
``wiki12k.txt``), ``diag_sentences`` (that many later, unseen lines for diagnostics), ``dev_pairs`` (STS-B dev
pairs scored; ``None``: all), ``eval_max_seq_length``, ``seeds`` (one warm-up tower W_s per seed) and
``simcse`` (the :func:`~jtcse.training.simcse.train_simcse` keyword arguments of a warm-up).
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from evaluation.drivers.splits import best_on_selection


def read_rows(work: Path) -> dict[str, dict]:
    """Every row file in ``<work>/results``, by row name (in name order): what a report is built from."""
    return {p.stem: json.loads(p.read_text(encoding="utf-8")) for p in sorted((work / "results").glob("*.json"))}


def load_shipped():
    """The shipped MiniLM as shipped (its own modules: mean pooling, ``Normalize``), on the CPU: the row to beat."""
    from sentence_transformers import SentenceTransformer

    from jtcse.defaults import default_tower_path

    return SentenceTransformer(default_tower_path(), device="cpu")


def load_shipped_cls():
    """The shipped MiniLM with CLS pooling instead of its mean, on the CPU."""
    from jtcse.modeling.loading import load_model

    return load_model(None, pooling="cls", device="cpu")


def pair_of(seed: int, seeds: list[int]) -> tuple[int, int]:
    """Warm-up towers of the twin with this seed: W_s and the next one (cyclically)."""
    i = seeds.index(seed)
    return seeds[i], seeds[(i + 1) % len(seeds)]


def training_record(folder: Path, run: Callable[[], dict]) -> dict:
    """Train into ``folder`` (``run``: a trainer call that resumes) and return the row fields of its run summary:
    ``train_seconds`` (this call's wall time, model loading and saving included; a training that had finished
    before: its summary's time), ``steps``, ``first_loss``, ``last_loss`` and ``last_loss_terms``."""
    from jtcse.training.run_dir import is_finished

    finished = is_finished(folder)
    started = time.perf_counter()
    summary = run()
    seconds = 0.0 if finished else round(time.perf_counter() - started, 2)
    return {
        "train_seconds": seconds or summary.get("seconds"),
        "steps": summary.get("steps"),
        "first_loss": summary.get("first_logged_loss"),
        "last_loss": summary.get("last_logged_loss"),
        "last_loss_terms": summary.get("loss_terms"),
    }


class TrainingGrid:
    """The grid's shared inputs (training corpus, dev pairs, diagnostics sentences) and its row bookkeeping.

    Args:
        work: folder of the checkpoints (``work/<row>``) and row results (``work/results``).
        cfg: the grid's settings (see the module docstring).
        threads: torch CPU threads.
        data: folder with ``wiki12k.txt`` and ``stsbenchmark/``.
    """

    def __init__(self, work: Path, cfg: dict, threads: int, data: Path):
        import torch

        torch.set_num_threads(threads)
        self.threads = threads
        self.work = work
        self.cfg = cfg
        (work / "results").mkdir(parents=True, exist_ok=True)
        self.corpus = work / "corpus.txt"
        lines = (data / "wiki12k.txt").read_text(encoding="utf-8").splitlines()
        if not self.corpus.exists():
            self.corpus.write_text("\n".join(lines[: cfg["corpus_lines"]]) + "\n", encoding="utf-8")
        # diagnostics sentences: wiki lines the models never trained on
        start = cfg["corpus_lines"]
        self.diag_sentences = [s for s in lines[start : start + 2 * cfg["diag_sentences"]] if s.strip()][
            : cfg["diag_sentences"]
        ]
        from jtcse.evaluation.sts import read_stsb_file

        pairs = read_stsb_file(data / "stsbenchmark" / "sts-dev.csv")
        n = cfg["dev_pairs"]
        self.dev = pairs if n is None else pairs.take(range(n))

    # -- bookkeeping -------------------------------------------------------------------------------
    def result_path(self, name: str) -> Path:
        return self.work / "results" / f"{name}.json"

    def done(self, name: str) -> bool:
        return self.result_path(name).exists()

    def row(self, name: str) -> dict | None:
        """Row ``name`` as saved, or ``None`` while it is missing."""
        path = self.result_path(name)
        return json.loads(path.read_text(encoding="utf-8")) if path.exists() else None

    def save(self, name: str, record: dict) -> dict:
        record = {"name": name, "threads": self.threads, **record}
        self.result_path(name).write_text(json.dumps(record, indent=2, default=str), encoding="utf-8")
        print(f"[repro] {name}: dev {record.get('dev_spearman')}  train_s {record.get('train_seconds')}", flush=True)
        return record

    def chosen(self, names: dict, stage: str):
        """The key of ``names`` (key -> row name) whose row scores best on the selection split
        (:func:`~evaluation.drivers.splits.best_on_selection`); a missing row stops the driver."""
        rows = {key: self.row(name) for key, name in names.items()}
        best = best_on_selection(rows)
        if best is None:
            missing = [names[key] for key, row in rows.items() if row is None]
            raise SystemExit(f"run the {stage} stage first (missing rows {missing})")
        return best

    def trained(self, name: str, run: Callable[[], dict], load: Callable[[], Any], **record) -> None:
        """Row ``name``: train it into ``work/name`` once (:func:`training_record`), score the saved model on the
        dev pairs and save the row with the run summary's numbers."""
        if self.done(name):
            return
        training = training_record(self.work / name, run)
        rho, eval_s = self.dev_spearman(load())
        self.save(
            name,
            {
                **record,
                "dev_spearman": rho,
                "eval_seconds": eval_s,
                **training,
            },
        )

    def dev_spearman(self, model, pairs=None) -> tuple[float, float]:
        """``(Spearman, seconds)`` of ``model`` on ``pairs`` (default: the dev pairs) at the evaluation length."""
        from jtcse.evaluation.sts import cosine_spearman

        model.max_seq_length = self.cfg["eval_max_seq_length"]
        started = time.perf_counter()
        rho = cosine_spearman(model, self.dev if pairs is None else pairs, batch_size=64)
        return float(rho), round(time.perf_counter() - started, 2)

    def speed_sentences(self) -> list[str]:
        """What a ``speed`` row encodes: the dev sentences, then the corpus, ``cfg["speed_sentences"]`` in all."""
        lines = self.corpus.read_text(encoding="utf-8").splitlines()
        return (self.dev.sentences1 + self.dev.sentences2 + lines)[: self.cfg["speed_sentences"]]

    # -- the warm-up towers every twin starts from --------------------------------------------------
    def tower_dir(self, seed: int) -> Path:
        return self.work / f"warmup_s{seed}"

    def warmups(self) -> None:
        """SimCSE warm-up tower W_s from the embedded MiniLM for every seed (row ``warmup_s<seed>``)."""
        from jtcse.modeling.loading import load_model
        from jtcse.training.simcse import train_simcse

        for seed in self.cfg["seeds"]:
            out = self.tower_dir(seed)
            self.trained(
                f"warmup_s{seed}",
                lambda: train_simcse(None, self.corpus, out, seed=seed, logging_steps=5, **self.cfg["simcse"]),
                lambda: load_model(out, device="cpu"),
                group="warmup",
                seed=seed,
            )
