"""The CPU reproduction's tables and figures (``repro.toml``; ``evaluation/REPRODUCTION.md``, ``evaluation/repro/``:
``results.json``, ``tables.md``, ``results.csv`` and the plots)."""

from __future__ import annotations

import csv
import re
import statistics
from pathlib import Path

from evaluation.report import mean_std, mean_std_text, percent, titled
from evaluation.study import Scope

HEADLINE = (
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
"""The rows over the seeds (``NAME_s<seed>``) in ``results.json``'s ``headline``."""
PLOTTED = (
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
)
"""The same, in the plot's order (each budget's rows together)."""


def _ms(headline: dict, key: str) -> str:
    h = headline.get(key)
    return mean_std_text(h["values"], count=True) if h else "not run"


def _paired(scored: dict, a: str, b: str) -> str:
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


def _headline(scope: Scope, scored: dict, headline: dict) -> str:
    dev = lambda k: percent(scored[k]["dev_spearman"]) if k in scored else "not run"  # noqa: E731
    lines = [
        f"| MiniLM as shipped, mean pooling (its native) | – | {dev('minilm_mean')} | |",
        f"| MiniLM as shipped, CLS pooling | – | {dev('minilm_cls')} | |",
    ]
    for label, key in scope.study.get("tables")["headline"]["lines"]:
        h = headline.get(key)
        values = ", ".join(f"{100 * v:.2f}" for v in h["values"]) if h else ""
        lines.append([label, str(h["n"]), mean_std_text(h["values"]), values] if h else f"| {label} | 0 | not run | |")
    budget = [["none", _ms(headline, "twin_untrained"), _ms(headline, "warmup"), _ms(headline, "twin_untrained"), "–"]]
    for label, length, twin in (
        ("short (the grid's twin budget)", "short", "jtcse_full"),
        ("long", "long", "jtcse_long"),
    ):
        budget.append(
            [
                label,
                _ms(headline, twin),
                _ms(headline, f"simcse_{length}"),
                _ms(headline, f"twin_simcse_{length}"),
                _paired(scored, twin, f"twin_simcse_{length}"),
            ]
        )
    note = (
        f"JTCSE-D from the long twins (distilled into W_s): {_ms(headline, 'distilled_long')}; paired Δ vs its "
        f"teacher {_paired(scored, 'distilled_long', 'jtcse_long')}, vs W_s continued with SimCSE for 100 steps "
        f"{_paired(scored, 'distilled_long', 'simcse_long')}."
    )
    return titled(scope, "headline", lines) + titled(scope, "budget", budget, note)


def _ablations(scope: Scope, scored: dict) -> str:
    dev = lambda k: percent(scored[k]["dev_spearman"]) if k in scored else "not run"  # noqa: E731
    secs = lambda k: f"{scored[k]['train_seconds']:.0f}" if "train_seconds" in scored.get(k, {}) else "–"  # noqa: E731
    seeds = sorted({v["seed"] for k, v in scored.items() if k.startswith("jtcse_full_s")})
    first, tables = seeds[0] if seeds else 1, scope.study.get("tables")

    def key(name: str, seed: int) -> str:
        return f"{name}_s{seed}" if name in ("jtcse_full", "twin_untrained") or seed != first else name

    def across(name: str) -> list[str]:
        """Seed 1's score, the mean ± std over seeds, the paired Δ vs the untrained twin of the same towers, seed 1's
        training seconds."""
        vals = [scored[key(name, s)]["dev_spearman"] for s in seeds if key(name, s) in scored]
        deltas = [
            scored[key(name, s)]["dev_spearman"] - scored[f"twin_untrained_s{s}"]["dev_spearman"]
            for s in seeds
            if key(name, s) in scored and f"twin_untrained_s{s}" in scored
        ]
        return [
            dev(key(name, first)),
            mean_std_text(vals, count=True),
            mean_std_text(deltas, count=True),
            secs(key(name, first)),
        ]

    losses = [[label, *across(name), f"{paper:.2f}"] for label, name, paper in tables["loss"]["lines"]]
    caels = [[k, layers, *across(name)] for k, layers, name in tables["cael"]["lines"]]
    full1, regs = scored.get("jtcse_full_s1", {}).get("dev_spearman"), []
    for label, k in tables["regularisers"]["lines"]:
        delta = percent(scored[k]["dev_spearman"] - full1) if k in scored and full1 is not None else "–"
        regs.append([label, dev(k), delta, secs(k)])
    cael = titled(scope, "cael", caels, tables["cael"]["note"])
    return titled(scope, "loss", losses) + cael + titled(scope, "regularisers", regs)


def _timings(scope: Scope, rows: dict, scored: dict) -> str:
    def grid(k: str, v: dict) -> bool:
        return v.get("group") in ("headline", "loss", "cael", "regulariser") and k.startswith(
            ("jtcse", "loss", "cael", "reg")
        )

    lines = []
    for label, prefix in scope.study.get("tables")["timings"]["lines"]:
        sel = [
            v for k, v in scored.items() if "train_seconds" in v and (k.startswith(prefix) if prefix else grid(k, v))
        ]
        if sel:
            lines.append(
                [
                    label,
                    str(len(sel)),
                    str(sorted({v["threads"] for v in sel})),
                    f"{statistics.fmean(v['train_seconds'] for v in sel):.0f}",
                    str(sorted({v.get("steps") for v in sel})),
                    f"{statistics.fmean(v['eval_seconds'] for v in sel):.0f}",
                ]
            )
    geometry = []
    for row, d in ((v["row"], v) for v in rows.values() if v.get("group") == "diagnostics"):
        au = d["alignment_uniformity"]["model"]
        energy = ", ".join(f"{enc}: {curve[-1]:.3f}" for enc, curve in d["cls_energy"].items())
        geometry.append([row, f"{au['alignment']:.3f}", f"{au['uniformity_pairs']:.3f}", energy])
    return titled(scope, "timings", lines) + (titled(scope, "geometry", geometry) if geometry else "")


def report(scope: Scope) -> tuple[dict, str]:
    rows = scope.rows
    scored = {k: v for k, v in rows.items() if "dev_spearman" in v}

    def seeded(prefix: str) -> dict | None:
        found = [v for k, v in scored.items() if k.startswith(prefix + "_s")]
        if not found:
            return None
        m, s = mean_std([v["dev_spearman"] for v in found])
        secs = [v["train_seconds"] for v in found if "train_seconds" in v]
        return {
            "mean": m,
            "std": s,
            "n": len(found),
            "values": [v["dev_spearman"] for v in found],
            "train_seconds_mean": statistics.fmean(secs) if secs else None,
        }

    headline = {prefix: seeded(prefix) for prefix in HEADLINE}
    tables = _headline(scope, scored, headline) + _ablations(scope, scored) + _timings(scope, rows, scored)
    return {"settings": scope.study.settings, "rows": rows, "headline": headline}, tables.rstrip("\n") + "\n"


def figures(scope: Scope, out: Path, plots: bool) -> None:
    """``results.csv`` (one line per scored row: its settings, dev Spearman ×100 and timings) and the plots."""
    scored = {k: v for k, v in scope.rows.items() if "dev_spearman" in v}
    columns = ["cael_every", "nce_weight", "icnce_weight", "ictm_weight"]
    with (out / "results.csv").open("w", newline="", encoding="utf-8") as fh:
        writer = csv.writer(fh)
        writer.writerow(
            [
                "row",
                "group",
                "seed",
                *columns,
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
            writer.writerow(
                [
                    k,
                    v.get("group"),
                    v.get("seed", ""),
                    *(st.get(c, "") for c in columns),
                    "+".join(st.get("regularizers", [])),
                    f"{100 * v['dev_spearman']:.2f}",
                    *(v.get(c, "") for c in ("train_seconds", "steps", "eval_seconds", "threads")),
                ]
            )
    if plots:
        plot(out, scope.rows, scored)


def plot(out: Path, rows: dict, scored: dict) -> None:
    """``sts_dev_rows.png`` (every configuration), ``alignment_uniformity.png`` and ``cls_energy.png``."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    configs: dict[str, list[float]] = {}  # every configuration over its seeds; the shipped MiniLM as lines
    for k, v in scored.items():
        if v.get("group") != "baseline":
            configs.setdefault(re.sub(r"_s\d+$", "", k), []).append(100 * v["dev_spearman"])
    if configs:
        names = [n for n in PLOTTED if n in configs] + sorted(n for n in configs if n not in PLOTTED)
        fig, ax = plt.subplots(figsize=(7, 0.28 * len(names) + 1.5))
        means = [statistics.fmean(configs[n]) for n in names]
        stds = [statistics.stdev(configs[n]) if len(configs[n]) > 1 else 0.0 for n in names]
        ax.barh(range(len(names)), means, xerr=stds, color="tab:blue", alpha=0.5, capsize=2)
        for i, n in enumerate(names):
            ax.plot(configs[n], [i] * len(configs[n]), "k.", markersize=4)
        for key, color in (("minilm_cls", "r"), ("minilm_mean", "g")):
            if key in scored:
                x = 100 * scored[key]["dev_spearman"]
                ax.axvline(x, color=color, linestyle="--", linewidth=1, label=f"{key} {x:.2f}")
        ax.set_xlim(min(min(v) for v in configs.values()) - 0.4, max(max(v) for v in configs.values()) + 0.4)
        ax.set_yticks(range(len(names)), [f"{n} (n={len(configs[n])})" for n in names], fontsize=7)
        ax.invert_yaxis()
        ax.set_xlabel("STS-B dev Spearman x100 (bars: mean ± std over seeds; dots: seeds)")
        ax.set_title("CPU reproduction: every configuration")
        ax.legend(fontsize=7, loc="lower right", title="shipped MiniLM (off-axis if not shown)", title_fontsize=6)
        fig.tight_layout()
        fig.savefig(out / "sts_dev_rows.png", dpi=120)
        plt.close(fig)
    diags = {v["row"]: v for v in rows.values() if v.get("group") == "diagnostics"}
    if not diags:
        return
    fig, ax = plt.subplots(figsize=(5, 4))  # alignment / uniformity of the model embeddings on STS-B dev
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
