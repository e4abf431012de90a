"""Issue 42 ("Owned by content, confined to its folder"): one test per root cause, each of which failed on main
before it (``scripts/sweep_outputs.py --issue 42`` runs the same cases as command lines), and a property test:
random records with hostile entries never delete anything outside the output, in a temporary tree."""

from __future__ import annotations

import hashlib
import json
import os
import random
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from helpers.cli import fork_run_cli, one_error_line, subprocess_env
from helpers.files import snapshot

from jtcse.errors import JTCSEError
from jtcse.output_paths import RECORD, FileOutput, FolderOutput, fingerprint

MY_BYTES = b"a file of mine: jtcse must never replace or delete it\n"


def _tree(root: Path) -> dict[str, str]:
    """sha256 of every file under ``root`` (links not followed), and where each link points."""
    out = {}
    for top, folders, files in os.walk(root):
        for name in [*files, *folders]:
            path = Path(top) / name
            if path.is_symlink():
                out[str(path)] = f"-> {os.readlink(path)}"
            elif path.is_file():
                out[str(path)] = hashlib.sha256(path.read_bytes()).hexdigest()
    return out


def _listing(record: Path, *entries) -> None:
    """``entries`` added to what ``record`` lists, as a hand (or another program) would."""
    data = json.loads(record.read_text(encoding="utf-8"))
    files = data["files"]
    data["files"] = [*files, *entries] if isinstance(files, list) else [*files, *entries]
    record.write_text(json.dumps(data), encoding="utf-8")


# --------------------------------------------------------------- root cause 1: the record is trusted as it stands
HOSTILE = ["../victim.txt", "<abs>/victim.txt", "../vdir", "../*.keep", "a/../../victim.txt", "link/keep.txt", "link",
           ".", "", 42, None, ["x"], {"x": 1}]  # fmt: skip


@pytest.mark.parametrize("entry", HOSTILE, ids=[json.dumps(e) for e in HOSTILE])
def test_root_cause_1_a_record_naming_anything_outside_its_output_is_refused_and_deletes_nothing(tmp_path, entry):
    """`FolderOutput.clear` joined each listed name onto the folder unchecked: `../victim.txt`, an absolute path, a
    folder `../vdir` or a glob `../*.keep` added to a record were deleted by `--overwrite`, exit 0."""
    for rel in ("victim.txt", "vdir/keep.txt", "a.keep", "b.keep"):
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_bytes(MY_BYTES)
    out = FolderOutput(tmp_path / "out", "jtcse index build")
    out.write_json("manifest.json", {"rows": 1})
    if "link" in str(entry):
        (out.path / "link").symlink_to(tmp_path / "vdir")
    entry = entry.replace("<abs>", str(tmp_path)) if isinstance(entry, str) else entry
    _listing(out.record_path, entry)
    before = _tree(tmp_path)
    shown = repr(entry) if isinstance(entry, str) else json.dumps(entry)
    for act in (out.check, out.clear, lambda: out.remove("manifest.json")):
        with pytest.raises(JTCSEError, match=rf"^{out.record_path} lists {__import__('re').escape(shown)}, which "):
            act()
    assert _tree(tmp_path) == before


def test_root_cause_1_a_file_outputs_record_is_checked_too(tmp_path):
    (tmp_path / "victim.txt").write_bytes(MY_BYTES)
    out = FileOutput(tmp_path / "hits.jsonl", "jtcse index search")
    with out.writing():
        out.add()
        with out.atomic() as tmp:
            tmp.write_text("{}\n", encoding="utf-8")
        out.add(sealed=True)
    _listing(out.record_path, "../victim.txt")
    with pytest.raises(JTCSEError, match=r"hits\.jsonl\.json lists '\.\./victim\.txt', which is not a path inside"):
        out.check()
    assert (tmp_path / "victim.txt").read_bytes() == MY_BYTES


# ------------------------------------------------------- root cause 2: temporaries beside an output taken as jtcse's
@pytest.mark.parametrize("kind", ["folder of mine", "file of mine", "link to my folder"])
def test_root_cause_2_a_temporary_jtcse_did_not_make_is_never_removed(tmp_path, kind):
    """`atomic_folder` removed `OUT.tmp` unchecked before every fetch, ensemble and export (a link: a traceback)."""
    (tmp_path / "mydir").mkdir()
    (tmp_path / "mydir" / "notes.txt").write_bytes(MY_BYTES)
    tmp = tmp_path / "ens.tmp"
    if kind == "folder of mine":
        tmp.mkdir()
        (tmp / "notes.txt").write_bytes(MY_BYTES)
    elif kind == "file of mine":
        tmp.write_bytes(MY_BYTES)
    else:
        tmp.symlink_to(tmp_path / "mydir")
    before = _tree(tmp_path)
    out = FolderOutput(tmp_path / "ens", "jtcse ensemble", whole=True)
    for act in (out.check, lambda: out.replacing().__enter__()):
        with pytest.raises(JTCSEError, match=rf"^{tmp} is in the way: jtcse ensemble writes its new output there"):
            act()
    assert _tree(tmp_path) == before


def test_root_cause_2_a_temporary_jtcse_made_is_cleared_and_a_failed_write_keeps_the_old_output(tmp_path):
    out = FolderOutput(tmp_path / "ens", "jtcse ensemble", whole=True)
    with out.replacing() as new:
        (new.path / "model.safetensors").write_bytes(b"old")
    FolderOutput(tmp_path / "ens.tmp", "jtcse ensemble").add("half")  # what a killed replacing leaves: marked
    (tmp_path / "ens.tmp" / "half").write_bytes(b"half")
    out.check()
    with pytest.raises(OSError), out.replacing() as new:
        (new.path / "model.safetensors").write_bytes(b"new, half")
        raise OSError(28, "No space left on device")
    assert (out.path / "model.safetensors").read_bytes() == b"old" and not (tmp_path / "ens.tmp").exists()


# ------------------------------------------------------------ root cause 3: ownership looked at top-level names only
@pytest.mark.parametrize(
    "mine", ["1_Pooling/notes.txt", "README.md.tmp", "1_Pooling.tmp/notes.txt", "modules.json.lock", ".x.tmp-12"]
)
def test_root_cause_3_a_file_of_mine_inside_or_named_like_a_temporary_is_mine(tmp_path, mine):
    """A file of mine inside a folder jtcse wrote was deleted by `--overwrite` with the folder; files of mine named
    like jtcse's temporaries (README.md.tmp, a folder member_1.tmp/, modules.json.lock) passed as jtcse's."""
    out = FolderOutput(tmp_path / "run", "jtcse simcse")
    with out.moved_in() as scratch:
        (scratch / "1_Pooling").mkdir(parents=True)
        (scratch / "1_Pooling" / "config.json").write_bytes(b"{}")
        (scratch / "modules.json").write_bytes(b"[]")
    (out.path / mine).parent.mkdir(parents=True, exist_ok=True)
    (out.path / mine).write_bytes(MY_BYTES)
    with pytest.raises(JTCSEError, match=r"was not written by jtcse simcse \(jtcse_outputs\.json does not list it\)"):
        out.check()
    out.clear()  # --overwrite had it been allowed: only what the record proves is jtcse's goes
    assert (out.path / mine).read_bytes() == MY_BYTES and not (out.path / "modules.json").exists()
    assert not (out.path / "1_Pooling" / "config.json").exists()


# ------------------------------------------------------------------- root cause 4: ownership by name, not by content
def test_root_cause_4_a_listed_file_whose_content_changed_is_mine(tmp_path):
    """I encode to out.npy, then save my own array as out.npy: the same command replaced it ("does not hold 64 rows;
    encoding it again"). A record now holds each file's size and digest: a file that no longer matches is mine."""
    out = FolderOutput(tmp_path / "out", "jtcse diagnose")
    out.write_json("report.json", {"a": 1})
    (out.path / "report.json").write_bytes(MY_BYTES)
    with pytest.raises(JTCSEError, match=r"report\.json is not what jtcse diagnose wrote there: its content changed"):
        out.check()
    out.clear()
    assert (out.path / "report.json").read_bytes() == MY_BYTES
    result = FileOutput(tmp_path / "hits.jsonl", "jtcse index search")
    with result.writing():
        result.add()
        with result.atomic() as tmp:
            tmp.write_text("{}\n", encoding="utf-8")
        result.add(sealed=True)
    result.path.write_bytes(MY_BYTES)
    with pytest.raises(JTCSEError, match=r"hits\.jsonl is not what jtcse index search wrote there"):
        result.check()
    result.clear()
    assert result.path.read_bytes() == MY_BYTES


@pytest.mark.slow
def test_root_cause_4_encode_never_replaces_my_array_saved_over_its_output(tiny_bert, tmp_path):
    import numpy as np

    from jtcse.search.encode import encode_file

    corpus = tmp_path / "corpus.txt"
    corpus.write_text("".join(f"Sentence {i} says something.\n" for i in range(9)), encoding="utf-8")
    encode_file(tiny_bert, corpus, tmp_path / "out.npy", chunk_size=4, show_progress=False)
    np.save(tmp_path / "out.npy", np.arange(12.0).reshape(3, 4))
    mine = (tmp_path / "out.npy").read_bytes()
    for overwrite in (False, True):
        with pytest.raises(JTCSEError, match=r"out\.npy is not what jtcse encode wrote there: its content changed"):
            encode_file(tiny_bert, corpus, tmp_path / "out.npy", chunk_size=4, show_progress=False, overwrite=overwrite)
    assert (tmp_path / "out.npy").read_bytes() == mine


# ------------------------------------------------------------------- root cause 5: model inputs recorded by path
def test_root_cause_5_the_fingerprint_of_a_folder_is_its_content(tmp_path):
    """A model replaced at the same path was the same input (its path, or its files' sizes and times, were
    recorded). The one fingerprint of jtcse.output_paths reads every file of a folder (a model, a data folder)."""
    model = tmp_path / "mymodel"
    for name, data in (("model.safetensors", b"weights A"), ("config.json", b"{}"), ("1_Pooling/config.json", b"{}")):
        (model / name).parent.mkdir(parents=True, exist_ok=True)
        (model / name).write_bytes(data)
    first = fingerprint(model)
    assert first.startswith("sha256:") and fingerprint(shutil.copytree(model, tmp_path / "moved")) == first
    (model / ".cache").mkdir()
    (model / ".cache" / "x").write_text("hidden: not the model")
    (model / "checkpoints").mkdir()
    (model / "checkpoints" / "optimizer.pt").write_bytes(b"working state")
    assert fingerprint(model, ignore=["checkpoints"]) == first != fingerprint(model)
    stat = (model / "model.safetensors").stat()
    (model / "model.safetensors").write_bytes(b"weights B")  # another model at the same path: same size, same time
    os.utime(model / "model.safetensors", ns=(stat.st_atime_ns, stat.st_mtime_ns))
    assert fingerprint(model, ignore=["checkpoints"]) != first
    (model / "model.safetensors").write_bytes(b"weights A")
    (model / "1_Pooling" / "config.json").rename(model / "1_Pooling" / "other.json")  # names count too
    assert fingerprint(model, ignore=["checkpoints"]) != first
    (tmp_path / "file.txt").write_text("x")
    assert fingerprint(tmp_path / "file.txt") == f"sha256:{hashlib.sha256(b'x').hexdigest()[:16]}"
    assert fingerprint("sentence-transformers/all-MiniLM-L6-v2", missing_ok=True).startswith("sentence-transformers/")
    with pytest.raises(JTCSEError, match="teacher model not found: nope"):
        fingerprint("nope", what="teacher model")


class _Interrupt(Exception):
    pass


@pytest.mark.slow
def test_root_cause_5_a_partial_encode_never_resumes_across_a_changed_model(tiny_bert, tiny_bert_b, tmp_path):
    """Kill an encode midway, replace the model at the same path, rerun: it said "Resumed after row 512" and marked
    the file complete, half of it model A's vectors and half model B's."""
    from jtcse.search.encode import encode_file

    model, corpus, out = tmp_path / "mymodel", tmp_path / "corpus.txt", tmp_path / "v.npy"
    shutil.copytree(tiny_bert, model)
    corpus.write_text("".join(f"Sentence {i} says something.\n" for i in range(9)), encoding="utf-8")
    with pytest.raises(_Interrupt):
        encode_file(str(model), corpus, out, chunk_size=4, show_progress=False,
                    on_chunk=lambda done, total: (_ for _ in ()).throw(_Interrupt()))  # fmt: skip
    shutil.rmtree(model)
    shutil.copytree(tiny_bert_b, model)
    with pytest.raises(JTCSEError, match=rf"^The model {model} changed since rows 0–3 of {out} were written; --over"):
        encode_file(str(model), corpus, out, chunk_size=4, show_progress=False)
    assert encode_file(str(model), corpus, out, chunk_size=4, show_progress=False, overwrite=True).rows == 9
    with corpus.open("a", encoding="utf-8") as handle:
        handle.write("One more sentence of mine.\n")  # item 8: "already complete" after a line was appended
    with pytest.raises(JTCSEError, match=rf"^{out} was encoded from other inputs: the input {corpus} changed since"):
        encode_file(str(model), corpus, out, chunk_size=4, show_progress=False)


@pytest.mark.slow
@pytest.mark.cli
def test_root_cause_5_a_trainer_takes_a_model_replaced_at_its_path_for_another(tiny_bert, tiny_bert_b, tmp_path):
    """`jtcse simcse -m mymodel ... -o run`, another model saved as mymodel, rerun: "nothing to do"."""
    from helpers.cli import invoke_cli

    shutil.copytree(tiny_bert, tmp_path / "mymodel")
    (tmp_path / "corpus.txt").write_text("".join(f"Sentence {i} says something.\n" for i in range(12)))
    args = ("simcse", "-m", tmp_path / "mymodel", "--corpus", tmp_path / "corpus.txt", "--max-steps", 1,
            "--batch-size", 4, "--max-seq-length", 16, "-o", tmp_path / "run")  # fmt: skip
    assert invoke_cli(*args).returncode == 0
    shutil.rmtree(tmp_path / "mymodel")
    shutil.copytree(tiny_bert_b, tmp_path / "mymodel")
    line = one_error_line(invoke_cli(*args))
    assert "already holds a finished run, from inputs that have changed since (model " in line, line


# --------------------------------------------------------------------- root cause 6: a SICK file without its header
def test_root_cause_6_readers_keep_every_data_row_with_or_without_a_header(tmp_path):
    """`read_sick_file` always skipped line 1 (11 of 12 pairs scored, no warning); an STS-B file with a header line
    was refused. Every reader of tables detects a header from its first row and never drops a data row."""
    from jtcse.evaluation.senteval_data import read_sick_file
    from jtcse.evaluation.sts import read_stsb_file
    from jtcse.training.paraphrase_pairs import read_paraphrase_pairs

    rows = ["1\tA man plays.\tSomeone plays.\t4.5\tNEUTRAL", "2\tA dog runs.\tA cat sleeps.\t1.2\tNEUTRAL",
            "3\tKids play.\tChildren play.\t4.9\tENTAILMENT"]  # fmt: skip
    header = "pair_ID\tsentence_A\tsentence_B\trelatedness_score\tentailment_judgment"
    for name, lines in (("plain", rows), ("header", [header, *rows])):
        (tmp_path / name).write_text("\n".join(lines) + "\n", encoding="utf-8")
        assert list(read_sick_file(tmp_path / name).scores) == [4.5, 1.2, 4.9]
    (tmp_path / "na").write_text("\n".join(["1\tA.\tB.\tn/a\tX", *rows[1:]]) + "\n", encoding="utf-8")
    with pytest.raises(JTCSEError, match=r"na: line 1: score 'n/a' is not a number"):
        read_sick_file(tmp_path / "na")  # a bad first row is refused as a row, never dropped as a header

    stsb = [f"main-captions\tMSRvid\t2012test\t{i:04d}\t{s}\tA {i}.\tB {i}." for i, s in enumerate((1.0, 4.0, 2.5))]
    (tmp_path / "stsb").write_text("genre\tfilename\tyear\tid\tscore\tsentence1\tsentence2\n" + "\n".join(stsb) + "\n")
    assert list(read_stsb_file(tmp_path / "stsb").scores) == [1.0, 4.0, 2.5]
    (tmp_path / "pairs").write_text("original\tparaphrase\nA dog runs.\tThe dog is running.\nA cat.\tA kitten.\n")
    assert read_paraphrase_pairs(tmp_path / "pairs").originals == ["A dog runs.", "A cat."]


# ------------------------------------------------------------ root cause 7: a failed write, simulated by ulimit -f
def _limited(limit_kib: int, *args, cwd: Path) -> subprocess.CompletedProcess:
    """``jtcse ARGS`` in a child whose files may not grow past ``limit_kib`` KiB (``ulimit -f``), forked from this
    process (a process of its own, without a fresh interpreter's imports: ``helpers.cli.fork_cli``)."""
    return fork_run_cli(*args, cwd=cwd, file_size_kib=limit_kib)


@pytest.mark.slow
@pytest.mark.cli
def test_root_cause_7_a_failed_write_is_one_line_keeps_the_old_output_and_leaves_no_manual_step(tiny_bert, tmp_path):
    """`encode` under a full disk: `OSError: File too large` (a traceback) and an unrecorded .npy every later run
    refused; `index build --overwrite`: a traceback, the old index already gone (cleared before the build)."""
    from helpers.cli import invoke_cli

    corpus = tmp_path / "corpus.txt"
    corpus.write_text("".join(f"Sentence number {i} says something.\n" for i in range(40)), encoding="utf-8")
    encode = ("encode", tiny_bert, "-i", corpus, "--no-progress", "-o", tmp_path / "v.npy")
    line = one_error_line(_limited(4, *encode, cwd=tmp_path))
    assert f"{tmp_path / 'v.npy'}" in line and "[EFBIG]" in line and "The rows finished so far are kept" in line
    assert invoke_cli(*encode).returncode == 0  # the same command, no manual step

    index = ("index", "build", tiny_bert, "-i", corpus, "--no-progress", "-o", tmp_path / "idx")
    assert invoke_cli(*index).returncode == 0
    before = snapshot(sorted((tmp_path / "idx").iterdir()))
    line = one_error_line(_limited(4, *index, "--overwrite", cwd=tmp_path))
    assert "[EFBIG]" in line and f"{tmp_path / 'idx'} is as it was" in line
    assert snapshot(sorted((tmp_path / "idx").iterdir())) == before
    assert invoke_cli(*index, "--overwrite").returncode == 0 and not (tmp_path / "idx.tmp").exists()


@pytest.mark.slow
@pytest.mark.cli
def test_root_cause_7_a_checkpoint_that_cannot_be_written_is_one_line(tiny_bert, tmp_path):
    """A trainer's checkpoint save under a full disk was a `SafetensorError` traceback."""
    from helpers.cli import invoke_cli

    (tmp_path / "corpus.txt").write_text("".join(f"Sentence {i} says something.\n" for i in range(12)))
    args = ("simcse", "-m", tiny_bert, "--corpus", tmp_path / "corpus.txt", "--max-steps", 2, "--save-steps", 1,
            "--batch-size", 4, "--max-seq-length", 16, "-o", tmp_path / "run")  # fmt: skip
    line = one_error_line(_limited(1024, *args, cwd=tmp_path))
    assert f"{tmp_path / 'run'}: a checkpoint or the model could not be written (File too large)" in line, line
    assert invoke_cli(*args).returncode == 0


@pytest.mark.slow
def test_root_cause_7_an_optimizer_state_cut_short_is_one_line(tmp_path):
    """torch.save (the optimizer's state of a checkpoint) past a file-size limit says only ``unexpected pos N vs M``
    in a RuntimeError: a traceback when the model itself still fit."""
    code = (
        "import sys, torch\n"  # (Python ignores SIGXFSZ: a write past the limit fails with EFBIG)
        "from pathlib import Path\n"
        "from jtcse.training.trainer_run import write_failures\n"
        "out = Path(sys.argv[1])\n"
        "try:\n"
        "    with write_failures(out):\n"
        "        torch.save({'exp_avg': torch.zeros(300_000)}, out / 'optimizer.pt')\n"
        "except Exception as err:\n"
        "    print(type(err).__name__, err)\n"
    )
    command = ["bash", "-c", 'ulimit -f 1024 && exec "$@"', "bash", sys.executable, "-c", code, str(tmp_path)]
    env = subprocess_env(PYTHONDONTWRITEBYTECODE=1)
    done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=300)
    assert done.stdout.startswith(
        f"JTCSEError {tmp_path}: a checkpoint or the model could not be written (a file came out short: no space "
        "left or a file-size limit). The last complete checkpoint"
    ), done.stdout + done.stderr[-2000:]


# --------------------------------------------------------------------------------------------- the messages (item 8)
def test_item_8_messages_say_what_is_wrong_and_what_to_do(tmp_path):
    from jtcse.evaluation.mteb_local_tasks import classification_task
    from jtcse.evaluation.sts import STSDevEvaluator

    with pytest.raises(JTCSEError, match=r"^/ is the root folder; jtcse ensemble writes an output of its own there"):
        FolderOutput("/", "jtcse ensemble").check()  # it was "PosixPath('/') has an empty name"
    same = [f"main-captions\tMSRvid\t2012test\t{i:04d}\t{s}\tA man {i}.\tA man {i}." for i, s in enumerate((1, 3, 5))]
    (tmp_path / "same.csv").write_text("\n".join(same) + "\n", encoding="utf-8")
    with pytest.raises(JTCSEError, match=r"same\.csv: each of its 3 pairs pairs a sentence with itself, so every"):
        STSDevEvaluator(tmp_path / "same.csv")  # it was "its embeddings have collapsed", after a training step
    text = [f"sentence {i} about {'cats' if i % 2 else 'dogs'}" for i in range(12)]
    (tmp_path / "cls.csv").write_text("text,label,split\n" + "".join(
        f"{t},{i % 2}{'.0' * (i < 8)},{'train' if i < 8 else 'test'}\n" for i, t in enumerate(text)))  # fmt: skip
    with pytest.raises(
        JTCSEError, match=r"the test labels '0', '1' never occur in train \(its labels: '0\.0', '1\.0'\)"
    ):
        classification_task(tmp_path / "cls.csv")  # it was "could not be loaded (offline?)"
    (tmp_path / "one.csv").write_text("text,label,split\n" + "".join(f"{t},a,{'train' if i < 8 else 'test'}\n"
                                                                     for i, t in enumerate(text)))  # fmt: skip
    with pytest.raises(JTCSEError, match=r"every train row has the label 'a'; a classifier learns to tell labels"):
        classification_task(tmp_path / "one.csv")
    out = FileOutput(tmp_path / "v.npy", "jtcse encode")
    out.path.write_bytes(b"vectors")
    out.record_path.write_text('{\n  "written_by": "jtcse encode",\n  "files": {"v.npy": nu')  # cut short
    with pytest.raises(JTCSEError, match=r"v\.npy\.json is damaged \(not JSON: .*; cut short\?\): it is the record"):
        out.check()  # it was "jtcse did not write v.npy"


# --------------------------------------------------------------------------------------------- the property test
_PARTS = ["..", ".", "", "x", "sub", "*", "?", "[a]", "victim.txt", "vdir", "link", "out", "\\", "~"]


def _hostile_entry(rng: random.Random, root: Path):
    """A random record entry: a path of random parts (``..``, globs, links, absolute), or not a string at all."""
    roll = rng.random()
    if roll < 0.08:
        return rng.choice([None, 0, 1.5, [], {}, ["../victim.txt"], True])
    path = "/".join(rng.choice(_PARTS) for _ in range(rng.randint(1, 4)))
    return str(root / path) if roll < 0.2 else path


def _random_output(rng: random.Random, root: Path) -> FolderOutput:
    out = FolderOutput(root / "out", rng.choice(["jtcse index build", "jtcse ensemble"]), whole=rng.random() < 0.5)
    out.write_json("manifest.json", {"n": rng.random()})
    with out.moved_in() as scratch:
        (scratch / "sub").mkdir(parents=True)
        (scratch / "sub" / "x").write_bytes(b"x")
    if rng.random() < 0.5:
        (out.path / "link").symlink_to(root / "vdir")
    if rng.random() < 0.3:  # links inside a folder jtcse wrote: to my folder, to my file
        (out.path / "sub" / "lnk").symlink_to(root / "vdir")
        (out.path / "sub" / "victim.txt").symlink_to(root / "victim.txt")
    if rng.random() < 0.3:
        (root / "out.tmp").symlink_to(root / "vdir")
    record = json.loads(out.record_path.read_text())
    entries = [_hostile_entry(rng, root) for _ in range(rng.randint(1, 4))]
    if rng.random() < 0.5:  # the table of issue 42 (a value: a digest, being written, or nonsense)
        keys = [e for e in entries if isinstance(e, str)]
        record["files"].update({k: rng.choice([None, {"bytes": 1, "sha256": "0" * 64}, 7]) for k in keys})
    else:  # a list, as jtcse before it wrote
        record["files"] = [*record["files"], *entries]
    out.record_path.write_text(json.dumps(record))
    return out


_ACTS = [FolderOutput.check, FolderOutput.clear, FolderOutput.seal, lambda out: out.remove(*out.files),
         lambda out: out.remove("sub", "link"), lambda out: out.replacing().__enter__(),
         lambda out: out.add("new.txt")]  # fmt: skip
"""Every act of the mechanism that may delete, replace or rewrite."""


def test_property_random_hostile_records_never_delete_outside_the_output(tmp_path):
    """Seeded random records with hostile entries (outside paths, ``..``, globs, links, absolute paths, non-strings),
    in either record format, met by every deleting act of the mechanism: nothing outside ``out/`` changes."""
    rng = random.Random(42)
    for trial in range(60):
        root = tmp_path / f"t{trial}"
        for rel in ("victim.txt", "vdir/keep.txt", "vdir/x", "out2/x", "a.keep"):
            (root / rel).parent.mkdir(parents=True, exist_ok=True)
            (root / rel).write_bytes(MY_BYTES)
        out = _random_output(rng, root)
        tmp = root / "out.tmp"  # jtcse's own temporary beside the output, unless a link of mine is there
        ours = (f"{out.path}/",) if tmp.is_symlink() else (f"{out.path}/", str(tmp))
        outside = {k: v for k, v in _tree(root).items() if not k.startswith(ours)}
        for act in rng.sample(_ACTS, k=len(_ACTS)):
            try:
                act(out)
            except JTCSEError:
                pass
        now = {k: v for k, v in _tree(root).items() if not k.startswith(ours)}
        assert now == outside, (
            trial,
            json.loads((out.path / RECORD).read_text()) if out.record_path.exists() else None,
        )


def test_a_card_jtcse_updates_in_place_stays_jtcses_and_one_i_edited_stays_mine(tmp_path):
    """`eval sts --update-card` rewrites README.md of a model jtcse trained: its record takes the new digest, so a later
    `--overwrite` does not take the updated card for a file of mine; a card I edited is updated but stays mine."""
    from jtcse.output_paths import write_text_in_place

    out = FolderOutput(tmp_path / "run", "jtcse simcse")
    out.write_text("README.md", "# card\n")
    write_text_in_place(out.path, "README.md", "# card\n\n## Evaluation\n")
    out.check()
    (out.path / "README.md").write_text("# my notes\n")
    write_text_in_place(out.path, "README.md", "# my notes\n\n## Evaluation\n")
    with pytest.raises(JTCSEError, match=r"README\.md is not what jtcse simcse wrote there"):
        out.check()
