"""The twin in the main job (issue 37): the pipeline's default chosen on two selection files by their mean, and the
JTCSE twin in it if it wins. CPU-sized, resumable.

Every choice maximises the mean Spearman over the two selection files, STS-B train and SICK train (less the pairs
they share with STS-B dev; :func:`jtcse.training.selection.best_by_total`, the rule ``jtcse pipeline`` uses), and
the default, whose students ship, has one guard: no file below the start's score. Each file and each genre is
reported, never a constraint; STS-B dev is scored for every row and never chosen on.

Stages (``--stages``, in this order; rows in ``<work>/results/``, cosines in ``<work>/cos/``):

``shipped``    the shipped MiniLM as shipped (the row to beat)
``warmups``    the pipeline's two dropout warm-ups for every seed s (warm-up I at seed s, II at s + 1); warm-up I alone
               is the same-budget control (plain SimCSE keeping the pooling)
``twins``      the twin with a real signal (128 sentences a step through GradCache, batches of neighbours) on seed
               ``grid_seed``'s warm-ups, one setting moved at a time (steps, learning rate, ICTM weight): the best by
               the rule becomes ``--twin``'s defaults; each twin's two towers scored too (how far ICTM pulls them
               apart)
``seeds``      that twin for every seed, and its towers
``ensembles``  every variant (:data:`VARIANTS`) for every seed at the variant's one weight chosen by the rule on the
               mean over the seeds, and the weights before issue 31 on today's members
``pipeline``   ``jtcse pipeline`` (the library call), the warm-ups and twins above copied in (with their files' times:
               the same models) so only the ensemble and the distillation run, the students scored: today's members at
               the weights before for every seed (the row to beat), each variant with a twin (:data:`SCREENED`) at the
               first seed, and the best of those by the rule for every seed; the default chosen
               (:func:`~evaluation.drivers.twin_default_report.default_choice`)

``retrieval``  the retrieval check of every row the lead table shows (the start, the control, every student): STS-B
               train pairs scoring at least 4 as query and answer among all its sentences, scored by mteb
               (:func:`jtcse.evaluation.retrieval_check.retrieval_check`), so a default that wins on STS and loses on
               retrieval shows

``--report-only`` rebuilds ``evaluation/twin_default/`` and the tables between the ``TWIN_DEFAULT`` markers of
``evaluation/DEFAULTS.md`` (:mod:`evaluation.drivers.twin_default_report`). Run from the repository root:
``python -m evaluation.drivers.twin_default --data ../shared/data --threads 2``.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

from evaluation.drivers.cli import driver_parser, places, publish, run_stages
from evaluation.drivers.grid import load_shipped, read_rows
from evaluation.drivers.repro_default_scores import ScoredGrid
from evaluation.drivers.twin_default_report import (
    build_report,
    screen_choice,
    twin_choice,
    variant_weight,
    write_default_weights,
)
from evaluation.drivers.twin_default_settings import (
    BEFORE,
    FULL,
    QUICK,
    SCREENED,
    SHIPPED,
    SPLITS,
    STAGES,
    TODAY,
    VARIANTS,
)
from jtcse.training.selection import concat_cosine


class TwinDefaultRunner(ScoredGrid):
    """The driver's stages on :class:`~evaluation.drivers.repro_default_scores.ScoredGrid`, every row scored on STS-B
    dev and the two selection files, per genre, from cached cosines."""

    split_names = SPLITS

    def __init__(
        self,
        work: Path,
        cfg: dict,
        threads: int,
        data: Path,
        variants: list[str] | None = None,
        only: dict | None = None,
    ):
        from jtcse.training.selection import selection_pairs

        super().__init__(work, cfg, threads, data)
        self.data = data
        self.variants = variants or [*VARIANTS, BEFORE]  # the ensembles to make; students: BEFORE and SCREENED
        self.only = only or {}  # {"tags": [...], "seeds": [...]}: what this process trains (others run the rest)
        dev_file = data / "stsbenchmark" / "sts-dev.csv"
        files = {"sts": data / "stsbenchmark" / "sts-train.csv", "sick": data / "sick" / "sick-train.csv"}
        self.selection = {split: selection_pairs(path, dev_file) for split, path in files.items()}
        if cfg.get("select_limit"):
            self.selection = {s: p.take(range(min(cfg["select_limit"], len(p)))) for s, p in self.selection.items()}

    def pairs(self, split: str):
        return self.selection[split] if split in self.selection else super().pairs(split)

    def trained(self, name: str, run, load, **record) -> dict:
        """:meth:`ScoredGrid.trained` with the CPU seconds of the training when it runs here (``cpu_seconds``: every
        thread of this process, so a busy machine changes it less than the wall time)."""
        cpu: dict[str, float] = {}

        def timed() -> dict:
            started = time.process_time()
            try:
                return run()
            finally:
                cpu["seconds"] = round(time.process_time() - started, 1)

        row = super().trained(name, timed, load, **record)
        if row.get("train_seconds") and "seconds" in cpu and "cpu_seconds" not in row:
            row = self.save(name, {**{k: v for k, v in row.items() if k not in ("name", "threads")},
                                   "cpu_seconds": cpu["seconds"]})  # fmt: skip
        return row

    # -- stages --------------------------------------------------------------------------------------
    def shipped(self) -> None:
        self.score(SHIPPED, load_shipped, group="baseline")

    def warmup_name(self, seed: int) -> str:
        return f"dropout_s{seed}"

    def warmups(self) -> None:
        from jtcse.modeling.loading import load_model
        from jtcse.training.simcse import train_simcse

        for seed in sorted({s for s0 in self.cfg["seeds"] for s in (s0, s0 + 1)}):
            name = self.warmup_name(seed)
            out = self.work / name
            self.trained(name, lambda: train_simcse(None, self.corpus, out, seed=seed,
                                                    **self.cfg["simcse"]),
                         lambda: load_model(out, device="cpu"), group="warmup", seed=seed)  # fmt: skip

    def twin_settings(self, tag: str) -> dict:
        """The twin of grid (or follow-up) setting ``tag``: the base twin with that setting moved."""
        return {**self.cfg["twin"], **{**self.cfg["twin_grid"], **self.cfg.get("followup", {})}[tag]}

    def twin_row(self, tag: str, seed: int) -> str:
        """A twin of grid setting ``tag`` on seed ``seed``'s warm-ups (I at seed, II at seed + 1)."""
        from jtcse.modeling.loading import load_model
        from jtcse.training.twin import train_twin

        name, out = f"twin_{tag}_s{seed}", self.work / f"twin_{tag}_s{seed}"
        a, b = self.work / self.warmup_name(seed), self.work / self.warmup_name(seed + 1)
        self.trained(name, lambda: train_twin(str(a), str(b), self.corpus, out, seed=seed, logging_steps=5,
                                              show_progress=False, **self.twin_settings(tag)),
                     lambda: load_model(out, device="cpu"), group="twin", tag=tag, seed=seed)  # fmt: skip
        towers = self.work / f"{name}_towers"
        if not (towers / "tower_2" / "modules.json").is_file():
            load_model(out, device="cpu")[0].export_towers(towers)
        for i in (1, 2):
            folder = towers / f"tower_{i}"
            self.score(f"{name}_t{i}", lambda: load_model(folder, device="cpu"), group="tower", tag=tag, seed=seed)
        self.agreement(name)
        return name

    def agreement(self, name: str) -> None:
        """How alike the twin's two towers err on STS-B train (rank-error agreement, jtcse.evaluation.diversity)."""
        import numpy as np

        from jtcse.evaluation.diversity import error_agreement

        row = self.row(name)
        if "tower_agreement" not in row:
            gold = np.asarray(self.selection["sts"].scores)
            value = error_agreement(self.cosines(f"{name}_t1", "sts"), self.cosines(f"{name}_t2", "sts"), gold)
            self.save(
                name, {**{k: v for k, v in row.items() if k not in ("name", "threads")}, "tower_agreement": value}
            )

    def twins(self) -> None:
        for tag in self.only.get("tags") or self.cfg["twin_grid"]:
            self.twin_row(tag, self.cfg["grid_seed"])

    def followup(self) -> None:
        """ICTM's weight moved from the chosen twin (seed 1), after the default was chosen: reported, not chosen on."""
        for tag in self.only.get("tags") or self.cfg.get("followup", {}):
            self.twin_row(tag, self.cfg["grid_seed"])

    def twin_choice(self) -> str:
        """The twin grid's setting best by the rule; the driver stops while a grid row is missing."""
        choice = twin_choice(read_rows(self.work), self.cfg)
        if choice is None:
            raise SystemExit("run the twins stage first")
        return choice

    def seeds(self) -> None:
        tag = self.twin_choice()
        for seed in self.only.get("seeds") or self.cfg["seeds"]:
            self.twin_row(tag, seed)

    # -- ensembles -----------------------------------------------------------------------------------
    def members_of(self, variant: str, seed: int) -> list[str] | None:
        """An ensemble's rows, the start first (at weight 1), then the trained members (at one weight); ``None`` for a
        variant with a twin while the twin grid is unfinished."""
        warmups = [self.warmup_name(seed), self.warmup_name(seed + 1)]
        if variant in ("warmups", *TODAY):
            return [SHIPPED, *warmups]
        tag = twin_choice(read_rows(self.work), self.cfg)
        if tag is None:
            return None
        twin = f"twin_{tag}_s{seed}"
        return {
            "twin": [SHIPPED, twin],
            "twin_towers": [SHIPPED, f"{twin}_t1", f"{twin}_t2"],
            "twin_warmups": [SHIPPED, twin, *warmups],
        }[variant]

    def grid_of(self, members: list[str], grid: list[float]) -> dict:
        """Weight -> the scores of the concat ensemble of ``members`` (the start at 1, the rest at that weight), exactly
        from the members' cached cosines."""
        out = {}
        for w in grid:
            weights = [1.0] + [w] * (len(members) - 1)
            out[w] = self.scores_from(
                {split: concat_cosine([self.cosines(m, split) for m in members], weights) for split in SPLITS}
            )
        return out

    def ensembles(self) -> None:
        for variant in self.variants:
            seeds_members = [self.members_of(variant, seed) for seed in self.cfg["seeds"]]
            ready = all(members is not None for members in seeds_members)
            if not ready or any(self.row(m) is None for members in seeds_members for m in members):
                print(f"[twin_default] ensembles: members of {variant} missing, skipped", flush=True)
                continue
            fixed = variant == BEFORE
            grid = [self.cfg["before_weights"][0]] if fixed else self.cfg["weight_grid"]
            grids = [self.grid_of(members, grid) for members in seeds_members]
            weight = grid[0] if fixed else variant_weight(grids)
            for seed, members, scores in zip(self.cfg["seeds"], seeds_members, grids, strict=True):
                name = f"ens_{variant}_s{seed}"
                if not self.done(name):
                    self.save(name, {"group": "ensemble", "variant": variant, "seed": seed, "members": members,
                                     "weights": [1.0] + [weight] * (len(members) - 1), **scores[weight],
                                     "grid": [{"weight": w, **{s: v[f"{s}_spearman"] for s in SPLITS}}
                                              for w, v in scores.items()]})  # fmt: skip

    # -- students through the pipeline ---------------------------------------------------------------
    def pipeline_values(self, variant: str, seed: int) -> dict:
        """The pipeline settings of ``variant`` for ``seed``, with the weight its ensemble rows chose."""
        weights = self.row(f"ens_{variant}_s{seed}")["weights"]
        values = {"corpus": str(self.corpus), "seed": seed, "until": "distill", "warmup": dict(self.cfg["simcse"]),
                  "distill": self.cfg["distill"]}  # fmt: skip
        w = weights[1]
        if variant in ("warmups", *TODAY):
            return {**values, "twin": {"enabled": False}, "ensemble": {"enabled": True, "weights": [w, w, 1.0]}}
        twin = {"enabled": True, **self.twin_settings(self.twin_choice())}
        if variant == "twin":
            ensemble = {"enabled": True, "weights": [w, 1.0]}
        elif variant == "twin_towers":
            ensemble = {"enabled": True, "twin_towers": True, "weights": [w, w, 1.0]}
        else:  # the twin, the start, then the two warm-ups joined as other models
            from jtcse.pipeline.stages import WARMUP_A, WARMUP_B

            out = self.student_dir(variant, seed)
            warmups = [str(out / WARMUP_A.metadata.folder), str(out / WARMUP_B.metadata.folder)]
            ensemble = {"enabled": True, "with": warmups, "weights": [w, 1.0, w, w]}
        return {**values, "twin": twin, "ensemble": ensemble}

    def student_dir(self, variant: str, seed: int) -> Path:
        return self.work / f"pipeline_{variant}_s{seed}"

    def student_seeds(self, variant: str) -> list[int]:
        """The seeds ``variant``'s students train at (those of ``--seeds`` among them): every seed for the weights
        before and for the variant the screen carries; the first seed alone for the other screened variants, and
        for every one of them while the screen is incomplete."""
        seeds = self.cfg["seeds"]
        if variant != BEFORE and screen_choice(read_rows(self.work), self.cfg) != variant:
            seeds = seeds[:1]
        wanted = self.only.get("seeds")
        return [seed for seed in seeds if not wanted or seed in wanted]

    def pipeline(self) -> None:
        for variant in [v for v in self.variants if v in (BEFORE, *SCREENED)]:
            if not self.done(f"ens_{variant}_s{self.cfg['seeds'][-1]}"):
                print(f"[twin_default] pipeline: {variant} has no ensemble rows, skipped", flush=True)
                continue
            for seed in self.student_seeds(variant):
                self.student(variant, seed)
        carried = screen_choice(read_rows(self.work), self.cfg)  # the screen may have finished just now
        for seed in self.student_seeds(carried) if carried in self.variants else []:
            self.student(carried, seed)

    def student(self, variant: str, seed: int) -> None:
        """``jtcse pipeline`` of ``variant`` at ``seed`` (the warm-ups and twin copied in), its student scored."""
        from jtcse.pipeline.settings import PipelineConfig
        from jtcse.pipeline.stages import TWIN, WARMUP_A, WARMUP_B

        name, out = f"student_{variant}_s{seed}", self.student_dir(variant, seed)
        copies = {
            WARMUP_A.metadata.folder: self.warmup_name(seed),
            WARMUP_B.metadata.folder: self.warmup_name(seed + 1),
        }
        if variant in SCREENED:
            copies[TWIN.metadata.folder] = f"twin_{self.twin_choice()}_s{seed}"
        config = PipelineConfig.from_values(self.pipeline_values(variant, seed))
        self.pipeline_student(name, out, copies, config, variant=variant, seed=seed)
        self.stage_seconds(name, out)

    def retrieval(self) -> None:
        from sentence_transformers import SentenceTransformer

        from jtcse.evaluation.retrieval_check import retrieval_check
        from jtcse.pipeline.stages import DISTILL

        names = [SHIPPED, *(self.warmup_name(s) for s in self.cfg["seeds"])]
        names += [f"student_{v}_s{s}" for v in [*TODAY, *SCREENED] for s in self.cfg["seeds"]]
        for name in names:
            row = self.row(name)
            if row is None or "retrieval" in row:
                continue
            if name == SHIPPED:
                model = load_shipped()
            else:
                folder = self.work / name if name.startswith("dropout_") else self.student_dir(*self.variant_seed(name))
                model = SentenceTransformer(str(folder / DISTILL.metadata.folder if name.startswith("student_") else folder),
                                            device="cpu")  # fmt: skip
            model.max_seq_length = self.cfg["eval_max_seq_length"]
            check = retrieval_check(model, self.retrieval_file, batch_size=64)
            self.save(name, {**{k: v for k, v in row.items() if k not in ("name", "threads")}, "retrieval": check})

    @property
    def retrieval_file(self) -> Path:
        """STS-B train (quick: its first ``select_limit`` pairs, copied into the work folder)."""
        path = self.data / "stsbenchmark" / "sts-train.csv"
        if not self.cfg.get("select_limit"):
            return path
        short = self.work / "retrieval-pairs.csv"
        lines = path.read_text(encoding="utf-8").splitlines()[: self.cfg["select_limit"]]
        short.write_text("\n".join(lines) + "\n", encoding="utf-8")
        return short

    def variant_seed(self, name: str) -> tuple[str, int]:
        """``(variant, seed)`` of a student row ``student_{variant}_s{seed}``."""
        variant, _, seed = name.removeprefix("student_").rpartition("_s")
        return variant, int(seed)

    def stage_seconds(self, name: str, out: Path) -> None:
        """The pipeline's own wall seconds of each stage it ran, on the student's row."""
        row = self.row(name)
        if "stage_seconds" not in row:
            summary = json.loads((out / "pipeline_summary.json").read_text(encoding="utf-8"))
            stages = {r["stage"]: r["seconds"] for r in summary["table"] if r["status"] == "ran"}
            self.save(name, {**{k: v for k, v in row.items() if k not in ("name", "threads")}, "stage_seconds": stages})


def main() -> None:
    parser = driver_parser(__doc__, STAGES, threads=2)
    every = [*VARIANTS, BEFORE]
    parser.add_argument("--variants", default=",".join(every), help=f"the ensembles and students to make: {every}")
    parser.add_argument("--tags", default="", help="train only these twin grid settings (another process the rest)")
    parser.add_argument(
        "--seeds", dest="seed_list", default="", help="train only the twins and students of these seeds"
    )
    args = parser.parse_args()
    cfg = QUICK if args.quick else FULL
    where = places(args, "twin_default", "DEFAULTS.md")
    variants = [v for v in every if v in args.variants.split(",")]
    only = {"tags": [t for t in args.tags.split(",") if t], "seeds": [int(s) for s in args.seed_list.split(",") if s]}
    runner = TwinDefaultRunner(where.work, cfg, args.threads, args.data, variants, only)
    if not args.report_only:
        run_stages(runner, args, STAGES, "twin_default")
    results, tables = build_report(where.work, cfg)
    publish(where, results, tables, marker="TWIN_DEFAULT")
    if where.writeup is not None and results["default"] is not None:  # a full run's choice: the pipeline's defaults
        write_default_weights(results["ensemble_weights"])
    print(tables)


if __name__ == "__main__":
    main()
