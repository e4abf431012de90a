"""Members that differ (issue 31): which sources of difference between the two warm-ups make the default ensemble
gain over its members, measured as the pipeline runs them. CPU-sized, resumable.

Every choice is made on the **selection split** (the 1,497 STS-B *train* pairs of ``evaluation/DEFAULTS.md``);
STS-B dev is scored for every model and never used to choose. The corpus is the whole of ``wiki12k.txt``; every
warm-up is ``train_simcse`` of the shipped MiniLM with the pipeline's settings, so ``jtcse pipeline`` finds these
folders done. An ensemble kind is the pipeline's: the shipped MiniLM (weight 1) + warm-up I (seed s) + warm-up II
(seed s + 1), the two differing as the kind says (:data:`~evaluation.drivers.members_settings.KINDS`); their weight
is chosen on the selection split, exactly from the members' cached cosines.

Stages (``--stages``, in this order; rows in ``<work>/results/``, cosines in ``<work>/cos/``, selection-split
embeddings in ``<work>/emb/``):

``shipped``    the shipped MiniLM as shipped (the row to beat)
``warmups``    every warm-up the kinds need, each variant at the seeds it is used with
``ensembles``  every kind for every seed at the kind's one weight (the best on the selection split among those
               that keep each of its genres within 0.3 of the start's in every seed), the gain over its best
               member, and how differently its two warm-ups err (rank-error agreement, linear CKA;
               jtcse.evaluation.diversity)
``twin``       the twin of the ``twin_kind`` warm-ups with a real signal (128 sentences a step through
               CachedJTCSELoss, each batch a group of neighbours: hard negatives), scored summed and as two
               separate towers, each in an ensemble with the start; a shorter one that fits the wall-time bar; and
               the same twin untrained (its warm-ups summed), the control for what twin training adds
``pipeline``   ``jtcse pipeline`` (the library call) for each seed with the new default
               (:meth:`MembersRunner.default_choice`), and for one seed with today's, reusing the warm-ups above;
               the distilled students scored like every other row

``--report-only`` rebuilds ``evaluation/members/`` and the members tables of ``evaluation/DEFAULTS.md``
(:mod:`evaluation.drivers.members_report`). Run from the repository root:
``python -m evaluation.drivers.members --data ../shared/data --threads 2``.
"""

from __future__ import annotations

import statistics
from pathlib import Path

from evaluation.drivers.cli import driver_parser, places, publish, run_stages
from evaluation.drivers.grid import load_shipped, read_rows
from evaluation.drivers.members_report import build_report, training_seconds, worst_genre
from evaluation.drivers.members_settings import (
    FULL,
    KINDS,
    PIPELINE_KEYS,
    QUICK,
    SHIPPED,
    STAGES,
    VARIANTS,
    trained_twin,
)
from evaluation.drivers.repro_default_scores import ScoredGrid
from jtcse.training.selection import concat_cosine

TWIN_MEASURED = {"batch_size": 16, "max_steps": 100, "mini_batch_size": 0, "hard_negatives": False}
"""The twin's defaults when this driver measured (before issue 37 made the GradCache twin the default)."""


class MembersRunner(ScoredGrid):
    """The members driver's stages on :class:`~evaluation.drivers.repro_default_scores.ScoredGrid` (rows scored on
    dev and the selection split, per genre, from cached cosines), plus selection-split embeddings for CKA."""

    def __init__(self, work: Path, cfg: dict, threads: int, data: Path):
        super().__init__(work, cfg, threads, data)
        self.data = data
        (work / "emb").mkdir(parents=True, exist_ok=True)

    # -- the two diversity measures --------------------------------------------------------------------
    def embeddings(self, name: str, load=None):
        """The selection split's sentences (sorted) embedded by row ``name``'s model, cached (``load`` it once)."""
        import numpy as np

        path = self.work / "emb" / f"{name}.npy"
        if not path.exists():
            model = load()
            model.max_seq_length = self.cfg["eval_max_seq_length"]
            sentences = sorted(set(self.select.sentences1 + self.select.sentences2))
            np.save(path, model.encode(sentences, batch_size=64, convert_to_numpy=True))
        return np.load(path)

    def diversity(self, a: str, b: str) -> dict:
        """How differently rows ``a`` and ``b`` err on the selection split and how alike they embed it."""
        import numpy as np

        from jtcse.evaluation.diversity import error_agreement, linear_cka

        gold = np.asarray(self.select.scores)
        return {
            "error_agreement": error_agreement(self.cosines(a, "select"), self.cosines(b, "select"), gold),
            "cka": linear_cka(self.embeddings(a), self.embeddings(b)),
        }

    def scored(self, name: str, load, **record) -> dict:
        row = self.score(name, load, **record)
        self.embeddings(name, load)
        return row

    # -- stages --------------------------------------------------------------------------------------
    def shipped(self) -> None:
        self.scored(SHIPPED, load_shipped, group="baseline")

    def needed(self) -> list[tuple[str, int]]:
        """``(variant, seed)`` of every warm-up a kind needs: warm-up I at seed s, warm-up II at seed s + 1."""
        seeds = self.cfg["seeds"]
        need = {(a, s) for a, _ in KINDS.values() for s in seeds} | {
            (b, s + 1) for _, b in KINDS.values() for s in seeds
        }
        return sorted(need, key=lambda vs: (vs[1], list(VARIANTS).index(vs[0])))

    def warmup(self, variant: str, seed: int) -> str:
        from jtcse.modeling.loading import load_model
        from jtcse.training.simcse import train_simcse

        name, out = f"{variant}_s{seed}", self.work / f"{variant}_s{seed}"
        if not self.done(name) or not (self.work / "emb" / f"{name}.npy").exists():
            self.trained(name, lambda: train_simcse(None, self.corpus, out, seed=seed, **self.cfg["simcse"],
                                                    **VARIANTS[variant]),
                         lambda: load_model(out, device="cpu"), group="warmup", variant=variant, seed=seed)  # fmt: skip
            self.embeddings(name, lambda: load_model(out, device="cpu"))
        return name

    def warmups(self) -> None:
        for variant, seed in self.needed():
            self.warmup(variant, seed)

    def members_of(self, kind: str, seed: int) -> list[str]:
        """An ensemble's rows: the start, then warm-up I (seed s) and II (seed s + 1) of a kind, the twin of
        ``twin:KIND`` (``short:KIND``: the shorter one), its two towers for ``towers:KIND`` or the twin of the
        same warm-ups before any twin training for ``untrained:KIND`` (the warm-ups' mean-pooled vectors
        summed)."""
        how, _, kind = kind.rpartition(":")
        if how in ("twin", "short", "untrained"):
            return [SHIPPED, f"{how}_{kind}_s{seed}"]
        if how == "towers":
            return [SHIPPED, f"twin_{kind}_s{seed}_t1", f"twin_{kind}_s{seed}_t2"]
        a, b = KINDS[kind]
        return [SHIPPED, f"{a}_s{seed}", f"{b}_s{seed + 1}"]

    def grid_of(self, members: list[str]) -> dict:
        """The concat ensemble of ``members`` (the first, the start, at weight 1; the others at one weight ``w``)
        for each ``w`` of the weight grid: weight -> scores, exactly from the members' cached cosines."""
        grid = {}
        for w in self.cfg["weight_grid"]:
            weights = [1.0] + [w] * (len(members) - 1)
            cos = {
                split: concat_cosine([self.cosines(m, split) for m in members], weights) for split in ("dev", "select")
            }
            grid[w] = self.scores_from(cos)
        return grid

    def kind_weight(self, grids: list[dict]) -> float:
        """The one weight a kind ships with (the pipeline has one default for every seed), from each seed's
        :meth:`grid_of`: the weight best on the selection split (mean over the seeds) among those with which
        **every** seed keeps each selection genre within ``genre_margin`` of the start's; without one, the weight
        whose worst genre loses least."""
        safe = [w for w in grids[0] if all(self.within_margin(g[w]) for g in grids)]
        if safe:
            return max(safe, key=lambda w: statistics.fmean(g[w]["select_spearman"] for g in grids))
        shipped = self.row(SHIPPED)
        return max(grids[0], key=lambda w: min(worst_genre(g[w], shipped) for g in grids))

    def ensembles_of(self, choice: str) -> None:
        """The rows ``ens_..._s{seed}`` of ``choice`` (a kind, ``twin:KIND``, ``short:KIND``, ``towers:KIND`` or
        ``untrained:KIND``) for every seed, at the choice's one weight; the diversity is that of the two towers
        for ``towers:KIND``, else of the two warm-ups the members come from."""
        how, _, kind = choice.rpartition(":")
        seeds_members = [self.members_of(choice, seed) for seed in self.cfg["seeds"]]
        if any(self.row(m) is None for members in seeds_members for m in members):
            return
        grids = [self.grid_of(members) for members in seeds_members]
        weight = self.kind_weight(grids)
        for seed, members, grid in zip(self.cfg["seeds"], seeds_members, grids, strict=True):
            pair = members[1:] if how in ("", "towers") else self.members_of(kind, seed)[1:]
            self.ensemble(self.ensemble_pattern(choice).format(seed=seed), members, tuple(pair), grid, weight,
                          kind=choice, seed=seed)  # fmt: skip

    def ensemble(self, name: str, members: list[str], pair: tuple[str, str], grid: dict, weight: float,
                 **record) -> dict:  # fmt: skip
        """Row ``name``: the concat ensemble of ``members`` (the start at weight 1, the others at ``weight``; every
        weight's scores in ``grid``), its gain over its best member, the ``pair``'s diversity, and the weight best
        for this seed alone."""
        if self.done(name):
            return self.row(name)
        unconstrained = max(grid, key=lambda w: grid[w]["select_spearman"])
        rows = [self.row(m) for m in members]
        return self.save(name, {
            "group": "ensemble", "members": members, "weights": [1.0] + [weight] * (len(members) - 1),
            **grid[weight], "genre_safe": self.within_margin(grid[weight]), "unconstrained_weight": unconstrained,
            "unconstrained_select": grid[unconstrained]["select_spearman"],
            "unconstrained_dev": grid[unconstrained]["dev_spearman"],
            "best_member_select": max(r["select_spearman"] for r in rows),
            "best_member_dev": max(r["dev_spearman"] for r in rows),
            "gain_select": grid[weight]["select_spearman"] - max(r["select_spearman"] for r in rows),
            "gain_dev": grid[weight]["dev_spearman"] - max(r["dev_spearman"] for r in rows),
            "pair": list(pair), **self.diversity(*pair),
            "grid": [{"weight": w, "select": v["select_spearman"], "dev": v["dev_spearman"],
                      "worst_genre": worst_genre(v, self.row(SHIPPED))} for w, v in grid.items()],
            **record,
        })  # fmt: skip

    def within_margin(self, scores: dict) -> bool:
        """Whether every selection genre of ``scores`` is within ``genre_margin`` of the shipped MiniLM's."""
        return worst_genre(scores, self.row(SHIPPED)) >= -self.cfg["genre_margin"]

    def ensembles(self) -> None:
        for kind in KINDS:
            self.ensembles_of(kind)

    def mean_row(self, pattern: str) -> dict | None:
        """A kind's rows over the seeds: the mean selection score, its seed spread (std) and each selection genre's
        worst seed."""
        rows = [self.row(pattern.format(seed=s)) for s in self.cfg["seeds"]]
        if any(r is None for r in rows):
            return None
        return {
            "select_spearman": statistics.fmean(r["select_spearman"] for r in rows),
            "select_std": statistics.stdev(r["select_spearman"] for r in rows) if len(rows) > 1 else 0.0,
            "select_genres": {g: min(r["select_genres"][g] for r in rows) for g in rows[0]["select_genres"]},
        }

    def twin(self) -> None:
        """The twin of the ``twin_kind`` warm-ups, 128 sentences a step (GradCache), summed and as two towers, and
        the same twin untrained (what the twin training adds)."""
        from jtcse.modeling.build import build_twin
        from jtcse.modeling.loading import load_model
        from jtcse.training.twin import train_twin

        kind = self.cfg["twin_kind"]
        for seed in self.cfg["seeds"]:
            _, a, b = self.members_of(kind, seed)
            for how in ("twin", "short"):
                name, out = f"{how}_{kind}_s{seed}", self.work / f"{how}_{kind}_s{seed}"
                self.trained(name, lambda: train_twin(str(self.work / a), str(self.work / b), self.corpus, out,
                                                      seed=seed, logging_steps=5, show_progress=False,
                                                      **self.twin_settings(how)),
                             lambda: load_model(out, device="cpu"), group=how, kind=kind, seed=seed)  # fmt: skip
                self.embeddings(name, lambda: load_model(out, device="cpu"))
            name = f"twin_{kind}_s{seed}"
            towers = self.work / f"{name}_towers"
            if not (towers / "tower_2" / "modules.json").is_file():
                load_model(self.work / name, device="cpu")[0].export_towers(towers)
            for i in (1, 2):
                folder = towers / f"tower_{i}"
                self.scored(f"{name}_t{i}", lambda: load_model(folder, device="cpu"), group="tower", kind=kind, seed=seed)  # fmt: skip
            # the control: the same twin before any twin training, i.e. the two warm-ups summed
            self.scored(f"untrained_{kind}_s{seed}", lambda: build_twin(str(self.work / a), str(self.work / b),
                        pooling="mean", device="cpu"), group="untrained", kind=kind, seed=seed)  # fmt: skip
        for how in ("twin", "short", "towers", "untrained"):
            self.ensembles_of(f"{how}:{kind}")

    def candidates(self) -> list[str]:
        """Every default the driver weighs: each kind, and the twin of ``twin_kind`` summed, as towers and the
        shorter one summed."""
        kind = self.cfg["twin_kind"]
        return [*KINDS, f"twin:{kind}", f"towers:{kind}", f"short:{kind}"]

    def twin_settings(self, how: str) -> dict:
        """``train_twin`` settings of the twin (``twin``) or of the shorter one (``short``: ``short_twin_steps``
        steps, to fit the wall-time bar)."""
        return {**self.cfg["twin"], **({"max_steps": self.cfg["short_twin_steps"]} if how == "short" else {})}

    def default_choice(self) -> str:
        """The new default: the candidate best on the selection split (mean over the seeds, each at its one
        weight) among those keeping every selection genre of every seed within ``genre_margin`` of the start's and
        running within ``time_bar`` times today's wall time; today's (``dropout``) unless that one beats it by more
        than the larger seed spread of the two (a change inside the seed noise is no change)."""
        merged = {c: self.mean_row(self.ensemble_pattern(c)) for c in self.candidates()}
        missing = [c for c, row in merged.items() if row is None]
        if missing:
            raise SystemExit(f"rows missing for {missing}: run the earlier stages first")
        # wall time against today's: the members' training (training_seconds) plus the ensemble and the
        # distillation (later_stages_s, the same for every choice)
        rows, later = read_rows(self.work), self.cfg["later_stages_s"]
        bar = self.cfg["time_bar"] * (training_seconds(rows, "today") + later)
        fits = [c for c, r in merged.items() if self.within_margin(r) and training_seconds(rows, c) + later <= bar]
        best = max(fits or ["dropout"], key=lambda c: merged[c]["select_spearman"])
        ours, theirs = merged["dropout"], merged[best]
        spread = max(ours["select_std"], theirs["select_std"])
        return best if theirs["select_spearman"] - ours["select_spearman"] > spread else "dropout"

    def ensemble_pattern(self, choice: str) -> str:
        """The ensemble rows (with ``{seed}``) of a choice: a kind, ``twin:KIND`` or ``towers:KIND``."""
        how, _, kind = choice.rpartition(":")
        return f"ens_{how}_{kind}_s{{seed}}" if how else f"ens_{kind}_s{{seed}}"

    def chosen_weight(self, choice: str) -> float:
        """The trained members' weight a default of ``choice`` ships with: its one weight (:meth:`kind_weight`)."""
        return self.row(self.ensemble_pattern(choice).format(seed=self.cfg["seeds"][0]))["weights"][1]

    def pipeline_values(self, choice: str, seed: int) -> dict:
        """The pipeline settings of ``choice`` (``today``: today's defaults; a kind, ``twin:KIND`` or
        ``towers:KIND`` with :meth:`chosen_weight`) for ``seed``."""
        kind = "dropout" if choice == "today" else choice.split(":")[-1]
        tables = PIPELINE_KEYS[kind]
        values = {"corpus": str(self.corpus), "seed": seed, "until": "distill", "warmup_b": tables["warmup_b"],
                  "warmup": {**self.cfg["simcse"], **tables["warmup"]}, "distill": self.cfg["distill"],
                  "twin": {"enabled": False}}  # fmt: skip
        if choice == "today":  # the weights shipped before this driver chose them (1.25, 1.25, 1)
            return {**values, "ensemble": {"enabled": True, "weights": self.cfg["today_weights"]}}
        w, trained = self.chosen_weight(choice), 1 if choice.startswith(("twin:", "short:")) else 2
        values["ensemble"] = {"enabled": True, "weights": [w] * trained + [1.0]}
        if choice != kind:
            values["twin"] = {"enabled": True, **TWIN_MEASURED, **self.twin_settings(choice.split(":")[0])}
            values["ensemble"]["twin_towers"] = choice.startswith("towers:")
        return values

    def pipeline(self) -> None:
        """``jtcse pipeline`` for each seed with the new default's settings and with today's, the warm-ups (and
        twins) above copied in (with their files' times: the same models) so only what follows them runs; the
        students scored."""

        from jtcse.pipeline.settings import PipelineConfig
        from jtcse.pipeline.stages import TWIN, WARMUP_A, WARMUP_B

        for choice in dict.fromkeys([self.default_choice(), "today"]):
            tag, kind = choice.replace(":", "-"), "dropout" if choice == "today" else choice.split(":")[-1]
            # today's students are DEFAULTS.md's 3 seeds (the same trainers, deterministic): one again, for the time
            for seed in self.cfg["seeds"][: self.cfg["today_seeds"] if choice == "today" else None]:
                name, out = f"student_{tag}_s{seed}", self.work / f"pipeline_{tag}_s{seed}"
                _, a, b = self.members_of(kind, seed)
                copies = {WARMUP_A.metadata.folder: a, WARMUP_B.metadata.folder: b}
                if ":" in choice:
                    copies[TWIN.metadata.folder] = f"{trained_twin(choice)}_{kind}_s{seed}"
                config = PipelineConfig.from_values(self.pipeline_values(choice, seed))
                self.pipeline_student(name, out, copies, config, choice=choice, seed=seed)
                self.ensemble_time(name, out)

    def ensemble_time(self, name: str, out: Path) -> None:
        """The pipeline's own seconds for the stages after the warm-ups, on the student's row."""
        import json

        summary = json.loads((out / "pipeline_summary.json").read_text(encoding="utf-8"))
        row = self.row(name)
        if "stage_seconds" not in row:
            stages = {r["stage"]: r["seconds"] for r in summary["table"] if r["status"] in ("ran", "skipped (done)")}
            self.save(name, {**{k: v for k, v in row.items() if k not in ("name", "threads")}, "stage_seconds": stages})


def main() -> None:
    args = driver_parser(__doc__, STAGES, threads=2).parse_args()
    cfg = QUICK if args.quick else FULL
    where = places(args, "members", "DEFAULTS.md")
    runner = MembersRunner(where.work, cfg, args.threads, args.data)
    if not args.report_only:
        run_stages(runner, args, STAGES, "members")
    results, tables = build_report(where.work, cfg)
    publish(where, results, tables, marker="MEMBERS")
    print(tables)


if __name__ == "__main__":
    main()
