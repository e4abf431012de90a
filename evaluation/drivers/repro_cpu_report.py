"""The CPU reproduction's report (``evaluation/REPRODUCTION.md``, ``evaluation/repro/``) from its row files:
``results.json``, ``tables.md`` (also the generated part of the write-up), ``results.csv`` and the plots."""

from __future__ import annotations

import csv
import re
import statistics
from pathlib import Path

from evaluation.drivers.formatting import mean_std, mean_std_text, percent
from evaluation.drivers.grid import read_rows

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


def markdown_tables(rows: dict, headline: dict) -> str:
    """The report's tables, built from the row results only (numbers ×100)."""
    scored = {k: v for k, v in rows.items() if "dev_spearman" in v}
    dev = lambda k: percent(scored[k]["dev_spearman"]) if k in scored else "not run"  # noqa: E731
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

        return (
            dev(key_for(name, seeds[0] if seeds else 1)),
            mean_std_text(vals, count=True),
            mean_std_text(deltas, count=True),
        )

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
        delta = percent(scored[key]["dev_spearman"] - full1) if key in scored and full1 is not None else "–"
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


def build_report(work: Path, cfg: dict) -> tuple[dict, str]:
    """``(results, markdown tables)`` from the row files (:func:`write_figures` adds the CSV and the plots)."""
    rows = read_rows(work)
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
    return summary, markdown_tables(rows, summary["headline"])


def write_figures(out: Path, rows: dict) -> None:
    """``results.csv`` and the plots (:func:`plot`) of the rows (``results.json``'s ``rows``) into ``out``."""
    scored = {k: v for k, v in rows.items() if "dev_spearman" in v}
    write_csv(out / "results.csv", scored)
    plot(out, rows, scored)


def write_csv(path: Path, scored: dict) -> None:
    """One line per scored row: its settings, dev Spearman ×100 and timings."""
    with path.open("w", newline="", encoding="utf-8") as fh:
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


def plot(out: Path, rows: dict, scored: dict) -> None:
    """``sts_dev_rows.png`` (every configuration), ``alignment_uniformity.png`` and ``cls_energy.png``."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

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
