"""The one report builder: a study's ``results.json`` (its rows, its choices), ``tables.md`` and the generated part of
its write-up, from its rows alone. A study module's ``report(scope)`` lays out a write-up whose tables are its own;
every other study's tables are the file's ``[[tables]]`` (:func:`scores_table`). The numbers are printed as the
write-ups print them: Spearman ×100, mean ± sample std over the seeds."""

from __future__ import annotations

import json
import math
import re
import statistics
from pathlib import Path

from evaluation.choices import means, paired, total
from evaluation.scoring import main_score
from evaluation.study import Scope, Waiting
from jtcse.training.selection import share_kept


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


def number(row: dict, dotted: str) -> float | None:
    """A row's number at ``dotted`` (``stage_seconds.twin``; a table: the sum of its numbers); ``None`` without."""
    for key in dotted.split("."):
        row = row.get(key) if isinstance(row, dict) else None
    values = list(row.values()) if isinstance(row, dict) else [row]
    return sum(values) if values and None not in values else None


def _mean(rows: list[dict], field: str) -> float | None:
    values = [number(row, field) for row in rows]
    return statistics.fmean(values) if values and None not in values else None


def _line(scope: Scope, spec: dict, line: dict, names: dict, has: dict) -> list[str] | None:
    """The cells of one line of :func:`scores_table` (``names``: its ``each`` values; ``has``: the table has a
    ``beat`` / ``kept`` column); ``None`` without rows."""
    study, splits = scope.study, list(spec.get("splits", scope.study.splits))
    found = seeded(scope, line["row"], names)
    if not found:
        return None
    cells = [scope.resolve(line["label"], names), str(len(found))]
    cells += [mean_std_text([main_score(r, s) for r in found]) for s in splits]
    cells.append(mean_std_text([total(r, study.selection) for r in found]))
    beat, kept, pairs = line.get("beat", spec.get("beat")), line.get("kept", spec.get("kept")), []
    if beat:  # the same seeds of the row and of the row to beat (a row without seeds against each)
        rows, bases = scope.seeded(line["row"], names), scope.seeded(beat, names)
        rows, bases = rows * (len(bases) if len(rows) == 1 else 1), bases * (len(rows) if len(bases) == 1 else 1)
        pairs = [(scope.rows[n], scope.rows[b]) for n, b in zip(rows, bases, strict=True) if {n, b} <= set(scope.rows)]
        difference = paired(*map(list, zip(*pairs, strict=True)), study.selection) if pairs else None
        error = "" if difference is None or math.isnan(difference.stderr) else f" ± {100 * difference.stderr:.2f}"
        cells.append(f"{100 * difference.mean:+.2f}{error}" if difference else "–")
    elif has["beat"]:
        cells.append("–")
    if kept:
        teacher, start = (seeded(scope, kept[k], names) for k in ("teacher", "start"))
        totals = [statistics.fmean(means(rows, study.selection).values()) for rows in (found, teacher, start) if rows]
        share = share_kept(*totals) if len(totals) == 3 else None
        cells.append("–" if share is None else f"{share:.0%}")
    elif has["kept"]:
        cells.append("–")
    for _, field, *ratio in spec.get("columns", []):  # a field's mean, or its ratio to the row to beat's
        mean = _mean([a for a, _ in pairs] if ratio else found, field)
        base = _mean([b for _, b in pairs], field) if ratio else 1.0
        cells.append("–" if mean is None or not base else f"{mean / base:.2f}" if ratio else f"{mean:.0f}")
    return cells


def scores_table(scope: Scope, spec: dict) -> str:
    """A ``[[tables]]`` entry: for each of its ``rows`` (``label`` and ``row``, a pattern over the seeds; ``each``:
    one line a combination of its values), the seeds found, each split's mean ± std (``splits``, by their
    ``label``), the mean over the selection splits; with ``beat`` (a row pattern, the table's or the line's own) the
    paired difference of that mean against it over the same seeds ± its standard error; with ``kept`` (``teacher``
    and ``start`` patterns) the share of the teacher's gain over the start on that mean that the row keeps
    (:func:`jtcse.training.selection.share_kept`); ``columns`` (``[header, field]``) a field's mean (:func:`number`),
    ``[header, field, "ratio"]`` its ratio to the row to beat's. A line waiting on a choice is left out."""
    study, splits = scope.study, list(spec.get("splits", scope.study.splits))
    has = {key: key in spec or any(key in line for line in spec["rows"]) for key in ("beat", "kept")}
    header = ["model", "seeds", *(study.splits[s].get("label", s) for s in splits), "selection mean"]
    header += ["Δ vs the row to beat ± SE"] * has["beat"] + ["share of the teacher's gain kept"] * has["kept"]
    header += [column[0] for column in spec.get("columns", [])]
    lines = []
    for line in spec["rows"]:
        for names in scope.combos(line.get("each", {}), {}):
            try:
                cells = _line(scope, spec, line, names, has)
            except Waiting:
                continue
            lines += [cells] if cells else []
    return table(scope.resolve(spec["title"]), header, lines, spec.get("note", ""))


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
