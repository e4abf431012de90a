"""Small-scale CPU reproduction of the JTCSE recipe from the embedded MiniLM, with ablations.

One command reproduces every number in ``evaluation/REPRODUCTION.md`` (from the repository root)::

    OMP_NUM_THREADS=2 HF_HUB_OFFLINE=1 python -m evaluation.drivers.repro_cpu            # full grid
    OMP_NUM_THREADS=2 HF_HUB_OFFLINE=1 python -m evaluation.drivers.repro_cpu --quick    # smoke run

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
needed by all shards and are skipped when done); ``--report-only`` rebuilds ``results.json``, ``results.csv``,
``tables.md`` and the plots from the row files (:mod:`evaluation.drivers.repro_cpu_report`).
Checkpoints live under ``runs/`` (git-ignored). Each training row calls its trainer, which reuses a finished
model and resumes an interrupted one from its checkpoints (:mod:`evaluation.drivers.grid`). ``--data`` is the
folder with ``wiki12k.txt`` and ``stsbenchmark/`` (default ``../shared/data`` beside the repository).
"""

from __future__ import annotations

import json
import time

from evaluation.drivers.cli import chosen_stages, driver_parser, places, publish
from evaluation.drivers.grid import TrainingGrid, pair_of
from evaluation.drivers.repro_cpu_report import build_report, write_figures

STAGES = (
    "baselines",
    "warmups",
    "untrained",
    "twins",
    "distill",
    "diagnostics",
    "controls",
    "long",
    "ablation_seeds",
    "distill_long",
)
"""The stages (``--stages``); the runner runs them in the order of :func:`main`."""

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
    """The CPU reproduction's grid: :class:`~evaluation.drivers.grid.TrainingGrid` (inputs, row bookkeeping,
    warm-ups) plus the baseline, twin, distillation, control and diagnostics stages."""

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
                cael_every=row["cael_every"] or 0,  # 0: no cross-attention (TNCSE)
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


def main() -> None:
    parser = driver_parser(__doc__, STAGES, threads=2)
    parser.add_argument("--shard", default="0/1", help="i/n: run only every n-th twin row (from the i-th)")
    args = parser.parse_args()

    cfg = QUICK if args.quick else FULL
    where = places(args, "repro", "REPRODUCTION.md")
    if not args.report_only:
        stages = set(chosen_stages(args, STAGES))
        runner = Runner(where.work, cfg, args.threads, args.data)
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
    results, tables = build_report(where.work, cfg)
    publish(where, results, tables)
    write_figures(where.out, results["rows"])
    print(json.dumps(results["headline"], indent=2))


if __name__ == "__main__":
    main()
