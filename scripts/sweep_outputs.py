"""The outputs sweeps: each case of issue 38 ("Every output owned", cases 1-12) and of issue 42 ("Owned by content,
confined to its folder", cases 1-8) run as a user would, against any checkout.

    python scripts/sweep_outputs.py --checkout PATH [--issue 38|42] [--json OUT.json]
    python scripts/sweep_outputs.py --combine BEFORE.json AFTER.json     # one before / after table, runs nothing

Run from the repository root. Each case runs ``python -m jtcse ...`` (``PYTHONPATH=PATH``, offline, one thread)
in a fresh temporary folder of my files (:mod:`jtcse.testing.user_folder`): tiny towers (``jtcse.testing.towers``
of this checkout), 12 lines of the STS-B dev file and of SICK train, 64 of wiki12k.txt; 1-4 steps, batch 4,
length 16. A row records the commands, exit codes, one ``Error:`` line or a traceback, the sha256 of my files
before and after, what a stale case reported, an outcome and a verdict: ``bad`` for a file of mine replaced or
deleted, a traceback, a stale result reported as done, a check after a stage trained, a message saying the wrong
thing, a failed write that cost the old output or left a manual step. Writes nowhere but its temporaries and --json.
"""

from __future__ import annotations

import io
import json
import os
import shutil
import sys
from collections.abc import Callable
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))  # the sweep's own tools (towers, the user's folder) are this checkout's
from jtcse.testing.user_folder import Case, Row, UserFiles, main, quote, read_json, said, sha256  # noqa: E402

DATA = Path("/work/shared/data")  # sts-dev.csv, SICK_train.txt and wiki12k.txt, read only
TRAIN = "--batch-size 4 --max-seq-length 16 --logging-steps 1"
TINY = f"--max-steps 1 {TRAIN}"
PIPELINE = "pipeline --tower-a model --tower-b model_b --corpus corpus.txt --batch-size 4 --warmup-max-steps 1 "
PIPELINE += "--warmup-max-seq-length 16 --distill-max-steps 1 --distill-max-seq-length 16"
WARMUPS = f"{PIPELINE} --until warmup"
PIPELINE_INPUTS = "model model_b corpus.txt"
RECIPES = {"extends.toml": "extends = 'nowhere.toml'\n", "bom.toml": "\ufeffseed = 3\n", "seed.toml": "seed = -1\n"}
NOTES = {"extends.toml": "extends a file that is not there", "bom.toml": "saved with a BOM", "X": "X: a model of mine",
         "fields.csv": "its line 4 has 6 fields", "na.csv": "its line 4's score is `n/a`", "seed.toml": "seed = -1",
         "flat.csv": "every score 3.0: no Spearman", "nan.csv": "its line 3's score is `nan`"}  # fmt: skip
INPUTS = {"model", "model_b", "corpus.txt", "dev.csv", "manifest.toml"}  # my files given as inputs: no note


IS_INPUT = "is the input"
ONE_COMMAND = [  # case, files of mine, the command, what a refusal must say
    ("1", "model dev.csv", "eval sts model --stsb-file dev.csv -o dev.csv"),
    ("1", "model dev.csv scores.json", "eval sts model --stsb-file dev.csv -o scores.json"),
    ("1", "model dev.csv res/summary.json", "eval mteb model --tasks '' --local-task dev.csv -o res"),
    ("1", "model corpus.txt rep/report.json", "diagnose model --sentences corpus.txt --limit 8 --seq-len 16 -o rep"),
    ("2", "model corpus.txt data.rows.npy", "encode model -i corpus.txt -o data.npy"),
    ("2", "model corpus.txt mine.npy", "encode model -i corpus.txt -o mine.npy --overwrite"),
    ("2", "model corpus.txt mine.parquet", "encode model -i corpus.txt -o mine.parquet --overwrite"),
    ("3", "model corpus.txt d/texts.txt", "index build model -i corpus.txt -o d"),
    ("3", "model corpus.txt d/texts.txt", "index build model -i corpus.txt -o d --overwrite"),
    ("5", "model X corpus.txt", f"distill -t X -s model --corpus corpus.txt {TINY} -o X", IS_INPUT),
    ("5", "model X corpus.txt", f"distill -t X -s model --corpus corpus.txt {TINY} -o X --overwrite", IS_INPUT),
    ("5", "X corpus.txt", f"simcse -m X --corpus corpus.txt {TINY} -o X --overwrite", IS_INPUT),
    ("5", "X corpus.txt", f"train --tower-a X --tower-b X --corpus corpus.txt {TINY} -o X --overwrite", IS_INPUT),
    ("10", f"{PIPELINE_INPUTS} FILE", f"{WARMUPS} -o FILE"),
    ("10", "model corpus.txt FILE", "index build model -i corpus.txt -o FILE"),
    ("12", "extends.toml", "pipeline --recipe extends.toml --dump-recipe", "extends.toml"),
    ("12", "bom.toml", "pipeline --recipe bom.toml --dump-recipe", "BOM"),
]


def shown(command: str) -> str:
    """A command as the table shows it: the tiny settings as ``…``."""
    for settings in (PIPELINE.removeprefix("pipeline "), TINY, TRAIN):
        command = command.replace(settings, "…")
    return f"`{command}`"


def one_commands(sweep: Sweep) -> list[Row]:
    return [Case(sweep, case, mine).one_command(command, *needs) for case, mine, command, *needs in ONE_COMMAND]


def added_then_overwrite(sweep: Sweep) -> list[Row]:
    """Case 4: run a command, add files of mine into its output, rerun it with --overwrite."""
    rows = []
    for mine, command, added in [
        ("manifest.toml", "data fetch corpus --manifest manifest.toml -o data", "data/notes.txt data/myruns/run.txt"),
        ("model", "ensemble model model -o ens", "ens/notes.txt"),
    ]:
        c = Case(sweep, "4", mine)
        c.jtcse(command, setup=True)
        for rel in added.split():
            c.mine(rel)
        note = f"after a first run; I added {', '.join(added.split())}"
        rows.append(c.one_command(f"{command} --overwrite", note=note))
    return rows


def rescored(text: str, score: Callable[[int, str], str]) -> str:
    """``text`` (STS-B lines) with each line's gold score given by ``score(line index, score)``."""
    rows = [line.split("\t") for line in text.splitlines(keepends=True)]
    return "".join("\t".join([*f[:4], score(i, f[4]), *f[5:]]) for i, f in enumerate(rows))


def flipped(index: int, score: str) -> str:
    return f"{5 - float(score):.3f}"  # every gold score s as 5 - s: each Spearman changes sign


def trainers_rerun(sweep: Sweep) -> list[Row]:
    """Case 6 (a dev file edited in place) and 9 (a model file deleted) on a trainer."""
    c = Case(sweep, "6", "model corpus.txt dev.csv")
    simcse = f"simcse -m model --corpus corpus.txt {TRAIN} --dev-file dev.csv --checkpoint best-dev --eval-steps 1 "
    simcse += "--max-steps 2 -o run"
    c.jtcse(simcse, setup=True)
    again = c.jtcse(simcse)
    c.mine("dev.csv", rescored(sweep.dev_text, flipped))  # my edit, in place
    c.freeze()
    edited = c.jtcse(simcse)
    done = "nothing to do" in edited.stderr
    outcome = f"{edited.said}: {quote(edited.message, 95)}" if edited.message else edited.said
    outcome = f"“nothing to do” after dev.csv changed ({edited.said})" if done else outcome
    what = f"{shown(simcse)} twice; I edit dev.csv in place; rerun"
    ok = not done and edited.stderr_kind in ("clean", "one Error: line")
    rows = [c.row(what, outcome, ok, same_again="nothing to do" in again.stderr)]

    c = Case(sweep, "9", "model corpus.txt")
    simcse = f"simcse -m model --corpus corpus.txt {TINY} -o run"
    c.jtcse(simcse, setup=True)
    (c.dir / "run/model.safetensors").unlink()
    rerun = c.jtcse(simcse)
    back = (c.dir / "run/model.safetensors").is_file()
    outcome = ("“nothing to do”, " if "nothing to do" in rerun.stderr else "") + rerun.said
    outcome += f"; model.safetensors {'trained again' if back else 'still missing'}"
    rows.append(c.row(f"{shown(simcse)}; I delete run/model.safetensors; rerun", outcome, back))
    return rows


def stage_status(summary: dict, stage: str) -> str:
    return next((row.get("status", "?") for row in summary.get("table", []) if row.get("stage") == stage), "absent")


def pipeline_rerun(sweep: Sweep) -> list[Row]:
    """Case 6 (the dev file edited in place) and 9 (a stage's model file deleted) on one pipeline run."""
    c = Case(sweep, "6", f"{PIPELINE_INPUTS} dev.csv")
    pipeline = f"{PIPELINE} --dev-file dev.csv -o run"
    c.jtcse(pipeline, setup=True)
    score = (read_json(c.dir / "run/pipeline_summary.json") or {})["stages"]["eval"]["dev_spearman"]["ensemble"]
    c.mine("dev.csv", rescored(sweep.dev_text, flipped))
    c.freeze()
    c.jtcse(pipeline)
    summary = read_json(c.dir / "run/pipeline_summary.json") or {}
    status = stage_status(summary, "eval")
    now = summary.get("stages", {}).get("eval", {}).get("dev_spearman", {}).get("ensemble")
    spearman, first = f"{100 * now:.2f}" if now is not None else "none", f"{100 * score:.2f}"
    outcome = f"eval “{status}”: the ensemble's dev Spearman {spearman} (first run {first}; the truth -{first})"
    ok = status == "ran" and now is not None and abs(now + score) < 1e-6
    what = f"{shown(pipeline)}; I edit dev.csv in place (every score s as 5 - s); rerun"
    rows = [c.row(what, outcome, ok, eval_status=status, ensemble=now, first=score)]

    c.case = "9"  # the same run
    (c.dir / "run/tower_a/model.safetensors").unlink()
    c.freeze()
    rerun = c.jtcse(pipeline)
    back = (c.dir / "run/tower_a/model.safetensors").is_file()
    status = stage_status(read_json(c.dir / "run/pipeline_summary.json") or {}, "warmup_a") if rerun.rc == 0 else None
    skipped = any("tower_a" in line and "nothing to do" in line for line in rerun.stderr.splitlines())
    warned = "model.safetensors, which its run wrote, is missing" in rerun.stderr
    outcome = "tower_a: " + ("“nothing to do”, " if skipped else "")
    outcome += "trained again" if back else "its model.safetensors still missing"
    outcome += (" (a warning names the missing file)" if warned else "") + (f", “{status}”" if status else "")
    if rerun.message:
        outcome += f"; then {rerun.said}: {quote(rerun.message, 110)}"
    ok = back and "other settings" not in rerun.message  # the next stage's input changed: not a setting
    what = "the same run: I delete run/tower_a/model.safetensors; rerun"
    rows.append(c.row(what, outcome, ok, [rerun], warmup_a_status=status, error=rerun.message))
    return rows


def nan_score(sweep: Sweep) -> list[Row]:
    """Case 7: one NaN gold score in the dev file a trainer keeps its best checkpoint by."""
    c = Case(sweep, "7", "model corpus.txt nan.csv")
    c.freeze()
    simcse = f"simcse -m model --corpus corpus.txt {TRAIN} --dev-file nan.csv --checkpoint best-dev --eval-steps 2 "
    call = c.jtcse(simcse + "--save-steps 2 --max-steps 4 -o run")
    path = c.dir / "run/run_summary.json"
    summary = read_json(path, strict=False) or {}
    kept = {key: summary.get(key) for key in ("best_step", "saved_step", "best_dev_spearman")}
    outcome, ok = f"{call.said} before training: {quote(call.message)}", True
    if call.rc != 2 or (c.dir / "run").exists():
        valid = read_json(path) is not None
        warned = call.rc == 0 and "nan" in call.stderr.lower()
        outcome = f"{call.said}, {'a word on NaN' if warned else 'no warning'}; run_summary.json "
        outcome += ("valid JSON; " if valid else "holds a bare NaN (not JSON); ") + str(kept)[1:-1].replace("'", "")
        ok = valid and warned
    return [c.row(c.described(call.command[6:]), outcome, ok, **kept)]


def pipeline_fails_later(sweep: Sweep) -> list[Row]:
    """Case 8 (a rerun that trains a stage, then fails) and case 12's messages in a pipeline."""
    c = Case(sweep, "8", PIPELINE_INPUTS)
    c.jtcse(f"{WARMUPS} -o run", setup=True)
    shutil.rmtree(c.dir / "run/tower_a")
    c.freeze()
    changed = f"{WARMUPS} --warmup-learning-rate 0.001 --warmup-b-learning-rate 0.001"
    rerun = c.jtcse(f"{changed} -o run")
    new_a = (c.dir / "run/tower_a/model.safetensors").is_file()
    left = read_json(c.dir / "run/pipeline_summary.json") or {}
    stale = bool(left) and "stale" not in json.dumps(left).lower()
    left_lr = left.get("config", {}).get("warmup", {}).get("learning_rate")
    summary = f"the earlier run's pipeline_summary.json left (warm-up lr {left_lr})" if stale else "no summary left"
    outcome = f"{rerun.said} at warmup_b; tower_a/ {'holds the new model' if new_a else 'has no model'}; {summary}"
    what = f"{shown(f'{WARMUPS} -o run')}; I remove run/tower_a; rerun with `--warmup-learning-rate 0.001` (and -b's)"
    rows = [c.row(what, outcome, not stale, summary_left=bool(left), left_lr=left_lr)]

    line = rerun.message
    rejected = ", which pipeline rejects" if "--overwrite" in line else ""
    outcome = f"says {quote(line.rsplit('. ', 1)[-1], 120)}{rejected}"
    rows.append(Row("12", "that refusal of a pipeline stage: what it says to do", outcome,
                    "bad" if "--overwrite" in line else "ok", [], {}, [rerun]))  # fmt: skip

    c.case = "12"  # the same run
    further = c.jtcse(f"{changed} --warmup-max-steps 2 -o run")
    cached = c.jtcse(f"{PIPELINE} --twin --twin-mini-batch-size 4 --twin-regularizer simreg --until twin -o run2")
    named = {"--warmup-b-learning-rate": rerun, "--warmup-keep-checkpoints": further, "--twin-mini-batch-size": cached}
    wrong = [option for option, call in named.items() if option not in call.message]
    outcome = "; ".join(f"instead of {option}: {quote(named[option].message, 110)}" for option in wrong)
    what = "pipeline errors name its options: that refusal, `--warmup-max-steps 2` over the finished warm-up, "
    what += "`--twin-mini-batch-size 4 --twin-regularizer simreg`"
    messages = {option: call.message for option, call in named.items()}
    rows.append(c.row(what, outcome or f"names {', '.join(named)}", not wrong, [*named.values()], messages=messages))
    return rows


def refused_before_training(c: Case, command: str, note: str = "") -> Row:
    c.freeze()
    call = c.jtcse(f"{command} -o run")
    stages = ["tower_a", "tower_b", "probe", "twin", "ensemble", "distilled"]  # (those holding a model)
    trained = [stage for stage in stages if any((c.dir / f"run/{stage}").glob("**/model.safetensors"))]
    ok = call.stderr_kind == "one Error: line" and not trained
    when = f"after {', '.join(trained)} trained" if trained else "before any stage trained"
    outcome = f"{call.said} {when}" if call.rc else f"exit 0 ({', '.join(trained)} trained), nothing refused"
    outcome = f"{outcome}: {quote(call.message)}" if call.message else outcome
    return c.row(c.described(command, note), outcome, ok, trained=trained)


LATE = [  # case 11: a file of mine a stage reads, the command (into run), a note
    ("fields.csv", f"{PIPELINE} --dev-file fields.csv", ""),
    ("na.csv", f"{PIPELINE} --dev-file na.csv", ""),
    ("flat.csv", f"{PIPELINE} --dev-file flat.csv", ""),
    ("", f"{PIPELINE} --twin --twin-cael-every 3 --until twin", "towers of 4 layers"),
    ("", f"{WARMUPS} --seed 4294967295", "seed + 1 out of range"),
]


def checked_late(sweep: Sweep) -> list[Row]:
    """Case 11 (an input checked only by the stage reading it) and case 12's seed in a recipe."""
    rows = [refused_before_training(Case(sweep, "11", f"{PIPELINE_INPUTS} {mine}"), *late) for mine, *late in LATE]
    c = Case(sweep, "12", f"{PIPELINE_INPUTS} seed.toml")
    dump = c.jtcse("pipeline --recipe seed.toml --dump-recipe")
    row = refused_before_training(c, f"{WARMUPS} --recipe seed.toml", "seed = -1; first `--dump-recipe`, then a run")
    if dump.rc == 0:
        row.outcome, row.verdict = f"the check passes (--dump-recipe: exit 0); the run: {row.outcome}", "bad"
    return [*rows, row]


CASES_38 = [one_commands, added_then_overwrite, trainers_rerun, pipeline_rerun, nan_score, pipeline_fails_later,
            checked_late]  # fmt: skip


# --------------------------------------------------------------------------------------------- issue 42's cases
ENCODE = "encode model -i corpus.txt --no-progress"
INDEX = "index build model -i corpus.txt --no-progress"
ENSEMBLE = "ensemble model model -o ens"


def listing(record: Path, entry) -> None:
    """``entry`` added to what ``record`` lists (a list of names before issue 42, a table of them after)."""
    data = json.loads(record.read_text(encoding="utf-8"))
    files = data.get("files") or []
    table_of = isinstance(files, dict) and isinstance(entry, str)
    data["files"] = {**files, entry: None} if table_of else [*files, entry]
    record.write_text(json.dumps(data), encoding="utf-8")


HOSTILE = [  # case 1: the command, its record, the entry I add to it, files of mine (ABS: an absolute path)
    (f"{ENCODE} -o vecs", "vecs/_jtcse.json", "../victim.txt", "victim.txt"),
    (f"{INDEX} -o idx", "idx/jtcse_outputs.json", "ABS/victim.txt", "victim.txt"),
    (f"{INDEX} -o idx", "idx/jtcse_outputs.json", "../vdir", "vdir/keep.txt"),
    (f"{INDEX} -o idx", "idx/jtcse_outputs.json", "../*.keep", "a.keep b.keep"),
    (f"{ENCODE} -o vecs", "vecs/_jtcse.json", 42, "victim.txt"),
    (f"{INDEX} -o idx", "idx/jtcse_outputs.json", "link/keep.txt", "vdir/keep.txt"),  # idx/link -> ../vdir
]


def hostile_records(sweep) -> list[Row]:
    """Case 1: a record that lists what is outside its output (a colleague's run folder), then `--overwrite`."""
    rows = []
    for command, record, entry, mine in HOSTILE:
        c = Case(sweep, "1", f"model corpus.txt {mine}")
        c.jtcse(command, setup=True)
        if entry == "link/keep.txt":
            (c.dir / "idx" / "link").symlink_to("../vdir")
        listing(c.dir / record, str(c.dir / "victim.txt") if entry == "ABS/victim.txt" else entry)
        c.freeze()
        call = c.jtcse(f"{command} --overwrite")
        entry = json.dumps(entry).replace("ABS", "<the case folder>") + " (idx/link → ../vdir)" * ("link" in str(entry))
        ok = call.stderr_kind == "one Error: line" and Path(record).name in call.message
        rows.append(c.row(f"{shown(command)}; I add {entry} to {record}; again with `--overwrite`", said(call), ok))
    return rows


def temporaries_and_locks(sweep) -> list[Row]:
    """Case 2: a temporary or lock of the name jtcse uses, that jtcse did not make."""
    rows = []
    for mine, command, note in [
        ("model ens.tmp/notes.txt", ENSEMBLE, "ens.tmp/notes.txt"),
        ("model mydir/notes.txt", ENSEMBLE, "ens.tmp: a link to my folder mydir"),
        ("manifest.toml data.lock", "data fetch corpus --manifest manifest.toml --no-progress -o data", "data.lock"),
        ("model corpus.txt v.npy.lock", f"{ENCODE} -o v.npy", "v.npy.lock"),
    ]:
        c = Case(sweep, "2", mine)
        if "link" in note:
            (c.dir / "ens.tmp").symlink_to("mydir")
        row = c.one_command(command, note=note if "link" in note else f"{note}: mine")
        added = sorted(set(os.listdir(c.dir / "mydir")) - {"notes.txt"}) if "link" in note else []
        if added:  # written through the link into my folder
            row.outcome, row.verdict = f"{len(added)} files written into my folder mydir; {row.outcome}", "bad"
        rows.append(row)
    return rows


def inside_and_by_content(sweep) -> list[Row]:
    """Cases 3 and 4: a file of mine inside a folder jtcse wrote or named like its temporaries; saved over its file."""
    rows = []
    for added in ("ens/member_1/notes.txt", "ens/README.md.tmp ens/member_1.tmp/notes.txt ens/modules.json.lock"):
        c = Case(sweep, "3", "model")
        c.jtcse(ENSEMBLE, setup=True)
        for rel in added.split():
            c.mine(rel)
        note = f"after a first run; I added {', '.join(added.split())}"
        rows.append(c.one_command(f"{ENSEMBLE} --overwrite", note=note))
    for extra in ("", " --overwrite"):
        c = Case(sweep, "4", "model corpus.txt")
        c.jtcse(f"{ENCODE} -o out.npy", setup=True)
        c.mine("out.npy", sweep.files["my.npy"])
        note = "after a first run I saved my own array as out.npy"
        rows.append(c.one_command(f"{ENCODE} -o out.npy{extra}", note=note))
    return rows


def replaced_models(sweep) -> list[Row]:
    """Case 5: a model replaced at the same path is another input: never "nothing to do", never resumed across."""
    rows = []
    for mine, command, model in [
        ("mymodel corpus.txt", f"simcse -m mymodel --corpus corpus.txt {TINY} -o run", "mymodel"),
        ("model student corpus.txt", f"distill -t model -s student --corpus corpus.txt {TINY} -o run", "student"),
    ]:
        c = Case(sweep, "5", mine)
        c.jtcse(command, setup=True)
        c.replace_tower(model)
        c.freeze()
        call = c.jtcse(command)
        done = "nothing to do" in call.stderr
        outcome = f"“nothing to do” after {model} was replaced ({call.said})" if done else said(call)
        ok = not done and call.stderr_kind == "one Error: line" and "changed" in call.message
        rows.append(c.row(f"{shown(command)}; I save another model at {model}/; rerun", outcome, ok))
    c = Case(sweep, "5", "mymodel corpus.txt")
    encode = "encode mymodel -i corpus.txt --no-progress --chunk-size 16 -o v.npy"
    c.jtcse(encode, JTCSE_CRASH_AT="encode-chunk:2")
    c.replace_tower("mymodel")
    c.freeze()
    call = c.jtcse(encode)
    mixed = "Resumed after row" in call.stderr
    outcome = "“Resumed after row 32”: rows 0–31 of the old model, 32–63 of the new" if mixed else said(call)
    ok = not mixed and call.stderr_kind == "one Error: line" and "changed" in call.message
    rows.append(c.row(f"`{encode}` killed after 2 chunks; I save another model at mymodel/; rerun", outcome, ok))
    return rows


READ = [  # case 6: a file of mine, the command, where its output says how many pairs it read, how many it holds
    ("sick.txt", "eval sts model --data-dir . --tasks SICKR --task-dir SICKR=sick.txt -o s.json",
     ("s.json", "details", "SICKR", "n_pairs"), 12, "SICK, no header line"),
    ("sick_header.txt", "eval sts model --data-dir . --tasks SICKR --task-dir SICKR=sick_header.txt -o s.json",
     ("s.json", "details", "SICKR", "n_pairs"), 12, "SICK with its header line"),
    ("stsb_header.csv", "eval sts model --stsb-file stsb_header.csv -o s.json", ("s.json", "pairs", "all"), 12,
     "STS-B with a header line"),
    ("pairs.tsv", f"simcse -m model --pairs pairs.tsv {TINY} -o run", ("run/run_summary.json", "data", "pairs_used"),
     8, "`original<TAB>paraphrase` header, then 8 pairs"),
]  # fmt: skip


def readers(sweep) -> list[Row]:
    """Case 6: files as users have them, with or without a header line: every data row read, no header as a row."""
    rows = []
    for mine, command, where, pairs, note in READ:
        c = Case(sweep, "6", f"model {mine}")
        c.freeze()
        call = c.jtcse(command)
        found = read_json(c.dir / where[0])
        for key in where[1:]:
            found = found.get(key) if isinstance(found, dict) else None
        outcome = f"{said(call)}; {found} pairs read of {pairs}" if call.rc == 0 else said(call)
        rows.append(c.row(c.described(command, note), outcome, call.rc == 0 and found == pairs, pairs=found))
    return rows


def failed_writes(sweep) -> list[Row]:
    """Case 7: a write that fails midway (`ulimit -f`): one line, the old output kept, no manual step after."""
    rows = []
    for command, limit, note in [
        (f"{ENCODE} -o v.npy", 4096, "4 KiB"),
        (f"simcse -m model --corpus corpus.txt {TRAIN} --save-steps 1 --max-steps 2 -o run", 1 << 20, "1 MiB"),
    ]:
        c = Case(sweep, "7", "model corpus.txt")
        c.freeze()
        failed, again = c.jtcse(command, fsize=limit), c.jtcse(command)
        outcome = f"{said(failed)}; then without the limit: {said(again)}"
        ok = failed.stderr_kind == "one Error: line" and again.rc == 0
        rows.append(c.row(f"{shown(command)} under `ulimit -f` ({note}), then the same command again", outcome, ok))
    c = Case(sweep, "7", "model corpus.txt")
    c.jtcse(f"{INDEX} -o idx", setup=True)
    old = {p.name: sha256(p) for p in (c.dir / "idx").iterdir()}
    c.freeze()
    failed = c.jtcse(f"{INDEX} -o idx --overwrite", fsize=4096)
    now = {p.name: sha256(p) for p in (c.dir / "idx").iterdir()} if (c.dir / "idx").is_dir() else {}
    kept = "kept whole" if now == old else f"lost ({len(set(old) - set(now))} of its {len(old)} files gone)"
    ok = failed.stderr_kind == "one Error: line" and now == old
    what = f"{shown(INDEX + ' -o idx')}; then `--overwrite` under `ulimit -f` (4 KiB)"
    rows.append(c.row(what, f"{said(failed)}; the old index {kept}", ok))
    return rows


MESSAGES = [  # case 8: files of mine, the command, what its one line must say, and must not, a note
    ("model corpus.txt", f"{INDEX} -o /", "root", "empty name", ""),
    ("model corpus.txt same.csv", f"simcse -m model --corpus corpus.txt {TRAIN} --dev-file same.csv --checkpoint "
     "best-dev --eval-steps 1 --max-steps 2 -o run", "same.csv", "collapsed", "each pair a sentence and itself"),
    ("model cls.csv", "eval mteb model --tasks '' --local-task cls.csv -o res", "label", "offline",
     "train labels 0.0/1.0, test 0/1"),
    ("model one.csv", "eval mteb model --tasks '' --local-task one.csv -o res", "label", "offline", "one class"),
]  # fmt: skip
EDITS = {"I append a line to corpus.txt": ("corpus.txt", "changed", "already complete"),
         "I cut v.npy.json short": ("v.npy.json", "damaged", "did not write")}  # fmt: skip


def messages(sweep) -> list[Row]:
    """Case 8: each message says what is wrong and what to do (and a dev file is checked before training)."""
    rows = []
    for mine, command, needs, wrong, note in MESSAGES:
        c = Case(sweep, "8", mine)
        c.freeze()
        call = c.jtcse(command)
        trained = any((c.dir / "run").glob("**/*.safetensors"))
        ok = call.stderr_kind == "one Error: line" and needs in call.message and wrong not in call.message
        outcome = said(call) + (" (after training steps)" if trained else "")
        rows.append(c.row(c.described(command, note), outcome, ok and not trained))
    for edit, (name, needs, wrong) in EDITS.items():
        c = Case(sweep, "8", "model corpus.txt")
        c.jtcse(f"{ENCODE} -o v.npy", setup=True)
        path = c.dir / name
        data = path.read_bytes()
        path.write_bytes(data + b"One more sentence of mine.\n" if name == "corpus.txt" else data[:100])
        c.freeze()
        call = c.jtcse(f"{ENCODE} -o v.npy")
        ok = call.stderr_kind == "one Error: line" and needs in call.message and wrong not in call.message
        rows.append(c.row(f"{shown(ENCODE + ' -o v.npy')}; {edit}; rerun", said(call), ok))
    return rows


CASES_42 = [hostile_records, temporaries_and_locks, inside_and_by_content, replaced_models, readers, failed_writes,
            messages]  # fmt: skip


class Sweep(UserFiles):
    """The user's files of every case: issue 38's dev files and recipes, issue 42's tables and my own array."""

    shown, notes, inputs = staticmethod(shown), NOTES, INPUTS

    def __init__(self, checkout: Path, root: Path, server_url: str):
        import numpy as np

        super().__init__(checkout, root, server_url, DATA)
        dev, text = self.dev_text, [f"sentence number {i} about {'cats' if i % 2 else 'dogs'}" for i in range(24)]
        cells, pairs = [line.split("\t") for line in dev.splitlines(keepends=True)], self.corpus_text.splitlines()[:8]
        array = io.BytesIO()
        np.save(array, np.arange(12.0).reshape(3, 4))
        split = lambda i: "train" if i < 16 else "test"  # noqa: E731
        self.files.update(
            RECIPES,
            **{"fields.csv": "".join([*dev.splitlines(keepends=True)[:3], "\t".join(cells[3][:6]) + "\n",
                                     *dev.splitlines(keepends=True)[4:]]),
               "na.csv": rescored(dev, lambda i, s: "n/a" if i == 3 else s),
               "flat.csv": rescored(dev, lambda i, s: "3.000"),
               "nan.csv": rescored(dev, lambda i, s: "nan" if i == 2 else s),
               "sick.txt": self.sick_text, "my.npy": array.getvalue(),
               "sick_header.txt": "pair_ID\tsentence_A\tsentence_B\trelatedness_score\tentailment_judgment\n" + self.sick_text,
               "stsb_header.csv": "genre\tfilename\tyear\tid\tscore\tsentence1\tsentence2\n" + dev,
               "same.csv": "".join("\t".join([*f[:6], f[5] + "\n"]) for f in cells),
               "pairs.tsv": "original\tparaphrase\n" + "".join(f"{p}\tIn other words: {p}\n" for p in pairs),
               "cls.csv": "text,label,split\n" + "".join(f"{t},{i % 2}{'.0' * (i < 16)},{split(i)}\n" for i, t in enumerate(text)),
               "one.csv": "text,label,split\n" + "".join(f"{t},a,{split(i)}\n" for i, t in enumerate(text))},
        )  # fmt: skip


if __name__ == "__main__":
    main(__doc__, {"38": CASES_38, "42": CASES_42}, Sweep)
