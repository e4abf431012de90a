"""The one report builder: a study's ``results.json`` (its rows, its choices), ``tables.md`` and the generated part of
its write-up, from its rows alone. A study module's ``report(scope)`` lays out a write-up whose tables are its own;
every other study's tables are the file's ``[[tables]]`` (:func:`scores_table`). The numbers are printed as the
write-ups print them: Spearman ×100, mean ± sample std over the seeds."""

from __future__ import annotations

import json
import re
import statistics
from pathlib import Path

from evaluation.choices import means, paired_difference, total
from evaluation.study import Scope, Waiting


def mean_std(values: list[float]) -> tuple[float, float | None]:
    """Mean and sample standard deviation (``None`` for a single value)."""
    return statistics.fmean(values), (statistics.stdev(values) if len(values) > 1 else None)


def percent(value: float | None) -> str:
    """``value`` ×100 with two decimals; ``–`` when missing."""
    return "–" if value is None else f"{100 * value:.2f}"


def mean_std_text(values: list[float], count: bool = False, empty: str = "not run") -> str:
    """``mean ± std`` ×100 of ``values`` (the std only for several), ``(n=...)`` after it with ``count``."""
    if not values:
        return empty
    m, sd = mean_std(values)
    return (
        f"{100 * m:.2f}" + (f" ± {100 * sd:.2f}" if sd is not None else "") + (f" (n={len(values)})" if count else "")
    )


def genre_label(genre: str) -> str:
    """``main-captions`` -> ``captions``; STS-B train spells the forum genre ``main-forum``, dev ``main-forums``."""
    label = genre.removeprefix("main-")
    return "forums" if label == "forum" else label


def table(title: str, header: list[str], lines: list, note: str = "") -> str:
    """A Markdown table under a ``###`` title, a blank line after it and after ``note`` (a line: its cells, or a
    string written as it is)."""
    out = [f"### {title}", "", "| " + " | ".join(header) + " |", "|" + " --- |" * len(header)]
    out += [line if isinstance(line, str) else "| " + " | ".join(line) + " |" for line in lines]
    return "\n".join(out) + "\n\n" + (f"{note}\n\n" if note else "")


def titled(scope: Scope, name: str, lines: list, note: str = "", **names) -> str:
    """:func:`table` ``name`` of the study file's ``[tables]``: its ``title`` and ``header`` filled from the scope and
    ``names`` (a header item that fills to a list is spliced in)."""
    spec = scope.study.get("tables")[name]
    header = [scope.resolve(item, names) for item in spec["header"]]
    header = [cell for item in header for cell in (item if isinstance(item, list) else [item])]
    return table(scope.resolve(spec["title"], names), header, lines, note)


def seeded(scope: Scope, pattern: str, names: dict | None = None) -> list[dict]:
    """The rows of ``pattern`` (one a seed when it names ``{seed}``) that exist."""
    return [scope.rows[n] for n in scope.seeded(pattern, names) if n in scope.rows]


def chosen(scope: Scope, name: str):
    """The value of a choice (a ``[choices]`` table or a study module's function), ``None`` while it waits."""
    try:
        return scope.lookup(name, {})
    except Waiting:
        return None


def scores_table(scope: Scope, spec: dict) -> str:
    """A ``[[tables]]`` entry: for each of its ``rows`` (``label`` and ``row``, a pattern over the seeds), the seeds
    found, each split's mean ± std, the mean over the selection splits, and with ``beat`` (a row pattern) the paired
    difference of that mean against it over the same seeds ± its standard error; with ``kept`` (``teacher`` and
    ``start`` patterns) the share of the teacher's gain over the start on that mean that the row keeps."""
    study, splits, beat = scope.study, list(spec.get("splits", scope.study.splits)), spec.get("beat")
    header = ["model", "seeds", *splits, "selection mean"]
    header += [f"Δ vs {beat} ± SE"] * bool(beat) + ["share of the teacher's gain kept"] * ("kept" in spec)
    lines = []
    for line in spec["rows"]:
        found = seeded(scope, line["row"])
        if not found:
            continue
        cells = [line["label"], str(len(found)), *(mean_std_text([r[f"{s}_spearman"] for r in found]) for s in splits)]
        cells.append(mean_std_text([total(r, study.selection) for r in found]))
        if beat:
            bases = scope.seeded(beat)
            names = scope.seeded(line["row"]) * (len(bases) if "{seed" not in line["row"] else 1)
            pairs = [
                (scope.rows[n], scope.rows[b]) for n, b in zip(names, bases, strict=True) if {n, b} <= set(scope.rows)
            ]
            diff, error = paired_difference(*map(list, zip(*pairs, strict=True)), study.selection) if pairs else (0, 0)
            cells.append(f"{100 * diff:+.2f} ± {100 * error:.2f}" if pairs else "–")
        if "kept" in spec:
            teacher, start = (seeded(scope, spec["kept"][k]) for k in ("teacher", "start"))
            gain = [statistics.fmean(means(rows, study.selection).values()) for rows in (found, teacher, start)]
            kept = teacher and start and gain[1] != gain[2]
            cells.append(f"{(gain[0] - gain[2]) / (gain[1] - gain[2]):.0%}" if kept else "–")
        lines.append(cells)
    return table(spec["title"], header, lines, spec.get("note", ""))


def build(scope: Scope) -> tuple[dict, str]:
    """``(results, tables)`` of the study from ``scope.rows``."""
    hook = scope.study.hook("report")
    if hook:
        return hook(scope)
    tables = "".join(scores_table(scope, spec) for spec in scope.study.get("tables", {}).values())
    return {"choices": {name: chosen(scope, name) for name in scope.study.choices}, "rows": scope.rows}, tables


def refresh(writeup: Path, tables: str, marker: str) -> None:
    """Replace what stands between ``<!-- {marker} START -->`` and ``<!-- {marker} END -->`` in ``writeup``."""
    pattern = re.compile(rf"<!-- {marker} START -->.*<!-- {marker} END -->", flags=re.S)
    text = pattern.sub(lambda _: f"<!-- {marker} START -->\n{tables}<!-- {marker} END -->", writeup.read_text("utf-8"))
    writeup.write_text(text, encoding="utf-8")


def publish(scope: Scope, out: Path, writeup: Path | None, plots: bool = True) -> str:
    """Write ``results.json``, ``tables.md`` (and the study module's ``figures``, with ``plots`` its plots) into ``out``
    and the tables into the write-up between the study's ``marker`` comments; returns the tables."""
    results, tables = build(scope)
    out.mkdir(parents=True, exist_ok=True)
    (out / "results.json").write_text(json.dumps(results, indent=2, default=str), encoding="utf-8")
    (out / "tables.md").write_text(tables, encoding="utf-8")
    figures = scope.study.hook("figures")
    if figures:
        figures(scope, out, plots)
    if writeup is not None:
        refresh(writeup, tables, scope.study.get("marker", "TABLES"))
    return tables
