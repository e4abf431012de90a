"""The members driver's report: ``evaluation/members/results.json`` and the tables between the ``MEMBERS`` markers
of ``evaluation/DEFAULTS.md`` (every number from the row files of :mod:`evaluation.drivers.members`)."""

from __future__ import annotations

import statistics
from pathlib import Path

from evaluation.drivers.formatting import mean_std, mean_std_text, percent
from evaluation.drivers.grid import read_rows
from evaluation.drivers.members_settings import KINDS, SHIPPED, VARIANT_LABELS, trained_twin
from evaluation.drivers.repro_default_settings import genre_label


def _seconds_text(seconds: list) -> str:
    """The mean training seconds of rows, or "–" for rows that trained nothing themselves (a twin's towers)."""
    trained = [s for s in seconds if s]
    return f"{statistics.fmean(trained):.0f}" if trained else "–"


def _table(title: str, header: list[str], lines: list[list[str]]) -> str:
    out = [f"### {title}", "", "| " + " | ".join(header) + " |", "|" + " --- |" * len(header)]
    out += ["| " + " | ".join(line) + " |" for line in lines]
    return "\n".join(out) + "\n\n"


def _seeded(rows: dict, names: list[str]) -> list[dict]:
    return [rows[n] for n in names if n in rows]


def _genres(found: list[dict], split: str) -> list[str]:
    genres = sorted(found[0][f"{split}_genres"]) if found else []
    return [mean_std_text([r[f"{split}_genres"][g] for r in found]) for g in genres]


def _plain(values: list[float], digits: int = 2) -> str:
    if not values:
        return "–"
    m, sd = mean_std(values)
    return f"{m:.{digits}f}" + (f" ± {sd:.{digits}f}" if sd is not None else "")


def training_seconds(rows: dict, choice: str) -> float:
    """The training a pipeline with ``choice`` (a kind, ``twin:KIND``, ``towers:KIND`` or ``today``) runs before its
    ensemble, from the members' rows: the least contended run of each (this machine is shared; the same warm-up
    measured 400-1,540 s)."""

    def least(prefix: str) -> float:
        return min(r["train_seconds"] for n, r in rows.items()
                   if n.startswith(prefix) and n[len(prefix) :].isdigit() and r.get("train_seconds"))  # fmt: skip

    kind = choice.rpartition(":")[2]
    a, b = KINDS["dropout" if kind == "today" else kind]
    twin = trained_twin(choice)
    return least(f"{a}_s") + least(f"{b}_s") + (least(f"{twin}_{kind}_s") if twin else 0.0)


def worst_genre(row: dict, shipped: dict) -> float:
    """How far ``row``'s worst selection genre is above the start's (negative: below)."""
    return min(row["select_genres"][g] - v for g, v in shipped["select_genres"].items())


def build_report(work: Path, cfg: dict) -> tuple[dict, str]:
    """``(results, tables)`` from ``<work>/results``: the rows as they are, and the Markdown tables."""
    rows = read_rows(work)
    seeds = cfg["seeds"]
    shipped = rows.get(SHIPPED)
    tables = ""
    genre_names = [genre_label(g) for g in sorted(shipped["dev_genres"])] if shipped else []
    select_genres = [genre_label(g) for g in sorted(shipped["select_genres"])] if shipped else []

    # -- every warm-up variant as a member on its own
    lines = []
    if shipped:
        lines.append(["**shipped MiniLM (row to beat)**", "1", percent(shipped["select_spearman"]),
                      *[percent(v) for _, v in sorted(shipped["select_genres"].items())],
                      percent(shipped["dev_spearman"]), *[percent(v) for _, v in sorted(shipped["dev_genres"].items())],
                      "–"])  # fmt: skip
    for variant, label in VARIANT_LABELS.items():
        found = [r for n, r in rows.items() if r.get("group") == "warmup" and r.get("variant") == variant]
        if found:
            lines.append([label, str(len(found)), mean_std_text([r["select_spearman"] for r in found]),
                          *_genres(found, "select"), mean_std_text([r["dev_spearman"] for r in found]),
                          *_genres(found, "dev"), _seconds_text([r["train_seconds"] for r in found])])  # fmt: skip
    labels = {"twin": "the twin (summed towers)", "short": "the shorter twin (summed towers)",
              "tower": "one of the twin's towers",
              "untrained": "the twin before twin training (the warm-ups summed)"}  # fmt: skip
    for name, label in labels.items():
        found = [r for r in rows.values() if r.get("group") == name]
        if found:
            lines.append([f"{label}, {found[0]['kind']} warm-ups", str(len(found)),
                          mean_std_text([r["select_spearman"] for r in found]), *_genres(found, "select"),
                          mean_std_text([r["dev_spearman"] for r in found]), *_genres(found, "dev"),
                          _seconds_text([r.get("train_seconds") for r in found])])  # fmt: skip
    tables += _table(
        "Members on their own (Spearman ×100, mean ± std over seeds; selection split = 1,497 STS-B *train* pairs)",
        ["member", "seeds", "selection", *[f"sel. {g}" for g in select_genres], "dev",
         *[f"dev {g}" for g in genre_names], "train s"],
        lines,
    )  # fmt: skip

    # -- the ensembles: how differently their trained members err, and what the ensemble gains over its best one
    lines = []
    kinds = [(k, f"ens_{k}_s{{}}") for k in KINDS] + sorted(
        {(r["kind"], f"ens_{r['kind'].split(':')[0]}_{r['kind'].split(':')[1]}_s{{}}") for r in rows.values()
         if r.get("group") == "ensemble" and ":" in r.get("kind", "")})  # fmt: skip
    for kind, pattern in kinds:
        found = _seeded(rows, [pattern.format(s) for s in seeds])
        if not found:
            continue
        a, b = KINDS[kind.split(":")[-1]]
        members = {"twin": "start + twin", "short": "start + shorter twin", "towers": "start + tower I + tower II",
                   "untrained": "start + untrained twin"}.get(kind.split(":")[0], f"start + {a} + {b}")  # fmt: skip
        lines.append([f"{kind}" + (" (today's default)" if kind == "dropout" else ""), members,
                      _plain([r["error_agreement"] for r in found]), _plain([r["cka"] for r in found]),
                      mean_std_text([r["select_spearman"] for r in found]),
                      mean_std_text([r["gain_select"] for r in found]), mean_std_text([r["dev_spearman"] for r in found]),
                      mean_std_text([r["gain_dev"] for r in found]), *_genres(found, "dev"),
                      "; ".join(sorted({f"{r['weights'][1]:g}" for r in found})),
                      f"{100 * min(worst_genre(r, shipped) for r in found):+.2f}",
                      "; ".join(f"{r['unconstrained_weight']:g}" for r in found),
                      mean_std_text([r["unconstrained_select"] for r in found]),
                      mean_std_text([r["unconstrained_select"] - r["best_member_select"] for r in found])])  # fmt: skip
    tables += _table(
        "Ensembles and how their members differ (the start at weight 1, the trained members at one weight for every "
        "seed: the best on the selection split among those keeping each of its genres within 0.3 of the start's in "
        "every seed; error agreement: Spearman of the two trained members' rank errors on the selection split, "
        "1 = they err alike; CKA: linear CKA of their selection-split embeddings; gain: over the ensemble's best "
        "member; the last three columns: each seed's best weight with no genre kept)",
        ["kind", "members", "error agreement", "CKA", "selection", "gain (selection)", "dev", "gain (dev)",
         *[f"dev {g}" for g in genre_names], "weight", "worst sel. genre vs start", "no genre kept: weight per seed",
         "no genre kept: selection", "no genre kept: gain"],
        lines,
    )  # fmt: skip

    # -- the students the pipeline distils from the chosen kind and from today's default
    lines, students = [], {}
    for r in rows.values():
        if r.get("group") == "student":
            students.setdefault(r["choice"], []).append(r)
    # the ensemble's teacher vectors and the distillation, as the pipeline timed them in this run
    later = {c: statistics.fmean(sum(v for k, v in r["stage_seconds"].items() if not k.startswith("warmup"))
                                 for r in found) for c, found in students.items()}  # fmt: skip
    for choice, found in sorted(students.items(), key=lambda item: item[0] == "today"):
        weights = found[0]["settings"]["ensemble"]["weights"]
        which = "the default before (dropout" if choice == "today" else f"new default ({choice}"
        label = f"{which}, weights {', '.join(f'{w:g}' for w in weights)})"
        total = training_seconds(rows, choice) + later[choice]
        before = training_seconds(rows, "today") + later["today"] if "today" in later else None
        lines.append([label, str(len(found)),
                      mean_std_text([r["select_spearman"] for r in found]), *_genres(found, "select"),
                      f"{100 * min(worst_genre(r, shipped) for r in found):+.2f}",
                      mean_std_text([r["dev_spearman"] for r in found]), *_genres(found, "dev"),
                      f"{training_seconds(rows, choice) / 60:.1f}", f"{later[choice] / 60:.1f}",
                      f"{total / before:.2f}" if before else "–"])  # fmt: skip
    if lines:
        tables += _table(
            "Students of `jtcse pipeline` (the warm-ups above reused, the ensemble and the distillation run by the "
            "pipeline, today's recipe last; minutes on this machine: the members' training, the least contended "
            "run of each, and the pipeline's later stages as timed in this run)",
            ["pipeline", "seeds", "selection", *[f"sel. {g}" for g in select_genres], "worst sel. genre vs start",
             "dev", *[f"dev {g}" for g in genre_names], "members' training, min", "ensemble + distillation, min",
             "wall time vs the default before"],
            lines,
        )  # fmt: skip
    return {"rows": rows, "config": cfg}, tables
