"""The UCD driver's report (``evaluation/UCD.md``, ``evaluation/ucd/``) from its row files: ``results.json`` and
the markdown tables."""

from __future__ import annotations

import statistics
from pathlib import Path

from evaluation.drivers.formatting import mean_std, mean_std_text, percent
from evaluation.drivers.grid import read_rows
from evaluation.drivers.splits import best_on_selection

SHIPPED = "minilm_mean"
"""The row to beat: the shipped MiniLM with its own mean pooling."""


def build_report(work: Path, cfg: dict) -> tuple[dict, str]:
    """``(results, markdown tables)`` from the row files."""
    rows = read_rows(work)
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
            out.append(
                f"| {label} | {pooling} | – | {percent(get(single))} | | {percent(get(single, 'select_spearman'))} |"
            )
            return
        vals = seeded(prefix) if prefix else []
        sel = seeded(prefix, "select_spearman") if prefix else []
        per = ", ".join(f"{100 * v:.2f}" for v in vals)
        out.append(
            f"| {label} | {pooling} | {len(vals)} | {mean_std_text(vals, count=True)} | {per} | "
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
            f"| {lr:g}{mark} | {percent(r['select_spearman'])} | {percent(r['dev_spearman'])} | "
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
        out.append(
            f"| {s} | W{a}, W{b} | {percent(max(wa, wb))} | {percent(twin)} | {100 * (twin - max(wa, wb)):+.2f} |"
        )
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
            f"{percent(r['weight_grid'][str(w)]['select'])} / {percent(r['weight_grid'][str(w)]['dev'])}"
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
            f"| `{o}`{mark} | {percent(r['select_spearman'])} | {percent(r['dev_spearman'])} | {delta} | "
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
