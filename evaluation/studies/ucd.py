"""The UCD study's tables (``ucd.toml``; ``evaluation/UCD.md``, ``evaluation/ucd/``)."""

from __future__ import annotations

import statistics

from evaluation.report import chosen, mean_std, mean_std_text, percent, titled
from evaluation.study import Scope, Waiting


def _weight_scores(row: dict, weight: float) -> dict:
    """An ensemble row's scores at the twin's ``weight`` (rows made before the study runner hold ``weight_grid``)."""
    if "weight_grid" in row:
        return row["weight_grid"][str(weight)]
    return next(option for option in row["grid"] if option["weights"][1] == weight)


def _stages(scope: Scope) -> str:
    lines = []
    for label, pooling, pattern, *waiting in scope.study.get("tables")["stages"]["lines"]:
        try:
            label, pattern = scope.resolve(label), scope.resolve(pattern)
        except Waiting:
            lines.append(f"| {waiting[0]} | {pooling} | 0 | not run |  | – |")
            continue
        if "{seed}" not in pattern:
            row = scope.rows.get(pattern, {})
            dev, select = percent(row.get("dev_spearman")), percent(row.get("select_spearman"))
            lines.append(f"| {label} | {pooling} | – | {dev} | | {select} |")
            continue
        found = [scope.rows[n] for n in scope.seeded(pattern) if n in scope.rows]
        dev, select = [r["dev_spearman"] for r in found], [r["select_spearman"] for r in found]
        per_seed, mean = ", ".join(f"{100 * v:.2f}" for v in dev), percent(statistics.fmean(select)) if select else "–"
        lines.append([label, pooling, str(len(dev)), mean_std_text(dev, count=True), per_seed, mean])
    return titled(scope, "stages", lines)


def _probes(scope: Scope, tuned) -> str:
    rows, seeds, lines = scope.rows, scope.study.seeds, []
    for lr in scope.study.settings["twin_lrs"]:
        r = rows.get(f"twin_lr{lr:g}_s{seeds[0]}")
        if not r:
            lines.append(f"| {lr:g} | not run | | | |")
            continue
        loss = f"{r.get('first_loss', 0):.4f} → {r.get('last_loss', 0):.4f}"
        mark = " **(chosen)**" if lr == tuned else ""
        lines.append(
            [
                f"{lr:g}{mark}",
                percent(r["select_spearman"]),
                percent(r["dev_spearman"]),
                loss,
                f"{r.get('train_seconds', 0):.0f}",
            ]
        )
    twins, deltas = [], []
    for i, s in enumerate(seeds):
        a, b = s, seeds[(i + 1) % len(seeds)]
        twin = rows.get(f"twin_lr{tuned:g}_s{s}", {}).get("dev_spearman") if tuned else None
        wa, wb = (rows.get(f"warmup_s{x}", {}).get("dev_spearman") for x in (a, b))
        if twin is not None and wa is not None and wb is not None:
            deltas.append(twin - max(wa, wb))
            twins.append([str(s), f"W{a}, W{b}", percent(max(wa, wb)), percent(twin), f"{100 * deltas[-1]:+.2f}"])
    warm, note = [rows[f"warmup_s{s}"]["dev_spearman"] for s in seeds if f"warmup_s{s}" in rows], ""
    if deltas and len(warm) > 1:
        m, sd = mean_std(deltas)
        note = f"Twin − better warm-up: {100 * m:+.2f}" + (f" ± {100 * sd:.2f}" if sd is not None else "")
        note += f"; warm-up seed spread (std of W_s): {100 * statistics.stdev(warm):.2f}."
    return titled(scope, "probe", lines, next=seeds[1 % len(seeds)]) + titled(scope, "twins", twins, note)


def _ensembles(scope: Scope, kept) -> str:
    rows, seeds, grid, lines = scope.rows, scope.study.seeds, scope.study.settings["weight_grid"], []
    for s in seeds:
        r = rows.get(f"ensemble_s{s}")
        if r:
            cells = [_weight_scores(r, w) for w in grid]
            lines.append(
                [str(s), *(f"{percent(c['select'])} / {percent(c['dev'])}" for c in cells), f"{r['weights'][1]:g}"]
            )
    columns = [f"w={w:g} select / dev" for w in grid]
    shipped, objectives = rows.get("minilm_mean", {}).get("dev_spearman"), []
    for o in scope.study.settings["objectives"]:
        r = rows.get(f"ucd_{o}_s{seeds[0]}")
        if not r:
            objectives.append(f"| {o} | not run | | | |")
            continue
        delta = f"{100 * (r['dev_spearman'] - shipped):+.2f}" if shipped is not None else "–"
        label = f"`{o}`" + (" **(kept)**" if o == kept else "")
        objectives.append(
            [
                label,
                percent(r["select_spearman"]),
                percent(r["dev_spearman"]),
                delta,
                f"{r.get('train_seconds', 0):.0f}",
            ]
        )
    speed, note = rows.get("speed"), ""
    if speed:
        rate = speed["sentences_per_s"]
        note = (
            f"Encode speed ({speed['sentences']} sentences, best of 3 interleaved repeats): shipped MiniLM "
            f"{rate['shipped']:.0f} sentences/s, UCD student {rate['ucd']:.0f} sentences/s (ratio "
            f"{speed['ratio_ucd_to_shipped']:.2f}; modules {', '.join(speed['modules']['ucd'])})."
        )
    return titled(scope, "weights", lines, weight_columns=columns) + titled(scope, "objectives", objectives, note)


def report(scope: Scope) -> tuple[dict, str]:
    cfg, rows = scope.study.settings, scope.rows
    tuned, kept = chosen(scope, "tuned_lr"), chosen(scope, "kept_objective")
    tables = _stages(scope) + _probes(scope, tuned) + _ensembles(scope, kept)

    def seeded(prefix: str | None) -> list[float]:
        return (
            [rows[f"{prefix}_s{s}"]["dev_spearman"] for s in cfg["seeds"] if f"{prefix}_s{s}" in rows] if prefix else []
        )

    final = {
        "shipped_minilm": rows.get("minilm_mean", {}).get("dev_spearman"),
        "warmup": seeded("warmup"),
        "twin": seeded(f"twin_lr{tuned:g}" if tuned else None),
        "ensemble": seeded("ensemble"),
        "ensemble_equal_weights": seeded("ensemble_eq"),
        "ucd": seeded(f"ucd_{kept}" if kept else None),
    }
    results = {"settings": cfg, "tuned_twin_lr": tuned, "kept_objective": kept, "rows": rows, "final": final}
    return results, tables.rstrip("\n") + "\n"
