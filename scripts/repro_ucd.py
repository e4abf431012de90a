"""Beat the model you started from: warm-ups → twin (lr probe) → ensemble with the shipped MiniLM (JTCSE+UC)
→ distillation of that ensemble into a MiniLM that keeps its mean pooling (UCD). CPU-sized, resumable.

One command reproduces every number in ``evaluation/UCD.md``::

    OMP_NUM_THREADS=2 PYTHONPATH=$PWD HF_HUB_OFFLINE=1 python scripts/repro_ucd.py            # everything
    OMP_NUM_THREADS=2 PYTHONPATH=$PWD HF_HUB_OFFLINE=1 python scripts/repro_ucd.py --quick    # smoke run

Stages (``--stages``; each row is written to ``<work>/results/<row>.json`` as soon as it exists, and a rerun
skips finished rows and finished trainings, so an interrupted run resumes):

1. ``baselines``: the shipped MiniLM with its own mean pooling (the row to beat) and with CLS pooling;
2. ``warmups``: SimCSE warm-up towers W1, W2, W3 (CLS pooling, seeds 1-3), as in ``scripts/repro_cpu.py``;
3. ``probe``: the twin of (W1, W2) at each learning rate of ``twin_lrs``; the lr with the best score on the
   **selection split** (a fixed random part of STS-B *train*, never dev) is the tuned lr;
4. ``twins``: the twins of seeds 2 and 3 ((W2, W3), (W3, W1)) at the tuned lr;
5. ``ensembles``: for each seed, the shipped MiniLM (mean pooling, as shipped) + the twin of that seed, concat;
   the twin's weight is chosen on the selection split from ``weight_grid`` (the MiniLM's is 1); the equal-weight
   ensemble is scored too;
6. ``objectives``: the seed-1 ensemble distilled into the shipped MiniLM (its own mean pooling and width) with
   every distillation objective, side by side; the objective with the best selection-split score is kept;
7. ``ucd``: that objective for seeds 2 and 3 (ensemble of seed s → student seed s);
8. ``speed``: encode throughput of a UCD student against the shipped MiniLM (interleaved repeats).

Every model is scored on STS-B dev (``sts-dev.csv``, all 1,500 pairs) and on the selection split. Choices are
made on the selection split only; dev is reported, never used to choose. ``--report-only`` rebuilds
``evaluation/ucd/results.json`` and the tables in ``evaluation/UCD.md`` from the row files.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
from pathlib import Path

from jtcse.training.grid import TrainingGrid, encode_rates, mean_std, pair_of, refresh_tables

DATA = Path(__file__).resolve().parents[2] / "shared" / "data"
"""Default ``--data``: the shared data folder beside the repository (``../shared/data``)."""

FULL = {
    "corpus_lines": 3000,
    "simcse": {"batch_size": 32, "max_seq_length": 32, "learning_rate": 3e-5, "max_steps": -1},
    "twin": {"batch_size": 16, "max_seq_length": 32, "max_steps": 100, "cael_every": 2},
    "twin_lrs": [1e-5, 3e-5, 1e-4],
    "distill": {"batch_size": 64, "max_seq_length": 32, "learning_rate": 2e-5, "epochs": 2},
    "objectives": ["similarity", "cosine", "mse-normalized", "mse"],
    "weight_grid": [0.5, 0.75, 1.0, 1.25, 1.5, 2.0],
    "eval_max_seq_length": 128,
    "dev_pairs": None,
    "select_pairs": 1500,
    "diag_sentences": 0,
    "seeds": [1, 2, 3],
    "speed_sentences": 2048,
}
QUICK = {
    "corpus_lines": 64,
    "simcse": {"batch_size": 8, "max_seq_length": 16, "learning_rate": 3e-5, "max_steps": 2},
    "twin": {"batch_size": 4, "max_seq_length": 16, "max_steps": 2, "cael_every": 2},
    "twin_lrs": [1e-5, 1e-4],
    "distill": {"batch_size": 8, "max_seq_length": 16, "learning_rate": 2e-5, "max_steps": 2},
    "objectives": ["cosine", "similarity"],
    "weight_grid": [0.5, 1.0],
    "eval_max_seq_length": 64,
    "dev_pairs": 40,
    "select_pairs": 40,
    "diag_sentences": 0,
    "seeds": [1, 2],
    "speed_sentences": 64,
}
SHIPPED = "minilm_mean"
"""The row to beat: the shipped MiniLM with its own mean pooling."""


def best_on_selection(rows: dict) -> object | None:
    """The key of ``rows`` (key -> row or ``None``) whose row scores best on the selection split; ``None``
    while any row is missing."""
    if not rows or any(row is None for row in rows.values()):
        return None
    return max(rows, key=lambda key: rows[key]["select_spearman"])


class UCDRunner(TrainingGrid):
    """:class:`~jtcse.training.grid.TrainingGrid` (inputs, row bookkeeping, warm-ups) plus the selection split
    and the twin / ensemble / distillation stages."""

    def __init__(self, work: Path, cfg: dict, threads: int, data: Path):
        super().__init__(work, cfg, threads, data)
        import numpy as np

        from jtcse.evaluation.sts import STSPairs, read_stsb_file

        train = read_stsb_file(data / "stsbenchmark" / "sts-train.csv")
        keep = np.sort(
            np.random.default_rng(0).choice(len(train), size=min(cfg["select_pairs"], len(train)), replace=False)
        )
        self.select = STSPairs(
            [train.sentences1[i] for i in keep], [train.sentences2[i] for i in keep], train.scores[keep]
        )

    # -- scores ------------------------------------------------------------------------------------
    def pair_cosines(self, model, pairs):
        """cos(f(s1), f(s2)) of every pair (``model`` at the evaluation length)."""
        from jtcse.evaluation.sts import encode_unique, paired_cosine

        model.max_seq_length = self.cfg["eval_max_seq_length"]
        return paired_cosine(encode_unique(model, pairs.sentences1 + pairs.sentences2, 64), pairs)

    def score(self, name: str, load, **record) -> dict:
        """Dev and selection-split Spearman of a saved model (row ``name``; the row file is updated in place)."""
        row = self.row(name) or {}
        if "select_spearman" in row and "dev_spearman" in row:
            return row
        model = load()
        out = {}
        for split, pairs in (("dev", self.dev), ("select", self.select)):
            if f"{split}_spearman" not in row:
                out[f"{split}_spearman"], out[f"{split}_eval_seconds"] = self.dev_spearman(model, pairs)
        row = {k: v for k, v in row.items() if k not in ("name", "threads")}
        return self.save(name, {**row, **record, **out})

    def trained_and_scored(self, name: str, run, load, **record) -> dict:
        """Train row ``name`` once (:meth:`TrainingGrid.trained`, dev score included), then add its selection score."""
        self.trained(name, run, load, **record)
        return self.score(name, load)

    def row(self, name: str) -> dict | None:
        path = self.result_path(name)
        return json.loads(path.read_text(encoding="utf-8")) if path.exists() else None

    # -- stages ------------------------------------------------------------------------------------
    def baselines(self) -> None:
        from sentence_transformers import SentenceTransformer

        from jtcse.defaults import default_tower_path
        from jtcse.modeling.loading import load_model

        self.score(
            SHIPPED,
            lambda: SentenceTransformer(default_tower_path(), device="cpu"),
            group="baseline",
            pooling="mean (shipped)",
        )
        self.score("minilm_cls", lambda: load_model(None, pooling="cls", device="cpu"), group="baseline", pooling="cls")

    def warmups(self) -> None:
        from sentence_transformers import SentenceTransformer

        super().warmups()
        for seed in self.cfg["seeds"]:
            self.score(f"warmup_s{seed}", lambda: SentenceTransformer(str(self.tower_dir(seed)), device="cpu"))

    def twin_name(self, lr: float, seed: int) -> str:
        return f"twin_lr{lr:g}_s{seed}"

    def twin(self, lr: float, seed: int) -> dict:
        from jtcse.modeling.loading import load_model
        from jtcse.training.twin import train_twin

        a, b = pair_of(seed, self.cfg["seeds"])
        name = self.twin_name(lr, seed)
        out = self.work / name
        return self.trained_and_scored(
            name,
            lambda: train_twin(
                str(self.tower_dir(a)),
                str(self.tower_dir(b)),
                self.corpus,
                out,
                seed=seed,
                learning_rate=lr,
                logging_steps=10,
                show_progress=False,
                device="cpu",
                **self.cfg["twin"],
            ),
            lambda: load_model(out, device="cpu"),
            group="twin",
            seed=seed,
            learning_rate=lr,
            towers=[f"W{a}", f"W{b}"],
        )

    def probe(self) -> None:
        for lr in self.cfg["twin_lrs"]:
            self.twin(lr, self.cfg["seeds"][0])

    def chosen(self, names: dict, stage: str):
        """:func:`best_on_selection` over the rows ``names`` (key -> row name); a missing row stops the driver."""
        rows = {key: self.row(name) for key, name in names.items()}
        best = best_on_selection(rows)
        if best is None:
            missing = [names[key] for key, row in rows.items() if row is None]
            raise SystemExit(f"run the {stage} stage first (missing rows {missing})")
        return best

    def tuned_lr(self) -> float:
        """The probed lr whose seed-1 twin scores best on the selection split."""
        return self.chosen({lr: self.twin_name(lr, self.cfg["seeds"][0]) for lr in self.cfg["twin_lrs"]}, "probe")

    def twins(self) -> None:
        lr = self.tuned_lr()
        for seed in self.cfg["seeds"]:
            self.twin(lr, seed)

    def ensembles(self) -> None:
        """MiniLM (as shipped) + twin of seed s; the twin's weight is picked on the selection split."""
        from scipy.stats import spearmanr
        from sentence_transformers import SentenceTransformer

        from jtcse.defaults import default_tower_path
        from jtcse.modeling.loading import load_model
        from jtcse.training.ensemble import save_ensemble

        lr = self.tuned_lr()
        shipped = SentenceTransformer(default_tower_path(), device="cpu")
        shipped_cos = {
            split: self.pair_cosines(shipped, pairs) for split, pairs in (("dev", self.dev), ("select", self.select))
        }
        for seed in self.cfg["seeds"]:
            name = f"ensemble_s{seed}"
            twin_dir = self.work / self.twin_name(lr, seed)
            if self.done(name):
                continue
            twin = load_model(twin_dir, device="cpu")
            twin_cos = {
                split: self.pair_cosines(twin, pairs) for split, pairs in (("dev", self.dev), ("select", self.select))
            }

            def combined(split: str, w: float) -> float:
                # concat of unit vectors weighted (1, w): cos = (cos_minilm + w² cos_twin) / (1 + w²)
                cos = (shipped_cos[split] + w * w * twin_cos[split]) / (1 + w * w)
                return float(spearmanr(cos, (self.dev if split == "dev" else self.select).scores).statistic)

            grid = {w: {"select": combined("select", w), "dev": combined("dev", w)} for w in self.cfg["weight_grid"]}
            best = max(grid, key=lambda w: grid[w]["select"])
            out = self.work / name
            save_ensemble([default_tower_path(), str(twin_dir)], out, weights=[1.0, best], overwrite=True, device="cpu")
            equal = grid.get(1.0) or {"select": combined("select", 1.0), "dev": combined("dev", 1.0)}
            self.save(
                f"ensemble_eq_s{seed}",
                {
                    "group": "ensemble_equal",
                    "seed": seed,
                    "weights": [1.0, 1.0],
                    "dev_spearman": equal["dev"],
                    "select_spearman": equal["select"],
                    "note": "computed from the members' cosines (exact for concat)",
                },
            )
            self.score(
                name,
                lambda: load_model(out, device="cpu"),
                group="ensemble",
                seed=seed,
                weights=[1.0, best],
                twin=self.twin_name(lr, seed),
                weight_grid={str(w): v for w, v in grid.items()},
                predicted_dev_spearman=grid[best]["dev"],
            )

    def distilled(self, objective: str, seed: int) -> dict:
        from sentence_transformers import SentenceTransformer

        from jtcse.training.distill import distill

        name = f"ucd_{objective}_s{seed}"
        out = self.work / name
        teacher = self.work / f"ensemble_s{seed}"
        if not teacher.is_dir():
            raise SystemExit(f"run the ensembles stage first ({teacher} is missing)")
        return self.trained_and_scored(
            name,
            lambda: distill(
                str(teacher),
                None,
                self.corpus,
                out,
                objective=objective,
                seed=seed,
                logging_steps=10,
                **self.cfg["distill"],
            ),
            lambda: SentenceTransformer(str(out), device="cpu"),
            group="ucd",
            seed=seed,
            objective=objective,
            teacher=teacher.name,
            student="shipped MiniLM (mean pooling)",
        )

    def objectives(self) -> None:
        for objective in self.cfg["objectives"]:
            self.distilled(objective, self.cfg["seeds"][0])

    def best_objective(self) -> str:
        """The distillation objective whose seed-1 student scores best on the selection split."""
        return self.chosen({o: f"ucd_{o}_s{self.cfg['seeds'][0]}" for o in self.cfg["objectives"]}, "objectives")

    def ucd(self) -> None:
        objective = self.best_objective()
        for seed in self.cfg["seeds"]:
            self.distilled(objective, seed)

    def speed(self) -> None:
        """Sentences/s of the seed-1 UCD student and the shipped MiniLM, 3 interleaved repeats each."""
        from sentence_transformers import SentenceTransformer

        from jtcse.defaults import default_tower_path

        if self.done("speed"):
            return
        student = self.work / f"ucd_{self.best_objective()}_s{self.cfg['seeds'][0]}"
        lines = (self.work / "corpus.txt").read_text(encoding="utf-8").splitlines()
        sentences = (self.dev.sentences1 + self.dev.sentences2 + lines)[: self.cfg["speed_sentences"]]
        models = {
            "shipped": SentenceTransformer(default_tower_path(), device="cpu"),
            "ucd": SentenceTransformer(str(student), device="cpu"),
        }
        rate = encode_rates(models, sentences, self.cfg["eval_max_seq_length"])
        self.save(
            "speed",
            {
                "group": "speed",
                "sentences": len(sentences),
                "student": student.name,
                "sentences_per_s": rate,
                "ratio_ucd_to_shipped": rate["ucd"] / rate["shipped"],
                "modules": {k: [type(m).__name__ for m in model] for k, model in models.items()},
            },
        )


# -- report ------------------------------------------------------------------------------------------
def _x(v: float | None) -> str:
    return "–" if v is None else f"{100 * v:.2f}"


def _ms(values: list[float]) -> str:
    if not values:
        return "not run"
    m, sd = mean_std(values)
    return f"{100 * m:.2f}" + (f" ± {100 * sd:.2f}" if sd is not None else "") + f" (n={len(values)})"


def build_report(work: Path, cfg: dict) -> tuple[dict, str]:
    """``(results, markdown tables)`` from the row files."""
    rows = {p.stem: json.loads(p.read_text(encoding="utf-8")) for p in sorted((work / "results").glob("*.json"))}
    seeds = cfg["seeds"]
    get = lambda name, key="dev_spearman": rows.get(name, {}).get(key)  # noqa: E731
    lr_rows = {lr: rows.get(f"twin_lr{lr:g}_s{seeds[0]}") for lr in cfg["twin_lrs"]}
    tuned = best_on_selection(lr_rows)
    obj_rows = {o: rows.get(f"ucd_{o}_s{seeds[0]}") for o in cfg["objectives"]}
    best_obj = best_on_selection(obj_rows)

    def seeded(prefix: str, key: str = "dev_spearman") -> list[float]:
        return [rows[f"{prefix}_s{s}"][key] for s in seeds if f"{prefix}_s{s}" in rows]

    twin_prefix = f"twin_lr{tuned:g}" if tuned else None
    ucd_prefix = f"ucd_{best_obj}" if best_obj else None
    shipped = get(SHIPPED)
    out = [
        f"### Every stage (STS-B dev Spearman ×100; selection split = {cfg['select_pairs']:,} STS-B *train* pairs, "
        "used for every choice)",
        "",
        "| model | pooling | seeds | dev: mean ± std | dev per seed | selection split: mean |",
        "| --- | --- | --- | --- | --- | --- |",
    ]

    def line(label: str, pooling: str, prefix: str | None, single: str | None = None) -> None:
        if single is not None:
            out.append(f"| {label} | {pooling} | – | {_x(get(single))} | | {_x(get(single, 'select_spearman'))} |")
            return
        vals = seeded(prefix) if prefix else []
        sel = seeded(prefix, "select_spearman") if prefix else []
        per = ", ".join(f"{100 * v:.2f}" for v in vals)
        out.append(
            f"| {label} | {pooling} | {len(vals)} | {_ms(vals)} | {per} | "
            f"{f'{100 * statistics.fmean(sel):.2f}' if sel else '–'} |"
        )

    line("**shipped MiniLM (the row to beat)**", "mean (its own)", None, SHIPPED)
    line("shipped MiniLM", "CLS", None, "minilm_cls")
    line("SimCSE warm-up tower W_s", "CLS", "warmup")
    line(f"JTCSE twin of (W_s, W_s+1), lr {tuned:g}" if tuned else "JTCSE twin (tuned lr)", "sum of 2 CLS", twin_prefix)
    line("ensemble: shipped MiniLM + twin, equal weights", "concat", "ensemble_eq")
    line("ensemble: shipped MiniLM + twin, twin weight from the selection split (JTCSE+UC)", "concat", "ensemble")
    line(
        f"UCD: ensemble distilled into the shipped MiniLM ({best_obj})" if best_obj else "UCD student",
        "mean (its own)",
        ucd_prefix,
    )

    out += [
        "",
        f"### Twin learning-rate probe (towers W{seeds[0]}, W{seeds[1 % len(seeds)]}; "
        f"{cfg['twin']['max_steps']} steps, batch {cfg['twin']['batch_size']}; chosen on the selection split)",
        "",
        "| lr | selection split | dev | first → last logged loss | train s |",
        "| --- | --- | --- | --- | --- |",
    ]
    for lr, r in lr_rows.items():
        if not r:
            out.append(f"| {lr:g} | not run | | | |")
            continue
        mark = " **(chosen)**" if lr == tuned else ""
        out.append(
            f"| {lr:g}{mark} | {_x(r['select_spearman'])} | {_x(r['dev_spearman'])} | "
            f"{r.get('first_loss', 0):.4f} → {r.get('last_loss', 0):.4f} | {r.get('train_seconds', 0):.0f} |"
        )

    out += [
        "",
        "### Twin vs the better of its two warm-up towers (paired by seed)",
        "",
        "| seed | towers | better warm-up | twin | Δ |",
        "| --- | --- | --- | --- | --- |",
    ]
    deltas = []
    for i, s in enumerate(seeds):
        a, b = s, seeds[(i + 1) % len(seeds)]
        twin = get(f"{twin_prefix}_s{s}") if twin_prefix else None
        wa, wb = get(f"warmup_s{a}"), get(f"warmup_s{b}")
        if twin is None or wa is None or wb is None:
            continue
        deltas.append(twin - max(wa, wb))
        out.append(f"| {s} | W{a}, W{b} | {_x(max(wa, wb))} | {_x(twin)} | {100 * (twin - max(wa, wb)):+.2f} |")
    warm = seeded("warmup")
    if deltas and len(warm) > 1:
        m, sd = mean_std(deltas)
        out.append(
            f"\nTwin − better warm-up: {100 * m:+.2f}"
            + (f" ± {100 * sd:.2f}" if sd is not None else "")
            + f"; warm-up seed spread (std of W_s): {100 * statistics.stdev(warm):.2f}."
        )

    out += [
        "",
        "### Ensemble weights (twin weight; the shipped MiniLM's is 1; dev shown, not used to choose)",
        "",
        "| seed | " + " | ".join(f"w={w:g} select / dev" for w in cfg["weight_grid"]) + " | chosen |",
        "| --- | " + " | ".join("---" for _ in cfg["weight_grid"]) + " | --- |",
    ]
    for s in seeds:
        r = rows.get(f"ensemble_s{s}")
        if not r:
            continue
        cells = [
            f"{_x(r['weight_grid'][str(w)]['select'])} / {_x(r['weight_grid'][str(w)]['dev'])}"
            for w in cfg["weight_grid"]
        ]
        out.append(f"| {s} | " + " | ".join(cells) + f" | {r['weights'][1]:g} |")

    out += [
        "",
        f"### Distillation objectives (teacher: ensemble of seed {seeds[0]}; student: the shipped MiniLM, "
        "mean pooling, width 384; chosen on the selection split)",
        "",
        "| objective | selection split | dev | Δ dev vs shipped | train s |",
        "| --- | --- | --- | --- | --- |",
    ]
    for o, r in obj_rows.items():
        if not r:
            out.append(f"| {o} | not run | | | |")
            continue
        mark = " **(kept)**" if o == best_obj else ""
        delta = f"{100 * (r['dev_spearman'] - shipped):+.2f}" if shipped is not None else "–"
        out.append(
            f"| `{o}`{mark} | {_x(r['select_spearman'])} | {_x(r['dev_spearman'])} | {delta} | "
            f"{r.get('train_seconds', 0):.0f} |"
        )
    speed = rows.get("speed")
    if speed:
        rate = speed["sentences_per_s"]
        out += [
            "",
            f"Encode speed ({speed['sentences']} sentences, best of 3 interleaved repeats): shipped MiniLM "
            f"{rate['shipped']:.0f} sentences/s, UCD student {rate['ucd']:.0f} sentences/s "
            f"(ratio {speed['ratio_ucd_to_shipped']:.2f}; modules {', '.join(speed['modules']['ucd'])}).",
        ]
    results = {
        "settings": cfg,
        "tuned_twin_lr": tuned,
        "kept_objective": best_obj,
        "rows": rows,
        "final": {
            "shipped_minilm": shipped,
            "warmup": seeded("warmup"),
            "twin": seeded(twin_prefix) if twin_prefix else [],
            "ensemble": seeded("ensemble"),
            "ensemble_equal_weights": seeded("ensemble_eq"),
            "ucd": seeded(ucd_prefix) if ucd_prefix else [],
        },
    }
    return results, "\n".join(out) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="tiny settings: a smoke run of the whole driver")
    parser.add_argument("--threads", type=int, default=int(os.environ.get("OMP_NUM_THREADS", 2)))
    parser.add_argument(
        "--stages",
        default="baselines,warmups,probe,twins,ensembles,objectives,ucd,speed",
        help="comma-separated subset of the stages to run (in this order)",
    )
    parser.add_argument("--report-only", action="store_true")
    parser.add_argument(
        "--data", type=Path, default=DATA, help="folder with wiki12k.txt and stsbenchmark/ (default ../shared/data)"
    )
    parser.add_argument(
        "--work", type=Path, default=None, help="checkpoints and row results (default runs/ucd[_quick])"
    )
    parser.add_argument(
        "-o",
        "--output",
        dest="out",
        metavar="OUTPUT",
        type=Path,
        default=None,
        help="results folder (default evaluation/ucd; quick: <work>/report)",
    )
    parser.add_argument("--out", dest="out", type=Path, help=argparse.SUPPRESS)  # the old spelling
    args = parser.parse_args()

    cfg = QUICK if args.quick else FULL
    work = args.work or Path("runs/ucd_quick" if args.quick else "runs/ucd")
    out = args.out or (work / "report" if args.quick else Path("evaluation/ucd"))
    if not args.report_only:
        runner = UCDRunner(work, cfg, args.threads, args.data)
        stages = args.stages.split(",")
        for stage in ("baselines", "warmups", "probe", "twins", "ensembles", "objectives", "ucd", "speed"):
            if stage in stages:
                print(f"[ucd] stage {stage}", flush=True)
                getattr(runner, stage)()
    (work / "results").mkdir(parents=True, exist_ok=True)
    results, tables = build_report(work, cfg)
    out.mkdir(parents=True, exist_ok=True)
    (out / "results.json").write_text(json.dumps(results, indent=2, default=str), encoding="utf-8")
    (out / "tables.md").write_text(tables, encoding="utf-8")
    report = Path("evaluation/UCD.md")
    if not args.quick and args.out is None and report.exists():  # refresh the generated tables in the write-up
        refresh_tables(report, tables)
    print(tables)


if __name__ == "__main__":
    main()
