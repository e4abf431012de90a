"""Issue 38's sweep ("Every output owned"): each of its cases 1-12 run as a user would, against any checkout.

    python scripts/sweep_outputs.py --checkout PATH [--json OUT.json]
    python scripts/sweep_outputs.py --combine BEFORE.json AFTER.json     # one before / after table, runs nothing

Run from the repository root. Each case runs ``python -m jtcse ...`` (``PYTHONPATH=PATH``, offline, one thread)
in a fresh temporary folder of my files: tiny towers (``jtcse.testing.towers`` of this checkout), 12 lines of the
STS-B dev file, 64 of wiki12k.txt; 1-4 steps, batch 4, length 16. A row records the commands, exit codes, one
``Error:`` line or a traceback, the sha256 of my files before and after, what a stale case reported, an outcome
and a verdict: ``bad`` for a file of mine replaced or deleted, a traceback, a stale result reported as done, a check
after a stage trained, a message saying the wrong thing. Writes nowhere but its temporary folder and --json.
"""

from __future__ import annotations

import argparse
import functools
import hashlib
import json
import os
import shlex
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
DATA = Path("/work/shared/data")  # sts-dev.csv and wiki12k.txt, read only
MY_BYTES = b"a file of mine: jtcse must never replace or delete it\n"
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
VERDICT = {"bad": "**bad**", "ok": "ok"}  # as the tables show it
INPUTS = {"model", "model_b", "corpus.txt", "dev.csv", "manifest.toml"}  # my files given as inputs: no note


@dataclass
class Call:
    """A command as run: how stderr ended (clean, one Error: line, traceback, other), in words, and its key line."""

    command: str
    rc: int
    stderr_kind: str
    said: str
    message: str
    seconds: float
    stderr: str = field(repr=False)


@dataclass
class Row:
    """One row of the table and what stands behind it."""

    case: str
    what: str
    outcome: str
    verdict: str
    lost: list[str]  # the files of mine replaced or deleted
    reported: dict
    calls: list[Call]


class SetupFailed(Exception):
    """A command that sets a case up (a first run) failed: the case is reported bad, the sweep goes on."""


def quote(message: str, width: int = 100) -> str:
    """An error line for the table: without ``Error:``, cut to ``width`` characters."""
    text = message.removeprefix("Error: ")
    return f"“{text if len(text) <= width else text[: width - 1] + '…'}”"


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def not_json(constant: str):
    raise ValueError(f"{constant} is not JSON")


def read_json(path: Path, strict: bool = True) -> dict | None:
    """``path`` as JSON; None when missing or not JSON (``strict``: a bare NaN is not, as to any reader but Python)."""
    try:
        return json.loads(path.read_text(encoding="utf-8"), **({"parse_constant": not_json} if strict else {}))
    except (OSError, ValueError):
        return None


class Case:
    """A fresh folder where the user keeps files of theirs, runs jtcse and looks afterwards."""

    def __init__(self, sweep: Sweep, case: str, mine: str = ""):
        self.sweep, self.case = sweep, case
        self.dir = Path(tempfile.mkdtemp(prefix=f"case{case}-", dir=sweep.root))
        self.calls: list[Call] = []
        self.mine_paths: list[Path] = []
        self._frozen: dict[str, str] = {}
        for rel in mine.split():
            self.mine(rel)

    def mine(self, rel: str, data: bytes | str | None = None) -> None:
        """A file of mine at ``rel``: a tower (model, model_b, X), my dev file, corpus, manifest or a recipe by its
        name, else a few bytes of mine."""
        path, sweep = self.dir / rel, self.sweep
        path.parent.mkdir(parents=True, exist_ok=True)
        if data is None and rel in ("model", "model_b", "X"):
            shutil.copytree(sweep.towers["b" if rel == "model_b" else "a"], path)
        else:
            data = sweep.files.get(rel, MY_BYTES) if data is None else data
            path.write_bytes(data.encode() if isinstance(data, str) else data)
        self.mine_paths.append(path)

    def freeze(self) -> None:
        """Every file of mine as it is now (after my own edits): what jtcse must leave as it is."""
        paths = [p for root in self.mine_paths for p in (sorted(root.rglob("*")) if root.is_dir() else [root])]
        self._frozen = {str(p.relative_to(self.dir)): sha256(p) for p in paths if p.is_file()}

    def lost(self) -> list[str]:
        """Each file of mine deleted or replaced since :meth:`freeze`, in words."""
        now = {rel: sha256(self.dir / rel) for rel in self._frozen if (self.dir / rel).is_file()}
        gone = [f"{rel} deleted" for rel in self._frozen if rel not in now]
        changed = [rel for rel, digest in now.items() if digest != self._frozen[rel]]
        return gone + [f"{rel} replaced{' by JSON' * bool(read_json(self.dir / rel))}" for rel in changed]

    def jtcse(self, command: str, setup: bool = False) -> Call:
        """``python -m jtcse COMMAND`` here, the checkout under test on PYTHONPATH; ``setup``: it must succeed."""
        start = time.perf_counter()
        argv = [sys.executable, "-m", "jtcse", *shlex.split(command)]
        proc = subprocess.run(argv, cwd=self.dir, env=self.sweep.env, capture_output=True, text=True, timeout=900)
        lines = [line for line in proc.stderr.splitlines() if line.strip()]
        errors = [line for line in lines if line.startswith("Error")]
        if "Traceback (most recent call last)" in proc.stderr:
            kind, said, message = "traceback", f"traceback ({lines[-1].split(':')[0]})", lines[-1]
        elif proc.returncode == 2 and len(errors) == 1:
            kind, said, message = "one Error: line", "refused in one line", errors[0]
        else:
            kind = "clean" if proc.returncode == 0 else "other"
            said, message = f"exit {proc.returncode}", errors[-1] if errors else ""
        seconds = time.perf_counter() - start
        call = Call(f"jtcse {command}", proc.returncode, kind, said, message, round(seconds, 2), proc.stderr)
        self.calls.append(call)
        if setup and proc.returncode != 0:
            raise SetupFailed(self.row(f"set up by `{command}`", f"it failed: {call.said} {quote(message)}", False))
        return call

    def row(self, what: str, outcome: str, ok: bool, calls: list[Call] | None = None, **reported) -> Row:
        """The row: ``ok`` holds only if no file of mine was lost and no call ended in a traceback."""
        calls = self.calls if calls is None else calls
        lost = self.lost() if self._frozen else []
        outcome = f"{', '.join(lost)}; {outcome}" if lost else outcome
        ok = ok and not lost and all(c.stderr_kind != "traceback" for c in calls)
        return Row(self.case, what, outcome, "ok" if ok else "bad", lost, reported, calls)


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


def described(c: Case, command: str, note: str = "") -> str:
    """What the user does: the command, with a note on the files of mine that are not the usual inputs."""
    mine = [NOTES.get(p.name, f"{p.relative_to(c.dir)}: mine") for p in c.mine_paths if p.name not in INPUTS]
    return shown(command) + (f" ({note or '; '.join(mine)})" if note or mine else "")


def one_command(c: Case, command: str, needs: str = "", note: str = "") -> Row:
    """One command over files of mine: ok when none of them changed and, refused, its line says ``needs``."""
    c.freeze()
    call = c.jtcse(command)
    ok = needs in call.message
    said = f"{call.said}: {quote(call.message)}" if call.message else call.said
    outcome = said if ok or not call.message else f"{said}, not saying {needs!r}"
    return c.row(described(c, command, note), outcome, ok)


def one_commands(sweep: Sweep) -> list[Row]:
    return [one_command(Case(sweep, case, mine), command, *needs) for case, mine, command, *needs in ONE_COMMAND]


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
        rows.append(one_command(c, f"{command} --overwrite", note=note))
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
    return [c.row(described(c, call.command[6:]), outcome, ok, **kept)]


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
    return c.row(described(c, command, note), outcome, ok, trained=trained)


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


CASES = [one_commands, added_then_overwrite, trainers_rerun, pipeline_rerun, nan_score, pipeline_fails_later,
         checked_late]  # fmt: skip


class Sweep:
    """The temporary root, the towers, my files, the environment of every command (no bytecode written)."""

    def __init__(self, checkout: Path, root: Path, server_url: str):
        self.root = root
        sys.path.insert(0, str(REPO))  # the towers' maker of this checkout
        from jtcse.testing.towers import make_tiny_tower  # 4 layers, hidden 32, a real tokenizer

        self.towers = {name: Path(make_tiny_tower(root / name, seed=seed)) for seed, name in enumerate("ab")}
        lines = (DATA / "stsbenchmark" / "sts-dev.csv").read_text(encoding="utf-8").splitlines(keepends=True)
        self.dev_text = "".join(lines[::125][:12])  # 12 pairs across the genres and the score range
        wiki = [line for line in (DATA / "wiki12k.txt").read_text(encoding="utf-8").splitlines() if line.strip()]
        self.corpus_text = "".join(f"{line}\n" for line in wiki[:64])
        (root / "served").mkdir()
        (root / "served" / "corpus.txt").write_text(self.corpus_text, encoding="utf-8")
        digest = hashlib.sha256(self.corpus_text.encode()).hexdigest()
        manifest = (f'schema = 1\n[datasets.corpus]\nsummary = "a corpus"\n[[datasets.corpus.files]]\n'
                    f'name = "corpus.txt"\nurl = "{server_url}/corpus.txt"\nsha256 = "{digest}"\n')  # fmt: skip
        dev = self.dev_text.splitlines(keepends=True)
        self.files = {"dev.csv": self.dev_text, "corpus.txt": self.corpus_text, "manifest.toml": manifest, **RECIPES,
                      "fields.csv": "".join([*dev[:3], "\t".join(dev[3].split("\t")[:6]) + "\n", *dev[4:]]),
                      "na.csv": rescored(self.dev_text, lambda i, s: "n/a" if i == 3 else s),
                      "flat.csv": rescored(self.dev_text, lambda i, s: "3.000"),
                      "nan.csv": rescored(self.dev_text, lambda i, s: "nan" if i == 2 else s)}  # fmt: skip
        self.env = {**os.environ, "PYTHONPATH": str(checkout), "PYTHONDONTWRITEBYTECODE": "1", "OMP_NUM_THREADS": "1",
                    "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1",
                    "TOKENIZERS_PARALLELISM": "false", "NO_PROXY": "127.0.0.1,localhost", "JTCSE_DEBUG": "0"}  # fmt: skip


class Quiet(SimpleHTTPRequestHandler):
    def log_message(self, *args) -> None:
        pass


def run_sweep(checkout: Path) -> list[Row]:
    """Every case against ``checkout``, in a temporary folder removed afterwards."""
    root = Path(tempfile.mkdtemp(prefix="sweep_outputs-"))
    start, rows = time.perf_counter(), []
    server = ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(Quiet, directory=str(root / "served")))
    threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True).start()  # for `data fetch`
    try:
        sweep = Sweep(checkout, root, f"http://127.0.0.1:{server.server_address[1]}")
        for run_cases in CASES:
            try:
                rows += run_cases(sweep)
            except SetupFailed as failed:
                rows.append(failed.args[0])
            print(f"{run_cases.__name__}: {time.perf_counter() - start:.0f} s", file=sys.stderr, flush=True)
    finally:
        server.shutdown()
        shutil.rmtree(root, ignore_errors=True)
    return sorted(rows, key=lambda row: int(row.case))  # stable: a case's rows keep their order


def table(header: list[str], rows: list[list[str]]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + " --- |" * len(header)]
    lines += ["| " + " | ".join(cell.replace("|", "\\|").replace("\n", " ") for cell in cells) + " |" for cells in rows]
    return "\n".join(lines)


def combined(before: Path, after: Path) -> str:
    """One table of two sweeps' --json records (the same rows in the same order): before / after."""
    pairs = zip(*(json.loads(path.read_text(encoding="utf-8"))["rows"] for path in (before, after)), strict=True)
    header = ["case", "what the user does", "before", "after", "verdict before → after"]
    return table(header, [[a["case"], a["what"], a["outcome"], b["outcome"],
                           f"{VERDICT[a['verdict']]} → {VERDICT[b['verdict']]}"] for a, b in pairs])  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--checkout", type=Path, help="the checkout whose jtcse is measured (put on PYTHONPATH)")
    parser.add_argument("--json", type=Path, help="also write every record here")
    parser.add_argument("--combine", nargs=2, type=Path, metavar=("BEFORE.json", "AFTER.json"),
                        help="run nothing: print one before / after table of two sweeps' --json records")  # fmt: skip
    args = parser.parse_args()
    if args.combine:
        print(combined(*args.combine))
        return
    if args.checkout is None or not (args.checkout / "jtcse" / "__init__.py").is_file():
        parser.error(f"--checkout must name a checkout holding the jtcse package, not {args.checkout}")
    start = time.perf_counter()
    rows = run_sweep(args.checkout.resolve())
    seconds = time.perf_counter() - start
    header = ["case", "what the user does", "outcome", "verdict"]
    print(table(header, [[row.case, row.what, row.outcome, VERDICT[row.verdict]] for row in rows]))
    print(f"\n{sum(row.verdict == 'bad' for row in rows)} bad of {len(rows)} rows; {seconds:.0f} s", flush=True)
    if args.json:
        records = [asdict(row) for row in rows]
        for call in (call for record in records for call in record["calls"]):
            call["stderr"] = call["stderr"][-1500:]
        record = {"checkout": str(args.checkout.resolve()), "seconds": round(seconds, 1), "rows": records}
        args.json.write_text(json.dumps(record, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
