"""Faults thrown at real `jtcse` processes: killed mid-run, two writers on one output, bad outputs.

Kill points are deterministic: ``JTCSE_CRASH_AT=NAME:N`` makes the child SIGKILL itself at the N-th
pass through :func:`jtcse.locking.crash_point` ``NAME`` (``NAME:N:STOP`` freezes it instead, holding
its lock, until the test sends SIGCONT). Each case is listed in docs/runs.md ("What happens when
things go wrong").
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
from pathlib import Path

import pytest

from helpers.cli import one_error_line, run_cli, start_cli
from helpers.rtt import google
from helpers.stub_server import StubTranslateServer, fake_translate
from jtcse.locking import lock_path_for
from jtcse.rtt.cache import TranslationCache
from jtcse.rtt.pairs import read_pairs
from jtcse.rtt.runner import run_rtt
from jtcse.search.encode import meta_path_for, rows_path_for

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


def _snapshot(paths: list[Path]) -> dict[str, bytes]:
    """Bytes of every file under/at ``paths`` (folders walked), to prove nothing changed."""
    files = [f for p in paths for f in ([p] if p.is_file() else sorted(p.rglob("*")) if p.is_dir() else []) if f.is_file()]
    return {str(f): f.read_bytes() for f in files}


def _start_frozen(args: tuple, point: str) -> subprocess.Popen:
    """Start ``jtcse ARGS`` and return once it has frozen itself (SIGSTOP) at ``point``, lock held."""
    proc = start_cli(*args, JTCSE_CRASH_AT=f"{point}:STOP")
    _, status = os.waitpid(proc.pid, os.WUNTRACED)
    assert os.WIFSTOPPED(status), f"the first process ended before {point}"
    return proc


def _resume(proc: subprocess.Popen) -> subprocess.CompletedProcess:
    os.kill(proc.pid, signal.SIGCONT)
    stdout, stderr = proc.communicate(timeout=600)
    return subprocess.CompletedProcess(proc.args, proc.returncode, stdout, stderr)


# ------------------------------------------------------------------ encode


@pytest.mark.parametrize("suffix", [".npy", ".parquet"])
def test_encode_killed_mid_run_resumes_to_the_same_bytes(tiny_bert, corpus, tmp_path, suffix):
    args = _encode_args(tiny_bert, corpus)
    out = tmp_path / f"killed{suffix}"
    killed = run_cli(*args, "-o", out, JTCSE_CRASH_AT="encode-chunk:3")
    assert killed.returncode == -signal.SIGKILL
    progress = json.loads(meta_path_for(out).read_text())
    assert (progress["rows_done"], progress["complete"]) == (15, False)
    dead_pid = json.loads(lock_path_for(out).read_text())["pid"]  # the lock file outlived its holder

    rerun = run_cli(*args, "-o", out)
    assert rerun.returncode == 0, rerun.stderr
    assert f"Taking over the lock on {out} left by PID {dead_pid} on " in rerun.stderr
    assert "Resumed after row 15." in rerun.stderr
    fresh = run_cli(*args, "-o", tmp_path / f"fresh{suffix}")
    assert fresh.returncode == 0, fresh.stderr
    data_files = lambda path: [f for f in _outputs(path) if f != meta_path_for(path)]  # noqa: E731 - meta names its output
    for mine, theirs in zip(data_files(out), data_files(tmp_path / f"fresh{suffix}")):
        assert mine.read_bytes() == theirs.read_bytes(), mine
    assert json.loads(meta_path_for(out).read_text())["complete"] is True
    assert not lock_path_for(out).exists() and not out.with_name(out.name + ".parts").exists()


def test_second_encode_into_the_same_output_is_refused(tiny_bert, corpus, tmp_path):
    args = _encode_args(tiny_bert, corpus)
    out = tmp_path / "shared.parquet"
    first = _start_frozen((*args, "-o", out), "encode-chunk:2")
    try:
        before = _snapshot(_outputs(out) + [out.with_name(out.name + ".parts")])
        second = run_cli(*args, "-o", out)
        line = one_error_line(second)
        assert f"is being written by PID {first.pid} on " in line and str(out) in line
        assert f"running `jtcse encode {tiny_bert} " in line
        assert _snapshot(_outputs(out) + [out.with_name(out.name + ".parts")]) == before  # nothing touched
    finally:
        finished = _resume(first)
    assert finished.returncode == 0, finished.stderr
    assert run_cli(*args, "-o", tmp_path / "fresh.parquet").returncode == 0
    assert out.read_bytes() == (tmp_path / "fresh.parquet").read_bytes()  # the first run's result is whole


def test_encode_output_that_is_a_folder_or_under_a_file(tiny_bert, corpus, tmp_path):
    folder = tmp_path / "vectors.npy"
    folder.mkdir()
    (folder / "keep.txt").write_text("mine")
    for extra in ([], ["--overwrite"]):
        line = one_error_line(run_cli(*_encode_args(tiny_bert, corpus), "-o", folder, *extra))
        assert f"{folder} is a folder; -o names the .npy or .parquet file" in line
    assert (folder / "keep.txt").read_text() == "mine" and sorted(os.listdir(tmp_path)) == ["corpus.txt", "vectors.npy"]
    line = one_error_line(run_cli(*_encode_args(tiny_bert, corpus), "-o", corpus / "v.npy"))
    assert f"{corpus} is a file, not a folder" in line


def test_encode_overwrite_with_a_bad_model_keeps_the_old_output(tiny_bert, corpus, tmp_path):
    out = tmp_path / "v.npy"
    assert run_cli(*_encode_args(tiny_bert, corpus), "-o", out).returncode == 0
    before = _snapshot(_outputs(out))
    one_error_line(run_cli(*_encode_args(str(tmp_path / "no-such-model"), corpus), "-o", out, "--overwrite"))
    assert _snapshot(_outputs(out)) == before


def test_index_build_holds_a_lock_on_its_folder(tiny_bert, corpus, tmp_path):
    args = ("index", "build", tiny_bert, "-i", corpus, "--chunk-size", 5, "--no-progress", "--cpu")
    index = tmp_path / "idx"
    first = _start_frozen((*args, "--index", index), "encode-chunk:1")
    try:
        line = one_error_line(run_cli(*args, "--index", index))
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
        fresh = run_cli(*_rtt_args(corpus, server, stub_cert[0], tmp_path / "fresh"))
        assert fresh.returncode == 0, fresh.stderr

    answered_before = {(r.params["sl"], r.params["tl"], q) for r in first_run if r.status == 200 for q in r.params["q"].split("\n")}
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
        first = _start_frozen(args, "rtt-pivot:1")  # pairs.de.tsv written, fr not yet
        try:
            before = _snapshot([out])
            line = one_error_line(run_cli(*args))
            assert f"{out} is being written by PID {first.pid} on " in line
            assert {k: v for k, v in _snapshot([out]).items() if "rtt_cache" not in k} == {
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
    line = one_error_line(run_cli("rtt", "-i", tmp_path / "c.txt", "-o", target, "--no-progress"))
    assert f"{target} is a file, not a folder" in line
    with TranslationCache(tmp_path / "c.sqlite") as cache:
        cache.put("googletrans", "en", "de", "one line", "x")
        cache.put("googletrans", "de", "en", "x", "a line")
    line = one_error_line(
        run_cli("rtt", "-i", tmp_path / "c.txt", "-o", target, "--backend", "replay", "--cache", tmp_path / "c.sqlite", "--pivots", "de", "--no-progress")
    )
    assert f"{target} is a file; --output-dir names the folder" in line
    assert target.read_text() == "precious\n" and sorted(os.listdir(tmp_path)) == ["c.sqlite", "c.txt", "out.txt"]


def test_replay_of_a_pivot_the_cache_lacks_names_the_pivots_it_holds(stub, tmp_path):
    (tmp_path / "c.txt").write_text("\n".join(SENTENCES[:5]) + "\n")
    with TranslationCache(tmp_path / "c.sqlite") as cache, google(stub) as backend:
        run_rtt(SENTENCES[:5], ["de", "zh-cn"], backend, tmp_path / "a", cache=cache, progress=False)
    replay = ("rtt", "-i", tmp_path / "c.txt", "--backend", "replay", "--cache", tmp_path / "c.sqlite", "--no-progress")
    line = one_error_line(run_cli(*replay, "-o", tmp_path / "b", "--pivots", "de,fr"))
    assert "no en→pivot→en round trips for pivot(s) fr; they hold: de, zh-cn (cache " in line
    assert not (tmp_path / "b" / "pairs.de.tsv").exists() and not (tmp_path / "b" / "pairs.fr.tsv").exists()
    ok = run_cli(*replay, "-o", tmp_path / "b", "--pivots", "de")
    assert ok.returncode == 0, ok.stderr
    assert (tmp_path / "b" / "pairs.de.tsv").read_bytes() == (tmp_path / "a" / "pairs.de.tsv").read_bytes()
