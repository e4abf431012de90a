"""Defaults that train: the measurements behind ``jtcse pipeline``'s default recipe (issue 25). CPU-sized, resumable.

Every choice is made on the **selection split** (1,500 pairs of STS-B *train*, a fixed random sample, seed 0,
the one ``scripts/repro_ucd.py`` used); STS-B dev is scored for every model and never used to choose. The
corpus is the whole of ``wiki12k.txt``. Two rows to beat: the shipped MiniLM as shipped, and the same-budget
control, plain unsupervised SimCSE of the shipped MiniLM keeping its own modules (mean pooling + Normalize,
sentence-transformers' ``MultipleNegativesRankingLoss`` on (s, s) pairs, batch 32, length 32, lr 3e-5, one
pass) -- which is exactly ``train_simcse`` keeping the model's pooling, i.e. the recipe's own warm-up W_s.

Stages (``--stages``, in this order; each row is written to ``<work>/results/<row>.json`` as soon as it
exists, each model's pair cosines to ``<work>/cos/``, and a rerun skips finished rows and resumes
unfinished trainings):

``baselines``  the shipped MiniLM (mean pooling, as shipped) and with CLS pooling
``controls``   SimCSE of the shipped MiniLM, own modules, seeds 1-3 = the control rows = warm-up towers W_s
``corpus_size`` the control on the first 3,000 lines only (the budget of evaluation/UCD.md and of the issue)
``probe``      mean-pooled twins of (W1, W2) at each probe learning rate (seed 1); best on the selection split
``cls``        twins of two copies of the shipped MiniLM (no warm-up), CLS and mean, at the tuned lr
``twins``      mean-pooled twins (W_s, W_s+1) for every seed at the tuned lr and the final step count
``ensembles``  start + twin_s, start + twin_s + twin_s+1, start + twin_s + W_s ... scored from the members'
               cosines (a concat of unit vectors has cos = sum_i w_i^2 cos_i / sum_i w_i^2), weights chosen on
               the selection split
``distill``    the chosen ensemble of each seed distilled into the shipped MiniLM (``similarity``), at each
               distillation length of ``distill_epochs`` on seed 1, the best for seeds 2, 3
``speed``      encode throughput of the final student against the shipped MiniLM (interleaved repeats)
``ablation``   twin loss ablations on seed 1 (no CAEL, no ICTM, NCE only)
``cls_recipe`` the CLS recipe at the same settings: CLS warm-ups W1, W2 and their CLS twin

``--report-only`` rebuilds ``evaluation/default/results.json`` and the tables in ``evaluation/DEFAULTS.md``.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from repro_cpu import DATA, Runner, mean_std  # noqa: E402

FULL = {
    "corpus_lines": 10**6,  # every line of wiki12k.txt
    "small_corpus_lines": 3000,
    "simcse": {"batch_size": 32, "max_seq_length": 32, "learning_rate": 3e-5, "epochs": 1},
    "twin": {"batch_size": 16, "max_seq_length": 32, "cael_every": 2},
    "probe_steps": 100,
    "twin_lrs": [1e-5, 3e-5, 1e-4],
    "twin_steps": 300,
    "distill": {"batch_size": 64, "max_seq_length": 32, "learning_rate": 2e-5},
    "distill_epochs": [1, 2],
    "weight_grid": [0.5, 0.75, 1.0, 1.25, 1.5],
    "eval_max_seq_length": 128,
    "dev_pairs": None,
    "select_pairs": 1500,
    "diag_sentences": 0,
    "seeds": [1, 2, 3],
    "speed_sentences": 2048,
}
QUICK = {
    "corpus_lines": 64,
    "small_corpus_lines": 32,
    "simcse": {"batch_size": 8, "max_seq_length": 16, "learning_rate": 3e-5, "max_steps": 2},
    "twin": {"batch_size": 4, "max_seq_length": 16, "cael_every": 2},
    "probe_steps": 2,
    "twin_lrs": [1e-5, 1e-4],
    "twin_steps": 3,
    "distill": {"batch_size": 8, "max_seq_length": 16, "learning_rate": 2e-5, "max_steps": 2},
    "distill_epochs": [1],
    "weight_grid": [0.5, 1.0],
    "eval_max_seq_length": 64,
    "dev_pairs": 60,
    "select_pairs": 60,
    "diag_sentences": 0,
    "seeds": [1, 2],
    "speed_sentences": 64,
}
SHIPPED = "shipped"
SPLITS = ("dev", "select")
STAGES = ("baselines", "controls", "corpus_size", "probe", "cls", "twins", "ensembles", "distill", "speed", "ablation",
          "cls_recipe")


def best_on_selection(rows: dict) -> object | None:
    """The key of ``rows`` (key -> row or ``None``) whose row scores best on the selection split; ``None``
    while any row is missing."""
    if not rows or any(row is None for row in rows.values()):
        return None
    return max(rows, key=lambda key: rows[key]["select_spearman"])


class DefaultsRunner(Runner):
    """:class:`repro_cpu.Runner` with the selection split, per-genre scores and cached pair cosines."""

    def __init__(self, work: Path, cfg: dict, threads: int, data: Path = DATA):
        super().__init__(work, cfg, threads, data)
        import numpy as np

        from jtcse.evaluation.sts import read_stsb_file

        self.dev = read_stsb_file(data / "stsbenchmark" / "sts-dev.csv")
        train = read_stsb_file(data / "stsbenchmark" / "sts-train.csv")
        rng = np.random.default_rng(0)  # the sample repro_ucd.py drew
        self.select = train.take(np.sort(rng.choice(len(train), size=min(cfg["select_pairs"], len(train)), replace=False)))
        if cfg["dev_pairs"]:  # every k-th pair: all genres
            self.dev = self.dev.take(range(0, len(self.dev), len(self.dev) // cfg["dev_pairs"]))
        (work / "cos").mkdir(parents=True, exist_ok=True)

    def pairs(self, split: str):
        return self.dev if split == "dev" else self.select

    # -- rows and scores ---------------------------------------------------------------------------
    def row(self, name: str) -> dict | None:
        path = self.result_path(name)
        return json.loads(path.read_text(encoding="utf-8")) if path.exists() else None

    def cos_path(self, name: str, split: str) -> Path:
        return self.work / "cos" / f"{name}.{split}.npy"

    def cosines(self, name: str, split: str):
        import numpy as np

        return np.load(self.cos_path(name, split))

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
        if "select_spearman" in row and all(self.cos_path(name, s).exists() for s in SPLITS):
            return row
        model = load()
        model.max_seq_length = self.cfg["eval_max_seq_length"]
        started = time.perf_counter()
        cos = {}
        for split in SPLITS:
            pairs = self.pairs(split)
            cos[split] = paired_cosine(encode_unique(model, pairs.sentences1 + pairs.sentences2, 64), pairs)
            np.save(self.cos_path(name, split), cos[split])
        row = {k: v for k, v in row.items() if k not in ("name", "threads")}
        return self.save(name, {**row, **record, **self.scores_from(cos),
                                "eval_seconds": round(time.perf_counter() - started, 2)})

    def trained(self, name: str, run, load, **record) -> dict:
        """Train row ``name`` into ``work/name`` once (resumable), then score it."""
        from jtcse.training.pipeline import run_once

        row = self.row(name)
        if row is not None and "train_seconds" in row:
            return self.score(name, load)
        stage = run_once(self.work / name, run)
        summary = stage["summary"]
        record.update(train_seconds=stage["seconds"] or summary.get("seconds"), steps=summary.get("steps"),
                      first_loss=summary.get("first_logged_loss"), last_loss=summary.get("last_logged_loss"),
                      last_loss_terms=summary.get("loss_terms"))
        self.save(name, {**(row or {}), **record})
        return self.score(name, load)

    def chosen(self, names: dict, stage: str):
        rows = {key: self.row(name) for key, name in names.items()}
        best = best_on_selection(rows)
        if best is None:
            missing = [names[key] for key, row in rows.items() if row is None]
            raise SystemExit(f"run the {stage} stage first (missing rows {missing})")
        return best

    # -- stages ------------------------------------------------------------------------------------
    def baselines(self) -> None:
        from sentence_transformers import SentenceTransformer

        from jtcse.defaults import default_tower_path
        from jtcse.modeling.loading import load_model

        self.score(SHIPPED, lambda: SentenceTransformer(default_tower_path(), device="cpu"), group="baseline",
                   pooling="mean (as shipped)")
        self.score("shipped_cls", lambda: load_model(None, pooling="cls", device="cpu"), group="baseline", pooling="cls")

    def warmup(self, seed: int, pooling: str | None) -> str:
        """SimCSE of the shipped MiniLM (``pooling`` None: its own modules = the control row); the row name."""
        from sentence_transformers import SentenceTransformer

        from jtcse.training.simcse import train_simcse

        name = f"control_s{seed}" if pooling is None else f"warmup_{pooling}_s{seed}"
        out = self.work / name
        self.trained(
            name,
            lambda: train_simcse(None, self.corpus, out, pooling=pooling, seed=seed, logging_steps=20, **self.cfg["simcse"]),
            lambda: SentenceTransformer(str(out), device="cpu"),
            group="control" if pooling is None else "warmup", seed=seed, pooling=pooling or "own (mean + Normalize)",
        )
        return name

    def controls(self) -> None:
        for seed in self.cfg["seeds"]:
            self.warmup(seed, None)

    def corpus_size(self) -> None:
        """The control on the first 3,000 lines only (the issue's 87.13, the budget of evaluation/UCD.md)."""
        from sentence_transformers import SentenceTransformer

        from jtcse.training.simcse import train_simcse

        small = self.work / "corpus_small.txt"
        if not small.exists():
            lines = self.corpus.read_text(encoding="utf-8").splitlines()[: self.cfg["small_corpus_lines"]]
            small.write_text("\n".join(lines) + "\n", encoding="utf-8")
        for seed in self.cfg["seeds"]:
            name = f"control_small_s{seed}"
            out = self.work / name
            self.trained(
                name,
                lambda: train_simcse(None, small, out, seed=seed, logging_steps=20, **self.cfg["simcse"]),
                lambda: SentenceTransformer(str(out), device="cpu"),
                group="control_small", seed=seed, lines=self.cfg["small_corpus_lines"], pooling="own (mean + Normalize)",
            )

    # -- twins -------------------------------------------------------------------------------------
    def twin_name(self, pooling: str, lr: float, steps: int, seed: int, variant: str = "") -> str:
        return f"twin_{pooling}_lr{lr:g}_n{steps}{variant}_s{seed}"

    def tower(self, seed: int, pooling: str) -> Path:
        """Warm-up tower W_seed: the control of that seed (mean pooling), or a CLS warm-up."""
        return self.work / (self.warmup(seed, None) if pooling == "mean" else self.warmup(seed, pooling))

    def twin(self, pooling: str, lr: float, steps: int, seed: int, variant: str = "", **loss) -> str:
        """Twin of (W_s, W_s+1) (``variant`` "_direct": of two copies of the shipped MiniLM); the row name."""
        from jtcse.modeling.loading import load_model
        from jtcse.training.twin import train_twin

        seeds = self.cfg["seeds"]
        a, b = seed, seeds[(seeds.index(seed) + 1) % len(seeds)]
        towers = (None, None) if variant == "_direct" else (str(self.tower(a, pooling)), str(self.tower(b, pooling)))
        name = self.twin_name(pooling, lr, steps, seed, variant)
        out = self.work / name
        settings = {**self.cfg["twin"], **loss}
        self.trained(
            name,
            lambda: train_twin(*towers, self.corpus, out, pooling=pooling, seed=seed, learning_rate=lr, max_steps=steps,
                               logging_steps=10, show_progress=False, device="cpu", **settings),
            lambda: load_model(out, device="cpu"),
            group="twin", seed=seed, pooling=pooling, learning_rate=lr, max_steps=steps, variant=variant or "recipe",
            towers=["shipped", "shipped"] if variant == "_direct" else [f"W{a}", f"W{b}"], settings=settings,
        )
        return name

    def tuned_lr(self) -> float:
        seed, steps = self.cfg["seeds"][0], self.cfg["probe_steps"]
        return self.chosen({lr: self.twin_name("mean", lr, steps, seed) for lr in self.cfg["twin_lrs"]}, "probe")

    def probe(self) -> None:
        """Mean-pooled twins of (W1, W2) at each probe lr; the best on the selection split is the tuned lr."""
        for lr in self.cfg["twin_lrs"]:
            self.twin("mean", lr, self.cfg["probe_steps"], self.cfg["seeds"][0])

    def twin_steps(self) -> int:
        """The twin length: probe length or ``twin_steps``, whichever scores better on seed 1's selection split."""
        lr, seed = self.tuned_lr(), self.cfg["seeds"][0]
        return self.chosen({n: self.twin_name("mean", lr, n, seed) for n in (self.cfg["probe_steps"], self.cfg["twin_steps"])},
                           "twins")

    def cls(self) -> None:
        """Pooling side by side at the tuned lr and probe length: twins of two copies of the shipped MiniLM
        (no warm-up), CLS and mean."""
        lr, steps, seed = self.tuned_lr(), self.cfg["probe_steps"], self.cfg["seeds"][0]
        for pooling in ("mean", "cls"):
            self.twin(pooling, lr, steps, seed, "_direct")

    def cls_recipe(self) -> None:
        """The CLS recipe at the same settings: CLS warm-ups W1, W2 and their CLS twin."""
        self.twin("cls", self.tuned_lr(), self.cfg["probe_steps"], self.cfg["seeds"][0])

    def twins(self) -> None:
        """Seed 1 at ``twin_steps`` too (longer twin?), then every seed at the chosen length."""
        lr, seeds = self.tuned_lr(), self.cfg["seeds"]
        self.twin("mean", lr, self.cfg["twin_steps"], seeds[0])
        steps = self.twin_steps()
        for seed in seeds:
            self.twin("mean", lr, steps, seed)

    def ablation(self) -> None:
        """The twin's loss on a pre-trained encoder, seed 1 at the tuned settings: which terms pay?"""
        lr, steps, seed = self.tuned_lr(), self.cfg["probe_steps"], self.cfg["seeds"][0]
        self.twin("mean", lr, steps, seed, "_nocael", cael_every=None)
        self.twin("mean", lr, steps, seed, "_noictm", ictm_weight=0.0)
        self.twin("mean", lr, steps, seed, "_nceonly", icnce_weight=0.0, ictm_weight=0.0)

    # -- ensembles ---------------------------------------------------------------------------------
    def final_twin(self, seed: int) -> str:
        return self.twin_name("mean", self.tuned_lr(), self.twin_steps(), seed)

    def ensemble_candidates(self, seed: int) -> dict[str, list[str]]:
        """``{kind: member rows}`` for seed s (the first member, the shipped MiniLM, has weight 1)."""
        seeds = self.cfg["seeds"]
        nxt = seeds[(seeds.index(seed) + 1) % len(seeds)]
        return {
            "start+twin": [SHIPPED, self.final_twin(seed)],
            "start+2twins": [SHIPPED, self.final_twin(seed), self.final_twin(nxt)],
            "start+twin+warmups": [SHIPPED, self.final_twin(seed), f"control_s{seed}", f"control_s{nxt}"],
            "start+control": [SHIPPED, f"control_s{seed}"],
        }

    def weight_options(self, kind: str) -> list[tuple[float, ...]]:
        grid = self.cfg["weight_grid"]
        if kind == "start+twin+warmups":
            return [(1.0, w, u, u) for w in grid for u in (0.5, 1.0)]
        if kind == "start+2twins":
            return [(1.0, w, w) for w in grid]
        return [(1.0, w) for w in grid]

    def ensemble_scores(self, members: list[str], weights) -> dict:
        """Row fields of the concat ensemble of ``members`` (cos = sum w_i^2 cos_i / sum w_i^2)."""
        total = sum(w * w for w in weights)
        cos = {split: sum(w * w * self.cosines(m, split) for m, w in zip(members, weights)) / total for split in SPLITS}
        return self.scores_from(cos)

    def ensembles(self) -> None:
        """Every candidate of every seed, its weights chosen on the selection split (rows ``ens_<kind>_s<seed>``)."""
        for seed in self.cfg["seeds"]:
            for kind, members in self.ensemble_candidates(seed).items():
                name = f"ens_{kind}_s{seed}"
                if self.done(name) or any(self.row(m) is None for m in members):
                    continue
                grid = {w: self.ensemble_scores(members, w) for w in self.weight_options(kind)}
                best = max(grid, key=lambda w: grid[w]["select_spearman"])
                self.save(name, {"group": "ensemble", "kind": kind, "seed": seed, "members": members,
                                 "weights": list(best), **grid[best],
                                 "grid": [{"weights": list(w), "select": v["select_spearman"], "dev": v["dev_spearman"]}
                                          for w, v in grid.items()],
                                 "note": "scored from the members' cosines (exact for a concat of unit vectors)"})

    def teacher_kind(self) -> str:
        """The ensemble kind with the best mean selection score over the seeds (JTCSE kinds only)."""
        kinds = [k for k in self.ensemble_candidates(self.cfg["seeds"][0]) if "twin" in k]
        rows = {k: [self.row(f"ens_{k}_s{s}") for s in self.cfg["seeds"]] for k in kinds}
        if any(r is None for rs in rows.values() for r in rs):
            raise SystemExit("run the ensembles stage first")
        return max(kinds, key=lambda k: statistics.fmean(r["select_spearman"] for r in rows[k]))

    # -- distillation ------------------------------------------------------------------------------
    def teacher(self, kind: str, seed: int) -> Path:
        """The chosen ensemble of ``seed`` saved as a checkpoint (once)."""
        from jtcse.defaults import default_tower_path
        from jtcse.modeling.build import build_ensemble

        row = self.row(f"ens_{kind}_s{seed}")
        out = self.work / f"teacher_{kind}_s{seed}"
        if not (out / "modules.json").is_file():
            paths = [default_tower_path() if m == SHIPPED else str(self.work / m) for m in row["members"]]
            build_ensemble(paths, weights=row["weights"], device="cpu").save(str(out))
        return out

    def distilled(self, kind: str, epochs: float, seed: int) -> str:
        from sentence_transformers import SentenceTransformer

        from jtcse.training.distill import distill

        import shutil

        name = f"ucd_{kind}_e{epochs:g}_s{seed}"
        out = self.work / name
        teacher = self.teacher(kind, seed)
        # the teacher's vectors of this corpus, when another length already computed them (the cache key covers
        # the teacher's files and the sentences, so a copied file is only used when it is the same teacher)
        for cached in self.work.glob(f"ucd_{kind}_e*_s{seed}/teacher_cache/*.npy"):
            target = out / "teacher_cache" / cached.name
            if not target.exists():
                target.parent.mkdir(parents=True, exist_ok=True)
                shutil.copyfile(cached, target)
        self.trained(
            name,
            lambda: distill(str(teacher), None, self.corpus, out, objective="similarity", seed=seed, epochs=epochs,
                            logging_steps=10, **self.cfg["distill"]),
            lambda: SentenceTransformer(str(out), device="cpu"),
            group="ucd", seed=seed, kind=kind, epochs=epochs, teacher=teacher.name,
            student="shipped MiniLM (its own modules)",
        )
        return name

    def distill_epochs(self, kind: str) -> float:
        seed = self.cfg["seeds"][0]
        return self.chosen({e: f"ucd_{kind}_e{e:g}_s{seed}" for e in self.cfg["distill_epochs"]}, "distill")

    def distill(self) -> None:
        """Seed 1 at each length of ``distill_epochs``; the best on the selection split for the other seeds."""
        kind, seeds = self.teacher_kind(), self.cfg["seeds"]
        for epochs in self.cfg["distill_epochs"]:
            self.distilled(kind, epochs, seeds[0])
        epochs = self.distill_epochs(kind)
        for seed in seeds[1:]:
            self.distilled(kind, epochs, seed)

    def speed(self) -> None:
        """Sentences/s of the seed-1 final student and the shipped MiniLM (scripts/bench_encode.py's rule:
        the same sentences, batch and length, best of interleaved repeats)."""
        from sentence_transformers import SentenceTransformer

        from jtcse.defaults import default_tower_path

        if self.done("speed"):
            return
        kind = self.teacher_kind()
        student = self.work / f"ucd_{kind}_e{self.distill_epochs(kind):g}_s{self.cfg['seeds'][0]}"
        lines = self.corpus.read_text(encoding="utf-8").splitlines()
        sentences = (self.dev.sentences1 + self.dev.sentences2 + lines)[: self.cfg["speed_sentences"]]
        models = {"shipped": SentenceTransformer(default_tower_path(), device="cpu"),
                  "student": SentenceTransformer(str(student), device="cpu")}
        times: dict[str, list[float]] = {k: [] for k in models}
        for _ in range(3):
            for key, model in models.items():
                model.max_seq_length = self.cfg["eval_max_seq_length"]
                started = time.perf_counter()
                model.encode(sentences, batch_size=64)
                times[key].append(time.perf_counter() - started)
        rate = {k: len(sentences) / min(v) for k, v in times.items()}
        self.save("speed", {"group": "speed", "sentences": len(sentences), "student": student.name,
                            "sentences_per_s": rate, "ratio_student_to_shipped": rate["student"] / rate["shipped"],
                            "modules": {k: [type(m).__name__ for m in model] for k, model in models.items()}})


# -- report ------------------------------------------------------------------------------------------
GENRES = ("captions", "news", "forums")


def genre_label(genre: str) -> str:
    """``main-captions`` -> ``captions``; STS-B train spells the forum genre ``main-forum``, dev ``main-forums``."""
    label = genre.removeprefix("main-")
    return "forums" if label == "forum" else label


def _x(v: float | None) -> str:
    return "–" if v is None else f"{100 * v:.2f}"


def _ms(values: list[float]) -> str:
    if not values:
        return "not run"
    m, sd = mean_std(values)
    return f"{100 * m:.2f}" + (f" ± {100 * sd:.2f}" if sd is not None else "")


class Report:
    """The markdown tables of ``evaluation/DEFAULTS.md`` from the row files (``rows``: name -> row)."""

    def __init__(self, rows: dict, cfg: dict):
        self.rows, self.cfg, self.seeds = rows, cfg, cfg["seeds"]
        self.out: list[str] = []

    def get(self, name: str) -> dict | None:
        return self.rows.get(name)

    def names(self, pattern: str) -> list[str]:
        """The rows of ``pattern`` that exist: one per seed (``{seed}`` in it), else the one row."""
        names = [pattern.format(seed=s) for s in self.seeds] if "{seed}" in pattern else [pattern]
        return [n for n in names if n in self.rows]

    def seeded(self, pattern: str, key: str = "dev_spearman") -> list[float]:
        """``key`` of the rows of ``pattern`` that exist."""
        return [self.rows[n][key] for n in self.names(pattern)]

    def genre(self, name: str, genre: str, split: str = "dev") -> float | None:
        row = self.rows.get(name)
        if not row:
            return None
        return next((v for g, v in row[f"{split}_genres"].items() if genre_label(g) == genre), None)

    def genres_seeded(self, pattern: str, genre: str) -> list[float]:
        values = [self.genre(n, genre) for n in self.names(pattern)]
        return [v for v in values if v is not None]

    def best(self, names: dict):
        rows = {k: self.rows.get(n) for k, n in names.items()}
        return best_on_selection(rows)

    def table(self, title: str, header: list[str], lines: list[list[str]]) -> None:
        self.out += ["", f"### {title}", "", "| " + " | ".join(header) + " |", "|" + " --- |" * len(header)]
        self.out += ["| " + " | ".join(cells) + " |" for cells in lines]

    # the recipe's choices, as the driver made them
    def choices(self) -> dict:
        seed, cfg = self.seeds[0], self.cfg
        lr = self.best({lr: f"twin_mean_lr{lr:g}_n{cfg['probe_steps']}_s{seed}" for lr in cfg["twin_lrs"]})
        steps = kind = epochs = None
        if lr is not None:
            steps = self.best({n: f"twin_mean_lr{lr:g}_n{n}_s{seed}" for n in (cfg["probe_steps"], cfg["twin_steps"])})
        kinds = ("start+twin", "start+2twins", "start+twin+warmups")
        means = {k: self.seeded(f"ens_{k}_s{{seed}}", "select_spearman") for k in kinds}
        if all(len(v) == len(self.seeds) for v in means.values()):
            kind = max(kinds, key=lambda k: statistics.fmean(means[k]))
            epochs = self.best({e: f"ucd_{kind}_e{e:g}_s{seed}" for e in cfg["distill_epochs"]})
        return {"lr": lr, "steps": steps, "kind": kind, "epochs": epochs}

    def build(self) -> str:
        c = self.choices()
        twin = f"twin_mean_lr{c['lr']:g}_n{c['steps']}_s{{seed}}" if c["steps"] else None
        ens = f"ens_{c['kind']}_s{{seed}}" if c["kind"] else None
        ucd = f"ucd_{c['kind']}_e{c['epochs']:g}_s{{seed}}" if c["epochs"] else None
        finals = [
            ("**shipped MiniLM (row to beat)**", SHIPPED, "mean + Normalize (as shipped)"),
            ("**control**: SimCSE of the shipped MiniLM, own modules (= warm-up W_s)", "control_s{seed}", "mean + Normalize"),
            (f"JTCSE twin of (W_s, W_s+1), lr {c['lr']:g}, {c['steps']} steps" if twin else "JTCSE twin", twin, "sum of 2 mean"),
            ("ensemble: start + control W_s (no twin)", "ens_start+control_s{seed}", "concat"),
            ("ensemble: start + twin_s", "ens_start+twin_s{seed}", "concat"),
            ("ensemble: start + twin_s + twin_s+1", "ens_start+2twins_s{seed}", "concat"),
            ("ensemble: start + twin_s + W_s + W_s+1", "ens_start+twin+warmups_s{seed}", "concat"),
            (f"**UCD student**: {c['kind']} distilled into the shipped MiniLM, {c['epochs']} epoch(s)" if ucd
             else "UCD student", ucd, "mean + Normalize (its own)"),
        ]
        lines = []
        for label, pattern, pooling in finals:
            if pattern is None:
                lines.append([label, pooling, "0", "not run", "", "", "", "", ""])
                continue
            dev, sel = self.seeded(pattern), self.seeded(pattern, "select_spearman")
            genres = [_ms(self.genres_seeded(pattern, g)) for g in GENRES]
            lines.append([label, pooling, str(len(dev)), _ms(dev), ", ".join(f"{100 * v:.2f}" for v in dev), _ms(sel), *genres])
        self.table(f"Final rows (STS-B dev Spearman ×100, mean ± std over seeds; selection split = "
                   f"{self.cfg['select_pairs']:,} STS-B *train* pairs, used for every choice)",
                   ["model", "pooling", "seeds", "dev", "dev per seed", "selection split", *(f"dev {g}" for g in GENRES)], lines)
        self.targets(c, twin, ucd)
        self.genre_table(twin, ens, ucd)
        self.probe_table(c)
        self.pooling_table(c)
        self.corpus_table()
        self.ablation_table(c)
        self.ensemble_table()
        self.distill_table(c)
        self.timing_table()
        speed = self.rows.get("speed")
        if speed:
            rate = speed["sentences_per_s"]
            self.out += ["", f"Encode speed ({speed['sentences']} sentences, best of 3 interleaved repeats, one thread): "
                         f"shipped MiniLM {rate['shipped']:.0f} sentences/s, final student {rate['student']:.0f} "
                         f"sentences/s (ratio {speed['ratio_student_to_shipped']:.2f}; modules "
                         f"{', '.join(speed['modules']['student'])})."]
        return "\n".join(self.out).lstrip() + "\n"

    def targets(self, c: dict, twin: str | None, ucd: str | None) -> None:
        lines = []
        shipped = self.get(SHIPPED)
        control = {k: self.seeded("control_s{seed}", k) for k in ("dev_spearman", "select_spearman")}
        for label, pattern in (("twin", twin), ("UCD student", ucd)):
            if pattern is None or not self.seeded(pattern):
                continue
            for split, key in (("dev", "dev_spearman"), ("selection", "select_spearman")):
                vals = self.seeded(pattern, key)
                m, sd = mean_std(vals)
                cm, csd = mean_std(control[key]) if control[key] else (None, None)
                spread = max(sd or 0.0, csd or 0.0)
                gap = f"{100 * (m - cm):+.2f} (seed spread {100 * spread:.2f})" if cm is not None else "–"
                lines.append([label, split, _ms(vals), f"{100 * (m - shipped[key]):+.2f}" if shipped else "–", gap])
        self.table("Against the two rows to beat (Δ of the means; seed spread = the larger std of the two rows)",
                   ["model", "split", "mean ± std", "Δ vs shipped", "Δ vs control"], lines)

    def genre_table(self, twin, ens, ucd) -> None:
        lines = []
        base = {g: self.genre(SHIPPED, g) for g in GENRES}
        for label, pattern in (("shipped MiniLM", SHIPPED), ("control (SimCSE, own modules)", "control_s{seed}"),
                               ("twin", twin), ("chosen ensemble", ens), ("UCD student", ucd)):
            if pattern is None:
                continue
            cells = []
            for g in GENRES:
                vals = self.genres_seeded(pattern, g)
                if not vals:
                    cells.append("–")
                    continue
                m = statistics.fmean(vals)
                worst = min(vals) - base[g] if base[g] is not None else None
                cells.append(f"{100 * m:.2f} ({100 * (m - base[g]):+.2f}; worst seed {100 * worst:+.2f})"
                             if pattern != SHIPPED else f"{100 * m:.2f}")
            lines.append([label, *cells, _ms(self.seeded(pattern))])
        n = {genre_label(g): None for g in (self.get(SHIPPED) or {}).get("dev_genres", {})}
        self.table("Per genre (STS-B dev: 625 captions, 500 news, 375 forums pairs; mean over seeds, Δ vs shipped)"
                   if n else "Per genre", ["model", *(f"dev {g}" for g in GENRES), "dev all"], lines)

    def probe_table(self, c: dict) -> None:
        seed, lines = self.seeds[0], []
        for lr in self.cfg["twin_lrs"]:
            r = self.get(f"twin_mean_lr{lr:g}_n{self.cfg['probe_steps']}_s{seed}")
            if r:
                mark = " **(chosen)**" if lr == c["lr"] else ""
                lines.append([f"{lr:g}{mark}", _x(r["select_spearman"]), _x(r["dev_spearman"]),
                              f"{r.get('first_loss') or 0:.3f} → {r.get('last_loss') or 0:.3f}", f"{r.get('train_seconds', 0):.0f}"])
        self.table(f"Twin learning-rate probe (mean-pooled twin of W1, W2; {self.cfg['probe_steps']} steps, batch "
                   f"{self.cfg['twin']['batch_size']}; chosen on the selection split)",
                   ["lr", "selection split", "dev", "first → last logged loss", "train s"], lines)

    def pooling_table(self, c: dict) -> None:
        if c["lr"] is None:
            return
        lr, n, seed = c["lr"], self.cfg["probe_steps"], self.seeds[0]
        rows = [("shipped MiniLM, mean (as shipped)", SHIPPED), ("shipped MiniLM, CLS", "shipped_cls"),
                ("SimCSE warm-up W1, CLS", f"warmup_cls_s{seed}"), ("SimCSE warm-up W1, mean + Normalize (control)", f"control_s{seed}"),
                ("twin of 2 × shipped, CLS (no warm-up)", f"twin_cls_lr{lr:g}_n{n}_direct_s{seed}"),
                ("twin of 2 × shipped, mean (no warm-up)", f"twin_mean_lr{lr:g}_n{n}_direct_s{seed}"),
                ("twin of CLS warm-ups (W1, W2), CLS", f"twin_cls_lr{lr:g}_n{n}_s{seed}"),
                ("twin of mean warm-ups (W1, W2), mean", f"twin_mean_lr{lr:g}_n{n}_s{seed}")]
        lines = [[label, _x((self.get(name) or {}).get("select_spearman")), _x((self.get(name) or {}).get("dev_spearman")),
                  *(_x(self.genre(name, g)) for g in GENRES)] for label, name in rows if self.get(name)]
        self.table(f"CLS vs mean pooling (seed {seed}; twins at lr {lr:g}, {n} steps)",
                   ["model", "selection split", "dev", *(f"dev {g}" for g in GENRES)], lines)

    def corpus_table(self) -> None:
        lines = []
        for label, pattern in ((f"first {self.cfg['small_corpus_lines']:,} lines", "control_small_s{seed}"),
                               ("the whole of wiki12k", "control_s{seed}")):
            steps = [self.rows[pattern.format(seed=s)].get("steps") for s in self.seeds if pattern.format(seed=s) in self.rows]
            if steps:
                lines.append([label, str(steps[0]), _ms(self.seeded(pattern, "select_spearman")), _ms(self.seeded(pattern)),
                              *(_ms(self.genres_seeded(pattern, g)) for g in GENRES)])
        self.table("How much corpus: the control (SimCSE of the shipped MiniLM, own modules, one pass) by corpus size",
                   ["corpus", "steps", "selection split", "dev", *(f"dev {g}" for g in GENRES)], lines)

    def ablation_table(self, c: dict) -> None:
        if c["lr"] is None:
            return
        lr, seed, cfg = c["lr"], self.seeds[0], self.cfg
        rows = [(f"full loss, {cfg['probe_steps']} steps", f"twin_mean_lr{lr:g}_n{cfg['probe_steps']}_s{seed}"),
                (f"full loss, {cfg['twin_steps']} steps", f"twin_mean_lr{lr:g}_n{cfg['twin_steps']}_s{seed}"),
                ("no CAEL (TNCSE)", f"twin_mean_lr{lr:g}_n{cfg['probe_steps']}_nocael_s{seed}"),
                ("no ICTM", f"twin_mean_lr{lr:g}_n{cfg['probe_steps']}_noictm_s{seed}"),
                ("NCE only (two SimCSE towers trained side by side)", f"twin_mean_lr{lr:g}_n{cfg['probe_steps']}_nceonly_s{seed}")]
        lines = [[label, _x(self.get(n)["select_spearman"]), _x(self.get(n)["dev_spearman"]),
                  _x(self.genre(n, "captions")), f"{self.get(n).get('train_seconds', 0):.0f}"] for label, n in rows if self.get(n)]
        self.table(f"What the twin's terms and length do (mean-pooled twin of W1, W2, lr {lr:g}; seed {seed})",
                   ["twin", "selection split", "dev", "dev captions", "train s"], lines)

    def ensemble_table(self) -> None:
        lines = []
        for kind in ("start+control", "start+twin", "start+2twins", "start+twin+warmups"):
            pattern = f"ens_{kind}_s{{seed}}"
            if not self.seeded(pattern):
                continue
            weights = "; ".join("(" + ", ".join(f"{w:g}" for w in self.rows[pattern.format(seed=s)]["weights"]) + ")"
                                for s in self.seeds if pattern.format(seed=s) in self.rows)
            lines.append([kind, _ms(self.seeded(pattern, "select_spearman")), _ms(self.seeded(pattern)), weights])
        self.table("Ensemble members (concat; the shipped MiniLM has weight 1, the others' weights chosen per seed on the "
                   "selection split; the teacher kind is the best mean on the selection split)",
                   ["members", "selection split", "dev", "weights per seed"], lines)

    def distill_table(self, c: dict) -> None:
        if c["kind"] is None:
            return
        lines = []
        for e in self.cfg["distill_epochs"]:
            r = self.get(f"ucd_{c['kind']}_e{e:g}_s{self.seeds[0]}")
            if r:
                mark = " **(chosen)**" if e == c["epochs"] else ""
                lines.append([f"{e:g}{mark}", str(r.get("steps")), _x(r["select_spearman"]), _x(r["dev_spearman"]),
                              f"{r.get('train_seconds', 0):.0f}"])
        self.table(f"Distillation length (teacher: {c['kind']} of seed {self.seeds[0]}; student: the shipped MiniLM; "
                   "similarity objective, batch 64, length 32, lr 2e-5)",
                   ["epochs over wiki12k", "steps", "selection split", "dev", "train s"], lines)

    def timing_table(self) -> None:
        groups: dict[str, list[tuple[float, int]]] = {}
        for row in self.rows.values():
            if "train_seconds" in row and row.get("train_seconds"):
                key = row["group"] if row["group"] != "twin" else f"twin ({row.get('max_steps')} steps)"
                groups.setdefault(key, []).append((row["train_seconds"], row.get("steps") or 0))
        lines = [[g, str(len(v)), f"{statistics.fmean(s for s, _ in v) / 60:.1f}",
                  f"{statistics.fmean(s / max(n, 1) for s, n in v):.2f}"] for g, v in sorted(groups.items())]
        self.table("Timings (one thread on a 2-core machine shared with other sessions: wall time varies 2-5×)",
                   ["stage", "runs", "mean minutes", "mean s/step"], lines)


def build_report(work: Path, cfg: dict) -> tuple[dict, str]:
    """``(results, markdown tables)`` from the row files."""
    rows = {p.stem: json.loads(p.read_text(encoding="utf-8")) for p in sorted((work / "results").glob("*.json"))}
    report = Report(rows, cfg)
    tables = report.build()
    return {"settings": cfg, "choices": report.choices(), "rows": rows}, tables


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="tiny settings: a smoke run of the whole driver")
    parser.add_argument("--threads", type=int, default=int(os.environ.get("OMP_NUM_THREADS", 1)))
    parser.add_argument("--stages", default=",".join(STAGES), help="comma-separated subset of the stages (run in order)")
    parser.add_argument("--report-only", action="store_true")
    parser.add_argument("--data", type=Path, default=DATA, help="folder with wiki12k.txt and stsbenchmark/")
    parser.add_argument("--work", type=Path, default=None, help="checkpoints and rows (default runs/default[_quick])")
    parser.add_argument("--out", type=Path, default=None, help="results folder (default evaluation/default)")
    args = parser.parse_args()

    cfg = QUICK if args.quick else FULL
    work = args.work or Path("runs/default_quick" if args.quick else "runs/default")
    out = args.out or (work / "report" if args.quick else Path("evaluation/default"))
    if not args.report_only:
        runner = DefaultsRunner(work, cfg, args.threads, args.data)
        wanted = args.stages.split(",")
        unknown = sorted(set(wanted) - set(STAGES))
        if unknown:
            raise SystemExit(f"unknown stages {unknown}; choose from {', '.join(STAGES)}")
        for stage in STAGES:
            if stage in wanted:
                print(f"[default] stage {stage}", flush=True)
                getattr(runner, stage)()
    (work / "results").mkdir(parents=True, exist_ok=True)
    results, tables = build_report(work, cfg)
    out.mkdir(parents=True, exist_ok=True)
    (out / "results.json").write_text(json.dumps(results, indent=2, default=str), encoding="utf-8")
    (out / "tables.md").write_text(tables, encoding="utf-8")
    report = Path("evaluation/DEFAULTS.md")
    if not args.quick and args.out is None and report.exists():
        text = report.read_text(encoding="utf-8")
        text = re.sub(r"<!-- TABLES START -->.*<!-- TABLES END -->",
                      lambda _: f"<!-- TABLES START -->\n{tables}<!-- TABLES END -->", text, flags=re.S)
        report.write_text(text, encoding="utf-8")
    print(tables)


if __name__ == "__main__":
    main()
