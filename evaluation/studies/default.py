"""The defaults study's own (``default.toml``): two measurements (a twin's loss terms before training; the captions
trade-off of the default ensemble, ``evaluation/default/genre_tradeoff.json``) and the tables of
``evaluation/DEFAULTS.md`` ("Results") and ``evaluation/default/``."""

from __future__ import annotations

import json
import statistics
from pathlib import Path

from evaluation.report import chosen, genre_label, mean_std, mean_std_text, percent, titled
from evaluation.study import Row, Scope

GENRES = ("captions", "news", "forums")


# ---------------------------------------------------------------------------------------------------- measurements
def terms(runner, row: Row) -> None:
    """What drives a twin's update: each JTCSE term's value and the norm of its gradient over the towers' parameters,
    before training, on the same 4 batches of 16 corpus sentences (dropout views, seeded)."""
    import torch

    from jtcse.losses import JTCSELoss
    from jtcse.losses.jtcse_loss import stack_views
    from jtcse.modeling.build import build_twin

    lines = runner.corpus().read_text(encoding="utf-8").splitlines()
    batches = [lines[i * 16 : (i + 1) * 16] for i in range(4)]
    w1, w2 = (str(runner.folder(f"control_s{s}")) for s in runner.study.seeds[:2])
    setups = {
        "mean twin of W1, W2 (the recipe)": (w1, w2, "mean"),
        "mean twin of 2 × shipped": (None, None, "mean"),
        "CLS twin of 2 × shipped": (None, None, "cls"),
    }
    out = {}
    for label, (a, b, pooling) in setups.items():
        length = runner.settings["twin"]["max_seq_length"]
        model = build_twin(a, b, cael_every=2, max_seq_length=length, pooling=pooling, device="cpu").train()
        loss, params = JTCSELoss(model, seed=0), [p for p in model.parameters() if p.requires_grad]
        sums: dict[str, list[float]] = {}
        for k, batch in enumerate(batches):
            torch.manual_seed(k)
            features = stack_views([model.preprocess(batch)], pad_token_id=model.tokenizer.pad_token_id)
            for name, term in loss.compute_loss_from_outputs(model(features)).items():
                grads = torch.autograd.grad(term, params, retain_graph=True, allow_unused=True)
                sums.setdefault(name, []).append(term.item())
                norm = torch.sqrt(sum((g.double() ** 2).sum() for g in grads if g is not None)).item()
                sums.setdefault(f"{name}_grad_norm", []).append(norm)
        out[label] = {k: statistics.fmean(v) for k, v in sums.items()}
    runner.save(
        row,
        {
            "group": "terms",
            "batches": len(batches),
            "batch_size": 16,
            "setups": out,
            "note": "weighted terms (ICTM x 0.5) as JTCSELoss returns them; gradient norms over all parameters",
        },
    )


def genre_tradeoff(runner, row: Row) -> None:
    """The default ensemble (the shipped MiniLM at 1, its two warm-ups W_s and W_s+1 at a common weight w) at each
    weight of ``args.weights``, Spearman ×100 over all pairs and per genre on both splits, the mean over the seeds:
    exact from the cached cosines."""
    seeds, rows = runner.study.seeds, []
    for w in runner.value(row, "args")["weights"]:
        per_seed = []
        for i, seed in enumerate(seeds):
            members = ["shipped", f"control_s{seed}", f"control_s{seeds[(i + 1) % len(seeds)]}"]
            fields = runner.scorer.ensemble(members, [1.0, w, w])
            per_seed.append(
                {
                    s: {"all": 100 * fields[f"{s}_spearman"], **{g: 100 * v for g, v in fields[f"{s}_genres"].items()}}
                    for s in ("select", "dev")
                }
            )
        means = {
            s: {k: float(statistics.fmean(p[s][k] for p in per_seed)) for k in per_seed[0][s]} for s in per_seed[0]
        }
        rows.append({"weight": w, **means})
    runner.save(
        row,
        {"group": "genre_tradeoff", "seeds": seeds, "select_pairs": len(runner.scorer.pairs["select"]), "rows": rows},
    )


def figures(scope: Scope, out: Path, plots: bool) -> None:
    """``genre_tradeoff.json`` from its row, when the rows hold one."""
    row = scope.rows.get("genre_tradeoff")
    if row:
        found = {k: row[k] for k in ("seeds", "select_pairs", "rows")}
        (out / "genre_tradeoff.json").write_text(json.dumps(found, indent=2) + "\n", encoding="utf-8")


# ---------------------------------------------------------------------------------------------------- tables
class Tables:
    """The tables of ``evaluation/DEFAULTS.md`` from the rows (numbers ×100; titles and headers: the file's)."""

    def __init__(self, scope: Scope):
        self.scope, self.rows, self.cfg, self.seeds = scope, scope.rows, scope.study.settings, scope.study.seeds
        tuned = chosen(scope, "tuned") or {"loss": None, "lr": None}
        self.c = {"loss": tuned["loss"], "lr": tuned["lr"], "steps": chosen(scope, "steps")}
        self.c.update(kind=chosen(scope, "teacher"), epochs=chosen(scope, "epochs"))
        self.c["best_kinds"] = {"jtcse": chosen(scope, "best_jtcse"), "simcse": chosen(scope, "best_simcse")}
        c, recorded = self.c, (r["select_pairs"] for r in self.rows.values() if "select_pairs" in r)
        self.fill = {**c, "select": next(recorded, self.cfg["select_pairs"])}
        self.fill["twin_rows"] = f"twin_mean_lr{c['lr']:g}_n{c['steps']}{c['loss']}_s{{seed}}" if c["steps"] else None
        self.fill["ens_rows"] = f"ens_{c['kind']}_s{{seed}}" if c["kind"] else None
        self.fill["ucd_rows"] = f"ucd_{c['kind']}_e{c['epochs']:g}_s{{seed}}" if c["epochs"] else None
        self.out: list[str] = []

    def names(self, pattern: str) -> list[str]:
        """The rows of ``pattern`` that exist: one per seed (``{seed}`` in it), else the one row."""
        names = [pattern.format(seed=s) for s in self.seeds] if "{seed}" in pattern else [pattern]
        return [n for n in names if n in self.rows]

    def seeded(self, pattern: str, key: str = "dev_spearman") -> list[float]:
        return [self.rows[n][key] for n in self.names(pattern)]

    def genre(self, name: str, genre: str) -> float | None:
        row = self.rows.get(name)
        return next((v for g, v in row["dev_genres"].items() if genre_label(g) == genre), None) if row else None

    def genres_seeded(self, pattern: str, genre: str) -> list[float]:
        return [v for v in (self.genre(n, genre) for n in self.names(pattern)) if v is not None]

    def means(self, pattern: str) -> list[str]:
        """The rows' selection and dev scores and dev genres, mean ± std over the seeds."""
        genres = (mean_std_text(self.genres_seeded(pattern, g)) for g in GENRES)
        return [mean_std_text(self.seeded(pattern, "select_spearman")), mean_std_text(self.seeded(pattern)), *genres]

    def scores(self, name: str) -> list[str]:
        """A row's selection and dev scores and its dev genres."""
        row = self.rows.get(name) or {}
        genres = (percent(self.genre(name, g)) for g in GENRES)
        return [percent(row.get("select_spearman")), percent(row.get("dev_spearman")), *genres]

    def lines(self, name: str) -> list[list]:
        """The ``lines`` of table ``name``, each filled (a pattern not chosen yet: ``None``)."""
        spec = self.scope.study.get("tables")[name]["lines"]
        return [[self.scope.resolve(cell, self.fill) for cell in line] for line in spec]

    def table(self, name: str, lines: list[list[str]], note: str = "") -> None:
        self.out.append(titled(self.scope, name, lines, note, **self.fill))

    def build(self) -> str:
        lines = []
        for label, pattern, pooling, *waiting in self.scope.study.get("tables")["finals"]["lines"]:
            pattern = self.scope.resolve(pattern, self.fill)
            if pattern is None:
                lines.append([waiting[0], pooling, "0", "not run", "", "", "", "", ""])
                continue
            dev, select = self.seeded(pattern), self.seeded(pattern, "select_spearman")
            per_seed = ", ".join(f"{100 * v:.2f}" for v in dev)
            genres = (mean_std_text(self.genres_seeded(pattern, g)) for g in GENRES)
            label = self.scope.resolve(label, self.fill)
            lines.append([label, pooling, str(len(dev)), mean_std_text(dev), per_seed, mean_std_text(select), *genres])
        self.table("finals", lines)
        for part in (self.targets, self.genre_table, self.probe_table, self.pooling_table, self.corpus_table):
            part()
        for part in (self.length_table, self.terms_table, self.ensemble_table, self.distill_table, self.timing_table):
            part()
        speed = self.rows.get("speed")
        if speed:
            rate = speed["sentences_per_s"]
            self.out.append(
                f"Encode speed ({speed['sentences']} sentences, best of 3 interleaved repeats, one thread): shipped "
                f"MiniLM {rate['shipped']:.0f} sentences/s, final student {rate['student']:.0f} sentences/s (ratio "
                f"{speed['ratio_student_to_shipped']:.2f}; modules {', '.join(speed['modules']['student'])}).\n"
            )
        return "".join(self.out).rstrip("\n") + "\n"

    def targets(self) -> None:
        lines, shipped = [], self.rows.get("shipped")
        control = {k: self.seeded("control_s{seed}", k) for k in ("dev_spearman", "select_spearman")}
        for label, pattern in (("twin", self.fill["twin_rows"]), ("UCD student", self.fill["ucd_rows"])):
            for split, key in (("dev", "dev_spearman"), ("selection", "select_spearman")):
                if pattern is None or not self.seeded(pattern):
                    continue
                vals = self.seeded(pattern, key)
                (m, sd), (cm, csd) = mean_std(vals), mean_std(control[key]) if control[key] else (None, None)
                gap = f"{100 * (m - cm):+.2f} (seed spread {100 * max(sd or 0.0, csd or 0.0):.2f})" if cm else "–"
                delta = f"{100 * (m - shipped[key]):+.2f}" if shipped else "–"
                lines.append([label, split, mean_std_text(vals), delta, gap])
        self.table("targets", lines)

    def genre_table(self) -> None:
        lines, base = [], {g: self.genre("shipped", g) for g in GENRES}
        for label, pattern in self.lines("genres"):
            if pattern is None:
                continue
            cells = []
            for g in GENRES:
                vals = self.genres_seeded(pattern, g)
                m = statistics.fmean(vals) if vals else 0.0
                delta = f" ({100 * (m - base[g]):+.2f}; worst seed {100 * (min(vals) - base[g]):+.2f})" if vals else ""
                cells.append("–" if not vals else f"{100 * m:.2f}" + ("" if pattern == "shipped" else delta))
            lines.append([label, *cells, mean_std_text(self.seeded(pattern))])
        self.table("genres", lines)

    def probe_table(self) -> None:
        c, seed, n0, lines = self.c, self.seeds[0], self.cfg["probe_steps"], []
        define = self.scope.study.define
        for variant in define["ablations"]:
            for lr in self.cfg["twin_lrs"]:
                r = self.rows.get(f"twin_mean_lr{lr:g}_n{n0}{variant}_s{seed}")
                if r:
                    mark = " **(chosen)**" if (lr, variant) == (c["lr"], c["loss"]) else ""
                    terms = ", ".join(f"{k} {float(v):.2g}" for k, v in (r.get("last_loss_terms") or {}).items())
                    seconds = f"{r.get('train_seconds', 0):.0f}"
                    lines.append(
                        [define["loss_labels"][variant], f"{lr:g}{mark}", *self.scores(r["name"]), terms, seconds]
                    )
        if f"twin_untrained_s{seed}" in self.rows:
            lines.append(
                ["(no twin training: the summed warm-ups)", "–", *self.scores(f"twin_untrained_s{seed}"), "", "0"]
            )
        self.table("probe", lines)

    def pooling_table(self) -> None:
        if self.c["lr"] is not None:
            self.table(
                "pooling", [[label, *self.scores(name)] for label, name in self.lines("pooling") if name in self.rows]
            )

    def corpus_table(self) -> None:
        lines = []
        for label, pattern in self.lines("corpus"):
            if self.names(pattern):
                lines.append([label, str(self.rows[self.names(pattern)[0]].get("steps")), *self.means(pattern)])
        self.table("corpus", lines)

    def length_table(self) -> None:
        c, lines = self.c, []
        if c["lr"] is None:
            return
        for n in (self.cfg["probe_steps"], self.cfg["twin_steps"]):
            name = f"twin_mean_lr{c['lr']:g}_n{n}{c['loss']}_s{self.seeds[0]}"
            if name in self.rows:
                mark = " **(chosen)**" if n == c["steps"] else ""
                lines.append([f"{n}{mark}", *self.scores(name), f"{self.rows[name].get('train_seconds', 0):.0f}"])
        self.table("length", lines)

    def terms_table(self) -> None:
        row, names = self.rows.get("terms"), ("nce_1", "nce_2", "icnce", "ictm")
        if row:
            cells = lambda v: [f"{v[n]:.2g} / {v[n + '_grad_norm']:.2g}" for n in names]  # noqa: E731
            self.table("terms", [[label, *cells(v)] for label, v in row["setups"].items()])

    def ensemble_table(self) -> None:
        lines, define = [], self.scope.study.define
        for kind in (*define["simcse_kinds"], *define["jtcse_kinds"], "start+jtcse"):
            names = self.names(f"ens_{kind}_s{{seed}}")
            if names:
                weights = "; ".join("(" + ", ".join(f"{w:g}" for w in self.rows[n]["weights"]) + ")" for n in names)
                lines.append([kind, *self.means(f"ens_{kind}_s{{seed}}")[:2], weights])
        self.table("ensembles", lines)

    def distill_table(self) -> None:
        c, seed, lines = self.c, self.seeds[0], []
        shipped = (self.rows.get("shipped") or {}).get("dev_spearman")
        for name in sorted(n for n in self.rows if n.startswith("ucd_") and n.endswith(f"_s{seed}")):
            r = self.rows[name]
            mark = " **(chosen)**" if (r["kind"], r["epochs"]) == (c["kind"], c["epochs"]) else ""
            delta = f"{100 * (r['dev_spearman'] - shipped):+.2f}" if shipped else "–"
            select, dev, captions = self.scores(name)[:3]
            steps, seconds = str(r.get("steps")), f"{r.get('train_seconds', 0):.0f}"
            lines.append([f"{r['kind']}{mark}", f"{r['epochs']:g}", steps, select, dev, delta, captions, seconds])
        self.table("distill", lines)

    def timing_table(self) -> None:
        groups: dict[str, list[tuple[float, int]]] = {}
        for row in self.rows.values():
            if row.get("train_seconds"):
                key = row["group"] if row["group"] != "twin" else f"twin ({row.get('max_steps')} steps)"
                groups.setdefault(key, []).append((row["train_seconds"], row.get("steps") or 0))
        minutes = lambda v: f"{statistics.fmean(s for s, _ in v) / 60:.1f}"  # noqa: E731
        per_step = lambda v: f"{statistics.fmean(s / max(n, 1) for s, n in v):.2f}"  # noqa: E731
        self.table("timings", [[g, str(len(v)), minutes(v), per_step(v)] for g, v in sorted(groups.items())])


def report(scope: Scope) -> tuple[dict, str]:
    tables = Tables(scope)
    text = tables.build()
    return {"settings": scope.study.settings, "choices": tables.c, "rows": scope.rows}, text
