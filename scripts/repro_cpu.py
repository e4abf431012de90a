"""Small-scale CPU reproduction of the JTCSE recipe from the embedded MiniLM, with ablations.

One command reproduces every number in ``evaluation/REPRODUCTION.md``::

    OMP_NUM_THREADS=2 PYTHONPATH=$PWD HF_HUB_OFFLINE=1 python scripts/repro_cpu.py            # full grid
    OMP_NUM_THREADS=2 PYTHONPATH=$PWD HF_HUB_OFFLINE=1 python scripts/repro_cpu.py --quick    # smoke run

Stages (each row's result is written to ``<work>/results/<row>.json`` as soon as it exists and a rerun
skips finished rows, so an interrupted grid resumes):

1. baselines: the shipped MiniLM with its own mean pooling and with CLS pooling;
2. SimCSE warm-up towers W1, W2, W3 (seeds 1-3: different dropout masks and data orders; no RTT, there is
   no network here);
3. the untrained twin of two warm-up towers (seed s pairs W_s with W_{s mod 3 + 1});
4. JTCSE twins: the full loss (3 seeds), the loss ablation grid, the CAEL spacing k, two regularisers;
5. JTCSE-D: the twin of seed s distilled into its first tower;
6. geometry diagnostics (alignment / uniformity on STS-B dev, CLS energy) for the main rows;
7. controls (each warm-up tower continued alone with SimCSE for the twin's budget), 100-step twins and their
   distillation, and the loss-grid / CAEL ablations on seeds 2 and 3 (stages ``controls``, ``long``,
   ``distill_long``, ``ablation_seeds``).

``--stages`` picks stages (default: all); ``--shard i/n`` runs only every n-th twin row (stages 1-3 are
needed by all shards and are skipped when done); ``--report-only`` rebuilds ``results.json``, ``results.csv`` and the plots from the row files.
Checkpoints live under ``runs/`` (git-ignored). Each training row runs through the pipeline's run-once step
(:func:`jtcse.training.pipeline.run_once`) and the stage runner, so a finished row's model is reused and an
interrupted one resumes from its checkpoints. ``--data`` is the folder with ``wiki12k.txt`` and
``stsbenchmark/`` (default ``../shared/data`` beside the repository).
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import re
import statistics
import time
from pathlib import Path

from jtcse.training.grid import TrainingGrid, mean_std, pair_of, refresh_tables

REPO = Path(__file__).resolve().parents[1]
DATA = REPO.parent / "shared" / "data"
"""Default ``--data``: the shared data folder beside the repository (``../shared/data``)."""

# Settings of the full run (the quick run shrinks them in ``settings``).
FULL = {
    "corpus_lines": 1000,
    "simcse": {"batch_size": 32, "max_seq_length": 32, "learning_rate": 3e-5, "max_steps": 30},
    "twin": {"batch_size": 16, "max_seq_length": 32, "learning_rate": 1e-5, "max_steps": 20},
    "distill": {"batch_size": 32, "max_seq_length": 32, "learning_rate": 5e-5, "max_steps": 31},
    "eval_max_seq_length": 128,
    "dev_pairs": None,
    "diag_sentences": 256,
    "seeds": [1, 2, 3],
    "long_twin_steps": 100,
}
QUICK = {
    "corpus_lines": 48,
    "simcse": {"batch_size": 8, "max_seq_length": 16, "learning_rate": 3e-5, "max_steps": 2},
    "twin": {"batch_size": 4, "max_seq_length": 16, "learning_rate": 1e-5, "max_steps": 2},
    "distill": {"batch_size": 8, "max_seq_length": 16, "learning_rate": 5e-5, "max_steps": 2},
    "eval_max_seq_length": 64,
    "dev_pairs": 60,
    "diag_sentences": 24,
    "seeds": [1, 2],
    "long_twin_steps": 3,
}


def twin_rows(seeds: list[int], quick: bool, long_steps: int = 0, ablation_seeds: bool = False) -> list[dict]:
    """Every twin training run: name, group, seed and the ``train_twin`` switches that differ from the full recipe.

    The ablations run on the first seed (names without a seed suffix); ``ablation_seeds`` adds the loss grid
    and the CAEL rows for the other seeds too (names ending in ``_s<seed>``)."""
    full = {"cael_every": 2, "nce_weight": 1.0, "icnce_weight": 1.0, "ictm_weight": 0.5, "regularizers": []}
    rows = [{"name": f"jtcse_full_s{s}", "group": "headline", "seed": s, **full} for s in seeds]
    grid = {  # (nce, icnce, ictm) weights; 0 switches the term off
        "loss_nce": (1.0, 0.0, 0.0),
        "loss_icnce": (0.0, 1.0, 0.0),
        "loss_ictm": (0.0, 0.0, 0.5),
        "loss_nce+icnce": (1.0, 1.0, 0.0),
        "loss_nce+ictm": (1.0, 0.0, 0.5),
        "loss_icnce+ictm": (0.0, 1.0, 0.5),
    }
    if quick:
        grid = {"loss_nce": grid["loss_nce"]}

    def ablations(seed: int, suffix: str) -> list[dict]:
        out = [
            {
                "name": name + suffix,
                "group": "loss",
                "seed": seed,
                **full,
                "nce_weight": nce,
                "icnce_weight": icnce,
                "ictm_weight": ictm,
            }
            for name, (nce, icnce, ictm) in grid.items()
        ]
        for k in () if quick else (1, 3, 6, 0):
            out.append(
                {
                    "name": (f"cael_k{k}" if k else "cael_none") + suffix,
                    "group": "cael",
                    "seed": seed,
                    **full,
                    "cael_every": k,
                }
            )
        return out

    rows += ablations(seeds[0], "")
    for reg in () if quick else ("simreg", "dispersion"):
        rows.append({"name": f"reg_{reg}", "group": "regulariser", "seed": seeds[0], **full, "regularizers": [reg]})
    if long_steps:
        rows += [
            {"name": f"jtcse_long_s{s}", "group": "long", "seed": s, **full, "max_steps": long_steps} for s in seeds
        ]
    if ablation_seeds:
        for s in seeds[1:]:
            rows += ablations(s, f"_s{s}")
    # order = priority if time runs out: headline seeds, loss grid, CAEL spacing, regularisers, longer runs,
    # the ablations on the other seeds
    return rows


class Runner(TrainingGrid):
    """The CPU reproduction's grid: :class:`~jtcse.training.grid.TrainingGrid` (inputs, row bookkeeping, warm-ups)
    plus the baseline, twin, distillation, control and diagnostics stages."""

    def baselines(self) -> None:
        from jtcse.modeling.loading import load_cls_tower, load_model

        if not self.done("minilm_mean"):
            rho, secs = self.dev_spearman(load_model(None, device="cpu"))
            self.save(
                "minilm_mean",
                {"group": "baseline", "pooling": "mean (shipped)", "dev_spearman": rho, "eval_seconds": secs},
            )
        if not self.done("minilm_cls"):
            model, _ = load_cls_tower(None, role="tower")
            rho, secs = self.dev_spearman(model)
            self.save("minilm_cls", {"group": "baseline", "pooling": "cls", "dev_spearman": rho, "eval_seconds": secs})

    def untrained_twins(self) -> None:
        from jtcse.modeling.build import build_twin

        seeds = self.cfg["seeds"]
        for seed in seeds:
            name = f"twin_untrained_s{seed}"
            if self.done(name):
                continue
            a, b = pair_of(seed, seeds)
            model = build_twin(str(self.tower_dir(a)), str(self.tower_dir(b)), cael_every=2, device="cpu")
            rho, secs = self.dev_spearman(model)
            self.save(
                name,
                {
                    "group": "twin_untrained",
                    "seed": seed,
                    "towers": [f"W{a}", f"W{b}"],
                    "dev_spearman": rho,
                    "eval_seconds": secs,
                },
            )

    def twin(self, row: dict) -> None:
        from jtcse.modeling.loading import load_model
        from jtcse.training.twin import train_twin

        a, b = pair_of(row["seed"], self.cfg["seeds"])
        out = self.work / row["name"]
        self.trained(
            row["name"],
            lambda: train_twin(
                str(self.tower_dir(a)),
                str(self.tower_dir(b)),
                self.corpus,
                out,
                cael_every=row["cael_every"] or None,
                seed=row["seed"],
                nce_weight=row["nce_weight"],
                icnce_weight=row["icnce_weight"],
                ictm_weight=row["ictm_weight"],
                regularizers=row["regularizers"],
                logging_steps=4,
                show_progress=False,
                device="cpu",
                **dict(self.cfg["twin"], **({"max_steps": row["max_steps"]} if "max_steps" in row else {})),
            ),
            lambda: load_model(out, device="cpu"),
            group=row["group"],
            seed=row["seed"],
            towers=[f"W{a}", f"W{b}"],
            settings={k: row[k] for k in ("cael_every", "nce_weight", "icnce_weight", "ictm_weight", "regularizers")},
        )

    def distilled(self, teacher_prefix: str = "jtcse_full", prefix: str = "distilled") -> None:
        from jtcse.modeling.loading import load_model
        from jtcse.training.distill import distill

        for seed in self.cfg["seeds"]:
            teacher = self.work / f"{teacher_prefix}_s{seed}"
            if not self.done(f"{teacher_prefix}_s{seed}"):
                continue
            a, _ = pair_of(seed, self.cfg["seeds"])
            out = self.work / f"{prefix}_s{seed}"
            self.trained(
                f"{prefix}_s{seed}",
                # JTCSE-D as measured in REPRODUCTION.md: MSE to the twin's vectors (same width, CLS student)
                lambda: distill(
                    str(teacher),
                    str(self.tower_dir(a)),
                    self.corpus,
                    out,
                    objective="mse",
                    seed=seed,
                    logging_steps=5,
                    **self.cfg["distill"],
                ),
                lambda: load_model(out, device="cpu"),
                group="headline" if prefix == "distilled" else "long",
                seed=seed,
                teacher=f"{teacher_prefix}_s{seed}",
                student=f"W{a}",
            )

    def controls(self, steps_name: str, twin_steps: int) -> None:
        """Same extra budget, plain SimCSE: continue each warm-up tower alone for as many steps (batch, length
        and learning rate) as the twin gets, then evaluate it and the untrained twin of two such towers.
        Separates what the JTCSE objective adds from what more contrastive training adds."""
        from jtcse.modeling.build import build_twin
        from jtcse.modeling.loading import load_model
        from jtcse.training.simcse import train_simcse

        seeds = self.cfg["seeds"]
        twin_cfg = dict(self.cfg["twin"], max_steps=twin_steps)
        for seed in seeds:
            out = self.work / f"simcse_{steps_name}_s{seed}"
            self.trained(
                out.name,
                lambda: train_simcse(
                    str(self.tower_dir(seed)), self.corpus, out, seed=seed + 100, logging_steps=5, **twin_cfg
                ),
                lambda: load_model(out, device="cpu"),
                group="control",
                seed=seed,
                settings=twin_cfg,
                **{"from": f"W{seed}"},
            )
        for seed in seeds:
            name = f"twin_simcse_{steps_name}_s{seed}"
            a, b = pair_of(seed, seeds)
            if self.done(name) or not (
                self.done(f"simcse_{steps_name}_s{a}") and self.done(f"simcse_{steps_name}_s{b}")
            ):
                continue
            model = build_twin(
                str(self.work / f"simcse_{steps_name}_s{a}"),
                str(self.work / f"simcse_{steps_name}_s{b}"),
                cael_every=2,
                device="cpu",
            )
            rho, secs = self.dev_spearman(model)
            self.save(
                name,
                {
                    "group": "control",
                    "seed": seed,
                    "towers": [f"simcse_{steps_name}_s{a}", f"simcse_{steps_name}_s{b}"],
                    "dev_spearman": rho,
                    "eval_seconds": secs,
                },
            )

    def diagnostics(self) -> None:
        from jtcse.evaluation.diagnostics import run_diagnostics
        from jtcse.modeling.build import build_twin
        from jtcse.modeling.loading import load_cls_tower, load_model

        s1 = self.cfg["seeds"][0]
        a, b = pair_of(s1, self.cfg["seeds"])
        models = {
            "minilm_cls": lambda: load_cls_tower(None, role="tower")[0],
            "minilm_mean": lambda: load_model(None, device="cpu"),
            f"warmup_s{s1}": lambda: load_model(self.tower_dir(s1), device="cpu"),
            f"twin_untrained_s{s1}": lambda: build_twin(
                str(self.tower_dir(a)), str(self.tower_dir(b)), cael_every=2, device="cpu"
            ),
            f"jtcse_full_s{s1}": lambda: load_model(self.work / f"jtcse_full_s{s1}", device="cpu"),
            f"distilled_s{s1}": lambda: load_model(self.work / f"distilled_s{s1}", device="cpu"),
            f"simcse_long_s{s1}": lambda: load_model(self.work / f"simcse_long_s{s1}", device="cpu"),
            f"jtcse_long_s{s1}": lambda: load_model(self.work / f"jtcse_long_s{s1}", device="cpu"),
        }
        for row, load in models.items():
            name = f"diag_{row}"
            if self.done(name) or not self.done(row):
                continue
            started = time.perf_counter()
            report = run_diagnostics(
                load(),
                self.diag_sentences,
                self.work / name,
                pairs=self.dev,
                max_pairs=self.cfg["diag_sentences"],
                seq_len=32,
                max_length=64,
                model_name=row,
            )
            self.save(
                name,
                {
                    "group": "diagnostics",
                    "row": row,
                    "seconds": round(time.perf_counter() - started, 2),
                    "alignment_uniformity": report["alignment_uniformity"],
                    "cls_energy": {enc: v["cls_energy"] for enc, v in report["encoders"].items()},
                    "n_positive_pairs": report.get("n_positive_pairs"),
                    "n_sentences": report["n_sentences"],
                },
            )


# -- report ------------------------------------------------------------------------------------------
# Published numbers, for a separate labelled column only (JTCSE paper, BERT-base, 12 layers, Wiki1M,
# 7-task STS average; not STS-B dev and not MiniLM, so not comparable in level, only in direction).
PAPER_LOSS = {
    "twin_untrained": 78.27,
    "loss_nce": 78.50,
    "loss_icnce": 78.71,
    "loss_ictm": 78.40,
    "loss_nce+icnce": 78.55,
    "loss_nce+ictm": 79.10,
    "loss_icnce+ictm": 79.62,
    "jtcse_full": 79.70,
}
PAPER_CAEL = {
    "1": 79.23,
    "2": 78.74,
    "3": 79.57,
    "4": 79.37,
    "6": 79.70,
    "12": 79.55,
    "w/o": 79.58,
}  # Table IX header: "Number of CAEL"
PAPER_HEADLINE = {"SimCSE-BERT-base": 76.25, "JTCSE-BERT-base": 79.70, "JTCSE-D-BERT-base": 79.89}


def fmt(x: float | None, scale: float = 100.0) -> str:
    return "–" if x is None else f"{scale * x:.2f}"


def markdown_tables(rows: dict, headline: dict) -> str:
    """The report's tables, built from the row results only (numbers ×100)."""
    scored = {k: v for k, v in rows.items() if "dev_spearman" in v}
    dev = lambda k: fmt(scored[k]["dev_spearman"]) if k in scored else "not run"  # noqa: E731
    secs = lambda k: f"{scored[k]['train_seconds']:.0f}" if k in scored and "train_seconds" in scored[k] else "–"  # noqa: E731
    out = [
        "### Headline rows (STS-B dev Spearman ×100, CLS pooling unless noted)",
        "",
        "| row | seeds | dev Spearman | per-seed |",
        "| --- | --- | --- | --- |",
    ]
    out.append(f"| MiniLM as shipped, mean pooling (its native) | – | {dev('minilm_mean')} | |")
    out.append(f"| MiniLM as shipped, CLS pooling | – | {dev('minilm_cls')} | |")
    labels = {
        "warmup": "SimCSE warm-up tower (W_s)",
        "twin_untrained": "twin of two warm-up towers, untrained",
        "jtcse_full": "JTCSE twin (NCE + ICNCE + 0.5·ICTM, k = 2)",
        "distilled": "JTCSE-D (twin distilled into W_s)",
    }
    for key, label in labels.items():
        h = headline.get(key)
        if not h:
            out.append(f"| {label} | 0 | not run | |")
            continue
        sd = f" ± {100 * h['std']:.2f}" if h["std"] is not None else ""
        out.append(
            f"| {label} | {h['n']} | {100 * h['mean']:.2f}{sd} | {', '.join(f'{100 * v:.2f}' for v in h['values'])} |"
        )
    out += [
        "",
        "### Same extra budget: JTCSE vs plain SimCSE continued on each tower (mean ± std over seeds)",
        "",
        "| extra training after warm-up | JTCSE twin | SimCSE-continued single tower | untrained twin of two "
        "SimCSE-continued towers | paired Δ: JTCSE − that twin |",
        "| --- | --- | --- | --- | --- |",
    ]

    def ms(key: str) -> str:
        h = headline.get(key)
        if not h:
            return "not run"
        return (
            f"{100 * h['mean']:.2f}" + (f" ± {100 * h['std']:.2f}" if h["std"] is not None else "") + f" (n={h['n']})"
        )

    def paired(a: str, b: str) -> str:
        """mean ± std over seeds of row a − row b with the same seed (same warm-up towers)."""
        d = [
            scored[f"{a}_s{s}"]["dev_spearman"] - scored[f"{b}_s{s}"]["dev_spearman"]
            for s in range(1, 10)
            if f"{a}_s{s}" in scored and f"{b}_s{s}" in scored
        ]
        if not d:
            return "–"
        m, sd = mean_std(d)
        return f"{100 * m:+.2f}" + (f" ± {100 * sd:.2f}" if sd is not None else "") + f" (n={len(d)})"

    out.append(f"| none | {ms('twin_untrained')} | {ms('warmup')} | {ms('twin_untrained')} | – |")
    out.append(
        f"| short (the grid's twin budget) | {ms('jtcse_full')} | {ms('simcse_short')} | {ms('twin_simcse_short')} | "
        f"{paired('jtcse_full', 'twin_simcse_short')} |"
    )
    out.append(
        f"| long | {ms('jtcse_long')} | {ms('simcse_long')} | {ms('twin_simcse_long')} | "
        f"{paired('jtcse_long', 'twin_simcse_long')} |"
    )
    out += [
        "",
        f"JTCSE-D from the long twins (distilled into W_s): {ms('distilled_long')}; paired Δ vs its teacher "
        f"{paired('distilled_long', 'jtcse_long')}, vs W_s continued with SimCSE for 100 steps "
        f"{paired('distilled_long', 'simcse_long')}.",
    ]
    seeds = sorted({v["seed"] for k, v in scored.items() if k.startswith("jtcse_full_s")})

    def key_for(name: str, seed: int) -> str:
        if name in ("jtcse_full", "twin_untrained"):
            return f"{name}_s{seed}"
        return name if seed == (seeds[0] if seeds else 1) else f"{name}_s{seed}"

    def across(name: str) -> tuple[str, str, str]:
        """(seed-1 value, mean ± std over seeds, paired Δ vs the untrained twin of the same towers)."""
        vals, deltas = [], []
        for seed in seeds:
            key, base_key = key_for(name, seed), f"twin_untrained_s{seed}"
            if key in scored:
                vals.append(scored[key]["dev_spearman"])
                if base_key in scored:
                    deltas.append(scored[key]["dev_spearman"] - scored[base_key]["dev_spearman"])

        def ms(xs: list[float]) -> str:
            if not xs:
                return "not run"
            m, sd = mean_std(xs)
            return f"{100 * m:.2f}" + (f" ± {100 * sd:.2f}" if sd is not None else "") + f" (n={len(xs)})"

        return dev(key_for(name, seeds[0] if seeds else 1)), ms(vals), ms(deltas)

    out += [
        "",
        "### Loss ablation (k = 2; seed s = towers W_s + W_s+1, as in the headline rows)",
        "",
        "| loss | seed 1 | mean ± std over seeds | paired Δ vs untrained twin | train s (seed 1) | "
        "paper (BERT-base, 7-STS avg) |",
        "| --- | --- | --- | --- | --- | --- |",
    ]
    grid = [
        ("none (untrained twin)", "twin_untrained", "twin_untrained"),
        ("NCE", "loss_nce", "loss_nce"),
        ("ICNCE", "loss_icnce", "loss_icnce"),
        ("ICTM", "loss_ictm", "loss_ictm"),
        ("NCE + ICNCE", "loss_nce+icnce", "loss_nce+icnce"),
        ("NCE + ICTM", "loss_nce+ictm", "loss_nce+ictm"),
        ("ICNCE + ICTM", "loss_icnce+ictm", "loss_icnce+ictm"),
        ("NCE + ICNCE + ICTM (full)", "jtcse_full", "jtcse_full"),
    ]
    for label, name, paper in grid:
        one, overall, delta = across(name)
        out.append(
            f"| {label} | {one} | {overall} | {delta} | {secs(key_for(name, seeds[0] if seeds else 1))} | "
            f"{PAPER_LOSS[paper]:.2f} |"
        )
    out += [
        "",
        "### Cross-attention encoder layers (full loss; MiniLM has 6 layers)",
        "",
        "| CAEL spacing k | CAEL layers | seed 1 | mean ± std over seeds | paired Δ vs untrained twin | train s (seed 1) |",
        "| --- | --- | --- | --- | --- | --- |",
    ]
    for k, layers in (("1", "1–6"), ("2", "2, 4, 6"), ("3", "3, 6"), ("6", "6"), ("none (TNCSE)", "–")):
        name = "jtcse_full" if k == "2" else ("cael_none" if k.startswith("none") else f"cael_k{k}")
        one, overall, delta = across(name)
        out.append(
            f"| {k} | {layers} | {one} | {overall} | {delta} | {secs(key_for(name, seeds[0] if seeds else 1))} |"
        )
    out += [
        "",
        'Paper, Table IX (BERT-base, 12 layers, 7-STS avg; header "Number of CAEL"): '
        + ", ".join(f"{k}: {v:.2f}" for k, v in PAPER_CAEL.items())
        + ".",
        "",
        "### Token-level regularisers added to the JTCSE step (seed 1, k = 2)",
        "",
        "| row | ours: STS-B dev | Δ vs JTCSE full s1 | train s |",
        "| --- | --- | --- | --- |",
    ]
    full1 = scored.get("jtcse_full_s1", {}).get("dev_spearman")
    for label, key in (
        ("JTCSE full", "jtcse_full_s1"),
        ("+ SimReg (weight 2)", "reg_simreg"),
        ("+ dispersion (angular, weight 0.1)", "reg_dispersion"),
    ):
        delta = fmt(scored[key]["dev_spearman"] - full1) if key in scored and full1 is not None else "–"
        out.append(f"| {label} | {dev(key)} | {delta} | {secs(key)} |")
    out += [
        "",
        "### Training time per stage (this machine, seconds per run incl. model load and save)",
        "",
        "| stage | runs | threads | mean s | steps | eval s (STS-B dev) |",
        "| --- | --- | --- | --- | --- | --- |",
    ]
    stages = {
        "SimCSE warm-up": "warmup_s",
        "JTCSE twin (grid rows, short)": None,
        "JTCSE twin (long)": "jtcse_long_s",
        "SimCSE continued (short)": "simcse_short_s",
        "SimCSE continued (long)": "simcse_long_s",
        "distillation": "distilled_s",
        "distillation (long teacher)": "distilled_long_s",
    }
    for label, prefix in stages.items():
        sel = [
            v
            for k, v in scored.items()
            if ("train_seconds" in v)
            and (
                k.startswith(prefix)
                if prefix
                else v.get("group") in ("headline", "loss", "cael", "regulariser")
                and k.startswith(("jtcse", "loss", "cael", "reg"))
            )
        ]
        if sel:
            out.append(
                f"| {label} | {len(sel)} | {sorted({v['threads'] for v in sel})} | "
                f"{statistics.fmean(v['train_seconds'] for v in sel):.0f} | {sorted({v.get('steps') for v in sel})} | "
                f"{statistics.fmean(v['eval_seconds'] for v in sel):.0f} |"
            )
    diags = {v["row"]: v for v in rows.values() if v.get("group") == "diagnostics"}
    if diags:
        out += [
            "",
            "### Geometry (STS-B dev: alignment over pairs scored > 4, uniformity over dev sentences; "
            "CLS energy at the last layer, unseen wiki sentences)",
            "",
            "| row | alignment | uniformity | CLS energy, last layer (per encoder) |",
            "| --- | --- | --- | --- |",
        ]
        for row, d in diags.items():
            au = d["alignment_uniformity"]["model"]
            energy = ", ".join(f"{enc}: {curve[-1]:.3f}" for enc, curve in d["cls_energy"].items())
            out.append(f"| {row} | {au['alignment']:.3f} | {au['uniformity_pairs']:.3f} | {energy} |")
    return "\n".join(out) + "\n"


def build_report(work: Path, out: Path, cfg: dict) -> dict:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    out.mkdir(parents=True, exist_ok=True)
    rows = {p.stem: json.loads(p.read_text(encoding="utf-8")) for p in sorted((work / "results").glob("*.json"))}
    scored = {k: v for k, v in rows.items() if "dev_spearman" in v}

    def seeded(prefix: str) -> dict | None:
        vals = [v["dev_spearman"] for k, v in scored.items() if k.startswith(prefix + "_s")]
        if not vals:
            return None
        m, s = mean_std(vals)
        secs = [v["train_seconds"] for k, v in scored.items() if k.startswith(prefix + "_s") and "train_seconds" in v]
        return {
            "mean": m,
            "std": s,
            "n": len(vals),
            "values": vals,
            "train_seconds_mean": statistics.fmean(secs) if secs else None,
        }

    summary = {
        "settings": cfg,
        "rows": rows,
        "headline": {
            p: seeded(p)
            for p in (
                "warmup",
                "twin_untrained",
                "jtcse_full",
                "distilled",
                "simcse_short",
                "twin_simcse_short",
                "jtcse_long",
                "simcse_long",
                "twin_simcse_long",
                "distilled_long",
            )
        },
    }
    (out / "results.json").write_text(json.dumps(summary, indent=2, default=str), encoding="utf-8")
    (out / "tables.md").write_text(markdown_tables(rows, summary["headline"]), encoding="utf-8")

    with (out / "results.csv").open("w", newline="", encoding="utf-8") as fh:
        w = csv.writer(fh)
        w.writerow(
            [
                "row",
                "group",
                "seed",
                "cael_every",
                "nce_weight",
                "icnce_weight",
                "ictm_weight",
                "regularizers",
                "dev_spearman_x100",
                "train_seconds",
                "steps",
                "eval_seconds",
                "threads",
            ]
        )
        for k, v in scored.items():
            st = v.get("settings", {})
            w.writerow(
                [
                    k,
                    v.get("group"),
                    v.get("seed", ""),
                    st.get("cael_every", ""),
                    st.get("nce_weight", ""),
                    st.get("icnce_weight", ""),
                    st.get("ictm_weight", ""),
                    "+".join(st.get("regularizers", [])),
                    f"{100 * v['dev_spearman']:.2f}",
                    v.get("train_seconds", ""),
                    v.get("steps", ""),
                    v.get("eval_seconds", ""),
                    v.get("threads", ""),
                ]
            )

    # plot 1: every configuration, mean ± std over seeds with the seeds as dots; the shipped MiniLM as lines
    configs: dict[str, list[float]] = {}
    for k, v in scored.items():
        if v.get("group") == "baseline":
            continue
        base = re.sub(r"_s\d+$", "", k)
        configs.setdefault(base, []).append(100 * v["dev_spearman"])
    if configs:
        first = [
            "warmup",
            "twin_untrained",
            "simcse_short",
            "twin_simcse_short",
            "jtcse_full",
            "distilled",
            "simcse_long",
            "twin_simcse_long",
            "jtcse_long",
            "distilled_long",
        ]
        names = [n for n in first if n in configs] + sorted(n for n in configs if n not in first)
        fig, ax = plt.subplots(figsize=(7, 0.28 * len(names) + 1.5))
        means = [statistics.fmean(configs[n]) for n in names]
        stds = [statistics.stdev(configs[n]) if len(configs[n]) > 1 else 0.0 for n in names]
        ax.barh(range(len(names)), means, xerr=stds, color="tab:blue", alpha=0.5, capsize=2)
        for i, n in enumerate(names):
            ax.plot(configs[n], [i] * len(configs[n]), "k.", markersize=4)
        for key, style in (("minilm_cls", "r--"), ("minilm_mean", "g--")):
            if key in scored:
                x = 100 * scored[key]["dev_spearman"]
                ax.axvline(x, color=style[0], linestyle="--", linewidth=1, label=f"{key} {x:.2f}")
        lows = [min(v) for v in configs.values()]
        highs = [max(v) for v in configs.values()]
        ax.set_xlim(min(lows) - 0.4, max(highs) + 0.4)
        ax.set_yticks(range(len(names)), [f"{n} (n={len(configs[n])})" for n in names], fontsize=7)
        ax.invert_yaxis()
        ax.set_xlabel("STS-B dev Spearman x100 (bars: mean ± std over seeds; dots: seeds)")
        ax.set_title("CPU reproduction: every configuration")
        ax.legend(fontsize=7, loc="lower right", title="shipped MiniLM (off-axis if not shown)", title_fontsize=6)
        fig.tight_layout()
        fig.savefig(out / "sts_dev_rows.png", dpi=120)
        plt.close(fig)

    # plot 2: alignment / uniformity (model embeddings, STS-B dev positives / sentences)
    diags = {v["row"]: v for k, v in rows.items() if v.get("group") == "diagnostics"}
    if diags:
        fig, ax = plt.subplots(figsize=(5, 4))
        for row, d in diags.items():
            au = d["alignment_uniformity"]["model"]
            ax.scatter(au["uniformity_pairs"], au["alignment"])
            ax.annotate(row, (au["uniformity_pairs"], au["alignment"]), fontsize=7)
        ax.set_xlabel("uniformity (STS-B dev sentences)")
        ax.set_ylabel("alignment (dev pairs scored > 4)")
        ax.set_title("alignment vs uniformity (lower is better on both)")
        fig.tight_layout()
        fig.savefig(out / "alignment_uniformity.png", dpi=120)
        plt.close(fig)

        fig, ax = plt.subplots(figsize=(6, 4))
        for row, d in diags.items():
            for enc, curve in d["cls_energy"].items():
                ax.plot(range(len(curve)), curve, marker="o", label=f"{row}:{enc}" if len(d["cls_energy"]) > 1 else row)
        ax.set_xlabel("layer (0 = embeddings)")
        ax.set_ylabel("CLS energy ||h_cls|| / ||H_others||_F")
        ax.legend(fontsize=6)
        ax.set_title("CLS energy per layer")
        fig.tight_layout()
        fig.savefig(out / "cls_energy.png", dpi=120)
        plt.close(fig)
    return summary


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument(
        "--quick", action="store_true", help="tiny settings, a few rows: a smoke run of the whole driver"
    )
    parser.add_argument("--threads", type=int, default=int(os.environ.get("OMP_NUM_THREADS", 2)))
    parser.add_argument("--shard", default="0/1", help="i/n: run only every n-th twin row (from the i-th)")
    parser.add_argument(
        "--stages",
        default="baselines,warmups,untrained,twins,distill,diagnostics,controls,long,ablation_seeds,distill_long",
        help="comma-separated subset of the stages to run",
    )
    parser.add_argument("--report-only", action="store_true")
    parser.add_argument(
        "--data", type=Path, default=DATA, help="folder with wiki12k.txt and stsbenchmark/ (default ../shared/data)"
    )
    parser.add_argument(
        "--work", type=Path, default=None, help="checkpoints and row results (default runs/repro[_quick])"
    )
    parser.add_argument(
        "-o",
        "--output",
        dest="out",
        metavar="OUTPUT",
        type=Path,
        default=None,
        help="results and plots (default evaluation/repro, quick: runs/repro_quick/report)",
    )
    parser.add_argument("--out", dest="out", type=Path, help=argparse.SUPPRESS)  # the old spelling
    args = parser.parse_args()

    cfg = QUICK if args.quick else FULL
    work = args.work or Path("runs/repro_quick" if args.quick else "runs/repro")
    out = args.out or (work / "report" if args.quick else Path("evaluation/repro"))
    if not args.report_only:
        stages = set(args.stages.split(","))
        runner = Runner(work, cfg, args.threads, args.data)
        if "baselines" in stages:
            runner.baselines()
        if "warmups" in stages:
            runner.warmups()
        if "untrained" in stages:
            runner.untrained_twins()
        if stages & {"twins", "long", "ablation_seeds"}:
            base_names = {r["name"] for r in twin_rows(cfg["seeds"], args.quick)}
            i, n = (int(x) for x in args.shard.split("/"))
            rows = twin_rows(
                cfg["seeds"],
                args.quick,
                cfg["long_twin_steps"] if "long" in stages else 0,
                ablation_seeds="ablation_seeds" in stages,
            )
            wanted = {
                "twins": lambda r: r["name"] in base_names,
                "long": lambda r: r["group"] == "long",
                "ablation_seeds": lambda r: r["group"] in ("loss", "cael") and r["seed"] != cfg["seeds"][0],
            }
            rows = [r for r in rows if any(wanted[st](r) for st in stages if st in wanted)]
            for row in rows[i::n]:
                runner.twin(row)
        if "controls" in stages:
            runner.controls("short", cfg["twin"]["max_steps"])
            runner.controls("long", cfg["long_twin_steps"])
        if "distill" in stages:
            runner.distilled()
        if "distill_long" in stages:
            runner.distilled("jtcse_long", "distilled_long")
        if "diagnostics" in stages:
            runner.diagnostics()
    summary = build_report(work, out, cfg)
    report = Path("evaluation/REPRODUCTION.md")
    if not args.quick and args.out is None and report.exists():  # refresh the generated tables in the write-up
        refresh_tables(report, (out / "tables.md").read_text(encoding="utf-8"))
    print(json.dumps(summary["headline"], indent=2))


if __name__ == "__main__":
    main()
