"""Defaults that train: the measurements behind ``jtcse pipeline``'s default recipe (issue 25). CPU-sized, resumable.

Every choice is made on the **selection split** (1,500 pairs of STS-B *train*, a fixed random sample, seed 0,
the one :mod:`evaluation.drivers.repro_ucd` used, less the 3 of its pairs that STS-B dev repeats); STS-B dev is
scored for every model and never used to choose. The corpus is the whole of ``wiki12k.txt``. Two rows to beat:
the shipped MiniLM as shipped, and the same-budget control, plain unsupervised SimCSE of the shipped MiniLM keeping
its own modules (mean pooling + Normalize, sentence-transformers' ``MultipleNegativesRankingLoss`` on (s, s) pairs,
batch 32, length 32, lr 3e-5, one pass) -- which is exactly ``train_simcse`` keeping the model's pooling, i.e. the
recipe's own warm-up W_s.

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
               cosines (``jtcse.training.selection.concat_cosine``: exact for a concat of unit vectors), weights
               chosen on the selection split
``distill``    the chosen ensemble of each seed distilled into the shipped MiniLM (``similarity``), at each
               distillation length of ``distill_epochs`` on seed 1, the best for seeds 2, 3
``speed``      encode throughput of the final student against the shipped MiniLM (interleaved repeats)
``cls``        twins of two copies of the shipped MiniLM (no warm-up), CLS and mean, at the tuned lr
``cls_recipe`` the CLS recipe at the same settings: CLS warm-ups W1, W2 and their CLS twin

``--report-only`` rebuilds ``evaluation/default/results.json`` and the tables in ``evaluation/DEFAULTS.md``
(:mod:`evaluation.drivers.repro_default_report`). The runner is split by stage: settings
(:mod:`~evaluation.drivers.repro_default_settings`), scoring (:mod:`~evaluation.drivers.repro_default_scores`),
the stages up to the twins (:mod:`~evaluation.drivers.repro_default_twins`), and here the ensembles, the
distillation and the speed row.

Run from the repository root: ``python -m evaluation.drivers.repro_default --data ../shared/data``.
"""

from __future__ import annotations

import statistics
from pathlib import Path

from evaluation.drivers.cli import driver_parser, places, publish, run_stages
from evaluation.drivers.repro_default_report import build_report
from evaluation.drivers.repro_default_settings import (
    FULL,
    JTCSE_KINDS,
    QUICK,
    SHIPPED,
    SIMCSE_KINDS,
    SPLITS,
    STAGES,
)
from evaluation.drivers.repro_default_twins import TwinStages
from evaluation.drivers.speed import speed_record
from jtcse.training.selection import concat_cosine


class DefaultsRunner(TwinStages):
    """Every stage of the defaults driver: :class:`~evaluation.drivers.repro_default_twins.TwinStages` and the
    ensembles, distillation and speed stages, and the choices made on the way."""

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
        """Row fields of the concat ensemble of ``members`` from their cached cosines (:func:`concat_cosine`)."""
        return self.scores_from(
            {split: concat_cosine([self.cosines(m, split) for m in members], weights) for split in SPLITS}
        )

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
        """Sentences/s of the seed-1 final student and the shipped MiniLM (:func:`~evaluation.drivers.speed.speed_record`)."""
        if self.done("speed"):
            return
        kind = self.teacher_kind()
        student = self.work / f"ucd_{kind}_e{self.distill_epochs(kind):g}_s{self.cfg['seeds'][0]}"
        self.save("speed", speed_record(student, "student", self.speed_sentences(), self.cfg["eval_max_seq_length"]))


def main() -> None:
    args = driver_parser(__doc__, STAGES, threads=1).parse_args()
    cfg = QUICK if args.quick else FULL
    where = places(args, "default", "DEFAULTS.md")
    runner = DefaultsRunner(where.work, cfg, args.threads, args.data)
    if not args.report_only:
        run_stages(runner, args, STAGES, "default")
    runner.save_choices()
    results, tables = build_report(where.work, cfg)
    publish(where, results, tables)
    print(tables)


if __name__ == "__main__":
    main()
