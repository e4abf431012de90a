"""Every output owned (issue 38): no command replaces or deletes a file it did not write.

:data:`TABLE` has one row per writing command (every command with -o/--output: :func:`test_every_writing_command_has_a_row`
fails for one without a row). Each row meets each way an output can hit the user's files (:data:`CASES`): the output
is the command's input, a file of the user's, a folder holding one, a link (symbolic or hard) to one, or an earlier
output of the command's to which the user added a file, rerun with ``--overwrite``. Afterwards every file of the
user's (the inputs included) has the sha256 it had, and the command exited 0 or 2 with one line, never a traceback.
Rows that must run the command to completion (the earlier output) are ``slow``; the others are refused before any
model loads.
"""

from __future__ import annotations

import hashlib
import os
import shutil
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest
from helpers.backends import OPENVINO
from helpers.cli import click_app, invoke_cli
from helpers.file_server import FileServer
from helpers.sts import write_stsb

CORPUS = "".join(f"Sentence number {i} says something {'new' if i % 2 else 'old'}.\n" for i in range(12))
MY_BYTES = b"a file of mine: jtcse must never replace or delete it\n"


@dataclass
class Inputs:
    """What the commands read: copies of the user's files under ``root`` (hashed like every file of theirs)."""

    root: Path
    model: Path
    corpus: Path
    dev: Path
    pairs: Path
    queries: Path
    rtt_pairs: Path
    manifest: Path

    @property
    def index(self) -> Path:
        """An index of the corpus (built by :meth:`build_index`, for the rows that search it)."""
        return self.root.parent / "index"

    def build_index(self) -> None:
        from jtcse.search.build import build_index

        build_index(str(self.model), self.corpus, self.index, show_progress=False)


@dataclass(frozen=True)
class Row:
    """How to run one writing command into ``OUT`` (``argv``), one input it reads (``source``: given as the output in
    the ``input`` case), the suffix of its output file (``""``: it writes a folder) and whether it takes
    ``--overwrite``."""

    argv: Callable[[Inputs, Path], list]
    source: Callable[[Inputs], Path]
    suffix: str = ""
    overwrite: bool = True


TRAINING = ("--max-steps", 1, "--batch-size", 4, "--max-seq-length", 16, "--logging-steps", 1)
PIPELINE_TRAINING = ("--batch-size", 4, "--warmup-max-steps", 1, "--warmup-max-seq-length", 16)
TABLE: dict[str, Row] = {
    "train": Row(
        lambda i, out: ["train", "--tower-a", i.model, "--tower-b", i.model, "--corpus", i.corpus, *TRAINING, "-o", out],
        lambda i: i.model,
    ),
    "simcse": Row(lambda i, out: ["simcse", "-m", i.model, "--corpus", i.corpus, *TRAINING, "-o", out], lambda i: i.model),
    "distill": Row(
        lambda i, out: ["distill", "-t", i.model, "-s", i.model, "--corpus", i.corpus, *TRAINING, "-o", out],
        lambda i: i.model,
    ),
    "ensemble": Row(lambda i, out: ["ensemble", i.model, i.model, "-o", out], lambda i: i.model),
    "rtt": Row(
        lambda i, out: ["rtt", "--input", i.corpus, "--pivots", "de", "--backend", "replay", "--replay-pairs",
                        i.rtt_pairs, "--no-progress", "-o", out],
        lambda i: i.rtt_pairs,
        overwrite=False,
    ),  # fmt: skip
    "eval sts": Row(
        lambda i, out: ["eval", "sts", i.model, "--stsb-file", i.dev, "-o", out], lambda i: i.dev, ".json", False
    ),
    "eval mteb": Row(
        lambda i, out: ["eval", "mteb", i.model, "--tasks", "", "--local-task", i.dev, "-o", out],
        lambda i: i.dev,
        overwrite=False,
    ),
    "diagnose": Row(
        lambda i, out: ["diagnose", i.model, "--sentences", i.corpus, "--limit", 8, "--seq-len", 16, "-o", out],
        lambda i: i.corpus,
        overwrite=False,
    ),
    "encode": Row(lambda i, out: ["encode", i.model, "-i", i.corpus, "--no-progress", "-o", out], lambda i: i.corpus, ".npy"),
    "index build": Row(lambda i, out: ["index", "build", i.model, "-i", i.corpus, "--no-progress", "-o", out], lambda i: i.corpus),
    "index search": Row(
        lambda i, out: ["index", "search", "--index", i.index, "--queries-file", i.queries, "-k", 2, "-o", out],
        lambda i: i.queries,
        ".jsonl",
        False,
    ),
    "index mine": Row(
        lambda i, out: ["index", "mine", i.model, "-i", i.pairs, "--num-negatives", 1, "-o", out],
        lambda i: i.pairs,
        ".jsonl",
        False,
    ),
    "export": Row(lambda i, out: ["export", i.model, "-o", out], lambda i: i.model),
    "data fetch": Row(lambda i, out: ["data", "fetch", "corpus", "--manifest", i.manifest, "--no-progress", "-o", out], lambda i: i.manifest),
    "pipeline": Row(
        lambda i, out: ["pipeline", "--tower-a", i.model, "--tower-b", i.model, "--corpus", i.corpus, "--until", "warmup",
                        *PIPELINE_TRAINING, "-o", out],
        lambda i: i.corpus,
        overwrite=False,
    ),
}  # fmt: skip
CASES = (
    "input",
    "my file",
    "folder of mine",
    "symlink to my file",
    "hard link to my file",
    "overwrite with my file added",
)
SLOW_CASES = {"overwrite with my file added"}


def _params():
    for command in TABLE:
        for case in CASES:
            marks = [pytest.mark.slow] if case in SLOW_CASES else []
            if command == "export" and case in SLOW_CASES and not OPENVINO:
                marks.append(pytest.mark.skip(reason="needs jtcse[openvino] to export (scripts/test.sh --export)"))
            yield pytest.param(command, case, marks=marks, id=f"{command}-{case}".replace(" ", "_"))


def _writing_commands() -> set[str]:
    """Every command of the CLI that writes: it has an -o/--output option."""
    found = set()

    def walk(group, path=()):
        for name, command in group.commands.items():
            if hasattr(command, "commands"):
                walk(command, (*path, name))
            elif any("--output" in getattr(param, "opts", ()) for param in command.params):
                found.add(" ".join((*path, name)))

    walk(click_app())
    return found


def test_every_writing_command_has_a_row():
    """A new command with -o/--output cannot be added without a row in the table."""
    assert _writing_commands() == set(TABLE)


@pytest.fixture
def inputs(tmp_path, tiny_bert) -> Inputs:
    root = tmp_path / "in"
    root.mkdir()
    shutil.copytree(tiny_bert, root / "model")
    (root / "corpus.txt").write_text(CORPUS, encoding="utf-8")
    pairs = "anchor\tpositive\n" + "".join(f"A sentence {i}.\tThe sentence {i}.\n" for i in range(8))
    (root / "pairs.tsv").write_text(pairs, encoding="utf-8")
    (root / "queries.txt").write_text("Sentence number 3.\n", encoding="utf-8")
    (root / "rtt").mkdir()
    lines = CORPUS.splitlines()
    (root / "rtt" / "pairs.de.tsv").write_text("".join(f"{s}\t{s.upper()}\n" for s in lines), encoding="utf-8")
    with FileServer({"/corpus.txt": CORPUS.encode()}) as server:
        digest = hashlib.sha256(CORPUS.encode()).hexdigest()
        (root / "manifest.toml").write_text(
            f'schema = 1\n[datasets.corpus]\nsummary = "a corpus"\n[[datasets.corpus.files]]\nname = "corpus.txt"\n'
            f'url = "{server.url("/corpus.txt")}"\nsha256 = "{digest}"\n',
            encoding="utf-8",
        )
        yield Inputs(root, root / "model", root / "corpus.txt", write_stsb(root / "dev.csv"), root / "pairs.tsv",
                     root / "queries.txt", root / "rtt", root / "manifest.toml")  # fmt: skip


def _digests(*roots: Path) -> dict[str, str]:
    """sha256 of every file under ``roots`` (links followed), and where each link points."""
    out = {}
    for root in roots:
        for path in sorted(root.rglob("*")):
            if path.is_symlink():
                out[f"{path} ->"] = os.readlink(path)
            if path.is_file():
                out[str(path)] = hashlib.sha256(path.read_bytes()).hexdigest()
    return out


def _output(case: str, row: Row, inputs: Inputs, mine: Path) -> Path:
    """Where the command writes in ``case`` (``mine``: the user's folder, where every file is theirs)."""
    suffix = row.suffix or ".txt"
    if case == "input":
        return row.source(inputs)
    if case == "folder of mine":
        (mine / "folder").mkdir()
        (mine / "folder" / "notes.txt").write_bytes(MY_BYTES)
        return mine / "folder"
    target = mine / f"mine{suffix}"
    target.write_bytes(MY_BYTES)
    if case == "symlink to my file":
        (mine / f"link{suffix}").symlink_to(target)
        return mine / f"link{suffix}"
    if case == "hard link to my file":
        os.link(target, mine / f"hard{suffix}")
        return mine / f"hard{suffix}"
    return target  # "my file"


def _exits_0_or_2_with_one_line(result) -> None:
    assert result.returncode in (0, 2), (result.returncode, result.stderr[-3000:])
    assert "Traceback" not in result.stderr, result.stderr[-3000:]
    if result.returncode == 2:
        errors = [line for line in result.stderr.splitlines() if line.startswith("Error")]
        assert len(errors) == 1, result.stderr[-3000:]


@pytest.mark.cli
@pytest.mark.parametrize("command, case", list(_params()))
def test_no_command_replaces_or_deletes_a_file_of_the_users(command, case, inputs, tmp_path):
    row = TABLE[command]
    mine = tmp_path / "mine"
    mine.mkdir()
    if case == "overwrite with my file added":
        out = tmp_path / "out" / (f"result{row.suffix}" if row.suffix else "")
        if command == "index search":
            inputs.build_index()
        first = invoke_cli(*row.argv(inputs, out), cwd=tmp_path)
        assert first.returncode == 0, first.stderr[-3000:]
        added = (out if not row.suffix else out.parent) / "notes.txt"
        added.write_bytes(MY_BYTES)
        argv = [*row.argv(inputs, out), *(["--overwrite"] if row.overwrite else [])]
        before = {**_digests(inputs.root, mine), str(added): hashlib.sha256(MY_BYTES).hexdigest()}
    else:
        out = _output(case, row, inputs, mine)
        argv = [*row.argv(inputs, out), *(["--overwrite"] if row.overwrite else [])]
        before = _digests(inputs.root, mine)
    result = invoke_cli(*argv, cwd=tmp_path)
    _exits_0_or_2_with_one_line(result)
    after = _digests(inputs.root, mine)
    if case == "overwrite with my file added":
        after[str(added)] = hashlib.sha256(added.read_bytes()).hexdigest()
    assert after == before, result.stderr[-2000:]
    if case != "overwrite with my file added":
        assert result.returncode == 2, result.stdout[-2000:]  # each of these is refused before anything is written


# ---------------------------------------------------------------------------------------------- the mechanism
def test_a_folder_output_refuses_what_its_record_does_not_list_and_clears_only_what_it_does(tmp_path):
    from jtcse.errors import JTCSEError
    from jtcse.output_paths import RECORD, FolderOutput

    out = FolderOutput(tmp_path / "out", "jtcse diagnose")
    out.check()  # new: fine
    out.write_json("report.json", {"a": 1})
    out.add("plot.png")  # entered, then killed while writing it: its temporary is left
    (tmp_path / "out" / ".plot.png.tmp-99").write_bytes(b"")
    out.check()
    with out.atomic("plot.png") as tmp:  # the next run writes it (and removes what the kill left)
        tmp.write_bytes(b"png")
    assert out.files == ["report.json", "plot.png"] and not (tmp_path / "out" / ".plot.png.tmp-99").exists()
    (tmp_path / "out" / ".plot.png.tmp-98").write_bytes(b"")  # beside a file written whole: not jtcse's
    with pytest.raises(JTCSEError, match=r"out/\.plot\.png\.tmp-98 was not written by jtcse diagnose"):
        out.check()
    (tmp_path / "out" / ".plot.png.tmp-98").unlink()
    (tmp_path / "out" / "notes.txt").write_bytes(MY_BYTES)
    with pytest.raises(JTCSEError, match=r"out/notes\.txt was not written by jtcse diagnose \(jtcse_outputs\.json"):
        out.check()
    (tmp_path / "out" / "notes.txt").unlink()
    (tmp_path / "out" / "plot.png").write_bytes(b"my plot")  # listed, its content changed since: mine now
    with pytest.raises(JTCSEError, match=r"out/plot\.png is not what jtcse diagnose wrote there: its content changed"):
        out.check()
    (tmp_path / "out" / "notes.txt").write_bytes(MY_BYTES)
    out.clear()  # --overwrite: only what the record proves is jtcse's
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == [RECORD, "notes.txt", "plot.png"]
    with pytest.raises(JTCSEError, match=r"holds the output of jtcse diagnose; give jtcse eval mteb a folder of its"):
        FolderOutput(tmp_path / "out", "jtcse eval mteb").check()


def test_a_model_is_moved_in_entry_by_entry_each_entered_in_the_record_first(tmp_path):
    from jtcse.output_paths import FolderOutput, missing_entries

    out = FolderOutput(tmp_path / "run", "jtcse simcse")
    for content in (b"old", b"new"):
        with out.moved_in() as scratch:
            (scratch / "1_Pooling").mkdir(parents=True)
            (scratch / "1_Pooling" / "config.json").write_bytes(content)
            (scratch / "model.safetensors").write_bytes(content)
    assert (tmp_path / "run" / "model.safetensors").read_bytes() == b"new"
    assert (tmp_path / "run" / "1_Pooling" / "config.json").read_bytes() == b"new"
    assert out.files == ["1_Pooling/config.json", "model.safetensors"] and missing_entries(tmp_path / "run") == []
    (tmp_path / "run" / "model.safetensors").unlink()
    assert missing_entries(tmp_path / "run") == ["model.safetensors"]


def test_a_file_output_is_owned_only_through_its_record_and_never_through_a_link(tmp_path):
    from jtcse.errors import JTCSEError
    from jtcse.output_paths import FileOutput

    out = FileOutput(tmp_path / "hits.jsonl", "jtcse index search")
    out.check()
    with out.writing():
        out.add()
        with out.atomic() as tmp:
            tmp.write_text("{}\n", encoding="utf-8")
    out.check()  # its own: a rerun may replace it
    os.link(tmp_path / "hits.jsonl", tmp_path / "copy.jsonl")
    with pytest.raises(JTCSEError, match=r"hits\.jsonl has 2 names \(hard links\)"):
        out.check()
    mine = tmp_path / "mine.jsonl"
    mine.write_bytes(MY_BYTES)
    with pytest.raises(JTCSEError, match=r"mine\.jsonl was not written by jtcse index search \(mine\.jsonl\.json"):
        FileOutput(mine, "jtcse index search").check()
    (tmp_path / "link.jsonl").symlink_to(mine)
    with pytest.raises(JTCSEError, match=r"link\.jsonl is a link \(to .*mine\.jsonl\); jtcse never writes through"):
        FileOutput(tmp_path / "link.jsonl", "jtcse index search").check()
    assert mine.read_bytes() == MY_BYTES


def test_json_is_written_without_nan_and_a_nan_names_its_key(tmp_path):
    """A bare NaN in run_summary.json is not JSON: the writer says which key holds it instead (case 7)."""
    from jtcse.errors import JTCSEError
    from jtcse.locking import atomic_write_json

    with pytest.raises(JTCSEError, match=r"Cannot write run_summary\.json: dev_spearman_by_step\.2 \(nan\) is not a"):
        atomic_write_json(tmp_path / "run_summary.json", {"steps": 4, "dev_spearman_by_step": {2: float("nan")}})
    assert not (tmp_path / "run_summary.json").exists()


# ------------------------------------------------------------------- issue 38's cases (each failed before it)
@pytest.mark.cli
def test_case1_a_result_file_never_replaces_an_input_or_a_file_jtcse_did_not_write(inputs, tmp_path):
    """`eval sts --stsb-file dev.csv -o dev.csv` wrote the scores over the dev file, exit 0; any existing -o was
    overwritten, as were eval mteb's summary and diagnose's report."""
    from helpers.cli import one_error_line

    dev, model = inputs.dev, inputs.model
    before = _digests(inputs.root)
    line = one_error_line(invoke_cli("eval", "sts", model, "--stsb-file", dev, "-o", dev))
    assert f"The output {dev} is the input {dev}" in line
    for argv, name in [
        (["eval", "sts", model, "--stsb-file", dev, "-o"], "scores.json"),
        (["eval", "mteb", model, "--tasks", "", "--local-task", dev, "-o"], "summary.json"),
        (["diagnose", model, "--sentences", inputs.corpus, "-o"], "report.json"),
    ]:
        folder = tmp_path / name.split(".")[0]
        folder.mkdir()
        (folder / name).write_bytes(MY_BYTES)
        line = one_error_line(invoke_cli(*argv, folder / name if name == "scores.json" else folder))
        assert f"{folder / name} was not written by jtcse" in line and "never replaced" in line, line
        assert (folder / name).read_bytes() == MY_BYTES
    assert _digests(inputs.root) == before


@pytest.mark.cli
def test_case2_encode_replaces_only_the_files_its_progress_file_lists(inputs, tmp_path):
    """`encode -o data.npy` replaced my data.rows.npy; with --overwrite it replaced my mine.npy / mine.parquet."""
    from helpers.cli import one_error_line

    (tmp_path / "data.rows.npy").write_bytes(MY_BYTES)
    line = one_error_line(invoke_cli("encode", inputs.model, "-i", inputs.corpus, "-o", tmp_path / "data.npy"))
    assert f"{tmp_path / 'data.rows.npy'} was not written by jtcse encode (data.npy.json does not list it)" in line
    for name in ("mine.npy", "mine.parquet"):
        (tmp_path / name).write_bytes(MY_BYTES)
        args = ("encode", inputs.model, "-i", inputs.corpus, "-o", tmp_path / name, "--overwrite")
        assert f"{tmp_path / name} was not written by jtcse encode" in one_error_line(invoke_cli(*args))
    assert all((tmp_path / n).read_bytes() == MY_BYTES for n in ("data.rows.npy", "mine.npy", "mine.parquet"))
    assert not (tmp_path / "data.npy").exists()


@pytest.mark.cli
def test_case3_index_build_never_writes_over_a_texts_file_of_mine(inputs, tmp_path):
    from helpers.cli import one_error_line

    (tmp_path / "d").mkdir()
    (tmp_path / "d" / "texts.txt").write_bytes(MY_BYTES)
    for flag in ([], ["--overwrite"]):
        line = one_error_line(
            invoke_cli("index", "build", inputs.model, "-i", inputs.corpus, "-o", tmp_path / "d", *flag)
        )
        assert f"{tmp_path / 'd' / 'texts.txt'} was not written by jtcse index build" in line
    assert [p.name for p in (tmp_path / "d").iterdir()] == ["texts.txt"]
    assert (tmp_path / "d" / "texts.txt").read_bytes() == MY_BYTES


@pytest.mark.cli
def test_case4_overwrite_never_deletes_what_i_added_to_an_earlier_fetch(inputs, tmp_path):
    from helpers.cli import one_error_line

    fetch = ("data", "fetch", "corpus", "--manifest", inputs.manifest, "--no-progress", "-o", tmp_path / "data")
    assert invoke_cli(*fetch).returncode == 0
    (tmp_path / "data" / "notes.txt").write_bytes(MY_BYTES)
    (tmp_path / "data" / "myruns").mkdir()
    (tmp_path / "data" / "myruns" / "run.txt").write_bytes(MY_BYTES)
    line = one_error_line(invoke_cli(*fetch, "--overwrite"))
    assert "was not written by jtcse data fetch" in line and ("myruns" in line or "notes.txt" in line)
    assert (tmp_path / "data" / "notes.txt").read_bytes() == (tmp_path / "data" / "myruns" / "run.txt").read_bytes()


@pytest.mark.slow
@pytest.mark.cli
def test_case4_overwrite_never_deletes_what_i_added_to_an_earlier_ensemble(inputs, tmp_path):
    from helpers.cli import one_error_line

    ensemble = ("ensemble", inputs.model, inputs.model, "-o", tmp_path / "ens")
    assert invoke_cli(*ensemble).returncode == 0
    (tmp_path / "ens" / "notes.txt").write_bytes(MY_BYTES)
    line = one_error_line(invoke_cli(*ensemble, "--overwrite"))
    assert f"{tmp_path / 'ens' / 'notes.txt'} was not written by jtcse ensemble" in line
    assert (tmp_path / "ens" / "notes.txt").read_bytes() == MY_BYTES and (tmp_path / "ens" / "modules.json").is_file()


@pytest.mark.cli
@pytest.mark.parametrize("trainer", ["distill", "simcse", "train"])
def test_case5_a_trainer_never_writes_over_its_input_even_with_overwrite(trainer, inputs):
    """`distill -t X -o X --overwrite` replaced the teacher's weights; the refusal without the flag listed setting
    differences instead of saying the folder is the input."""
    from helpers.cli import one_error_line

    before = _digests(inputs.root)
    for flag in ([], ["--overwrite"]):
        line = one_error_line(invoke_cli(*TABLE[trainer].argv(inputs, inputs.model), *flag))
        assert line == (
            f"Error: The output {inputs.model} is the input {inputs.model}: writing it would destroy what is read, "
            "--overwrite or not. Give another -o/--output."
        )
    assert _digests(inputs.root) == before


@pytest.mark.slow
@pytest.mark.cli
def test_case6_a_dev_file_edited_in_place_is_another_dev_file(inputs, tmp_path):
    """`simcse --checkpoint best-dev` said "nothing to do" after the dev file was edited in place (same path)."""
    from helpers.cli import one_error_line

    args = (*TABLE["simcse"].argv(inputs, tmp_path / "run"), "--dev-file", inputs.dev, "--checkpoint", "best-dev",
            "--eval-steps", 1, "--max-steps", 2)  # fmt: skip
    assert invoke_cli(*args).returncode == 0
    rerun = invoke_cli(*args)
    assert rerun.returncode == 0 and "nothing to do" in rerun.stderr  # the same file: done
    text = inputs.dev.read_text(encoding="utf-8")
    inputs.dev.write_text(text.replace("\t4.8\t", "\t0.2\t"), encoding="utf-8")  # one gold score edited in place
    line = one_error_line(invoke_cli(*args))
    assert "already holds a finished run, from inputs that have changed since (dev_file " in line, line


@pytest.mark.cli
def test_case7_one_nan_score_is_an_error_naming_the_file_and_line_before_training(inputs, tmp_path):
    """One NaN score gave NaN Spearman everywhere, no warning, and a bare NaN in run_summary.json."""
    from helpers.cli import one_error_line

    from jtcse.errors import JTCSEError
    from jtcse.evaluation.sts import read_stsb_file

    lines = inputs.dev.read_text(encoding="utf-8").splitlines(keepends=True)
    lines[2] = lines[2].replace("\t0.6\t", "\tnan\t")
    nan_dev = tmp_path / "dev-nan.csv"
    nan_dev.write_text("".join(lines), encoding="utf-8")
    with pytest.raises(JTCSEError, match=rf"^{nan_dev}: line 3: score 'nan' is not a finite number\.$"):
        read_stsb_file(nan_dev)
    args = (*TABLE["simcse"].argv(inputs, tmp_path / "run"), "--dev-file", nan_dev, "--checkpoint", "best-dev")
    assert one_error_line(invoke_cli(*args)) == f"Error: {nan_dev}: line 3: score 'nan' is not a finite number."
    assert not (tmp_path / "run").exists()


def test_case7_the_best_checkpoint_by_dev_is_the_step_saved():
    """With every dev score NaN the trainer kept no best checkpoint and saved the last step (4), while the summary
    named step 2 as the best; a score that is not a number never makes a step "best"."""
    from types import SimpleNamespace

    from jtcse.training.arguments import DEV_METRIC
    from jtcse.training.run_summary import _kept, loss_history

    nan = float("nan")
    for scores, best_checkpoint, best in [
        ({2: nan, 4: nan}, None, None),
        ({2: 0.5, 4: nan}, "checkpoint-2", 2),
        ({2: 0.5, 4: 0.7}, "checkpoint-4", 4),
    ]:
        history = [{"step": step, DEV_METRIC: score} for step, score in scores.items()]
        state = SimpleNamespace(global_step=4, best_model_checkpoint=best_checkpoint, best_metric=scores.get(best))
        summary = {**loss_history(history), **_kept(state, kept_by_dev=True)}
        assert summary["best_step"] == best and summary["saved_step"] == (best or 4), scores


def test_case7_a_collapsed_model_has_no_dev_spearman_rather_than_nan():
    import numpy as np
    from helpers.sts import DEV_PAIRS

    from jtcse.errors import JTCSEError
    from jtcse.evaluation.sts import STSPairs, cosine_spearman

    class Collapsed:
        def encode(self, sentences, **_):
            return np.ones((len(sentences), 4), dtype=np.float32)

    pairs = STSPairs([a for a, _, _ in DEV_PAIRS], [b for _, b, _ in DEV_PAIRS], np.array([s for *_, s in DEV_PAIRS]))
    with pytest.raises(JTCSEError, match=r"gives all 6 pairs the same cosine \(1\.0000\).*collapsed"):
        cosine_spearman(Collapsed(), pairs)


def test_case9_a_run_missing_a_file_it_wrote_is_not_finished(tmp_path, caplog):
    """A folder whose model.safetensors was deleted was "finished run; nothing to do"."""
    import logging

    from jtcse.training.run_dir import is_finished, plan_output_dir, stage_output
    from jtcse.training.run_summary import write_run_summary

    config = {"stage": "simcse", "lr": 1e-3}
    output = stage_output(tmp_path, config)
    output.add("modules.json", "model.safetensors", "run_summary.json")
    for name in ("modules.json", "model.safetensors"):
        (tmp_path / name).write_text("{}", encoding="utf-8")
    write_run_summary(tmp_path, {"stage": "simcse", "steps": 2, "config": config})
    assert is_finished(tmp_path) and plan_output_dir(tmp_path, config, resume=True, overwrite=False).finished
    (tmp_path / "model.safetensors").unlink()
    assert not is_finished(tmp_path)
    with caplog.at_level(logging.WARNING):
        plan = plan_output_dir(tmp_path, config, resume=True, overwrite=False)
    assert plan.action == "fresh"
    assert f"{tmp_path} is not a finished run: model.safetensors, which its run wrote, is missing" in caplog.text


@pytest.mark.slow
@pytest.mark.cli
def test_case9_a_trainer_trains_again_a_run_whose_weights_were_deleted(inputs, tmp_path):
    args = TABLE["simcse"].argv(inputs, tmp_path / "run")
    assert invoke_cli(*args).returncode == 0
    (tmp_path / "run" / "model.safetensors").unlink()
    rerun = invoke_cli(*args)
    assert rerun.returncode == 0 and "nothing to do" not in rerun.stderr
    assert "model.safetensors, which its run wrote, is missing" in rerun.stderr
    assert (tmp_path / "run" / "model.safetensors").is_file()


@pytest.mark.cli
def test_case10_index_build_into_a_file_is_one_line(inputs, tmp_path):
    """`index build -o FILE` ended in a FileExistsError traceback."""
    from helpers.cli import one_error_line

    (tmp_path / "idx").write_bytes(MY_BYTES)
    line = one_error_line(invoke_cli("index", "build", inputs.model, "-i", inputs.corpus, "-o", tmp_path / "idx"))
    assert line == f"Error: {tmp_path / 'idx'} is a file; -o/--output names the folder jtcse index build writes."
    assert (tmp_path / "idx").read_bytes() == MY_BYTES


@pytest.mark.cli
def test_case12_a_negative_seed_is_refused_when_given(tmp_path):
    """`seed = -1` passed the settings check and failed only at run time."""
    from helpers.cli import one_error_line

    line = one_error_line(invoke_cli("simcse", "--seed", -1, "-o", tmp_path / "run"))
    assert line == "Error: --seed: must be between 0 and 4294967295"
    line = one_error_line(invoke_cli("pipeline", "--seed", 2**32 - 1, "-o", tmp_path / "run"))
    assert line == "Error: --seed: must be between 0 and 4294967294 (seed + 1 is used too)"
    assert not (tmp_path / "run").exists()


# ------------------------------------------------------- issue 38's cases in `jtcse pipeline` (each failed before it)
def _pipeline_config(**values):
    from jtcse.pipeline.settings import PipelineConfig

    return PipelineConfig.from_values(values)


def _stsb(path: Path, rows) -> Path:
    """``rows`` (sentence1, sentence2, score text) as an STS-B file."""
    path.write_text("".join(f"main-news\tx\t2015\t{i}\t{s}\t{a}\t{b}\n" for i, (a, b, s) in enumerate(rows)), "utf-8")
    return path


@pytest.mark.cli
def test_case10_pipeline_into_a_file_is_one_line(tmp_path):
    """`jtcse pipeline -o FILE` ended in a FileExistsError traceback."""
    from helpers.cli import one_error_line

    (tmp_path / "run").write_bytes(MY_BYTES)
    line = one_error_line(invoke_cli("pipeline", "--until", "warmup", "-o", tmp_path / "run"))
    assert line == f"Error: {tmp_path / 'run'} is a file; -o/--output names the folder jtcse pipeline writes."
    assert (tmp_path / "run").read_bytes() == MY_BYTES


def test_a_stage_folder_of_the_run_itself_may_join_the_ensemble(tmp_path):
    """``--ensemble-with OUT/tower_a`` (the run's own warm-up as one more member) names what the run makes, not an
    input inside the output; a model of the user's inside OUT is still refused."""
    from jtcse.errors import JTCSEError
    from jtcse.pipeline.run import pipeline_output

    out = tmp_path / "out"
    own = _pipeline_config(ensemble={"enabled": True, "with": [str(out / "tower_a"), str(out / "tower_b")]})
    pipeline_output(out, own).check()
    mine = out / "my_model"
    mine.mkdir(parents=True)
    (mine / "config.json").write_bytes(MY_BYTES)
    with pytest.raises(JTCSEError, match="holds the input"):
        pipeline_output(out, _pipeline_config(ensemble={"enabled": True, "with": [str(mine)]})).check()
    assert (mine / "config.json").read_bytes() == MY_BYTES


def test_case11_the_plan_reads_every_file_a_stage_reads_before_any_stage_trains(tmp_path, tiny_bert):
    """The dev file's format and scores, the selection files', the corpus and cael_every were checked only by the
    stage that read them, after hours of earlier stages; the seed + 1 of warm-up II only when it trained."""
    from helpers.sts import write_stsb

    from jtcse.errors import JTCSEError
    from jtcse.pipeline.plan import make_plan
    from jtcse.pipeline.run import run_pipeline

    dev = write_stsb(tmp_path / "dev.csv")
    short = tmp_path / "short.csv"
    short.write_text("main-news\tx\t2015\t0\t4.0\tA man.\n", encoding="utf-8")
    flat = _stsb(tmp_path / "flat.csv", [(f"A bird {i} sings.", f"Bird {i} is singing.", "3.0") for i in range(6)])
    corpus = tmp_path / "corpus.txt"
    corpus.write_bytes(b"A sentence.\nAn \xff byte.\n")
    pairs = tmp_path / "pairs.tsv"
    pairs.write_text("only one column\n", encoding="utf-8")
    start = {"tower_a": tiny_bert, "tower_b": tiny_bert}
    for values, message in [
        (dict(dev_file=str(short)), rf"^{short}: line 1 has 6 tab-separated fields"),
        (dict(dev_file=str(flat)), rf"^{flat}: every one of its 6 pairs has the gold score 3"),
        (dict(dev_file=str(dev), selection_files=[str(flat)]), rf"^{flat}: every one of its 6 pairs"),
        (dict(until="warmup", corpus=str(corpus)), rf"^{corpus}: line 2 is not valid UTF-8"),
        (dict(until="warmup", pairs_b=str(pairs)), rf"{pairs}"),
        (dict(until="twin", twin={"enabled": True, "cael_every": 3}),
         r"^\[twin\] cael_every=3 does not divide the towers' 4 layers"),
    ]:  # fmt: skip
        with pytest.raises(JTCSEError, match=message):
            make_plan(_pipeline_config(**start, **values), tmp_path / "out", "cpu")
        with pytest.raises(JTCSEError, match=message):  # the run: refused before any stage
            run_pipeline(tmp_path / "out", _pipeline_config(**start, **values), device="cpu")
        assert not (tmp_path / "out").exists()
    with pytest.raises(JTCSEError, match=r"seed: must be between 0 and 4294967294 \(seed \+ 1 is used too\)$"):
        _pipeline_config(**start, seed=2**32 - 1)


@pytest.mark.slow
@pytest.mark.cli
def test_case8_and_case12_a_rerun_that_fails_leaves_no_stale_summary_and_says_what_to_do_in_the_pipeline(
    inputs, tmp_path, tiny_bert_b
):
    """Case 8: a rerun whose warm-up I trained again, then failed, left pipeline_summary.json describing the old
    models. Case 12: a stage was told to "pass --overwrite", which `pipeline` rejects, and a setting was named by the
    single-stage option (learning_rate, --keep-checkpoints), not the pipeline's."""
    from helpers.cli import one_error_line

    out = tmp_path / "run"
    args = ["pipeline", "--tower-a", inputs.model, "--tower-b", tiny_bert_b, "--corpus", inputs.corpus,
            "--until", "warmup", "--batch-size", 4, "--warmup-max-seq-length", 16, "-o", out]  # fmt: skip
    assert invoke_cli(*args, "--warmup-max-steps", 1).returncode == 0
    assert (out / "pipeline_summary.json").is_file() and (out / "pipeline_summary.md").is_file()
    shutil.rmtree(out / "tower_a")  # warm-up I trains again; warm-up II is then refused: its setting changed
    line = one_error_line(invoke_cli(*args, "--warmup-max-steps", 1, "--warmup-b-learning-rate", 0.001))
    assert line.startswith(f"Error: {out / 'tower_b'} already holds a finished run, with other settings (")
    assert "--warmup-b-learning-rate 3e-05 -> 0.001" in line and "--overwrite" not in line, line
    assert line.endswith(f"Choose another -o/--output, or remove {out / 'tower_b'} to run the stage again."), line
    assert (out / "tower_a" / "model.safetensors").is_file()  # trained again ...
    assert not (out / "pipeline_summary.json").exists() and not (out / "pipeline_summary.md").exists()  # ... no stale
    line = one_error_line(invoke_cli(*args, "--warmup-max-steps", 2))
    assert "cannot train further (keep them with --warmup-keep-checkpoints)" in line and "--overwrite" not in line


@pytest.mark.slow
def test_case6_and_case9_the_pipelines_stages_compare_files_by_content_and_need_every_file_they_wrote(
    inputs, tmp_path, tiny_bert_b, caplog
):
    """Case 6: a dev file edited in place left the eval stage "skipped (done)" with the old scores, and a selection
    file edited in place the ensemble chosen on it. Case 9: a stage folder missing a file its run wrote was done
    (the ensemble's: refused over its own run_summary.json), and the next stage blamed its "teacher" setting."""
    import json
    import logging

    from jtcse.errors import JTCSEError
    from jtcse.pipeline.run import run_pipeline

    out = tmp_path / "run"
    selection = _stsb(tmp_path / "selection.csv", [(f"Bird {i} sings.", f"A bird {i} is singing.", f"{i % 5}.5")
                                                   for i in range(8)])  # fmt: skip
    tiny = {"max_steps": 1, "batch_size": 4, "max_seq_length": 16}
    config = _pipeline_config(tower_a=str(inputs.model), tower_b=tiny_bert_b, corpus=str(inputs.corpus),
                              dev_file=str(inputs.dev), selection_files=[str(selection)], warmup=tiny, distill=tiny)  # fmt: skip
    first = run_pipeline(out, config, device="cpu")
    scores = first["stages"]["eval"]["dev_spearman"]

    dev_text = inputs.dev.read_text(encoding="utf-8")  # every gold score s becomes 5 - s: each Spearman flips sign
    flipped = [line.split("\t") for line in dev_text.splitlines()]
    inputs.dev.write_text("".join("\t".join([*f[:4], f"{5 - float(f[4]):g}", *f[5:]]) + "\n" for f in flipped), "utf-8")
    edited = run_pipeline(out, config, device="cpu")
    assert [(row["stage"], row["status"]) for row in edited["table"] if row["stage"] in ("ensemble", "eval")] == [
        ("ensemble", "skipped (done)"), ("eval", "ran")
    ]  # fmt: skip
    assert edited["stages"]["eval"]["dev_spearman"] == pytest.approx({k: -v for k, v in scores.items()})

    original = selection.read_text(encoding="utf-8")
    selection.write_text(original.replace("\t0.5\t", "\t4.5\t"), encoding="utf-8")
    with pytest.raises(JTCSEError, match=r"ensemble finished from inputs that have changed since \(selection_files "):
        run_pipeline(out, config, device="cpu")
    selection.write_text(original, encoding="utf-8")  # the same content again: done again

    shutil.rmtree(out / "ensemble" / "member_1")
    with caplog.at_level(logging.WARNING):
        again = run_pipeline(out, config, device="cpu")
    assert f"{out / 'ensemble'} is not a finished run: member_1, which its run wrote, is missing" in caplog.text
    assert (out / "ensemble" / "member_1").is_dir()  # made again, the same bytes: the distillation's teacher (its
    statuses = {row["stage"]: row["status"] for row in again["table"]}  # content) is the same model, so it is done
    assert (statuses["ensemble"], statuses["distill"]) == ("ran", "skipped (done)"), statuses
    assert json.loads((out / "ensemble" / "run_summary.json").read_text())["stage"] == "ensemble"
    (out / "ensemble" / "member_2" / "config.json").write_text("{}")  # another teacher now: an input, not a setting
    with pytest.raises(JTCSEError) as refused:
        run_pipeline(out, config, device="cpu")
    message = str(refused.value)
    assert message.startswith(f"{out / 'distilled'} already holds a finished run, from inputs that have changed since")
    assert "(teacher " in message and "other settings" not in message, message
    assert (out / "ensemble" / "member_2" / "config.json").read_text() == "{}"


def test_a_pipeline_folder_from_before_records_is_read_as_its_own(tmp_path):
    """A run folder of jtcse before records (its pipeline_summary.json, stage folders) may be run in again; a file of
    the user's there, or a stage folder that is a file, is refused."""
    from jtcse.errors import JTCSEError
    from jtcse.pipeline.run import pipeline_output
    from jtcse.pipeline.settings import PipelineConfig

    run = tmp_path / "run"
    (run / "tower_a").mkdir(parents=True)
    (run / "pipeline_summary.json").write_text('{"output_dir": "run", "stages": {}}', encoding="utf-8")
    (run / "pipeline_summary.md").write_text("| stage |\n", encoding="utf-8")
    out = pipeline_output(run, PipelineConfig())
    out.check()
    assert out.files == ["pipeline_summary.json", "pipeline_summary.md"]  # the stage folders: outputs of their own
    (run / "notes.txt").write_bytes(MY_BYTES)
    with pytest.raises(JTCSEError, match=r"run/notes\.txt was not written by jtcse pipeline"):
        out.check()
    (run / "notes.txt").unlink()
    (run / "eval").write_bytes(MY_BYTES)
    with pytest.raises(JTCSEError, match=r"run/eval is a file; jtcse pipeline writes a folder there"):
        out.check()
