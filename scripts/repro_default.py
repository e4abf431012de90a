"""Defaults that train: the measurements behind ``jtcse pipeline``'s default recipe (issue 25). CPU-sized, resumable.

Every choice is made on the **selection split** (1,500 pairs of STS-B *train*, a fixed random sample, seed 0,
the one ``scripts/repro_ucd.py`` used, less the 3 of its pairs that STS-B dev repeats); STS-B dev is scored for every model and never used to choose. The
corpus is the whole of ``wiki12k.txt``. Two rows to beat: the shipped MiniLM as shipped, and the same-budget
control, plain unsupervised SimCSE of the shipped MiniLM keeping its own modules (mean pooling + Normalize,
sentence-transformers' ``MultipleNegativesRankingLoss`` on (s, s) pairs, batch 32, length 32, lr 3e-5, one
pass) -- which is exactly ``train_simcse`` keeping the model's pooling, i.e. the recipe's own warm-up W_s.

Stages (``--stages``, in this order; each row is written to ``<work>/results/<row>.json`` as soon as it
exists, each model's pair cosines to ``<work>/cos/``, and a rerun skips finished rows and resumes
unfinished trainings):

``rescore``    every scored row's fields again from its saved cosines (after the selection split changed)
``baselines``  the shipped MiniLM (mean pooling, as shipped) and with CLS pooling
``controls``   SimCSE of the shipped MiniLM, own modules, seeds 1-3 = the control rows = warm-up towers W_s
``corpus_size`` the control on the first 3,000 lines only (the budget of evaluation/UCD.md and of the issue)
``untrained``  the mean-pooled twin of (W_s, W_s+1) before twin training (the summed warm-ups alone)
``terms``      each twin loss term's value and gradient norm before training (mean twin of W1, W2; twins of
               two copies of the shipped MiniLM, mean and CLS): which term drives the update
``ablation``   mean-pooled twins of (W1, W2) with the full loss and without ICTM / CAEL / both ICNCE and ICTM
               (seed 1, lr 3e-5); the best on the selection split is the loss of every later twin
``probe``      that loss at each probe learning rate (seed 1); best on the selection split
``twins``      mean-pooled twins (W_s, W_s+1) for every seed at the tuned lr, chosen loss and the chosen length
``ensembles``  start + twin_s, start + twin_s + twin_s+1, start + twin_s + W_s ... scored from the members'
               cosines (a concat of unit vectors has cos = sum_i w_i^2 cos_i / sum_i w_i^2), weights chosen on
               the selection split
``distill``    the chosen ensemble of each seed distilled into the shipped MiniLM (``similarity``), at each
               distillation length of ``distill_epochs`` on seed 1, the best for seeds 2, 3
``speed``      encode throughput of the final student against the shipped MiniLM (interleaved repeats)
``cls``        twins of two copies of the shipped MiniLM (no warm-up), CLS and mean, at the tuned lr
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

from jtcse.training.grid import encode_rates  # noqa: E402

FULL = {
    "corpus_lines": 10**6,  # every line of wiki12k.txt
    "small_corpus_lines": 3000,
    "simcse": {"batch_size": 32, "max_seq_length": 32, "learning_rate": 3e-5, "epochs": 1},
    "twin": {"batch_size": 16, "max_seq_length": 32, "cael_every": 2},
    "probe_steps": 100,
    "variant_lr": 3e-5,
    "twin_lrs": [1e-5, 3e-5, 1e-4],
    "twin_steps": 300,
    "distill": {"batch_size": 64, "max_seq_length": 32, "learning_rate": 2e-5},
    "distill_epochs": [1, 2],
    "weight_grid": [0.5, 0.75, 1.0, 1.25, 1.5, 2.0, 3.0],
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
    "variant_lr": 1e-5,
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
ABLATIONS = {
    "_noictm": {"ictm_weight": 0.0},
    "_nceonly": {"icnce_weight": 0.0, "ictm_weight": 0.0},
    "_nocael": {"cael_every": None},
}
"""Twin loss variants tried on seed 1 (name suffix -> train_twin keywords)."""
KIND_LABELS = {
    "twin": "the final twin alone",
    "start+twin": "shipped + final twin",
    "start+2twins": "shipped + twin_s + twin_s+1",
    "start+twin+warmups": "shipped + twin_s + W_s + W_s+1",
    "start+control": "shipped + W_s",
    "start+2controls": "shipped + W_s + W_s+1",
    "2controls": "W_s + W_s+1",
    "start+untrained": "shipped + untrained twin (W_s + W_s+1 summed)",
    "start+jtcse": "shipped + the full-JTCSE-loss twin (seed 1)",
}
LOSS_LABELS = {
    "": "full JTCSE loss",
    "_noictm": "no ICTM",
    "_nocael": "no CAEL (TNCSE)",
    "_nceonly": "NCE only (two SimCSE towers side by side)",
}
JTCSE_KINDS = ("twin", "start+twin", "start+2twins", "start+twin+warmups")
SIMCSE_KINDS = ("start+control", "start+2controls", "2controls", "start+untrained")
"""Ensembles with a JTCSE twin, and their same-budget controls built from the SimCSE warm-ups alone."""
SPLITS = ("dev", "select")
STAGES = (
    "rescore",
    "baselines",
    "controls",
    "corpus_size",
    "untrained",
    "terms",
    "ablation",
    "probe",
    "twins",
    "ensembles",
    "distill",
    "speed",
    "cls",
    "cls_recipe",
)


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

        from jtcse.evaluation.sts import pair_keys, read_stsb_file, without_pairs_of

        self.dev = read_stsb_file(data / "stsbenchmark" / "sts-dev.csv")
        train = read_stsb_file(data / "stsbenchmark" / "sts-train.csv")
        rng = np.random.default_rng(0)  # the sample repro_ucd.py drew
        sample = train.take(np.sort(rng.choice(len(train), size=min(cfg["select_pairs"], len(train)), replace=False)))
        # STS-B train repeats 11 pairs of dev (3 of them in this sample): left out, as the pipeline does
        self.select, _ = without_pairs_of(sample, self.dev)
        dev_keys = set(pair_keys(self.dev))
        self.sample_keep = np.array([key not in dev_keys for key in pair_keys(sample)])
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
        """A model's cosines on ``split``; selection cosines saved for the whole sample (before the pairs it
        shares with dev were left out) are cut to the selection split."""
        import numpy as np

        cos = np.load(self.cos_path(name, split))
        if split == "select" and len(cos) == len(self.sample_keep) != len(self.select):
            cos = cos[self.sample_keep]
        return cos

    def rescore(self) -> None:
        """Recompute every scored row's fields from its saved cosines (after the selection split changed)."""
        for path in sorted((self.work / "results").glob("*.json")):
            row = json.loads(path.read_text(encoding="utf-8"))
            name = row["name"]
            if "select_spearman" in row and all(self.cos_path(name, s).exists() for s in SPLITS):
                fresh = self.scores_from({split: self.cosines(name, split) for split in SPLITS})
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
        """Train row ``name`` into ``work/name`` once (resumable), then score it."""
        from jtcse.training.pipeline import run_once

        row = self.row(name)
        if row is not None and "train_seconds" in row:
            return self.score(name, load)
        stage = run_once(self.work / name, run)
        summary = stage["summary"]
        record.update(
            train_seconds=stage["seconds"] or summary.get("seconds"),
            steps=summary.get("steps"),
            first_loss=summary.get("first_logged_loss"),
            last_loss=summary.get("last_logged_loss"),
            last_loss_terms=summary.get("loss_terms"),
        )
        self.save(name, {**(row or {}), **record})
        return self.score(name, load)

    def chosen(self, names: dict, stage: str, genre_safe: bool = False):
        """The key of ``names`` (key -> row name) best on the selection split (``genre_safe``: among those losing
        no selection genre to the shipped MiniLM, :meth:`genre_safe_best`); a missing row stops the driver."""
        rows = {key: self.row(name) for key, name in names.items()}
        best = best_on_selection(rows)
        if best is None:
            missing = [names[key] for key, row in rows.items() if row is None]
            raise SystemExit(f"run the {stage} stage first (missing rows {missing})")
        return self.genre_safe_best(rows) if genre_safe else best

    # -- stages ------------------------------------------------------------------------------------
    def baselines(self) -> None:
        from sentence_transformers import SentenceTransformer

        from jtcse.defaults import default_tower_path
        from jtcse.modeling.loading import load_model

        self.score(
            SHIPPED,
            lambda: SentenceTransformer(default_tower_path(), device="cpu"),
            group="baseline",
            pooling="mean (as shipped)",
        )
        self.score(
            "shipped_cls", lambda: load_model(None, pooling="cls", device="cpu"), group="baseline", pooling="cls"
        )

    def warmup(self, seed: int, pooling: str | None) -> str:
        """SimCSE of the shipped MiniLM (``pooling`` None: its own modules = the control row); the row name."""
        from sentence_transformers import SentenceTransformer

        from jtcse.training.simcse import train_simcse

        name = f"control_s{seed}" if pooling is None else f"warmup_{pooling}_s{seed}"
        out = self.work / name
        self.trained(
            name,
            lambda: train_simcse(
                None, self.corpus, out, pooling=pooling, seed=seed, logging_steps=20, **self.cfg["simcse"]
            ),
            lambda: SentenceTransformer(str(out), device="cpu"),
            group="control" if pooling is None else "warmup",
            seed=seed,
            pooling=pooling or "own (mean + Normalize)",
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
                group="control_small",
                seed=seed,
                lines=self.cfg["small_corpus_lines"],
                pooling="own (mean + Normalize)",
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
            lambda: train_twin(
                *towers,
                self.corpus,
                out,
                pooling=pooling,
                seed=seed,
                learning_rate=lr,
                max_steps=steps,
                logging_steps=10,
                show_progress=False,
                device="cpu",
                **settings,
            ),
            lambda: load_model(out, device="cpu"),
            group="twin",
            seed=seed,
            pooling=pooling,
            learning_rate=lr,
            max_steps=steps,
            variant=variant or "recipe",
            towers=["shipped", "shipped"] if variant == "_direct" else [f"W{a}", f"W{b}"],
            settings=settings,
        )
        return name

    def best_variant(self) -> str:
        """The loss variant ("" = the full JTCSE loss, or an :data:`ABLATIONS` key) best on seed 1's selection
        split at ``variant_lr`` and the probe length."""
        lr, steps, seed = self.cfg["variant_lr"], self.cfg["probe_steps"], self.cfg["seeds"][0]
        return self.chosen({v: self.twin_name("mean", lr, steps, seed, v) for v in ("", *ABLATIONS)}, "ablation")

    def ablation(self) -> None:
        """The twin's loss on a pre-trained encoder (seed 1, ``variant_lr``, probe length): which terms pay?"""
        lr, steps, seed = self.cfg["variant_lr"], self.cfg["probe_steps"], self.cfg["seeds"][0]
        for variant in (*ABLATIONS, ""):
            self.twin("mean", lr, steps, seed, variant, **ABLATIONS.get(variant, {}))

    def probed(self) -> dict:
        """``{(variant, lr): row name}`` of the probe: the full loss and the best variant at each probe lr."""
        seed, steps = self.cfg["seeds"][0], self.cfg["probe_steps"]
        return {
            (v, lr): self.twin_name("mean", lr, steps, seed, v)
            for v in dict.fromkeys(["", self.best_variant()])
            for lr in self.cfg["twin_lrs"]
        }

    def probe(self) -> None:
        """The full loss and the best variant at each probe lr (seed 1, probe length)."""
        for variant, lr in self.probed():
            self.twin("mean", lr, self.cfg["probe_steps"], self.cfg["seeds"][0], variant, **ABLATIONS.get(variant, {}))

    def tuned(self) -> tuple[str, float]:
        """``(loss variant, lr)`` of the probe's best twin on the selection split."""
        return self.chosen(self.probed(), "probe")

    def twin_loss(self) -> str:
        return self.tuned()[0]

    def full_loss_twin(self) -> str:
        """Seed 1's twin with the full JTCSE loss at its best probe lr (the JTCSE twin proper, whatever loss won)."""
        seed, steps = self.cfg["seeds"][0], self.cfg["probe_steps"]
        lr = self.chosen({lr: self.twin_name("mean", lr, steps, seed) for lr in self.cfg["twin_lrs"]}, "probe")
        return self.twin_name("mean", lr, steps, seed)

    def tuned_lr(self) -> float:
        return self.tuned()[1]

    def twin_steps(self) -> int:
        """The twin length: probe length or ``twin_steps``, whichever scores better on seed 1's selection split."""
        lr, seed, variant = self.tuned_lr(), self.cfg["seeds"][0], self.twin_loss()
        return self.chosen(
            {
                n: self.twin_name("mean", lr, n, seed, variant)
                for n in (self.cfg["probe_steps"], self.cfg["twin_steps"])
            },
            "twins",
        )

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
        """The chosen loss on seed 1 at ``twin_steps`` too (longer twin?), then every seed at the chosen length."""
        lr, seeds, variant = self.tuned_lr(), self.cfg["seeds"], self.twin_loss()
        self.twin("mean", lr, self.cfg["twin_steps"], seeds[0], variant, **ABLATIONS.get(variant, {}))
        steps = self.twin_steps()
        for seed in seeds:
            self.twin("mean", lr, steps, seed, variant, **ABLATIONS.get(variant, {}))

    def untrained_twin(self, seed: int):
        """The mean-pooled twin of (W_s, W_s+1) before any twin training."""
        from jtcse.modeling.build import build_twin

        seeds = self.cfg["seeds"]
        a, b = seed, seeds[(seeds.index(seed) + 1) % len(seeds)]
        return build_twin(str(self.tower(a, "mean")), str(self.tower(b, "mean")), pooling="mean", device="cpu")

    def untrained(self) -> None:
        """The untrained twin of every seed: what the summed warm-ups give alone."""
        seeds = self.cfg["seeds"]
        for seed in seeds:
            b = seeds[(seeds.index(seed) + 1) % len(seeds)]
            self.score(
                f"twin_untrained_s{seed}",
                lambda: self.untrained_twin(seed),
                group="twin_untrained",
                seed=seed,
                towers=[f"W{seed}", f"W{b}"],
                pooling="mean",
            )

    def terms(self) -> None:
        """What drives a twin's update: each JTCSE term's value and the norm of its gradient over the towers'
        parameters, before training, on the same 4 batches of 16 corpus sentences (dropout views, seeded)."""
        import torch

        from jtcse.losses import JTCSELoss
        from jtcse.losses.jtcse_loss import stack_views
        from jtcse.modeling.build import build_twin

        if self.done("terms"):
            return
        lines = self.corpus.read_text(encoding="utf-8").splitlines()
        batches = [lines[i * 16 : (i + 1) * 16] for i in range(4)]
        w1, w2 = (str(self.tower(s, "mean")) for s in self.cfg["seeds"][:2])
        setups = {
            "mean twin of W1, W2 (the recipe)": (w1, w2, "mean"),
            "mean twin of 2 × shipped": (None, None, "mean"),
            "CLS twin of 2 × shipped": (None, None, "cls"),
        }
        out = {}
        for label, (a, b, pooling) in setups.items():
            model = build_twin(
                a, b, cael_every=2, max_seq_length=self.cfg["twin"]["max_seq_length"], pooling=pooling, device="cpu"
            ).train()
            loss = JTCSELoss(model, seed=0)
            params = [p for p in model.parameters() if p.requires_grad]
            sums: dict[str, list[float]] = {}
            for k, batch in enumerate(batches):
                torch.manual_seed(k)
                features = stack_views([model.preprocess(batch)], pad_token_id=model.tokenizer.pad_token_id)
                terms = loss.compute_loss_from_outputs(model(features))
                for name, term in terms.items():
                    grads = torch.autograd.grad(term, params, retain_graph=True, allow_unused=True)
                    norm = torch.sqrt(sum((g.double() ** 2).sum() for g in grads if g is not None)).item()
                    sums.setdefault(name, []).append(term.item())
                    sums.setdefault(f"{name}_grad_norm", []).append(norm)
            out[label] = {k: statistics.fmean(v) for k, v in sums.items()}
        self.save(
            "terms",
            {
                "group": "terms",
                "batches": len(batches),
                "batch_size": 16,
                "setups": out,
                "note": "weighted terms (ICTM x 0.5) as JTCSELoss returns them; gradient norms over all parameters",
            },
        )

    # -- ensembles ---------------------------------------------------------------------------------
    def final_twin(self, seed: int) -> str:
        return self.twin_name("mean", self.tuned_lr(), self.twin_steps(), seed, self.twin_loss())

    def ensemble_candidates(self, seed: int) -> dict[str, list[str]]:
        """``{kind: member rows}`` for seed s (the first member, the shipped MiniLM, has weight 1)."""
        seeds = self.cfg["seeds"]
        nxt = seeds[(seeds.index(seed) + 1) % len(seeds)]
        return {
            "twin": [self.final_twin(seed)],
            "start+twin": [SHIPPED, self.final_twin(seed)],
            "start+2twins": [SHIPPED, self.final_twin(seed), self.final_twin(nxt)],
            "start+twin+warmups": [SHIPPED, self.final_twin(seed), f"control_s{seed}", f"control_s{nxt}"],
            "start+control": [SHIPPED, f"control_s{seed}"],
            "start+2controls": [SHIPPED, f"control_s{seed}", f"control_s{nxt}"],
            "2controls": [f"control_s{seed}", f"control_s{nxt}"],
            "start+untrained": [SHIPPED, f"twin_untrained_s{seed}"],
            **({"start+jtcse": [SHIPPED, self.full_loss_twin()]} if seed == seeds[0] else {}),
        }

    def weight_options(self, kind: str) -> list[tuple[float, ...]]:
        grid = self.cfg["weight_grid"]
        if not kind.startswith("start"):  # no start: one equal-weight ensemble (the twin alone: itself)
            return [tuple(1.0 for _ in self.ensemble_candidates(self.cfg["seeds"][0])[kind])]
        if kind == "start+twin+warmups":
            return [(1.0, w, u, u) for w in grid for u in (0.5, 1.0)]
        if kind in ("start+2twins", "start+2controls"):
            return [(1.0, w, w) for w in grid]
        return [(1.0, w) for w in grid]

    def ensemble_scores(self, members: list[str], weights) -> dict:
        """Row fields of the concat ensemble of ``members`` (cos = sum w_i^2 cos_i / sum w_i^2)."""
        total = sum(w * w for w in weights)
        cos = {
            split: sum(w * w * self.cosines(m, split) for m, w in zip(members, weights, strict=False)) / total
            for split in SPLITS
        }
        return self.scores_from(cos)

    def genre_safe(self, row: dict) -> bool:
        """Whether ``row`` scores at least the shipped MiniLM's on every genre of the selection split."""
        shipped = self.row(SHIPPED)["select_genres"]
        return all(row["select_genres"][g] >= v for g, v in shipped.items())

    def genre_safe_best(self, options: dict):
        """The key of ``options`` (key -> row) best on the selection split among those that lose no genre of it to
        the shipped MiniLM (the recipe must not trade one kind of text for another); the best overall if none is."""
        safe = [k for k, row in options.items() if self.genre_safe(row)]
        return max(safe or list(options), key=lambda k: options[k]["select_spearman"])

    def ensembles(self) -> None:
        """Every candidate of every seed, its weights chosen on the selection split (rows ``ens_<kind>_s<seed>``)."""
        for seed in self.cfg["seeds"]:
            for kind, members in self.ensemble_candidates(seed).items():
                name = f"ens_{kind}_s{seed}"
                if self.done(name) or any(self.row(m) is None for m in members):
                    continue
                grid = {w: self.ensemble_scores(members, w) for w in self.weight_options(kind)}
                best = self.genre_safe_best(grid)
                self.save(
                    name,
                    {
                        "group": "ensemble",
                        "kind": kind,
                        "seed": seed,
                        "members": members,
                        "select_pairs": len(self.select),
                        "weights": list(best),
                        **grid[best],
                        "genre_safe": self.genre_safe(grid[best]),
                        "grid": [
                            {"weights": list(w), "select": v["select_spearman"], "dev": v["dev_spearman"]}
                            for w, v in grid.items()
                        ],
                        "note": "scored from the members' cosines (exact for a concat of unit vectors)",
                    },
                )

    def best_kind(self, kinds) -> str:
        """The ensemble kind among ``kinds`` best on the selection split (mean over seeds) among those whose every
        seed loses no selection genre to the shipped MiniLM (:meth:`genre_safe_best`)."""
        rows = {k: [self.row(f"ens_{k}_s{s}") for s in self.cfg["seeds"]] for k in kinds}
        if any(r is None for rs in rows.values() for r in rs):
            raise SystemExit("run the ensembles stage first")
        merged = {
            k: {
                "select_spearman": statistics.fmean(r["select_spearman"] for r in rs),
                "select_genres": {g: min(r["select_genres"][g] for r in rs) for g in rs[0]["select_genres"]},
            }
            for k, rs in rows.items()
        }
        return self.genre_safe_best(merged)

    def teacher_kind(self) -> str:
        """The teacher the recipe distils: of the best JTCSE ensemble and the best SimCSE-only one, the kind
        whose seed-1 student (first distillation length) scores better on the selection split."""
        first, seed = self.cfg["distill_epochs"][0], self.cfg["seeds"][0]
        kinds = dict.fromkeys([self.best_kind(JTCSE_KINDS), self.best_kind(SIMCSE_KINDS)])
        return self.chosen({k: f"ucd_{k}_e{first:g}_s{seed}" for k in kinds}, "distill", genre_safe=True)

    def save_choices(self) -> dict:
        """The choices made so far (each one ``None`` until its rows exist), as row ``choices`` for the report."""

        def attempt(choose):
            try:
                return choose()
            except SystemExit:
                return None

        out = {
            "loss": attempt(self.twin_loss),
            "lr": attempt(self.tuned_lr),
            "steps": attempt(self.twin_steps),
            "best_kinds": {
                "jtcse": attempt(lambda: self.best_kind(JTCSE_KINDS)),
                "simcse": attempt(lambda: self.best_kind(SIMCSE_KINDS)),
            },
            "kind": attempt(self.teacher_kind),
        }
        out["epochs"] = attempt(lambda: self.distill_epochs(out["kind"])) if out["kind"] else None
        return self.save("choices", {"group": "choices", **out})

    # -- distillation ------------------------------------------------------------------------------
    def teacher(self, kind: str, seed: int) -> Path:
        """The chosen ensemble of ``seed`` saved as a checkpoint (once)."""
        from jtcse.defaults import default_tower_path
        from jtcse.modeling.build import build_ensemble

        row = self.row(f"ens_{kind}_s{seed}")
        if kind == "twin":  # the twin teaches on its own (cosines of a one-member ensemble are the twin's)
            return self.work / row["members"][0]
        out = self.work / f"teacher_{kind}_s{seed}"
        if not (out / "modules.json").is_file():
            for member in row["members"]:  # an untrained twin was scored in memory: save it for the ensemble
                if member.startswith("twin_untrained_") and not (self.work / member / "modules.json").is_file():
                    self.untrained_twin(int(member.rsplit("_s", 1)[1])).save(str(self.work / member))
            paths = [default_tower_path() if m == SHIPPED else str(self.work / m) for m in row["members"]]
            build_ensemble(paths, weights=row["weights"], device="cpu").save(str(out))
        return out

    def distilled(self, kind: str, epochs: float, seed: int) -> str:
        import shutil

        from sentence_transformers import SentenceTransformer

        from jtcse.training.distill import distill

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
            lambda: distill(
                str(teacher),
                None,
                self.corpus,
                out,
                objective="similarity",
                seed=seed,
                epochs=epochs,
                logging_steps=10,
                **self.cfg["distill"],
            ),
            lambda: SentenceTransformer(str(out), device="cpu"),
            group="ucd",
            seed=seed,
            kind=kind,
            epochs=epochs,
            teacher=teacher.name,
            student="shipped MiniLM (its own modules)",
        )
        return name

    def distill_epochs(self, kind: str) -> float:
        seed = self.cfg["seeds"][0]
        return self.chosen(
            {e: f"ucd_{kind}_e{e:g}_s{seed}" for e in self.cfg["distill_epochs"]}, "distill", genre_safe=True
        )

    def distill(self) -> None:
        """Seed 1: the best JTCSE and the best SimCSE-only ensemble distilled; the better student's teacher at
        each length of ``distill_epochs``; the best length on the selection split for the other seeds."""
        seeds, first = self.cfg["seeds"], self.cfg["distill_epochs"][0]
        for kind in dict.fromkeys([self.best_kind(JTCSE_KINDS), self.best_kind(SIMCSE_KINDS)]):
            self.distilled(kind, first, seeds[0])
        if self.row(f"ens_start+jtcse_s{seeds[0]}") is not None:  # the full JTCSE loss, for comparison
            self.distilled("start+jtcse", first, seeds[0])
        kind = self.teacher_kind()
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
        models = {
            "shipped": SentenceTransformer(default_tower_path(), device="cpu"),
            "student": SentenceTransformer(str(student), device="cpu"),
        }
        rate = encode_rates(models, sentences, self.cfg["eval_max_seq_length"])
        self.save(
            "speed",
            {
                "group": "speed",
                "sentences": len(sentences),
                "student": student.name,
                "sentences_per_s": rate,
                "ratio_student_to_shipped": rate["student"] / rate["shipped"],
                "modules": {k: [type(m).__name__ for m in model] for k, model in models.items()},
            },
        )


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

    def select_size(self) -> int:
        """Pairs in the selection split (the sample less the pairs dev repeats), as the rows record it."""
        return next((r["select_pairs"] for r in self.rows.values() if "select_pairs" in r), self.cfg["select_pairs"])

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
        """The choices the runner made (row ``choices``, :meth:`DefaultsRunner.save_choices`)."""
        keys = ("loss", "lr", "steps", "kind", "epochs", "best_kinds")
        return {k: (self.rows.get("choices") or {}).get(k) for k in keys}

    def build(self) -> str:
        c = self.choices()
        twin = f"twin_mean_lr{c['lr']:g}_n{c['steps']}{c['loss']}_s{{seed}}" if c["steps"] else None
        ens = f"ens_{c['kind']}_s{{seed}}" if c["kind"] else None
        ucd = f"ucd_{c['kind']}_e{c['epochs']:g}_s{{seed}}" if c["epochs"] else None
        finals = [
            ("**shipped MiniLM (row to beat)**", SHIPPED, "mean + Normalize (as shipped)"),
            (
                "**control**: SimCSE of the shipped MiniLM, own modules (= warm-up W_s)",
                "control_s{seed}",
                "mean + Normalize",
            ),
            ("twin of (W_s, W_s+1) before twin training (summed warm-ups)", "twin_untrained_s{seed}", "sum of 2 mean"),
            (
                f"JTCSE twin of (W_s, W_s+1), lr {c['lr']:g}, {c['steps']} steps, {LOSS_LABELS[c['loss']]}"
                if twin
                else "JTCSE twin",
                twin,
                "sum of 2 mean",
            ),
            ("ensemble: start + control W_s (no twin)", "ens_start+control_s{seed}", "concat"),
            ("ensemble: start + W_s + W_s+1 (no twin)", "ens_start+2controls_s{seed}", "concat"),
            ("ensemble: W_s + W_s+1 (no twin, no start)", "ens_2controls_s{seed}", "concat"),
            (
                "ensemble: start + untrained twin (W_s + W_s+1 summed; no twin training)",
                "ens_start+untrained_s{seed}",
                "concat",
            ),
            ("ensemble: start + twin_s", "ens_start+twin_s{seed}", "concat"),
            ("ensemble: start + twin_s + twin_s+1", "ens_start+2twins_s{seed}", "concat"),
            ("ensemble: start + twin_s + W_s + W_s+1", "ens_start+twin+warmups_s{seed}", "concat"),
            (
                f"**UCD student**: {c['kind']} distilled into the shipped MiniLM, {c['epochs']} epoch(s)"
                if ucd
                else "UCD student",
                ucd,
                "mean + Normalize (its own)",
            ),
        ]
        lines = []
        for label, pattern, pooling in finals:
            if pattern is None:
                lines.append([label, pooling, "0", "not run", "", "", "", "", ""])
                continue
            dev, sel = self.seeded(pattern), self.seeded(pattern, "select_spearman")
            genres = [_ms(self.genres_seeded(pattern, g)) for g in GENRES]
            lines.append(
                [label, pooling, str(len(dev)), _ms(dev), ", ".join(f"{100 * v:.2f}" for v in dev), _ms(sel), *genres]
            )
        self.table(
            f"Final rows (STS-B dev Spearman ×100, mean ± std over seeds; selection split = "
            f"{self.select_size():,} STS-B *train* pairs, used for every choice)",
            ["model", "pooling", "seeds", "dev", "dev per seed", "selection split", *(f"dev {g}" for g in GENRES)],
            lines,
        )
        self.targets(c, twin, ucd)
        self.genre_table(twin, ens, ucd)
        self.probe_table(c)
        self.pooling_table(c)
        self.corpus_table()
        self.length_table(c)
        self.terms_table()
        self.ensemble_table()
        self.distill_table(c)
        self.timing_table()
        speed = self.rows.get("speed")
        if speed:
            rate = speed["sentences_per_s"]
            self.out += [
                "",
                f"Encode speed ({speed['sentences']} sentences, best of 3 interleaved repeats, one thread): "
                f"shipped MiniLM {rate['shipped']:.0f} sentences/s, final student {rate['student']:.0f} "
                f"sentences/s (ratio {speed['ratio_student_to_shipped']:.2f}; modules "
                f"{', '.join(speed['modules']['student'])}).",
            ]
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
        self.table(
            "Against the two rows to beat (Δ of the means; seed spread = the larger std of the two rows)",
            ["model", "split", "mean ± std", "Δ vs shipped", "Δ vs control"],
            lines,
        )

    def genre_table(self, twin, ens, ucd) -> None:
        lines = []
        base = {g: self.genre(SHIPPED, g) for g in GENRES}
        for label, pattern in (
            ("shipped MiniLM", SHIPPED),
            ("control (SimCSE, own modules)", "control_s{seed}"),
            ("twin", twin),
            ("chosen ensemble", ens),
            ("UCD student", ucd),
        ):
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
                cells.append(
                    f"{100 * m:.2f} ({100 * (m - base[g]):+.2f}; worst seed {100 * worst:+.2f})"
                    if pattern != SHIPPED
                    else f"{100 * m:.2f}"
                )
            lines.append([label, *cells, _ms(self.seeded(pattern))])
        n = {genre_label(g): None for g in (self.get(SHIPPED) or {}).get("dev_genres", {})}
        self.table(
            "Per genre (STS-B dev: 625 captions, 500 news, 375 forums pairs; mean over seeds, Δ vs shipped)"
            if n
            else "Per genre",
            ["model", *(f"dev {g}" for g in GENRES), "dev all"],
            lines,
        )

    def probe_table(self, c: dict) -> None:
        seed, n0, lines = self.seeds[0], self.cfg["probe_steps"], []
        for variant in ("", *ABLATIONS):
            for lr in self.cfg["twin_lrs"]:
                r = self.get(f"twin_mean_lr{lr:g}_n{n0}{variant}_s{seed}")
                if r:
                    mark = " **(chosen)**" if (lr, variant) == (c["lr"], c["loss"]) else ""
                    terms = ", ".join(f"{k} {float(v):.2g}" for k, v in (r.get("last_loss_terms") or {}).items())
                    lines.append(
                        [
                            LOSS_LABELS[variant],
                            f"{lr:g}{mark}",
                            _x(r["select_spearman"]),
                            _x(r["dev_spearman"]),
                            *(_x(self.genre(r["name"], g)) for g in GENRES),
                            terms,
                            f"{r.get('train_seconds', 0):.0f}",
                        ]
                    )
        before = self.get(f"twin_untrained_s{seed}")
        if before:
            lines.append(
                [
                    "(no twin training: the summed warm-ups)",
                    "–",
                    _x(before["select_spearman"]),
                    _x(before["dev_spearman"]),
                    *(_x(self.genre(before["name"], g)) for g in GENRES),
                    "",
                    "0",
                ]
            )
        self.table(
            f"Twin loss and learning rate (mean-pooled twin of W1, W2; {n0} steps, batch "
            f"{self.cfg['twin']['batch_size']}; the loss variants at lr {self.cfg['variant_lr']:g}, then the full "
            "loss and the best variant at each lr; chosen on the selection split)",
            [
                "twin loss",
                "lr",
                "selection split",
                "dev",
                *(f"dev {g}" for g in GENRES),
                "last logged terms",
                "train s",
            ],
            lines,
        )

    def pooling_table(self, c: dict) -> None:
        if c["lr"] is None:
            return
        lr, n, seed = c["lr"], self.cfg["probe_steps"], self.seeds[0]
        rows = [
            ("shipped MiniLM, mean (as shipped)", SHIPPED),
            ("shipped MiniLM, CLS", "shipped_cls"),
            ("SimCSE warm-up W1, CLS", f"warmup_cls_s{seed}"),
            ("SimCSE warm-up W1, mean + Normalize (control)", f"control_s{seed}"),
            ("twin of 2 × shipped, CLS (no warm-up)", f"twin_cls_lr{lr:g}_n{n}_direct_s{seed}"),
            ("twin of 2 × shipped, mean (no warm-up)", f"twin_mean_lr{lr:g}_n{n}_direct_s{seed}"),
            ("twin of CLS warm-ups (W1, W2), CLS", f"twin_cls_lr{lr:g}_n{n}_s{seed}"),
            ("twin of mean warm-ups (W1, W2), mean", f"twin_mean_lr{lr:g}_n{n}_s{seed}"),
        ]
        lines = [
            [
                label,
                _x((self.get(name) or {}).get("select_spearman")),
                _x((self.get(name) or {}).get("dev_spearman")),
                *(_x(self.genre(name, g)) for g in GENRES),
            ]
            for label, name in rows
            if self.get(name)
        ]
        self.table(
            f"CLS vs mean pooling (seed {seed}; twins at lr {lr:g}, {n} steps)",
            ["model", "selection split", "dev", *(f"dev {g}" for g in GENRES)],
            lines,
        )

    def corpus_table(self) -> None:
        lines = []
        for label, pattern in (
            (f"first {self.cfg['small_corpus_lines']:,} lines", "control_small_s{seed}"),
            ("the whole of wiki12k", "control_s{seed}"),
        ):
            steps = [
                self.rows[pattern.format(seed=s)].get("steps")
                for s in self.seeds
                if pattern.format(seed=s) in self.rows
            ]
            if steps:
                lines.append(
                    [
                        label,
                        str(steps[0]),
                        _ms(self.seeded(pattern, "select_spearman")),
                        _ms(self.seeded(pattern)),
                        *(_ms(self.genres_seeded(pattern, g)) for g in GENRES),
                    ]
                )
        self.table(
            "How much corpus: the control (SimCSE of the shipped MiniLM, own modules, one pass) by corpus size",
            ["corpus", "steps", "selection split", "dev", *(f"dev {g}" for g in GENRES)],
            lines,
        )

    def length_table(self, c: dict) -> None:
        if c["lr"] is None:
            return
        seed, lines = self.seeds[0], []
        for n in (self.cfg["probe_steps"], self.cfg["twin_steps"]):
            name = f"twin_mean_lr{c['lr']:g}_n{n}{c['loss']}_s{seed}"
            r = self.get(name)
            if r:
                mark = " **(chosen)**" if n == c["steps"] else ""
                lines.append(
                    [
                        f"{n}{mark}",
                        _x(r["select_spearman"]),
                        _x(r["dev_spearman"]),
                        *(_x(self.genre(name, g)) for g in GENRES),
                        f"{r.get('train_seconds', 0):.0f}",
                    ]
                )
        self.table(
            f"Twin length ({LOSS_LABELS[c['loss']]}, lr {c['lr']:g}, seed {seed}; chosen on the selection split)",
            ["steps", "selection split", "dev", *(f"dev {g}" for g in GENRES), "train s"],
            lines,
        )

    def terms_table(self) -> None:
        row = self.get("terms")
        if not row:
            return
        names = ("nce_1", "nce_2", "icnce", "ictm")
        lines = [
            [label, *(f"{v[n]:.2g} / {v[n + '_grad_norm']:.2g}" for n in names)] for label, v in row["setups"].items()
        ]
        self.table(
            "What drives a twin's update before training (term value / gradient norm over all parameters; "
            "mean of 4 batches of 16 corpus sentences; ICTM weighted 0.5)",
            ["twin", *names],
            lines,
        )

    def ensemble_table(self) -> None:
        lines = []
        for kind in (*SIMCSE_KINDS, *JTCSE_KINDS, "start+jtcse"):
            pattern = f"ens_{kind}_s{{seed}}"
            names = self.names(pattern)
            if not names:
                continue
            weights = "; ".join("(" + ", ".join(f"{w:g}" for w in self.rows[n]["weights"]) + ")" for n in names)
            safe = "".join("✓" if self.rows[n].get("genre_safe") else "✗" for n in names)
            lines.append(
                [
                    f"{kind}: {KIND_LABELS[kind]}",
                    str(len(names)),
                    _ms(self.seeded(pattern, "select_spearman")),
                    _ms(self.seeded(pattern)),
                    *(_ms(self.genres_seeded(pattern, g)) for g in GENRES),
                    safe,
                    weights,
                ]
            )
        self.table(
            "Teachers: ensembles (concat; weights chosen per seed on the selection split among the weights that lose "
            "no genre of it to the shipped MiniLM, if any: ✓; the shipped MiniLM's weight is 1)",
            ["members", "seeds", "selection split", "dev", *(f"dev {g}" for g in GENRES), "genre-safe", "weights"],
            lines,
        )

    def distill_table(self, c: dict) -> None:
        seed = self.seeds[0]
        shipped = (self.get(SHIPPED) or {}).get("dev_spearman")
        lines = []
        for name in sorted(n for n in self.rows if n.startswith("ucd_") and n.endswith(f"_s{seed}")):
            r = self.rows[name]
            mark = " **(chosen)**" if (r["kind"], r["epochs"]) == (c["kind"], c["epochs"]) else ""
            lines.append(
                [
                    f"{r['kind']}{mark}",
                    f"{r['epochs']:g}",
                    str(r.get("steps")),
                    _x(r["select_spearman"]),
                    _x(r["dev_spearman"]),
                    f"{100 * (r['dev_spearman'] - shipped):+.2f}" if shipped else "–",
                    _x(self.genre(name, "captions")),
                    f"{r.get('train_seconds', 0):.0f}",
                ]
            )
        self.table(
            f"Distillation: teacher and length (seed {seed}; student: the shipped MiniLM with its own modules; "
            "similarity objective, batch 64, length 32, lr 2e-5; the teacher's seed-1 ensemble as in the table above)",
            [
                "teacher",
                "epochs over wiki12k",
                "steps",
                "selection split",
                "dev",
                "Δ dev vs shipped",
                "dev captions",
                "train s",
            ],
            lines,
        )

    def timing_table(self) -> None:
        groups: dict[str, list[tuple[float, int]]] = {}
        for row in self.rows.values():
            if "train_seconds" in row and row.get("train_seconds"):
                key = row["group"] if row["group"] != "twin" else f"twin ({row.get('max_steps')} steps)"
                groups.setdefault(key, []).append((row["train_seconds"], row.get("steps") or 0))
        lines = [
            [
                g,
                str(len(v)),
                f"{statistics.fmean(s for s, _ in v) / 60:.1f}",
                f"{statistics.fmean(s / max(n, 1) for s, n in v):.2f}",
            ]
            for g, v in sorted(groups.items())
        ]
        self.table(
            "Timings (one thread on a 2-core machine shared with other sessions: wall time varies 2-5×)",
            ["stage", "runs", "mean minutes", "mean s/step"],
            lines,
        )


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
    parser.add_argument(
        "--stages", default=",".join(STAGES), help="comma-separated subset of the stages (run in order)"
    )
    parser.add_argument("--report-only", action="store_true")
    parser.add_argument("--data", type=Path, default=DATA, help="folder with wiki12k.txt and stsbenchmark/")
    parser.add_argument("--work", type=Path, default=None, help="checkpoints and rows (default runs/default[_quick])")
    parser.add_argument("--out", type=Path, default=None, help="results folder (default evaluation/default)")
    args = parser.parse_args()

    cfg = QUICK if args.quick else FULL
    work = args.work or Path("runs/default_quick" if args.quick else "runs/default")
    out = args.out or (work / "report" if args.quick else Path("evaluation/default"))
    runner = DefaultsRunner(work, cfg, args.threads, args.data)
    if not args.report_only:
        wanted = args.stages.split(",")
        unknown = sorted(set(wanted) - set(STAGES))
        if unknown:
            raise SystemExit(f"unknown stages {unknown}; choose from {', '.join(STAGES)}")
        for stage in STAGES:
            if stage in wanted:
                print(f"[default] stage {stage}", flush=True)
                getattr(runner, stage)()
    runner.save_choices()
    results, tables = build_report(work, cfg)
    out.mkdir(parents=True, exist_ok=True)
    (out / "results.json").write_text(json.dumps(results, indent=2, default=str), encoding="utf-8")
    (out / "tables.md").write_text(tables, encoding="utf-8")
    report = Path("evaluation/DEFAULTS.md")
    if not args.quick and args.out is None and report.exists():
        text = report.read_text(encoding="utf-8")
        text = re.sub(
            r"<!-- TABLES START -->.*<!-- TABLES END -->",
            lambda _: f"<!-- TABLES START -->\n{tables}<!-- TABLES END -->",
            text,
            flags=re.S,
        )
        report.write_text(text, encoding="utf-8")
    print(tables)


if __name__ == "__main__":
    main()
