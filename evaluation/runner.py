"""The one study runner: makes every row of a study file in order, each written to ``<work>/results/ROW.json`` as
soon as it exists, so that a rerun skips the rows there and an interrupted study resumes (a training row calls its
trainer, which returns a finished run's summary at once and resumes an interrupted one from its checkpoints)."""

from __future__ import annotations

import fnmatch
import json
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from evaluation import kinds
from evaluation.scoring import main_score
from evaluation.study import Row, Scope, Study, Waiting
from jtcse.locking import atomic_write_text


def read_rows(work: Path) -> dict[str, dict]:
    """Every row file in ``<work>/results``, by row name (in name order)."""
    files = sorted((work / "results").glob("*.json"), key=lambda p: p.stem)
    return {p.stem: json.loads(p.read_text(encoding="utf-8")) for p in files}


def scored_splits(study: Study, saved: dict) -> list[str]:
    """The splits of the study a saved row has its score on."""
    return [s for s in study.splits if f"{s}_spearman" in saved or f"{s}_score" in saved]


def scoring_over(study: Study, saved: dict) -> bool:
    """Whether a saved row's scoring is over: a row is saved after each split it is scored on (so that a rerun
    scores only what it lacks), so one with some splits but not all is still being scored. A row scored on no
    split (a diagnostics row) is whole."""
    return len(scored_splits(study, saved)) in (0, len(study.splits))


def finished_rows(study: Study, work: Path) -> dict[str, dict]:
    """The row files of ``work`` whose scoring is over (:func:`scoring_over`): one that another process is still
    scoring is left out until it has every split."""
    return {n: r for n, r in read_rows(work).items() if scoring_over(study, r)}


def training_record(folder: Path, run: Callable[[], dict]) -> dict:
    """Train into ``folder`` (``run``: a trainer call that resumes) and return the row fields of its run summary:
    ``train_seconds`` (this call's wall time; a training finished before: its summary's), ``cpu_seconds`` (every
    thread of this process, when it trained here), ``steps``, the first and last logged loss and its terms."""
    from jtcse.training.run_dir import is_finished

    finished = is_finished(folder)
    started, cpu = time.perf_counter(), time.process_time()
    summary = run()
    seconds = 0.0 if finished else round(time.perf_counter() - started, 2)
    record = {"train_seconds": seconds or summary.get("seconds"), "steps": summary.get("steps")}
    record.update(first_loss=summary.get("first_logged_loss"), last_loss=summary.get("last_logged_loss"))
    record["last_loss_terms"] = summary.get("loss_terms")
    return {**record, **({} if finished else {"cpu_seconds": round(time.process_time() - cpu, 1)})}


class Runner:
    """A study's rows made in ``work`` from the data folder ``data`` (``threads``: torch CPU threads); ``seeds`` and
    ``rows`` (name or stage globs) restrict what this process makes, so that several share a study."""

    def __init__(self, study: Study, work: Path, data: Path, threads: int, seeds=(), rows=()):
        self.study, self.work, self.data, self.threads = study, work, data, threads
        self.settings, self.wanted_seeds, self.wanted_rows = study.settings, set(seeds), list(rows)
        (work / "results").mkdir(parents=True, exist_ok=True)
        self.rows = read_rows(work)
        self.scope = Scope(study, self.rows)
        self._scorer = None

    # -- inputs ------------------------------------------------------------------------------------------------
    @property
    def scorer(self):
        from evaluation.scoring import Scorer

        if self._scorer is None:
            specs = {name: self.scope.resolve(spec) for name, spec in self.study.splits.items()}
            length = self.settings["eval_max_seq_length"]
            self._scorer = Scorer(self.work, self.data, specs, length, self.study.get("embed", []))
        return self._scorer

    def corpus_lines(self) -> list[str]:
        return (self.data / self.study.get("corpus", "wiki12k.txt")).read_text(encoding="utf-8").splitlines()

    def corpus(self, lines: int | None = None) -> Path:
        """The training corpus, the first ``corpus_lines`` lines of the corpus file (``lines``: fewer of them)."""
        path = self.work / ("corpus.txt" if lines is None else f"corpus_{lines}.txt")
        if not path.exists():
            atomic_write_text(path, "\n".join(self.corpus_lines()[: lines or self.settings["corpus_lines"]]) + "\n")
        return path

    def diag_sentences(self) -> list[str]:
        """``diag_sentences`` corpus lines after the training corpus: sentences no model trained on."""
        start, count = self.settings["corpus_lines"], self.settings["diag_sentences"]
        return [s for s in self.corpus_lines()[start : start + 2 * count] if s.strip()][:count]

    def speed_sentences(self) -> list[str]:
        """What a speed row encodes: the dev split's sentences, then the corpus, ``speed_sentences`` in all."""
        dev = self.scorer.pairs["dev"]
        lines = self.corpus().read_text(encoding="utf-8").splitlines()
        return (dev.sentences1 + dev.sentences2 + lines)[: self.settings["speed_sentences"]]

    # -- rows --------------------------------------------------------------------------------------------------
    def value(self, row: Row, key: str, default: Any = None) -> Any:
        return self.scope.value(row, key, default)

    def find(self, name: str) -> Row:
        """The row spec called ``name`` (from the first entry that makes it)."""
        for entry in (e for e in self.study.entries if "adds" not in e):
            try:
                found = [row for row in self.scope.expand(entry) if row.name == name]
            except Waiting:
                continue
            if found:
                return found[0]
        raise ValueError(f"{self.study.path}: no row is called {name!r}")

    def hook(self, row: Row, suffix: str = ""):
        return self.study.hook(row.entry["kind"] + suffix, kinds)

    def model_folder(self, row: Row) -> Path:
        """Where ``row``'s model is: its kind's ``KIND_folder``, else ``<work>/ROW``."""
        hook = self.hook(row, "_folder")
        return hook(self, row) if hook else self.work / row.name

    def model(self, row: Row):
        """``row``'s model on the CPU: its kind's ``KIND_load``, else the model in its folder."""
        from jtcse.modeling.loading import load_model

        hook = self.hook(row, "_load")
        return hook(self, row) if hook else load_model(str(self.model_folder(row)), device="cpu")

    def folder(self, name: str) -> Path:
        """Where the model of row ``name`` is, once the row is made."""
        if name not in self.rows:
            raise Waiting(f"row {name}")
        return self.model_folder(self.find(name))

    def load(self, name: str):
        return self.model(self.find(name))

    def save(self, row: Row, record: dict) -> dict:
        """Row ``row`` saved: its name, the threads, its entry's ``record`` fields, then ``record``."""
        record = {k: v for k, v in record.items() if k not in ("name", "threads")}
        saved = {"name": row.name, "threads": self.threads, **self.value(row, "record", {}), **record}
        # whole or not at all: another process of the study reads the row files before each entry
        atomic_write_text(self.work / "results" / f"{row.name}.json", json.dumps(saved, indent=2, default=str))
        self.rows[row.name] = saved
        scores = {s: main_score(saved, s) for s in self.study.splits if s in self.scored(saved)}
        print(f"[{self.study.name}] {row.name}: " + ", ".join(f"{s} {v:.4f}" for s, v in scores.items()), flush=True)
        return saved

    def scored(self, saved: dict) -> list[str]:
        """The splits of the study a saved row has its score on."""
        return scored_splits(self.study, saved)

    def update(self, name: str, **fields) -> None:
        """Fields added to the saved row ``name``."""
        row = self.find(name)
        self.save(row, {**self.rows[name], **fields})

    def score(self, row: Row, load: Callable, **record) -> dict:
        """Row ``row`` saved with ``record`` and scored (the model ``load`` returns) on each split its file lacks,
        saved after each: a split is scored once, whenever the row is made again."""
        saved = {**self.rows.get(row.name, {}), **record}
        missing = [s for s in self.study.splits if s not in self.scored(saved)]
        encoder = self.scorer.encoder(load()) if missing else None
        for split in missing:
            fields = self.scorer.score(row.name, encoder, split)
            seconds = round(saved.get("eval_seconds", 0) + fields.pop("seconds"), 2)
            saved = self.save(row, {**saved, **fields, "eval_seconds": seconds})
        return saved if missing else self.save(row, saved)

    def trained(self, row: Row, run: Callable[[], dict], after: Callable[[], dict] | None = None, **record) -> dict:
        """Row ``row``: trained into its folder once (:func:`training_record`), scored, ``after()``'s fields added."""
        record.update(training_record(self.work / row.name, run))
        saved = self.score(row, lambda: self.model(row), **record)
        return self.save(row, {**saved, **after()}) if after else saved

    # -- the run -----------------------------------------------------------------------------------------------
    def wanted(self, row: Row) -> bool:
        seed_ok = not self.wanted_seeds or row.names.get("seed") in self.wanted_seeds
        keys = (row.name, row.entry.get("stage", ""))
        return seed_ok and (not self.wanted_rows or any(fnmatch.fnmatch(k, g) for k in keys for g in self.wanted_rows))

    def done(self, row: Row) -> bool:
        """Whether ``row`` is made: saved, with a score on every split when it has one (an entry that ``adds`` a
        field to a row: whether it has it, or no such row)."""
        saved = self.rows.get(row.name)
        if "adds" in row.entry:
            return saved is None or row.entry["adds"] in saved
        return saved is not None and scoring_over(self.study, saved)

    def run(self, dry: bool = False) -> None:
        """Every entry in the file's order: its rows not done yet made (those waiting on others said and skipped;
        ``dry``: each said, nothing made). Before each entry the row files other processes of the study saved
        meanwhile are read in, so that one making ``--rows confirm`` finds the levers another one has made since."""
        if not dry:
            import torch

            torch.set_num_threads(self.threads)
        for entry in self.study.entries:
            self.rows.update(finished_rows(self.study, self.work))
            try:
                rows = self.scope.expand(entry)
            except Waiting as waiting:
                print(f"[{self.study.name}] {entry['name']} waits: {waiting}", flush=True)
                continue
            for row in rows:
                if self.wanted(row) and not self.done(row):
                    if dry:
                        print(f"[{self.study.name}] would make {row.name}", flush=True)
                        continue
                    try:
                        self.hook(row)(self, row)
                    except Waiting as waiting:
                        print(f"[{self.study.name}] {row.name} waits: {waiting}", flush=True)
