"""The seven-task SentEval STS table (STS12–16 "all", STS-B test, SICK-R test) for any encoder.

Per task, each distinct sentence is encoded once (sorted by length, so batches pad little); the
score is Spearman's ρ between cos(f(s1), f(s2)) and the gold scores — for STS12–16 over the
concatenation of all pairs of the year (SimCSE's "all" setting). Scores are reported in percent with
two decimals; the average is the mean of those rounded scores, as SimCSE's table prints it.
"""

from __future__ import annotations

import csv
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np

from jtcse.errors import JTCSEError
from jtcse.evaluation.senteval_data import SENTEVAL_STS_TASKS, STSTaskData, load_task
from jtcse.evaluation.sts import (
    ALL_GENRES,
    STSPairs,
    encode_unique,
    genre_spearman,
    paired_cosine,
    read_stsb_file,
    spearman_by_genre,
)


def percent(rho: float) -> float:
    """ρ as a percentage with two decimals (SimCSE prints ``"%.2f" % (ρ * 100)``)."""
    return float(f"{rho * 100:.2f}")


def _genre_percent(rho: float) -> float | None:
    """:func:`percent`, ``None`` for a genre without a correlation (NaN: too few pairs, or constant scores)."""
    return None if np.isnan(rho) else percent(rho)


def _fixed_table(names: list[str], values: list[float | None]) -> str:
    """A fixed-width table: one header row of names, one row of scores (``-`` for none)."""
    cells = ["-" if v is None else f"{v:.2f}" for v in values]
    widths = [max(len(n), len(c)) for n, c in zip(names, cells, strict=True)]
    line = "+" + "+".join("-" * (w + 2) for w in widths) + "+"
    row = lambda items: "| " + " | ".join(i.rjust(w) for i, w in zip(items, widths, strict=True)) + " |"  # noqa: E731
    return "\n".join([line, row(names), line, row(cells), line])


def append_csv_row(path: str | Path, row: dict[str, str]) -> None:
    """Write ``row`` (with its keys as the header) to the CSV file ``path``, or append it when the file already has
    that header, so several models build one table; another header is an error."""
    path = Path(path)
    header = list(row)
    append = False
    if path.is_file() and path.stat().st_size > 0:
        with path.open(newline="", encoding="utf-8") as handle:
            existing = next(csv.reader(handle), [])
        if existing != header:
            raise JTCSEError(f"{path} exists with another header ({', '.join(existing)}); choose a new --output-csv.")
        append = True
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("a" if append else "w", newline="", encoding="utf-8") as handle:
        writer = csv.DictWriter(handle, fieldnames=header)
        if not append:
            writer.writeheader()
        writer.writerow(row)


@dataclass
class STSTaskResult:
    """Score of one task plus what it cost to encode."""

    task: str
    spearman: float  # fraction, unrounded
    n_pairs: int
    unique_sentences: int
    encode_seconds: float
    subsets: dict[str, float] = field(default_factory=dict)  # per-subset ρ (fraction), for reference
    genres: dict[str, float] = field(default_factory=dict)  # per-genre ρ (fraction) when the pairs carry genres (STS-B)

    @property
    def sentences_per_second(self) -> float:
        return self.unique_sentences / self.encode_seconds if self.encode_seconds > 0 else float("inf")


def evaluate_task(model, data: STSTaskData, batch_size: int = 64, show_progress_bar: bool = False) -> STSTaskResult:
    """Score one task with ``model`` (anything with a sentence-transformers ``encode``)."""
    from scipy.stats import spearmanr

    sentences = [s for pairs in data.subsets.values() for s in pairs.sentences1 + pairs.sentences2]
    start = time.perf_counter()
    table = encode_unique(model, sentences, batch_size=batch_size, show_progress_bar=show_progress_bar)
    seconds = time.perf_counter() - start
    cosines = {name: paired_cosine(table, pairs) for name, pairs in data.subsets.items()}
    all_cos = np.concatenate(list(cosines.values()))
    all_gold = np.concatenate([pairs.scores for pairs in data.subsets.values()])
    genres = {}
    if all(pairs.genres for pairs in data.subsets.values()):
        blank = [""] * len(all_gold)  # spearman_by_genre reads only the scores and the genres
        joined = STSPairs(blank, blank, all_gold, [g for pairs in data.subsets.values() for g in pairs.genres])
        genres = {g: rho for g, rho in spearman_by_genre(all_cos, joined).items() if g != ALL_GENRES}
    return STSTaskResult(
        task=data.name,
        spearman=float(spearmanr(all_cos, all_gold).statistic),
        n_pairs=len(all_gold),
        unique_sentences=len(table),
        encode_seconds=seconds,
        subsets={name: float(spearmanr(cos, data.subsets[name].scores).statistic) for name, cos in cosines.items()},
        genres=genres,
    )


@dataclass
class SentEvalSTSReport:
    """Scores of the tasks that ran and the reasons the others did not."""

    results: dict[str, STSTaskResult]
    missing: dict[str, str]
    tasks: tuple[str, ...] = SENTEVAL_STS_TASKS
    meta: dict = field(default_factory=dict)

    def score(self, task: str) -> float | None:
        result = self.results.get(task)
        return None if result is None else percent(result.spearman)

    @property
    def average(self) -> float | None:
        scores = [self.score(t) for t in self.tasks if t in self.results]
        return float(f"{sum(scores) / len(scores):.2f}") if scores else None

    def to_json(self) -> dict:
        """``{"STS12": 68.4, …, "SICKR": …, "avg": …}`` plus details, missing tasks and throughput."""
        out: dict = {task: self.score(task) for task in self.tasks}
        out["avg"] = self.average
        out["avg_over"] = [t for t in self.tasks if t in self.results]
        out["missing"] = dict(self.missing)
        out["genres"] = {  # STS-B: Spearman ×100 per genre, so a gain overall cannot hide a loss on one kind of text
            task: {genre: _genre_percent(rho) for genre, rho in r.genres.items()}
            for task, r in self.results.items()
            if r.genres
        }
        sentences = sum(r.unique_sentences for r in self.results.values())
        seconds = sum(r.encode_seconds for r in self.results.values())
        out["sentences_per_second"] = round(sentences / seconds, 1) if seconds > 0 else None
        out["details"] = {
            task: {**asdict(r), "sentences_per_second": round(r.sentences_per_second, 1)}
            for task, r in self.results.items()
        }
        out["meta"] = dict(self.meta)
        return out

    def table(self) -> str:
        """A fixed-width table: one header row of task names, one row of scores; then each task's genres."""
        text = _fixed_table([*self.tasks, "Avg."], [self.score(t) for t in self.tasks] + [self.average])
        for task, genres in self.to_json()["genres"].items():
            text += f"\n{task} per genre: " + ", ".join(
                f"{g} {'-' if v is None else f'{v:.2f}'}" for g, v in genres.items()
            )
        for task, reason in self.missing.items():
            text += f"\n{task}: not evaluated ({reason})"
        return text

    def csv_row(self) -> dict[str, str]:
        row = {"model": str(self.meta.get("model", ""))}
        for task in self.tasks:
            score = self.score(task)
            row[task] = "" if score is None else f"{score:.2f}"
        row["avg"] = "" if self.average is None else f"{self.average:.2f}"
        return row

    def write_csv(self, path: str | Path) -> None:
        """Write (or append a row to) a results table: ``model, STS12, …, SICKR, avg`` (:func:`append_csv_row`)."""
        append_csv_row(path, self.csv_row())


@dataclass
class STSFileReport:
    """Spearman of one encoder on one STS-B-format file (``jtcse eval sts --stsb-file``): over all pairs and per
    genre (fractions, unrounded; ``"all"`` first), with the pairs each covers."""

    path: str
    spearman: dict[str, float]
    pairs: dict[str, int]
    meta: dict = field(default_factory=dict)

    def to_json(self) -> dict:
        """``{"file", "spearman": {"all": 85.12, "main-captions": …}, "pairs": {…}, "meta"}`` (×100, two decimals)."""
        scores = {genre: _genre_percent(rho) for genre, rho in self.spearman.items()}
        return {"file": self.path, "spearman": scores, "pairs": dict(self.pairs), "meta": dict(self.meta)}

    def table(self) -> str:
        return f"{self.path} (Spearman ×100)\n" + _fixed_table(
            list(self.spearman), list(self.to_json()["spearman"].values())
        )

    def csv_row(self) -> dict[str, str]:
        scores = self.to_json()["spearman"]
        return {
            "model": str(self.meta.get("model", "")),
            "file": self.path,
            **{genre: "" if v is None else f"{v:.2f}" for genre, v in scores.items()},
        }

    def write_csv(self, path: str | Path) -> None:
        """Write (or append a row to) ``model, file, all, <genre> …`` (:func:`append_csv_row`)."""
        append_csv_row(path, self.csv_row())


def run_stsb_file(model, path: str | Path, batch_size: int = 64, show_progress_bar: bool = False) -> STSFileReport:
    """Score ``model`` on the STS-B-format file ``path`` over all pairs and per genre
    (:func:`~jtcse.evaluation.sts.genre_spearman`: each sentence encoded once)."""
    pairs = read_stsb_file(path)
    scores = genre_spearman(model, pairs, batch_size=batch_size, show_progress_bar=show_progress_bar)
    counts = {ALL_GENRES: len(pairs), **{g: (pairs.genres or []).count(g) for g in scores if g != ALL_GENRES}}
    return STSFileReport(str(path), scores, counts)


def run_senteval_sts(
    model,
    data_dir: str | Path,
    tasks: tuple[str, ...] | list[str] = SENTEVAL_STS_TASKS,
    task_dirs: dict[str, str] | None = None,
    batch_size: int = 64,
    show_progress_bar: bool = False,
) -> SentEvalSTSReport:
    """Evaluate ``model`` on ``tasks`` found under ``data_dir``; unreadable tasks are reported, not fatal."""
    data_dir = Path(data_dir)
    if not data_dir.is_dir():
        raise JTCSEError(f"--data-dir {data_dir} is not a directory")
    unknown = [t for t in tasks if t not in SENTEVAL_STS_TASKS]
    if unknown:
        raise JTCSEError(f"unknown task(s) {', '.join(unknown)}; choose from {', '.join(SENTEVAL_STS_TASKS)}")
    task_dirs = task_dirs or {}
    results: dict[str, STSTaskResult] = {}
    missing: dict[str, str] = {}
    for task in tasks:
        try:
            data = load_task(data_dir, task, task_dirs.get(task))
        except JTCSEError as err:
            missing[task] = str(err)
            continue
        results[task] = evaluate_task(model, data, batch_size=batch_size, show_progress_bar=show_progress_bar)
    if not results:
        raise JTCSEError(
            f"no STS task could be read under {data_dir}:\n" + "\n".join(f"  {t}: {r}" for t, r in missing.items())
        )
    return SentEvalSTSReport(results, missing, tuple(tasks), meta={"data_dir": str(data_dir), "backend": "jtcse"})


_SENTEVAL_NAMES = {
    "STS12": "STS12",
    "STS13": "STS13",
    "STS14": "STS14",
    "STS15": "STS15",
    "STS16": "STS16",
    "STSB": "STSBenchmark",
    "SICKR": "SICKRelatedness",
}


def run_senteval_package(
    model, data_dir: str | Path, tasks=SENTEVAL_STS_TASKS, batch_size: int = 64
) -> SentEvalSTSReport:
    """The same table computed by the ``senteval`` package itself (SimCSE's fork for unsupervised STS-B/SICK-R).

    Untested here: ``senteval`` is not installable in this project's environment.
    """
    try:
        import senteval
    except ImportError:
        raise JTCSEError(
            "the senteval backend needs the 'senteval' package importable (e.g. SimCSE's SentEval on PYTHONPATH)"
        ) from None

    def batcher(params, batch):
        sentences = [" ".join(w.decode("utf-8") if isinstance(w, bytes) else w for w in words) for words in batch]
        return model.encode(sentences, batch_size=len(sentences), convert_to_numpy=True)

    params = {"task_path": str(data_dir), "usepytorch": True, "kfold": 10, "batch_size": batch_size}
    results: dict[str, STSTaskResult] = {}
    for task in tasks:
        start = time.perf_counter()
        out = senteval.engine.SE(params, batcher, lambda p, s: None).eval(_SENTEVAL_NAMES[task])
        seconds = time.perf_counter() - start
        if task.startswith("STS1"):
            rho, n = out["all"]["spearman"]["all"], sum(v["nsamples"] for k, v in out.items() if k != "all")
        else:
            rho, n = out["test"]["spearman"][0], out["test"].get("nsamples", 0)
        results[task] = STSTaskResult(task, float(rho), int(n), 0, seconds)
    return SentEvalSTSReport(results, {}, tuple(tasks), meta={"data_dir": str(data_dir), "backend": "senteval"})
