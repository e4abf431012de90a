"""The kinds of row a study makes (a ``[[rows]]`` entry's ``kind``), each a function ``kind(runner, row)`` that makes
and saves one row, built on jtcse's public API; a study module may define kinds of its own. Where a kind's model is
(``KIND_folder``) and how it loads (``KIND_load``) default to the row's folder in the work folder.

``model``: a model scored as it is (``from``: a path, else the embedded MiniLM; ``args``: ``load_model``'s).
``simcse``, ``twin``, ``distill``: a trainer run into the row's folder (``from``: its models, rows or ``none``) and
scored. ``untrained``: the twin of two rows before twin training. ``tower``: tower ``args.index`` of a twin row.
``ensemble``: the concat ensemble of scored rows, weights chosen from ``weights`` or ``grid`` (:func:`ensemble`).
``pipeline``: ``jtcse pipeline`` of ``values`` in the row's folder, the ``reuse`` folders copied in first, its
student scored; ``pipeline_folder``: another folder of a pipeline row (e.g. its teacher) scored. ``speed``,
``retrieval``, ``agreement``, ``diagnostics``: measurements (see each).
"""

from __future__ import annotations

import json
import shutil
import time
from pathlib import Path

from evaluation.choices import choose, worst_genre
from evaluation.study import Row, Waiting


def _model(path):
    from jtcse.modeling.loading import load_model

    return load_model(str(path), device="cpu")


# ---------------------------------------------------------------------------------------------------- models
def model(runner, row: Row) -> None:
    runner.score(row, lambda: model_load(runner, row))


def model_load(runner, row: Row):
    from jtcse.modeling.loading import load_model

    return load_model((runner.value(row, "from") or [None])[0], device="cpu", **runner.value(row, "args", {}))


def model_folder(runner, row: Row) -> Path:
    from jtcse.defaults import default_tower_path

    return Path((runner.value(row, "from") or [None])[0] or default_tower_path())


def _trainer(runner, row: Row, train) -> None:
    inputs = [str(runner.folder(name)) if name else None for name in runner.value(row, "from", [])] or [None]
    args = {"seed": row.names.get("seed", 0) + runner.value(row, "seed_offset", 0), **runner.value(row, "args", {})}
    corpus, out = runner.corpus(runner.value(row, "corpus_lines")), runner.work / row.name
    runner.trained(row, lambda: train(*inputs, corpus, out, **args))


def simcse(runner, row: Row) -> None:
    from jtcse.training.simcse import train_simcse

    _trainer(runner, row, train_simcse)


def twin(runner, row: Row) -> None:
    from jtcse.training.twin import train_twin

    _trainer(runner, row, train_twin)


def distill(runner, row: Row) -> None:
    from jtcse.training.distill import distill as train_student

    _trainer(runner, row, train_student)


def untrained(runner, row: Row) -> None:
    runner.score(row, lambda: untrained_load(runner, row))


def untrained_load(runner, row: Row):
    from jtcse.modeling.build import build_twin

    towers = [str(runner.folder(name)) for name in runner.value(row, "from")]
    return build_twin(*towers, device="cpu", **runner.value(row, "args", {}))


def untrained_folder(runner, row: Row) -> Path:
    """The untrained twin, saved when a later row needs its folder (an ensemble of it distilled)."""
    out = runner.work / row.name
    if not (out / "modules.json").is_file():
        untrained_load(runner, row).save(str(out))
    return out


def tower(runner, row: Row) -> None:
    runner.score(row, lambda: _model(tower_folder(runner, row)))


def tower_folder(runner, row: Row) -> Path:
    from jtcse.modeling.loading import load_model

    (twin_row,) = runner.value(row, "from")
    towers = runner.work / f"{twin_row}_towers"
    if not (towers / "tower_2" / "modules.json").is_file():
        load_model(str(runner.folder(twin_row)), device="cpu")[0].export_towers(towers)
    return towers / f"tower_{runner.value(row, 'args')['index']}"


# ---------------------------------------------------------------------------------------------------- ensembles
def _weight_options(runner, row: Row, count: int) -> list[tuple[float, ...]]:
    grid = runner.value(row, "grid")
    if grid is not None:  # the first member (the start) at 1, the others at one common weight
        return [(1.0, *[float(w)] * (count - 1)) for w in grid]
    return [tuple(map(float, w)) for w in runner.value(row, "weights")]


def ensemble(runner, row: Row) -> None:
    """The concat ensemble of the scored rows ``from`` (the start first), scored from their cosines at each weight
    option (``grid``: the start at 1, the others at each weight; or ``weights``: the options), the weights chosen by
    ``rule`` (:mod:`evaluation.choices`; ``shared``: one choice for every seed, on the seeds' means). The row holds
    every option's scores, what its members score, the gain over the best and (``pair``) how two of them differ;
    ``save``: the ensemble is saved and scored as a model."""
    combo = {key: row.names[key] for key in row.entry.get("each", {})}  # the seeds of this combination
    shared = runner.value(row, "shared")
    siblings = [
        r for r in runner.scope.expand(row.entry) if r.name == row.name or shared and combo.items() <= r.names.items()
    ]
    members = {r.name: runner.value(r, "from") for r in siblings}
    missing = sorted({m for names in members.values() for m in names if m not in runner.rows})
    if missing:
        raise Waiting(f"members {missing}")
    options = _weight_options(runner, row, len(members[row.name]))
    scores = {name: {w: runner.scorer.ensemble(ms, w) for w in options} for name, ms in members.items()}
    spec = {"rule": runner.value(row, "rule", "best"), **runner.value(row, "guard", {})}
    chosen = choose({w: [scores[name][w] for name in members] for w in options}, runner.scope, spec)
    alone = choose({w: [scores[row.name][w]] for w in options}, runner.scope, {})
    rows = [runner.rows[m] for m in members[row.name]]
    own = scores[row.name]
    record = {"members": members[row.name], "weights": list(chosen), **own[chosen]}
    for split in runner.scorer.pairs:
        record[f"best_member_{split}"] = max(r[f"{split}_spearman"] for r in rows)
        record[f"gain_{split}"] = own[chosen][f"{split}_spearman"] - record[f"best_member_{split}"]
        record[f"unconstrained_{split}"] = own[alone][f"{split}_spearman"]
    record["unconstrained_weight"] = alone[-1]
    if "margin" in spec:
        start = runner.rows[runner.study.get("start")]
        record["genre_safe"] = worst_genre([own[chosen]], start, runner.study.selection) >= -spec["margin"]
    if runner.value(row, "pair"):
        record.update(
            pair=runner.value(row, "pair"),
            **runner.scorer.diversity(*runner.value(row, "pair"), runner.study.selection[0]),
        )
    record["grid"] = [
        {"weights": list(w), **{s: v[f"{s}_spearman"] for s in runner.scorer.pairs}} for w, v in own.items()
    ]
    if runner.value(row, "save"):
        runner.score(row, lambda: _model(ensemble_folder(runner, row, chosen)), **record)
    else:
        runner.save(row, record)


def ensemble_folder(runner, row: Row, weights=None) -> Path:
    """The ensemble saved as a checkpoint (once), e.g. to be distilled."""
    from jtcse.training.ensemble import save_ensemble

    out = runner.work / row.name
    if not (out / "modules.json").is_file():
        weights = weights or runner.rows[row.name]["weights"]
        paths = [str(runner.folder(m)) for m in runner.value(row, "from")]
        save_ensemble(paths, out, weights=list(weights), overwrite=True, device="cpu")
    return out


# ---------------------------------------------------------------------------------------------------- pipeline runs
def pipeline(runner, row: Row) -> None:
    """``jtcse pipeline`` (the library call) of ``values`` in the row's folder, the folders of ``reuse`` (``{stage
    folder: row}``, or ``ROW/FOLDER``) copied in first with their files' times, so that the pipeline finds those
    stages done; its student scored, with the seconds of each stage it ran (``stage_seconds``) and of each its
    student needs (``pipeline_seconds``: those it reused from the rows it reused them from). Its ``values`` see
    ``folder`` (the row's) and ``inputs`` (each split as a ``--selection-file`` spec)."""
    from jtcse.pipeline.run import run_pipeline
    from jtcse.pipeline.settings import PipelineConfig
    from jtcse.pipeline.stages import DISTILL, STAGES

    out, reused = runner.work / row.name, {}
    for folder, source in runner.value(row, "reuse", {}).items():
        made = runner.rows.get(source.split("/")[0])  # a row is reused once it is made
        path = runner.work / source if "/" in source and made else runner.folder(source.split("/")[0])
        if not path.is_dir():
            raise Waiting(f"{path} to reuse")
        if not (out / folder).exists():
            shutil.copytree(path, out / folder, ignore=shutil.ignore_patterns("checkpoints"))
        stage = next(s.metadata.name for s in STAGES if s.metadata.folder == folder)
        reused[stage] = made.get("pipeline_seconds", {}).get(stage, made.get("train_seconds"))
    names = {**row.names, "folder": str(out), "inputs": runner.scorer.specs}
    values = {"corpus": str(runner.corpus()), "seed": row.names.get("seed", 42), "until": DISTILL.metadata.until}
    config = PipelineConfig.from_values({**values, **runner.value(Row(row.name, row.entry, names), "values", {})})

    def run() -> dict:
        return run_pipeline(out, config, device="cpu")["stages"][DISTILL.metadata.name]

    def seconds() -> dict:  # a stage done before (not one reused from another row) keeps its own run's seconds
        summary = json.loads((out / "pipeline_summary.json").read_text(encoding="utf-8"))
        took = {r["stage"]: r["stage_seconds"] for r in summary["table"] if r.get("stage_seconds") is not None}
        ran = {stage: s for stage, s in took.items() if stage not in reused}
        ran = {**runner.rows[row.name].get("stage_seconds", {}), **ran}
        return {"stage_seconds": ran, "pipeline_seconds": {**reused, **ran}}

    runner.trained(row, run, settings=config.values(), after=seconds)


def pipeline_folder(runner, row: Row) -> Path:
    from jtcse.pipeline.stages import DISTILL

    return runner.work / row.name / DISTILL.metadata.folder


def pipeline_part(runner, row: Row) -> None:
    """A folder of a pipeline row (``from``: the row, ``args.folder``: e.g. its ensemble) scored as a model, with the
    seconds of the row's stages it needs (``pipeline_seconds``: those up to its folder's)."""
    from jtcse.pipeline.stages import STAGES

    folder = pipeline_part_folder(runner, row)
    order = [s.metadata.name for s in STAGES]
    last = next(s.metadata.name for s in STAGES if s.metadata.folder == folder.name)
    spent = runner.rows[folder.parent.name].get("pipeline_seconds", {})
    needed = {stage: v for stage, v in spent.items() if order.index(stage) <= order.index(last)}
    runner.score(row, lambda: _model(folder), pipeline_seconds=needed)


def pipeline_part_folder(runner, row: Row) -> Path:
    return runner.folder(runner.value(row, "from")[0]).parent / runner.value(row, "args")["folder"]


# ---------------------------------------------------------------------------------------------------- measurements
def speed(runner, row: Row) -> None:
    """Sentences/s of the shipped MiniLM and of row ``from`` (as ``args.label``) on the same sentences, batch and
    length, the best of 3 rounds with the models taking turns (``scripts/bench_encode.py``'s rule)."""
    from jtcse.modeling.loading import load_model

    label, (student,) = runner.value(row, "args")["label"], runner.value(row, "from")
    models = {"shipped": load_model(None, device="cpu"), label: _model(runner.folder(student))}
    sentences = runner.speed_sentences()
    times: dict[str, list[float]] = {key: [] for key in models}
    for _ in range(3):
        for key, encoder in models.items():
            encoder.max_seq_length = runner.settings["eval_max_seq_length"]
            started = time.perf_counter()
            encoder.encode(sentences, batch_size=64)
            times[key].append(time.perf_counter() - started)
    rate = {key: len(sentences) / min(spent) for key, spent in times.items()}
    record = {"group": "speed", "sentences": len(sentences), "student": student, "sentences_per_s": rate}
    record[f"ratio_{label}_to_shipped"] = rate[label] / rate["shipped"]
    runner.save(row, {**record, "modules": {k: [type(m).__name__ for m in encoder] for k, encoder in models.items()}})


def retrieval(runner, row: Row) -> None:
    """Adds ``retrieval`` to row ``name``: the retrieval check (pairs of ``args.file`` scoring at least 4 as query
    and answer among all its sentences; its first ``args.limit`` lines), scored by mteb."""
    from jtcse.evaluation.retrieval_check import retrieval_check

    args, path = runner.value(row, "args"), runner.data / runner.value(row, "args")["file"]
    if args.get("limit"):
        lines = path.read_text(encoding="utf-8").splitlines()[: args["limit"]]
        path = runner.work / "retrieval-pairs.csv"
        path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    encoder = runner.load(row.name)
    encoder.max_seq_length = runner.settings["eval_max_seq_length"]
    runner.update(row.name, retrieval=retrieval_check(encoder, path, batch_size=64))


def agreement(runner, row: Row) -> None:
    """Adds ``tower_agreement`` to row ``name``: how alike rows ``from`` err on ``args.split`` (rank errors)."""
    measured = runner.scorer.diversity(*runner.value(row, "from"), runner.value(row, "args")["split"])
    runner.update(row.name, tower_agreement=measured["error_agreement"])


def diagnostics(runner, row: Row) -> None:
    """Alignment / uniformity on the ``dev`` split and CLS energy on unseen corpus lines of row ``from``."""
    from jtcse.evaluation.diagnostics import run_diagnostics

    (target,) = runner.value(row, "from")
    count, started, pairs = runner.settings["diag_sentences"], time.perf_counter(), runner.scorer.pairs["dev"]
    report = run_diagnostics(
        runner.load(target),
        runner.diag_sentences(),
        runner.work / row.name,
        pairs=pairs,
        max_pairs=count,
        seq_len=32,
        max_length=64,
        model_name=target,
    )
    energy = {encoder: v["cls_energy"] for encoder, v in report["encoders"].items()}
    record = {"group": "diagnostics", "row": target, "seconds": round(time.perf_counter() - started, 2)}
    record.update(alignment_uniformity=report["alignment_uniformity"], cls_energy=energy)
    runner.save(
        row, {**record, "n_positive_pairs": report.get("n_positive_pairs"), "n_sentences": report["n_sentences"]}
    )
