"""The members study's own (``members.toml``): the default it weighs (a time bar on the members' training and the
seeds' spread), each student's pipeline settings, and the tables between the ``MEMBERS`` markers of
``evaluation/DEFAULTS.md``."""

from __future__ import annotations

import statistics

from evaluation.choices import worst_genre
from evaluation.report import genre_label, mean_std, mean_std_text, percent, titled
from evaluation.study import Scope, Waiting


def training_seconds(scope: Scope, choice: str) -> float:
    """The training a pipeline with ``choice`` (a kind, ``HOW:KIND`` or ``today``) runs before its ensemble: the
    least contended run of each of its members (this machine is shared; one warm-up measured 400-1,540 s)."""

    def least(prefix: str) -> float:
        return min(
            r["train_seconds"]
            for n, r in scope.rows.items()
            if n.startswith(prefix) and n[len(prefix) :].isdigit() and r.get("train_seconds")
        )

    how, _, kind = choice.rpartition(":")
    a, b = scope.study.define["kinds"]["dropout" if kind == "today" else kind]
    twin = {"twin": "twin", "towers": "twin", "short": "short"}.get(how)
    return least(f"{a}_s") + least(f"{b}_s") + (least(f"{twin}_{kind}_s") if twin else 0.0)


def _pattern(choice: str) -> str:
    how, _, kind = choice.rpartition(":")
    return f"ens_{how}_{kind}_s{{seed}}" if how else f"ens_{kind}_s{{seed}}"


def default_choice(scope: Scope, names: dict) -> str:
    """The new default: the candidate (each kind; the twin of ``twin_kind`` summed, as towers, and shorter) best on
    the selection split (mean over the seeds, each at its one weight) among those keeping every selection genre of
    every seed within ``genre_margin`` of the start's and running within ``time_bar`` times today's wall time;
    today's (``dropout``) unless that one beats it by more than the larger seed spread of the two."""
    cfg, start, selection = scope.study.settings, scope.rows["shipped"], scope.study.selection
    kind = cfg["twin_kind"]
    candidates = [*scope.study.define["kinds"], f"twin:{kind}", f"towers:{kind}", f"short:{kind}"]
    found = {c: [scope.rows.get(_pattern(c).format(seed=s)) for s in scope.study.seeds] for c in candidates}
    if any(r is None for rows in found.values() for r in rows):
        raise Waiting("the ensembles of every candidate")
    bar = cfg["time_bar"] * (training_seconds(scope, "today") + cfg["later_stages_s"])
    fits = [
        c
        for c, rows in found.items()
        if worst_genre(rows, start, selection) >= -cfg["genre_margin"]
        and training_seconds(scope, c) + cfg["later_stages_s"] <= bar
    ]
    means = {c: mean_std([r["select_spearman"] for r in rows]) for c, rows in found.items()}
    best = max(fits or ["dropout"], key=lambda c: means[c][0])
    (ours, our_std), (theirs, their_std) = means["dropout"], means[best]
    return best if theirs - ours > max(our_std or 0.0, their_std or 0.0) else "dropout"


def student_tag(scope: Scope, names: dict) -> str:
    return names["choice"].replace(":", "-")


def student_reuse(scope: Scope, names: dict) -> dict:
    """The folders a student's pipeline reuses: its kind's warm-ups, and the twin of a ``HOW:KIND`` choice."""
    from jtcse.pipeline.stages import TWIN, WARMUP_A, WARMUP_B

    how, _, kind = names["choice"].rpartition(":")
    a, b = scope.study.define["kinds"]["dropout" if kind == "today" else kind]
    reuse = {WARMUP_A.metadata.folder: f"{a}_s{names['seed']}", WARMUP_B.metadata.folder: f"{b}_s{names['seed_b']}"}
    if how:
        reuse[TWIN.metadata.folder] = f"{'short' if how == 'short' else 'twin'}_{kind}_s{names['seed']}"
    return reuse


def student_values(scope: Scope, names: dict) -> dict:
    """The pipeline settings of a student: ``today`` the weights shipped before this study; a kind, or ``HOW:KIND``
    with a twin, at its one weight."""
    cfg, define, choice = scope.study.settings, scope.study.define, names["choice"]
    how, _, kind = choice.rpartition(":")
    a, b = define["kinds"]["dropout" if kind == "today" else kind]
    values = {
        "warmup": {**cfg["simcse"], **define["variants"][a]},
        "warmup_b": define["variants"][b],
        "distill": cfg["distill"],
        "twin": {"enabled": False},
    }
    if choice == "today":
        return {**values, "ensemble": {"enabled": True, "weights": cfg["today_weights"]}}
    w = scope.rows[_pattern(choice).format(seed=scope.study.seeds[0])]["weights"][1]
    values["ensemble"] = {"enabled": True, "weights": [w] * (1 if how in ("twin", "short") else 2) + [1.0]}
    if how:
        steps = {"max_steps": cfg["short_twin_steps"]} if how == "short" else {}
        values["twin"] = {"enabled": True, **define["twin_measured"], **cfg["twin"], **steps}
        values["ensemble"]["twin_towers"] = how == "towers"
    return values


# ---------------------------------------------------------------------------------------------------- tables
def _seconds_text(seconds: list) -> str:
    """The mean training seconds of rows, or "–" for rows that trained nothing themselves (a twin's towers)."""
    trained = [s for s in seconds if s]
    return f"{statistics.fmean(trained):.0f}" if trained else "–"


def _scores(found: list[dict], split: str) -> list[str]:
    """The rows' Spearman on ``split`` and on each of its genres, mean ± std."""
    genres = sorted(found[0][f"{split}_genres"]) if found else []
    cells = [mean_std_text([r[f"{split}_spearman"] for r in found])]
    return cells + [mean_std_text([r[f"{split}_genres"][g] for r in found]) for g in genres]


def _plain(values: list[float]) -> str:
    m, sd = mean_std(values)
    return f"{m:.2f}" + (f" ± {sd:.2f}" if sd is not None else "")


def _worst(found: list[dict], shipped: dict) -> str:
    return f"{100 * min(worst_genre([r], shipped, ['select']) for r in found):+.2f}"


def members_table(scope: Scope, shipped: dict, names: dict) -> str:
    rows, groups = scope.rows, scope.study.get("tables")["members"]["groups"]
    own = [
        percent(v)
        for split in ("select", "dev")
        for v in (shipped[f"{split}_spearman"], *(v for _, v in sorted(shipped[f"{split}_genres"].items())))
    ]
    lines = [["**shipped MiniLM (row to beat)**", "1", *own, "–"]]
    for variant, label in scope.study.define["variant_labels"].items():
        found = [r for r in rows.values() if r.get("group") == "warmup" and r.get("variant") == variant]
        if found:
            seconds = _seconds_text([r["train_seconds"] for r in found])
            lines.append([label, str(len(found)), *_scores(found, "select"), *_scores(found, "dev"), seconds])
    for group, label in groups.items():
        found = [r for r in rows.values() if r.get("group") == group]
        if found:
            seconds = _seconds_text([r.get("train_seconds") for r in found])
            label = f"{label}, {found[0]['kind']} warm-ups"
            lines.append([label, str(len(found)), *_scores(found, "select"), *_scores(found, "dev"), seconds])
    return titled(scope, "members", lines, **names)


def ensembles_table(scope: Scope, shipped: dict, names: dict) -> str:
    rows, kinds, hows = scope.rows, scope.study.define["kinds"], scope.study.get("tables")["ensembles"]["hows"]
    twins = {r["kind"] for r in rows.values() if r.get("group") == "ensemble" and ":" in r["kind"]}
    lines = []
    for choice in [*kinds, *sorted(twins)]:
        found = [rows[n] for n in (_pattern(choice).format(seed=s) for s in scope.study.seeds) if n in rows]
        if not found:
            continue
        how, _, kind = choice.rpartition(":")
        members = hows.get(how, "start + {} + {}".format(*kinds[kind]))
        label = choice + (" (today's default)" if choice == "dropout" else "")
        column = lambda key, found=found: mean_std_text([r[key] for r in found])  # noqa: E731
        weights = "; ".join(sorted({f"{r['weights'][1]:g}" for r in found}))
        alone = "; ".join(f"{r['unconstrained_weight']:g}" for r in found)
        alone_gain = mean_std_text([r["unconstrained_select"] - r["best_member_select"] for r in found])
        lines.append(
            [
                label,
                members,
                _plain([r["error_agreement"] for r in found]),
                _plain([r["cka"] for r in found]),
                column("select_spearman"),
                column("gain_select"),
                column("dev_spearman"),
                column("gain_dev"),
                *_scores(found, "dev")[1:],
                weights,
                _worst(found, shipped),
                alone,
                column("unconstrained_select"),
                alone_gain,
            ]
        )
    return titled(scope, "ensembles", lines, **names)


def students_table(scope: Scope, shipped: dict, names: dict) -> str:
    students: dict[str, list[dict]] = {}
    for r in scope.rows.values():
        if r.get("group") == "student":
            students.setdefault(r["choice"], []).append(r)
    # the ensemble's teacher vectors and the distillation, as the pipeline timed them in this run
    later = {
        c: statistics.fmean(sum(v for k, v in r["stage_seconds"].items() if not k.startswith("warmup")) for r in found)
        for c, found in students.items()
    }
    before = training_seconds(scope, "today") + later["today"] if "today" in later else None
    lines = []
    for choice, found in sorted(students.items(), key=lambda item: item[0] == "today"):
        weights = ", ".join(f"{w:g}" for w in found[0]["settings"]["ensemble"]["weights"])
        which = "the default before (dropout" if choice == "today" else f"new default ({choice}"
        members, rest = training_seconds(scope, choice), later[choice]
        ratio = f"{(members + rest) / before:.2f}" if before else "–"
        lines.append(
            [
                f"{which}, weights {weights})",
                str(len(found)),
                *_scores(found, "select"),
                _worst(found, shipped),
                *_scores(found, "dev"),
                f"{members / 60:.1f}",
                f"{rest / 60:.1f}",
                ratio,
            ]
        )
    return titled(scope, "students", lines, **names) if lines else ""


def report(scope: Scope) -> tuple[dict, str]:
    results = {"rows": scope.rows, "config": scope.study.settings}
    shipped = scope.rows.get("shipped")
    if not shipped:
        return results, ""
    names = {
        f"{split}_genres": [f"{prefix} {genre_label(g)}" for g in sorted(shipped[f"{split}_genres"])]
        for split, prefix in (("select", "sel."), ("dev", "dev"))
    }
    tables = [members_table, ensembles_table, students_table]
    return results, "".join(build(scope, shipped, names) for build in tables)
