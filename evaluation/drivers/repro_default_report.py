"""The defaults driver's report (``evaluation/DEFAULTS.md``, ``evaluation/default/``) from its row files:
``results.json`` and the markdown tables."""

from __future__ import annotations

import statistics
from pathlib import Path

from evaluation.drivers.formatting import mean_std, mean_std_text, percent
from evaluation.drivers.grid import read_rows
from evaluation.drivers.repro_default_settings import (
    ABLATIONS,
    GENRES,
    JTCSE_KINDS,
    KIND_LABELS,
    LOSS_LABELS,
    SHIPPED,
    SIMCSE_KINDS,
    genre_label,
)
from evaluation.drivers.splits import best_on_selection


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
            genres = [mean_std_text(self.genres_seeded(pattern, g)) for g in GENRES]
            lines.append(
                [
                    label,
                    pooling,
                    str(len(dev)),
                    mean_std_text(dev),
                    ", ".join(f"{100 * v:.2f}" for v in dev),
                    mean_std_text(sel),
                    *genres,
                ]
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
                lines.append(
                    [label, split, mean_std_text(vals), f"{100 * (m - shipped[key]):+.2f}" if shipped else "–", gap]
                )
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
            lines.append([label, *cells, mean_std_text(self.seeded(pattern))])
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
                            percent(r["select_spearman"]),
                            percent(r["dev_spearman"]),
                            *(percent(self.genre(r["name"], g)) for g in GENRES),
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
                    percent(before["select_spearman"]),
                    percent(before["dev_spearman"]),
                    *(percent(self.genre(before["name"], g)) for g in GENRES),
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
                percent((self.get(name) or {}).get("select_spearman")),
                percent((self.get(name) or {}).get("dev_spearman")),
                *(percent(self.genre(name, g)) for g in GENRES),
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
                        mean_std_text(self.seeded(pattern, "select_spearman")),
                        mean_std_text(self.seeded(pattern)),
                        *(mean_std_text(self.genres_seeded(pattern, g)) for g in GENRES),
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
                        percent(r["select_spearman"]),
                        percent(r["dev_spearman"]),
                        *(percent(self.genre(name, g)) for g in GENRES),
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
                    mean_std_text(self.seeded(pattern, "select_spearman")),
                    mean_std_text(self.seeded(pattern)),
                    *(mean_std_text(self.genres_seeded(pattern, g)) for g in GENRES),
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
                    percent(r["select_spearman"]),
                    percent(r["dev_spearman"]),
                    f"{100 * (r['dev_spearman'] - shipped):+.2f}" if shipped else "–",
                    percent(self.genre(name, "captions")),
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
    rows = read_rows(work)
    report = Report(rows, cfg)
    tables = report.build()
    return {"settings": cfg, "choices": report.choices(), "rows": rows}, tables
