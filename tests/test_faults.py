"""Faults thrown at real `jtcse` processes: killed mid-run, two writers on one output, bad outputs.

Kill points are deterministic: ``JTCSE_CRASH_AT=NAME:N`` makes the child SIGKILL itself at the N-th
pass through :func:`jtcse.locking.crash_point` ``NAME`` (``NAME:N:STOP`` freezes it instead, holding
its lock, until the test sends SIGCONT). Each case is listed in docs/runs.md ("What happens when
things go wrong"). The child is forked from the test process (``helpers.cli.fork_cli``: a process of its own,
without a fresh interpreter's seconds of imports) except where a fresh interpreter is part of the case: the pool
killed as it starts (multiprocessing's resource tracker must be the child's own) and the rtt runs (the child talks
to the stand-in server, a thread of the test process).
"""

from __future__ import annotations

import json
import logging
import os
import signal
import subprocess
import time
from pathlib import Path

import pytest
from helpers.cli import fork_cli, fork_run_cli, invoke_cli, one_error_line, run_cli, run_python, start_cli
from helpers.files import snapshot
from helpers.rtt import google
from helpers.shared import built_once

from jtcse.locking import lock_path_for
from jtcse.rtt.cache import TranslationCache
from jtcse.rtt.pairs import read_pairs
from jtcse.rtt.runner import run_rtt
from jtcse.search.encode import meta_path_for, rows_path_for
from jtcse.testing.translate_stub import StubTranslateServer, fake_translate

pytestmark = [pytest.mark.cli, pytest.mark.slow]

SENTENCES = [f"Sentence {i} says something about item {i % 7}." for i in range(23)]


@pytest.fixture
def corpus(tmp_path) -> Path:
    path = tmp_path / "corpus.txt"
    path.write_text("\n".join(SENTENCES[:9] + [""] + SENTENCES[9:]) + "\n", encoding="utf-8")
    return path


def _encode_args(model: str, corpus: Path) -> tuple:
    return ("encode", model, "-i", corpus, "--chunk-size", 5, "--batch-size", 4, "--no-progress")


def _outputs(out: Path) -> list[Path]:
    """Every file an encode run into ``out`` leaves."""
    return [out, meta_path_for(out)] + ([rows_path_for(out)] if out.suffix == ".npy" else [])


def _start_frozen(args: tuple, point: str, fork: bool = True):
    """Start ``jtcse ARGS`` (forked, or in a fresh interpreter) and return once it has frozen itself (SIGSTOP) at
    ``point``, lock held."""
    proc = (fork_cli if fork else start_cli)(*args, JTCSE_CRASH_AT=f"{point}:STOP")
    _, status = os.waitpid(proc.pid, os.WUNTRACED)
    assert os.WIFSTOPPED(status), f"the first process ended before {point}"
    return proc


def _resume(proc) -> subprocess.CompletedProcess:
    os.kill(proc.pid, signal.SIGCONT)
    stdout, stderr = proc.communicate(timeout=600)
    return subprocess.CompletedProcess(proc.args, proc.returncode, stdout, stderr)


# ------------------------------------------------------------------ encode


@pytest.mark.parametrize("suffix", [".npy", ".parquet"])
def test_encode_killed_mid_run_resumes_to_the_same_bytes(tiny_bert, corpus, tmp_path, suffix):
    args = _encode_args(tiny_bert, corpus)
    out = tmp_path / f"killed{suffix}"
    killed = fork_run_cli(*args, "-o", out, JTCSE_CRASH_AT="encode-chunk:3")
    assert killed.returncode == -signal.SIGKILL
    progress = json.loads(meta_path_for(out).read_text())
    assert (progress["rows_done"], progress["complete"]) == (15, False)
    dead_pid = json.loads(lock_path_for(out).read_text())["pid"]  # the lock file outlived its holder

    rerun = invoke_cli(*args, "-o", out)  # the same command again (in this process: the kill was the child's)
    assert rerun.returncode == 0, rerun.stderr
    assert f"Taking over the lock on {out} left by PID {dead_pid} on " in rerun.stderr
    assert "Resumed after row 15." in rerun.stderr
    fresh = invoke_cli(*args, "-o", tmp_path / f"fresh{suffix}")
    assert fresh.returncode == 0, fresh.stderr
    data_files = lambda path: [f for f in _outputs(path) if f != meta_path_for(path)]  # noqa: E731 - meta names its output
    for mine, theirs in zip(data_files(out), data_files(tmp_path / f"fresh{suffix}"), strict=True):
        assert mine.read_bytes() == theirs.read_bytes(), mine
    assert json.loads(meta_path_for(out).read_text())["complete"] is True
    assert not lock_path_for(out).exists() and not out.with_name(out.name + ".parts").exists()


def _processes_tagged(tag: str) -> list[int]:
    """PIDs of live processes whose environment holds ``JTCSE_TEST_TAG=tag`` (children inherit it)."""
    found = []
    for entry in Path("/proc").iterdir():
        try:
            if entry.name.isdigit() and f"JTCSE_TEST_TAG={tag}".encode() in (entry / "environ").read_bytes().split(
                b"\0"
            ):
                found.append(int(entry.name))
        except OSError:  # gone meanwhile, or not ours to read
            pass
    return found


def _left_after(tag: str, seconds: float) -> list[int]:
    """The processes tagged ``tag`` still alive ``seconds`` from now (sooner if none is); those are killed, so as not
    to outlive a failed test."""
    deadline = time.monotonic() + seconds
    while (left := _processes_tagged(tag)) and time.monotonic() < deadline:
        time.sleep(0.2)
    for pid in left:
        os.kill(pid, signal.SIGKILL)
    return left


@pytest.mark.skipif(not Path("/proc/self/environ").exists(), reason="finds the workers through /proc")
def test_pooled_encode_killed_mid_run_resumes_to_the_same_bytes_and_leaves_no_workers(tiny_bert, corpus, tmp_path):
    args = (*_encode_args(tiny_bert, corpus), "--processes", 2)
    out = tmp_path / "killed"  # a shards folder: part files
    tag = f"pool-{os.getpid()}-{tmp_path.name}"
    killed = fork_run_cli(*args, "-o", out, JTCSE_CRASH_AT="encode-chunk:2", JTCSE_TEST_TAG=tag)
    assert killed.returncode == -signal.SIGKILL
    # the pool workers (fresh interpreters the killed child started, tagged) died with their parent
    assert _left_after(tag, seconds=5) == []  # (and the watchdog, which wakes every 0.5 s, saw it and exited)
    assert json.loads(meta_path_for(out).read_text())["rows_done"] == 10

    rerun = invoke_cli(*args, "-o", out)  # in this process (its pool workers are fresh ones all the same)
    assert rerun.returncode == 0, rerun.stderr
    assert "Resumed after row 10." in rerun.stderr
    # the uninterrupted run, in one process: a pool writes the very part files one process writes (a second pool
    # would cost two more workers' imports, about 10 CPU seconds)
    fresh = invoke_cli(*_encode_args(tiny_bert, corpus), "-o", tmp_path / "fresh")
    assert fresh.returncode == 0, fresh.stderr
    parts = sorted(p.name for p in out.glob("part-*"))
    assert parts == sorted(p.name for p in (tmp_path / "fresh").glob("part-*")) and len(parts) == 5
    for name in parts:
        assert (out / name).read_bytes() == (tmp_path / "fresh" / name).read_bytes(), name


@pytest.mark.skipif(not Path("/proc/self/environ").exists(), reason="finds the workers through /proc")
def test_pooled_encode_killed_while_its_pool_starts_leaves_no_process_behind(tiny_bert, corpus, tmp_path):
    """Killed after its first worker started and before the second (the watchdog is not up yet): the worker, which
    loads the model and then waits on its queue, and multiprocessing's resource tracker once lived on (PPID 1)."""
    tag = f"pool-start-{os.getpid()}-{tmp_path.name}"
    args = (*_encode_args(tiny_bert, corpus), "--processes", 2, "-o", tmp_path / "out")
    killed = start_cli(*args, JTCSE_CRASH_AT="pool-start:2", JTCSE_TEST_TAG=tag)
    assert killed.wait(timeout=300) == -signal.SIGKILL
    left = _left_after(tag, seconds=30)  # a worker still importing torch exits at its first `import jtcse`
    killed.communicate()
    assert left == []


@pytest.fixture(scope="module")
def interrupted_encode(tiny_bert, tmp_path_factory) -> dict:
    """One ``jtcse encode`` that two tests read (each child costs seconds of imports): frozen (SIGSTOP, lock held)
    with two chunks on disk while a second encode into the same output is tried, then sent Ctrl-C (SIGINT, acted on
    as it wakes up); then the same command again in this process, and an uninterrupted encode for reference."""
    folder = tmp_path_factory.mktemp("interrupted_encode")
    corpus = folder / "corpus.txt"
    corpus.write_text("\n".join(SENTENCES[:9] + [""] + SENTENCES[9:]) + "\n", encoding="utf-8")
    args, out = _encode_args(tiny_bert, corpus), folder / "shared.parquet"
    first = _start_frozen((*args, "-o", out), "encode-chunk:2")
    try:
        before = snapshot(_outputs(out) + [out.with_name(out.name + ".parts")])
        second = invoke_cli(*args, "-o", out)
        untouched = snapshot(_outputs(out) + [out.with_name(out.name + ".parts")]) == before
        os.kill(first.pid, signal.SIGINT)
    finally:
        stopped = _resume(first)
    rerun = invoke_cli(*args, "-o", out)
    assert invoke_cli(*args, "-o", folder / "fresh.parquet").returncode == 0
    return {"out": out, "first_pid": first.pid, "second": second, "untouched": untouched, "stopped": stopped,
            "rerun": rerun, "fresh": folder / "fresh.parquet"}  # fmt: skip


@pytest.mark.xdist_group("interrupted_encode")
def test_second_encode_into_the_same_output_is_refused(interrupted_encode, tiny_bert):
    out = interrupted_encode["out"]
    line = one_error_line(interrupted_encode["second"])
    assert f"is being written by PID {interrupted_encode['first_pid']} on " in line and str(out) in line
    assert f"running `jtcse encode {tiny_bert} " in line
    assert interrupted_encode["untouched"]  # nothing touched
    # the first run's result, resumed after its Ctrl-C, is whole
    assert interrupted_encode["rerun"].returncode == 0, interrupted_encode["rerun"].stderr
    assert out.read_bytes() == interrupted_encode["fresh"].read_bytes()


@pytest.mark.xdist_group("interrupted_encode")
def test_ctrl_c_says_what_was_kept_and_how_to_resume(interrupted_encode):
    """SIGINT (Ctrl-C) ended `jtcse encode` with status 130 and not a word."""
    out, stopped, rerun = interrupted_encode["out"], interrupted_encode["stopped"], interrupted_encode["rerun"]
    assert stopped.returncode == 130, stopped.stderr[-2000:]
    assert stopped.stderr.strip().splitlines()[-1] == (
        f"Interrupted: the finished work in {out} is kept; run the same command again to resume."
    )
    assert rerun.returncode == 0 and "Resumed after row 10." in rerun.stderr, rerun.stderr


def test_encode_output_that_is_a_folder_or_under_a_file(tiny_bert, corpus, tmp_path):
    folder = tmp_path / "vectors.npy"
    folder.mkdir()
    (folder / "keep.txt").write_text("mine")
    for extra in ([], ["--overwrite"]):
        line = one_error_line(invoke_cli(*_encode_args(tiny_bert, corpus), "-o", folder, *extra))
        assert f"{folder} is a folder; -o/--output names the file jtcse encode writes." in line
    assert (folder / "keep.txt").read_text() == "mine" and sorted(os.listdir(tmp_path)) == ["corpus.txt", "vectors.npy"]
    line = one_error_line(invoke_cli(*_encode_args(tiny_bert, corpus), "-o", corpus / "v.npy"))
    assert f"{corpus} is a file, not a folder" in line


def test_encode_overwrite_with_a_bad_model_keeps_the_old_output(tiny_bert, corpus, tmp_path):
    out = tmp_path / "v.npy"
    assert invoke_cli(*_encode_args(tiny_bert, corpus), "-o", out).returncode == 0
    before = snapshot(_outputs(out))
    one_error_line(invoke_cli(*_encode_args(str(tmp_path / "no-such-model"), corpus), "-o", out, "--overwrite"))
    assert snapshot(_outputs(out)) == before


def test_index_build_holds_a_lock_on_its_folder(tiny_bert, corpus, tmp_path):
    args = ("index", "build", tiny_bert, "-i", corpus, "--chunk-size", 5, "--no-progress", "--cpu")
    index = tmp_path / "idx"
    first = _start_frozen((*args, "-o", index), "encode-chunk:1")
    try:
        line = one_error_line(invoke_cli(*args, "-o", index))
        assert f"{index} is being written by PID {first.pid} on " in line
    finally:
        finished = _resume(first)
    assert finished.returncode == 0, finished.stderr
    assert (index / "manifest.json").is_file() and not lock_path_for(index).exists()


# ------------------------------------------------------------------ rtt


def _expected(text: str, pivot: str) -> str:
    return fake_translate(fake_translate(text, "en", pivot), pivot, "en")


def _rtt_args(corpus: Path, server: StubTranslateServer, cert: str, out: Path, *extra) -> tuple:
    return (
        "rtt", "-i", corpus, "-o", out, "--pivots", "de,fr", "--service-url", server.service_url,
        "--ca-bundle", cert, "--concurrency", "2", "--pack-size", "4", "--chunk-size", "40", "--no-progress", *extra,
    )  # fmt: skip


def test_rtt_killed_mid_run_resumes_without_rerequesting(stub_cert, tmp_path):
    corpus = tmp_path / "corpus.txt"
    sentences = [f"Line {i} of the corpus, with a few words." for i in range(120)]
    corpus.write_text("\n".join(sentences) + "\n", encoding="utf-8")
    out = tmp_path / "out"
    with StubTranslateServer(*stub_cert) as server:
        args = _rtt_args(corpus, server, stub_cert[0], out)
        killed = run_cli(*args, JTCSE_CRASH_AT="rtt-translation:30")  # 30 translations committed, packs in flight
        assert killed.returncode == -signal.SIGKILL
        first_run = server.translation_requests()
        with TranslationCache(out / "rtt_cache.sqlite") as cache:
            stored_de = cache.get_many("googletrans", "en", "de", sentences)
        assert 30 <= len(stored_de) < len(sentences) and not (out / "pairs.de.tsv").exists()

        rerun = run_cli(*args)
        assert rerun.returncode == 0, rerun.stderr
        assert "Taking over the lock on" in rerun.stderr
        second_run = server.translation_requests()[len(first_run) :]
        fresh = invoke_cli(*_rtt_args(corpus, server, stub_cert[0], tmp_path / "fresh"))
        assert fresh.returncode == 0, fresh.stderr

    answered_before = {
        (r.params["sl"], r.params["tl"], q) for r in first_run if r.status == 200 for q in r.params["q"].split("\n")
    }
    asked_again = [(r.params["sl"], r.params["tl"], q) for r in second_run for q in r.params["q"].split("\n")]
    # whatever the first run committed is never requested again ...
    assert not any(key[2] in stored_de and key[:2] == ("en", "de") for key in asked_again)
    # ... and only texts whose answers were on the wire at the kill are: at most `concurrency` packs of `pack-size`
    assert len([key for key in asked_again if key in answered_before]) <= 2 * 4
    for name in ["pairs.de.tsv", "pairs.fr.tsv", "dropped.de.tsv", "dropped.fr.tsv"]:
        assert (out / name).read_bytes() == (tmp_path / "fresh" / name).read_bytes(), name
    assert read_pairs(out / "pairs.fr.tsv") == [(s, _expected(s, "fr")) for s in sentences]
    assert [p["kept"] for p in json.loads((out / "summary.json").read_text())["pivots"]] == [120, 120]


def test_second_rtt_into_the_same_folder_is_refused(stub_cert, tmp_path):
    corpus = tmp_path / "corpus.txt"
    corpus.write_text("\n".join(SENTENCES) + "\n", encoding="utf-8")
    out = tmp_path / "out"
    with StubTranslateServer(*stub_cert) as server:
        args = _rtt_args(corpus, server, stub_cert[0], out)
        first = _start_frozen(args, "rtt-pivot:1", fork=False)  # pairs.de.tsv written, fr not yet
        try:
            before = snapshot([out])
            line = one_error_line(invoke_cli(*args))
            assert f"{out} is being written by PID {first.pid} on " in line
            assert {k: v for k, v in snapshot([out]).items() if "rtt_cache" not in k} == {
                k: v for k, v in before.items() if "rtt_cache" not in k
            }
        finally:
            finished = _resume(first)
    assert finished.returncode == 0, finished.stderr
    assert read_pairs(out / "pairs.fr.tsv") == [(s, _expected(s, "fr")) for s in SENTENCES]


def test_rtt_output_that_is_a_file(tmp_path):
    target = tmp_path / "out.txt"
    target.write_text("precious\n")
    (tmp_path / "c.txt").write_text("one line\n")
    line = one_error_line(invoke_cli("rtt", "-i", tmp_path / "c.txt", "-o", target, "--no-progress"))
    assert f"{target} is a file; -o/--output names the folder jtcse rtt writes." in line
    with TranslationCache(tmp_path / "c.sqlite") as cache:
        cache.put("googletrans", "en", "de", "one line", "x")
        cache.put("googletrans", "de", "en", "x", "a line")
    line = one_error_line(
        invoke_cli(
            "rtt",
            "-i",
            tmp_path / "c.txt",
            "-o",
            target,
            "--backend",
            "replay",
            "--cache",
            tmp_path / "c.sqlite",
            "--pivots",
            "de",
            "--no-progress",
        )
    )
    assert f"{target} is a file; -o/--output names the folder" in line
    assert target.read_text() == "precious\n" and sorted(os.listdir(tmp_path)) == ["c.sqlite", "c.txt", "out.txt"]


def test_replay_of_a_pivot_the_cache_lacks_names_the_pivots_it_holds(stub, tmp_path):
    (tmp_path / "c.txt").write_text("\n".join(SENTENCES[:5]) + "\n")
    with TranslationCache(tmp_path / "c.sqlite") as cache, google(stub) as backend:
        run_rtt(SENTENCES[:5], ["de", "zh-cn"], backend, tmp_path / "a", cache=cache, progress=False)
    replay = ("rtt", "-i", tmp_path / "c.txt", "--backend", "replay", "--cache", tmp_path / "c.sqlite", "--no-progress")
    line = one_error_line(invoke_cli(*replay, "-o", tmp_path / "b", "--pivots", "de,fr"))
    assert "no en→pivot→en round trips for pivot(s) fr; they hold: de, zh-cn (cache " in line
    assert not (tmp_path / "b" / "pairs.de.tsv").exists() and not (tmp_path / "b" / "pairs.fr.tsv").exists()
    ok = invoke_cli(*replay, "-o", tmp_path / "b", "--pivots", "de")
    assert ok.returncode == 0, ok.stderr
    assert (tmp_path / "b" / "pairs.de.tsv").read_bytes() == (tmp_path / "a" / "pairs.de.tsv").read_bytes()


# ------------------------------------------------------------------ trainers (train, simcse, distill)


def _trainer_args(command: str, towers: tuple[str, str], corpus: Path, out: Path) -> tuple:
    """Six steps with a checkpoint every two (no dev file: the final model is the last step's)."""
    common = (
        "--corpus",
        corpus,
        "-o",
        out,
        "--batch-size",
        4,
        "--max-seq-length",
        16,
        "--max-steps",
        6,
        "--learning-rate",
        "1e-3",
    )
    if command == "simcse":
        return ("simcse", "-m", towers[0], *common, "--save-steps", 2, "--logging-steps", 1)
    return ("train", "--tower-a", towers[0], "--tower-b", towers[1], *common, "--eval-steps", 2)


@pytest.fixture(scope="session")
def uninterrupted(tiny_bert, tiny_bert_b, shared_root):
    """``get(command) -> (output, corpus)``: one uninterrupted run per command, made on first use and shared by the
    xdist workers (:func:`helpers.shared.built_once`); read-only, a test that changes one works on a copy."""

    def write_corpus(folder: Path) -> None:
        (folder / "corpus.txt").write_text("\n".join(SENTENCES) + "\n", encoding="utf-8")

    corpus = built_once(shared_root, "faults_corpus", write_corpus) / "corpus.txt"

    def get(command: str) -> tuple[Path, Path]:
        def build(folder: Path) -> None:
            result = invoke_cli(*_trainer_args(command, (tiny_bert, tiny_bert_b), corpus, folder / command))
            assert result.returncode == 0, result.stderr[-3000:]

        return built_once(shared_root, f"faults_uninterrupted_{command}", build) / command, corpus

    return get


def _weights(folder: Path) -> dict[str, dict]:
    from safetensors.torch import load_file

    files = [f for f in sorted(folder.rglob("*.safetensors")) if "checkpoints" not in f.relative_to(folder).parts]
    return {str(f.relative_to(folder)): load_file(f) for f in files}


def _assert_same_weights(mine: Path, theirs: Path) -> None:
    import torch

    a, b = _weights(mine), _weights(theirs)
    assert a and a.keys() == b.keys()
    different = [(f, k) for f in a for k in a[f] if not torch.equal(a[f][k], b[f][k])]
    assert not different, different[:5]


def _summary(folder: Path) -> dict:
    return json.loads((folder / "run_summary.json").read_text(encoding="utf-8"))


@pytest.mark.parametrize("command", ["simcse", "train"])
@pytest.mark.parametrize(
    "point, resumed_from",
    [("checkpoint-save:2", "checkpoint-2"), ("final-save:1", "checkpoint-6")],
    ids=["killed-writing-checkpoint-4", "killed-in-final-save"],
)
def test_trainer_killed_while_saving_resumes_to_the_uninterrupted_model(
    uninterrupted, tiny_bert, tiny_bert_b, tmp_path, command, point, resumed_from
):
    """SIGKILL inside a checkpoint save (weights and optimizer written, trainer_state.json not yet) or
    inside the final save (model written, summary not yet); the same command again finishes the run,
    bit-identical to an uninterrupted one (dropout on: every RNG, the ICNCE direction too, is restored)."""
    reference, corpus = uninterrupted(command)
    out = tmp_path / "run"
    args = _trainer_args(command, (tiny_bert, tiny_bert_b), corpus, out)
    killed = fork_run_cli(*args, JTCSE_CRASH_AT=point)
    assert killed.returncode == -signal.SIGKILL
    assert not (out / "run_summary.json").exists()
    if point.startswith("checkpoint-save"):
        partial = out / "checkpoints" / "checkpoint-4"
        assert (partial / "optimizer.pt").is_file() and not (partial / "trainer_state.json").exists()
    else:
        assert (out / "modules.json").is_file() and (out / "checkpoints" / "checkpoint-6").is_dir()

    rerun = invoke_cli(*args)  # the same command again (in this process: only the killed run needs its own)
    assert rerun.returncode == 0, rerun.stderr[-3000:]
    assert f"Taking over the lock on {out} left by PID " in rerun.stderr
    if point.startswith("checkpoint-save"):
        assert f"Skipping incomplete checkpoint(s) checkpoint-4 in {out / 'checkpoints'} " in rerun.stderr
    _assert_same_weights(out, reference)
    summary, expected = _summary(out), _summary(reference)
    assert summary["resumed_from"].endswith(resumed_from)
    assert summary["steps"] == expected["steps"] == 6  # not one step more
    # loss and time cover the whole run, not only the part after the resume
    assert summary["train_loss"] == pytest.approx(expected["train_loss"], rel=1e-6)
    assert summary["first_logged_loss"] == expected["first_logged_loss"] and summary["seconds"] > 0
    assert not (out / "checkpoints").exists() and not lock_path_for(out).exists()


def test_rerunning_a_finished_run_is_a_no_op(tiny_bert, tiny_bert_b, corpus, tmp_path):
    out = tmp_path / "twin"
    args = ("train", "--tower-a", tiny_bert, "--tower-b", tiny_bert_b, "--corpus", corpus, "-o", out,
            "--batch-size", 4, "--max-seq-length", 16, "--max-steps", 2, "--keep-checkpoints")  # fmt: skip
    assert invoke_cli(*args).returncode == 0
    before = snapshot([out])
    rerun = invoke_cli(*args)
    assert rerun.returncode == 0, rerun.stderr[-3000:]
    assert f"{out} already holds this finished run (2 steps, same settings); nothing to do." in rerun.stderr
    assert snapshot([out]) == before  # no extra step, no new checkpoint, nothing written


def test_second_trainer_into_the_same_output_is_refused(uninterrupted, tiny_bert, tiny_bert_b, tmp_path):
    _, corpus = uninterrupted("simcse")
    out = tmp_path / "tower"
    args = _trainer_args("simcse", (tiny_bert, tiny_bert_b), corpus, out)
    first = _start_frozen(args, "checkpoint-save:1")
    try:
        before = snapshot([out])
        line = one_error_line(invoke_cli(*args))
        assert f"{out} is being written by PID {first.pid} on " in line and "running `jtcse simcse " in line
        assert snapshot([out]) == before
    finally:
        finished = _resume(first)
    assert finished.returncode == 0, finished.stderr[-3000:]
    assert _summary(out)["steps"] == 6 and not lock_path_for(out).exists()


@pytest.fixture
def finished_runs(uninterrupted, tiny_bert, tmp_path):
    """Copies of a finished twin and tower, and a finished distilled student, in ``tmp_path``."""
    import shutil

    from jtcse.training.distill import distill

    runs = {command: tmp_path / command for command in ("train", "simcse")}
    for command, out in runs.items():
        shutil.copytree(uninterrupted(command)[0], out)
    runs["distill"] = tmp_path / "distill"
    distill(tiny_bert, tiny_bert, SENTENCES, runs["distill"], batch_size=4, max_steps=1, max_seq_length=16)
    return runs


def test_rejected_overwrite_leaves_the_finished_model_as_it_was(
    finished_runs, tiny_bert, tiny_bert_b, corpus, tmp_path
):
    """Everything is checked (model, regulariser, device, objective) before the output is touched."""
    from jtcse.testing import make_tiny_tower
    from jtcse.training.distill import distill
    from jtcse.training.simcse import train_simcse
    from jtcse.training.twin import train_twin

    wide = make_tiny_tower(tmp_path / "wide", "bert", hidden=48, seed=5)
    listing = sorted(os.listdir(tmp_path))
    before = snapshot(list(finished_runs.values()))
    twin, tower, student = finished_runs["train"], finished_runs["simcse"], finished_runs["distill"]
    line = one_error_line(
        invoke_cli(
            "train",
            "--tower-a",
            tiny_bert,
            "--tower-b",
            tiny_bert_b,
            "--corpus",
            corpus,
            "-o",
            twin,
            "--cael-every",
            3,
            "--overwrite",
        )
    )
    assert "--cael-every=3 does not divide the towers' 4 layers" in line  # the option, as the command names it
    cases = [
        (
            lambda: train_twin(tiny_bert, tiny_bert_b, corpus, twin, device="tpu9", overwrite=True),
            "unknown device 'tpu9'",
        ),
        (lambda: train_simcse(str(tmp_path / "nope"), SENTENCES, tower, overwrite=True), "model not found"),
        (
            lambda: train_simcse(tiny_bert, SENTENCES, tower, regularizers=["nitp:shallow_layer=9"], overwrite=True),
            "shallow_layer",
        ),
        (
            lambda: distill(wide, tiny_bert, SENTENCES, student, objective="kl", overwrite=True),
            "objective: Input should be",
        ),
        (
            lambda: distill(wide, tiny_bert, SENTENCES, student, student_pooling="max", overwrite=True),
            "student_pooling: Input should be",
        ),
    ]
    for call, message in cases:
        with pytest.raises(ValueError, match=message):
            call()
    assert snapshot(list(finished_runs.values())) == before
    assert sorted(os.listdir(tmp_path)) == listing  # no lock file, no stray folder


def test_trainer_output_that_is_a_file(tiny_bert, tiny_bert_b, tmp_path):
    from jtcse.training.distill import distill
    from jtcse.training.twin import train_twin

    target = tmp_path / "afile.txt"
    target.write_text("precious\n")
    line = one_error_line(invoke_cli("simcse", "-m", tiny_bert, "-o", target, "--max-steps", 1))
    assert f"{target} is a file; -o/--output names the folder the model is written to." in line
    for call in (
        lambda: train_twin(tiny_bert, tiny_bert_b, SENTENCES, target, max_steps=1),
        lambda: distill(tiny_bert, tiny_bert, SENTENCES, target, max_steps=1),
    ):
        with pytest.raises(ValueError, match=f"{target} is a file; -o/--output names the folder"):
            call()
    assert target.read_text() == "precious\n" and sorted(os.listdir(tmp_path)) == ["afile.txt"]


def test_a_run_that_fails_before_its_first_checkpoint_leaves_the_output_as_it_was(tiny_bert, tmp_path):
    from jtcse.errors import JTCSEError
    from jtcse.training.simcse import train_simcse

    # AdamW moves every weight by about lr in step 1; with lr = 1e30 the step-2 forward overflows
    settings = dict(batch_size=4, max_steps=4, save_steps=3, learning_rate=1e30, max_seq_length=16)
    (tmp_path / "old").mkdir()  # (a folder holding a file of yours is refused before: tests/test_outputs.py)
    for out in (tmp_path / "new", tmp_path / "old"):
        with pytest.raises(JTCSEError, match="NaN or infinite at step 2"):
            train_simcse(tiny_bert, SENTENCES, out, **settings)
    assert sorted(os.listdir(tmp_path)) == ["old"] and os.listdir(tmp_path / "old") == []  # not even a record


@pytest.mark.parametrize("command", ["train", "simcse", "distill"])
def test_a_length_above_the_position_table_is_clamped_when_the_model_is_built(
    command, tiny_bert, tiny_bert_b, tmp_path, caplog
):
    """64-position towers (68 with the margin) asked for 200 tokens, with a sentence longer than that."""
    from jtcse.training.distill import distill
    from jtcse.training.simcse import train_simcse
    from jtcse.training.twin import train_twin

    sentences = SENTENCES[:7] + [" ".join(["word"] * 150)]
    settings = dict(batch_size=4, max_steps=2, max_seq_length=200, learning_rate=1e-4)
    out = tmp_path / "run"
    with caplog.at_level(logging.WARNING):
        if command == "train":
            summary = train_twin(tiny_bert, tiny_bert_b, sentences, out, show_progress=False, plot=False, **settings)
        elif command == "simcse":
            summary = train_simcse(tiny_bert, sentences, out, **settings)
        else:
            summary = distill(tiny_bert, tiny_bert, sentences, out, **settings)
    assert "max_seq_length 200 is above what the " in caplog.text and "clamped to 68" in caplog.text
    assert summary["settings"]["max_seq_length"] == 68 and summary["steps"] == 2
    assert summary["config"]["max_seq_length"] == 200  # what was asked, so a rerun of the command resumes


def test_twin_on_one_distinct_sentence_is_refused(tiny_bert, tiny_bert_b, tmp_path):
    from jtcse.errors import JTCSEError
    from jtcse.training.twin import train_twin

    with pytest.raises(JTCSEError, match=r"a JTCSE twin needs at least 2 distinct training sentences .*\(got 1\)"):
        train_twin(tiny_bert, tiny_bert_b, ["The same line.", "The same line."], tmp_path / "run", max_steps=1)
    assert not (tmp_path / "run").exists()


def test_simcse_with_nitp_saves_a_tower_that_loads_without_jtcse(tiny_bert, tmp_path):
    """The NITP predictor head trains (and is kept in the checkpoints) but is not part of the saved tower."""
    from jtcse.training.simcse import train_simcse

    out = tmp_path / "tower"
    train_simcse(tiny_bert, SENTENCES, out, regularizers=["nitp"], batch_size=4, max_steps=2, max_seq_length=16)
    assert [m["type"].rsplit(".", 1)[-1] for m in json.loads((out / "modules.json").read_text())] == [
        "Transformer",
        "Pooling",
    ]
    probe = run_python(
        f"from sentence_transformers import SentenceTransformer\n"
        f"print(SentenceTransformer({str(out)!r}).encode(['a plain tower']).shape)",
        hide_jtcse=True,
    )
    assert probe.returncode == 0, probe.stderr[-2000:]
    assert probe.stdout.strip() == "(1, 32)"


@pytest.mark.parametrize("loss_class", ["JTCSELoss", "CachedJTCSELoss"])
def test_icnce_direction_is_a_function_of_seed_and_step(loss_class, tiny_bert, tiny_bert_b):
    """What lets a resumed twin run draw the directions an uninterrupted one drew: no RNG state to save."""
    import jtcse.losses
    from jtcse import build_twin

    twin = build_twin(tiny_bert, tiny_bert_b, max_seq_length=16)
    make = getattr(jtcse.losses, loss_class)

    def directions(loss, steps, draws=2):
        out = []
        for step in steps:
            loss.set_training_step(step)
            out.append(tuple(loss._tower_one_anchors() for _ in range(draws)))
        return out

    uninterrupted = directions(make(twin, seed=7), range(20))
    assert directions(make(twin, seed=7), range(13, 20)) == uninterrupted[13:]  # a run resumed at step 13
    assert len(set(uninterrupted)) > 1 and directions(make(twin, seed=8), range(20)) != uninterrupted
