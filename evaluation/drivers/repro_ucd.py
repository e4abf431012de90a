"""Beat the model you started from: warm-ups → twin (lr probe) → ensemble with the shipped MiniLM (JTCSE+UC)
→ distillation of that ensemble into a MiniLM that keeps its mean pooling (UCD). CPU-sized, resumable.

One command reproduces every number in ``evaluation/UCD.md`` (from the repository root)::

    OMP_NUM_THREADS=2 HF_HUB_OFFLINE=1 python -m evaluation.drivers.repro_ucd            # everything
    OMP_NUM_THREADS=2 HF_HUB_OFFLINE=1 python -m evaluation.drivers.repro_ucd --quick    # smoke run

Stages (``--stages``; each row is written to ``<work>/results/<row>.json`` as soon as it exists, and a rerun
skips finished rows and finished trainings, so an interrupted run resumes):

1. ``baselines``: the shipped MiniLM with its own mean pooling (the row to beat) and with CLS pooling;
2. ``warmups``: SimCSE warm-up towers W1, W2, W3 (CLS pooling, seeds 1-3), as in :mod:`evaluation.drivers.repro_cpu`;
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
``evaluation/ucd/results.json`` and the tables in ``evaluation/UCD.md`` from the row files
(:mod:`evaluation.drivers.repro_ucd_report`).
"""

from __future__ import annotations

from pathlib import Path

from evaluation.drivers.cli import driver_parser, places, publish, run_stages
from evaluation.drivers.grid import TrainingGrid, load_shipped, load_shipped_cls, pair_of
from evaluation.drivers.repro_ucd_report import SHIPPED, build_report
from evaluation.drivers.speed import speed_record
from evaluation.drivers.splits import selection_sample

STAGES = ("baselines", "warmups", "probe", "twins", "ensembles", "objectives", "ucd", "speed")

FULL = {
    "corpus_lines": 3000,
    "simcse": {"batch_size": 32, "max_seq_length": 32, "learning_rate": 3e-5, "max_steps": -1},
    "twin": {"batch_size": 16, "max_seq_length": 32, "max_steps": 100, "cael_every": 2},
    "twin_lrs": [1e-5, 3e-5, 1e-4],
    "distill": {"batch_size": 64, "max_seq_length": 32, "learning_rate": 2e-5, "epochs": 2},
    "objectives": ["similarity", "cosine", "mse-normalized", "mse"],
    "weight_grid": [0.5, 0.75, 1.0, 1.25, 1.5, 2.0],  # as measured: the pipeline's WEIGHT_GRID added 3.0 later
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


class UCDRunner(TrainingGrid):
    """:class:`~evaluation.drivers.grid.TrainingGrid` (inputs, row bookkeeping, warm-ups) plus the selection split
    and the twin / ensemble / distillation stages."""

    def __init__(self, work: Path, cfg: dict, threads: int, data: Path):
        super().__init__(work, cfg, threads, data)
        self.select = selection_sample(data, cfg["select_pairs"])

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

    # -- stages ------------------------------------------------------------------------------------
    def baselines(self) -> None:
        self.score(SHIPPED, load_shipped, group="baseline", pooling="mean (shipped)")
        self.score("minilm_cls", load_shipped_cls, group="baseline", pooling="cls")

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

        from jtcse.defaults import default_tower_path
        from jtcse.modeling.loading import load_model
        from jtcse.training.ensemble import save_ensemble
        from jtcse.training.selection import concat_cosine

        lr = self.tuned_lr()
        shipped = load_shipped()
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
                cos = concat_cosine([shipped_cos[split], twin_cos[split]], [1.0, w])
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
        if self.done("speed"):
            return
        student = self.work / f"ucd_{self.best_objective()}_s{self.cfg['seeds'][0]}"
        self.save("speed", speed_record(student, "ucd", self.speed_sentences(), self.cfg["eval_max_seq_length"]))


def main() -> None:
    args = driver_parser(__doc__, STAGES, threads=2).parse_args()
    cfg = QUICK if args.quick else FULL
    where = places(args, "ucd", "UCD.md")
    if not args.report_only:
        runner = UCDRunner(where.work, cfg, args.threads, args.data)
        run_stages(runner, args, STAGES, "ucd")
    results, tables = build_report(where.work, cfg)
    publish(where, results, tables)
    print(tables)


if __name__ == "__main__":
    main()
