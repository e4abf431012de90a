"""A resumable grid of training runs scored on STS-B dev: the row bookkeeping of the reproduction drivers
``scripts/repro_cpu.py`` and ``scripts/repro_ucd.py``.

A *row* is one result, written to ``<work>/results/<name>.json`` as soon as it exists; a rerun skips the rows
already there, so an interrupted grid resumes. A trained row runs through the pipeline's run-once step
(:func:`jtcse.training.pipeline.run_once`): a finished model is reused, an interrupted one resumes from its
checkpoints.

The grid's settings ``cfg`` (a dict) it reads: ``corpus_lines`` (the training corpus: the first lines of
``wiki12k.txt``), ``diag_sentences`` (that many later, unseen lines for diagnostics), ``dev_pairs`` (STS-B dev
pairs scored; ``None``: all), ``eval_max_seq_length``, ``seeds`` (one warm-up tower W_s per seed) and
``simcse`` (the :func:`~jtcse.training.simcse.train_simcse` keyword arguments of a warm-up).
"""

from __future__ import annotations

import json
import re
import statistics
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

_TABLES = re.compile(r"<!-- TABLES START -->.*<!-- TABLES END -->", flags=re.S)


def mean_std(values: list[float]) -> tuple[float, float | None]:
    """Mean and sample standard deviation (``None`` for a single value)."""
    return statistics.fmean(values), (statistics.stdev(values) if len(values) > 1 else None)


def pair_of(seed: int, seeds: list[int]) -> tuple[int, int]:
    """Warm-up towers of the twin with this seed: W_s and the next one (cyclically)."""
    i = seeds.index(seed)
    return seeds[i], seeds[(i + 1) % len(seeds)]


def refresh_tables(report: Path, tables: str) -> None:
    """Replace what stands between ``<!-- TABLES START -->`` and ``<!-- TABLES END -->`` in the write-up
    ``report`` with ``tables`` (the generated part of ``evaluation/*.md``)."""
    text = report.read_text(encoding="utf-8")
    text = _TABLES.sub(lambda _: f"<!-- TABLES START -->\n{tables}<!-- TABLES END -->", text)
    report.write_text(text, encoding="utf-8")


def encode_rates(
    models: dict[str, Any], sentences: list[str], max_seq_length: int, repeats: int = 3
) -> dict[str, float]:
    """Sentences per second of each model on ``sentences`` (the best of ``repeats`` rounds, the models taking
    turns within a round so a noisy neighbour hits them alike)."""
    times: dict[str, list[float]] = {key: [] for key in models}
    for _ in range(repeats):
        for key, model in models.items():
            model.max_seq_length = max_seq_length
            started = time.perf_counter()
            model.encode(sentences, batch_size=64)
            times[key].append(time.perf_counter() - started)
    return {key: len(sentences) / min(spent) for key, spent in times.items()}


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
        from jtcse.evaluation.sts import STSPairs, read_stsb_file

        pairs = read_stsb_file(data / "stsbenchmark" / "sts-dev.csv")
        n = cfg["dev_pairs"]
        self.dev = pairs if n is None else STSPairs(pairs.sentences1[:n], pairs.sentences2[:n], pairs.scores[:n])

    # -- bookkeeping -------------------------------------------------------------------------------
    def result_path(self, name: str) -> Path:
        return self.work / "results" / f"{name}.json"

    def done(self, name: str) -> bool:
        return self.result_path(name).exists()

    def save(self, name: str, record: dict) -> dict:
        record = {"name": name, "threads": self.threads, **record}
        self.result_path(name).write_text(json.dumps(record, indent=2, default=str), encoding="utf-8")
        print(f"[repro] {name}: dev {record.get('dev_spearman')}  train_s {record.get('train_seconds')}", flush=True)
        return record

    def trained(self, name: str, run: Callable[[], dict], load: Callable[[], Any], **record) -> None:
        """Row ``name``: train it into ``work/name`` once (:func:`~jtcse.training.pipeline.run_once`), score
        the saved model on the dev pairs and save the row with the run summary's numbers."""
        from jtcse.training.pipeline import run_once

        if self.done(name):
            return
        stage = run_once(self.work / name, run)
        summary = stage["summary"]
        rho, eval_s = self.dev_spearman(load())
        self.save(
            name,
            {
                **record,
                "dev_spearman": rho,
                "eval_seconds": eval_s,
                "train_seconds": stage["seconds"] or summary["seconds"],
                "steps": summary["steps"],
                "first_loss": summary["first_logged_loss"],
                "last_loss": summary["last_logged_loss"],
                "last_loss_terms": summary["loss_terms"],
            },
        )

    def dev_spearman(self, model, pairs=None) -> tuple[float, float]:
        """``(Spearman, seconds)`` of ``model`` on ``pairs`` (default: the dev pairs) at the evaluation length."""
        from jtcse.evaluation.sts import cosine_spearman

        model.max_seq_length = self.cfg["eval_max_seq_length"]
        started = time.perf_counter()
        rho = cosine_spearman(model, self.dev if pairs is None else pairs, batch_size=64)
        return float(rho), round(time.perf_counter() - started, 2)

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
