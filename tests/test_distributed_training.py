"""`jtcse train` / `simcse` / `distill` launched with torchrun (and accelerate launch) on the CPU, two processes.

The launches run ``tests/helpers/ddp_probe.py``, which records per rank what the trainer did (parallel
mode, the sentences of every step, a digest of the weights after every step, every model save and
summary write) and then runs the jtcse command line unchanged. Tiny 4-layer towers, a few steps each.
"""

from __future__ import annotations

import hashlib
import json
import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
import torch
from helpers.cli import REPO, invoke_cli, one_error_line, run_cli, run_launch, subprocess_env
from helpers.files import snapshot

from jtcse.locking import lock_path_for
from jtcse.output_paths import SCRATCH

PROBE = REPO / "tests" / "helpers" / "ddp_probe.py"
WORDS = "alpha beta gamma delta river stone cloud garden window paper table music quiet silver orange light".split()
DDP_FALSE_ALARM = "did not find any unused parameters"


@pytest.fixture(scope="module")
def corpus(tmp_path_factory) -> Path:
    """64 distinct sentences (distinct after lower-casing too): 4 global batches of 2 ranks x 8."""
    rng = random.Random(0)
    sentences: dict[str, None] = {}
    while len(sentences) < 64:
        sentences[" ".join(rng.choice(WORDS) for _ in range(rng.randint(4, 9))) + "."] = None
    path = tmp_path_factory.mktemp("data") / "corpus.txt"
    path.write_text("\n".join(sentences) + "\n", encoding="utf-8")
    return path


def torchrun_command(tmp_path: Path, args: tuple, probe: bool = True, monitor_interval: float = 0.1) -> list[str]:
    """``torchrun`` starting ``args`` (a jtcse command, through the probe unless not ``probe``) in two
    processes; each rank's output goes to ``tmp_path/logs``. Every ``monitor_interval`` seconds torchrun looks at
    its ranks: once one has failed it stops the other."""
    command = [
        sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node", "2",
        "--redirects", "3", "--log-dir", str(tmp_path / "logs"), "--monitor-interval", str(monitor_interval),
    ]  # fmt: skip
    command += [str(PROBE), str(tmp_path / "probe")] if probe else ["-m", "jtcse"]
    (tmp_path / "probe").mkdir(exist_ok=True)
    return [*command, *map(str, args)]


def torchrun(
    tmp_path: Path, *args: object, probe: bool = True, monitor_interval: float = 0.1, **env: object
) -> subprocess.CompletedProcess:
    """Launch ``args`` (a jtcse command) in two processes and wait (see :func:`torchrun_command`)."""
    return run_launch(torchrun_command(tmp_path, args, probe, monitor_interval), cwd=tmp_path, **env)


def rank_output(tmp_path: Path, rank: int) -> str:
    """What one rank printed (stdout and stderr) in the latest launch."""
    attempts = sorted((tmp_path / "logs").glob(f"*/attempt_*/{rank}"), key=lambda p: p.stat().st_mtime)
    return "".join((attempts[-1] / name).read_text() for name in ("stdout.log", "stderr.log"))


def events(tmp_path: Path, rank: int, name: str | None = None) -> list[dict]:
    path = tmp_path / "probe" / f"rank{rank}.jsonl"
    lines = [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []
    return [e for e in lines if name is None or e["event"] == name]


def resolved(tmp_path: Path, path: str) -> Path:
    """A path the probe logged, relative to the launch folder or absolute, resolved."""
    return (tmp_path / path).resolve()


def clear_probe(tmp_path: Path) -> None:
    for path in (tmp_path / "probe").glob("*.jsonl"):
        path.unlink()


def parameters_digest(model) -> str:
    flat = torch.cat([p.detach().reshape(-1) for p in model.parameters()])
    return hashlib.sha1(flat.numpy().tobytes()).hexdigest()


def assert_one_ddp_run(tmp_path: Path, out: Path, steps: list[int], *, find_unused: bool, what: str) -> None:
    """Both ranks trained as one DDP job on disjoint data with identical weights, and rank 0 alone wrote."""
    for rank in (0, 1):
        (begin,) = events(tmp_path, rank, "train_begin")
        assert begin["parallel_mode"] == "ParallelMode.DISTRIBUTED" and begin["world_size"] == 2, begin
        assert begin["process_index"] == rank and begin["find_unused"] is find_unused, begin
        (trained,) = events(tmp_path, rank, "trained")
        assert trained["wrapped"] == "DistributedDataParallel", trained
    # the towers stay identical across ranks after every step
    digests = [{e["step"]: e["params"] for e in events(tmp_path, rank, "step")} for rank in (0, 1)]
    assert sorted(digests[0]) == sorted(digests[1]) == steps
    assert digests[0] == digests[1]
    assert len(set(digests[0].values())) == len(steps)  # and they do change
    # disjoint shards: no sentence is seen by both ranks in one step, nor twice within the (first) epoch
    rows = [{e["step"]: set(e["rows"]) for e in events(tmp_path, rank, "batch")} for rank in (0, 1)]
    for step in steps:
        assert rows[0][step] and rows[1][step] and not rows[0][step] & rows[1][step], step
    seen = [row for rank in (0, 1) for step in steps for row in rows[rank][step]]
    assert len(seen) == len(set(seen))
    # rank 0 alone saves (checkpoints and the final model) and writes the summary; rank 1 prints nothing
    assert [e["path"] for e in events(tmp_path, 1) if e["event"] in ("save", "summary")] == []
    saves = [resolved(tmp_path, e["path"]) for e in events(tmp_path, 0, "save")]
    final = out.resolve() / SCRATCH  # the final model is saved whole there, then moved into out entry by entry
    assert saves[-1] == final and saves.count(saves[-1]) == 1
    assert all(path.parent.name == "checkpoints" for path in saves[:-1]), saves
    assert [resolved(tmp_path, e["path"]) for e in events(tmp_path, 0, "summary")] == [out.resolve()]
    assert rank_output(tmp_path, 1) == ""
    printed = rank_output(tmp_path, 0)
    assert printed.count(f"{what} saved to") == 1 and DDP_FALSE_ALARM not in printed
    summary = json.loads((out / "run_summary.json").read_text())
    assert summary["steps"] == steps[-1]
    saved_step = summary["saved_step"]  # the last step, or with checkpoint best-dev the best checkpoint
    assert summary["settings"]["world_size"] == 2 and summary["config"]["world_size"] == 2
    assert summary["settings"]["global_batch_size"] == 2 * summary["settings"]["batch_size"]
    # the saved model is the trained one, and it loads and encodes
    from jtcse.modeling.loading import load_model

    model = load_model(str(out))
    assert parameters_digest(model) == digests[0][saved_step]
    vectors = model.encode(["A sentence.", "Another one."], convert_to_numpy=True)
    assert vectors.shape[0] == 2 and np.isfinite(vectors).all()


@pytest.fixture(scope="module")
def twin_job(tmp_path_factory, tiny_bert, tiny_bert_b, corpus) -> dict:
    """One torchrun ``jtcse train`` (gathered negatives, cached loss; 3 steps, a checkpoint at step 2) that two
    tests read, as each would otherwise launch its own: rank 0 freezes itself (SIGSTOP) inside its first checkpoint
    save, holding the output's lock, while a second ``jtcse train`` into the same output is tried; then it goes on
    to the end. Its tests carry ``xdist_group("twin_job")``, so that one worker launches it once."""
    tmp_path = tmp_path_factory.mktemp("twin_job")
    out = tmp_path / "twin"
    args = (
        "train", "--tower-a", tiny_bert, "--tower-b", tiny_bert_b, "--corpus", corpus, "-o", out,
        "--batch-size", "8", "--max-seq-length", "16", "--max-steps", "3", "--eval-steps", "2",
        "--gather-across-devices", "--mini-batch-size", "3",
    )  # fmt: skip
    lock = lock_path_for(out)
    with (tmp_path / "launcher.log").open("w") as launcher_log:
        job = subprocess.Popen(
            torchrun_command(tmp_path, args), env=subprocess_env(JTCSE_CRASH_AT="checkpoint-save:1:STOP"),
            stdout=launcher_log, stderr=subprocess.STDOUT, cwd=tmp_path,
        )  # fmt: skip
    holder = None
    try:
        deadline = time.monotonic() + 400
        while holder is None or _state(holder) != "T":  # rank 0 stopped itself (SIGSTOP), lock held
            assert job.poll() is None and time.monotonic() < deadline, rank_output(tmp_path, 0)[-3000:]
            time.sleep(0.5)
            holder = json.loads(lock.read_text() or "{}").get("pid") if lock.is_file() else None
        before = snapshot([out])
        second_writer = invoke_cli(*args, cwd=tmp_path)  # another process than the job's ranks all the same
        untouched = snapshot([out]) == before
    finally:
        if holder is not None and _state(holder):
            os.kill(holder, signal.SIGCONT)  # let the job finish: it still holds its lock
        else:
            job.terminate()
        job.wait(timeout=600)
    launched = (tmp_path / "launcher.log").read_text()
    assert job.returncode == 0, launched[-3000:] + rank_output(tmp_path, 0)[-3000:]
    return {"tmp_path": tmp_path, "out": out, "holder": holder, "second_writer": second_writer,
            "untouched": untouched, "lock_left": lock.exists()}  # fmt: skip


@pytest.mark.distributed
@pytest.mark.slow
@pytest.mark.xdist_group("twin_job")
def test_train_under_torchrun_is_one_ddp_job_gathered_and_cached(twin_job):
    tmp_path, out = twin_job["tmp_path"], twin_job["out"]
    # with ICTM on every parameter has a gradient: no unused-parameter search
    assert_one_ddp_run(tmp_path, out, [1, 2, 3], find_unused=False, what="Twin")
    summary = json.loads((out / "run_summary.json").read_text())
    assert summary["loss"]["name"] == "CachedJTCSELoss"
    assert summary["loss"]["gather_across_devices"] is True and summary["loss"]["mini_batch_size"] == 3
    assert summary["config"]["gather_across_devices"] is True and summary["config"]["mini_batch_size"] == 3


@pytest.mark.distributed
@pytest.mark.slow
def test_simcse_under_torchrun_is_one_ddp_job_with_gathered_negatives(tmp_path, tiny_bert, corpus, dev_file):
    out = tmp_path / "tower"
    run = torchrun(
        tmp_path, "simcse", "--model", tiny_bert, "--corpus", corpus, "-o", out, "--dev-file", dev_file,
        "--batch-size", "8", "--max-seq-length", "16", "--max-steps", "4", "--eval-steps", "2",
        "--gather-across-devices",
    )  # fmt: skip
    assert run.returncode == 0, run.stderr[-3000:] + rank_output(tmp_path, 0)[-3000:]
    # CLS pooling never reads the BERT pooler: DDP has to expect parameters without gradients
    assert_one_ddp_run(tmp_path, out, [1, 2, 3, 4], find_unused=True, what="Tower")
    summary = json.loads((out / "run_summary.json").read_text())
    assert summary["loss"]["name"] == "MultipleNegativesRankingLoss" and summary["loss"]["gather_across_devices"]
    # rank 0 evaluated (the other rank encoding its share) and kept the best checkpoint
    assert set(summary["dev_spearman_by_step"]) == {"2", "4"} and summary["final_dev_spearman"] is not None


@pytest.mark.distributed
@pytest.mark.slow
def test_distill_under_accelerate_launch_encodes_the_teacher_once(tmp_path, tiny_bert, tiny_bert_b, corpus):
    """``accelerate launch`` (1.15) starts two local processes with --multi_gpu (torchrun underneath), and jtcse trains
    them as one DDP job with gloo on the CPU, as under torchrun; the teacher is encoded by rank 0 alone. (This launch
    is the suite's accelerate check: ``--cpu --num_processes N`` would start one process without MPI.) Port 0: a free
    port, not accelerate's default 29500, so that launches running side by side (pytest-xdist) do not collide."""
    out = tmp_path / "student"
    (tmp_path / "probe").mkdir()
    run = run_launch(
        [
            sys.executable, "-m", "accelerate.commands.launch", "--multi_gpu", "--num_processes", "2",
            "--num_machines", "1", "--main_process_port", "0", "--mixed_precision", "no", "--dynamo_backend", "no",
            "--tee", "3", "--log_dir", tmp_path / "logs", "--monitor_interval", "0.1",
            PROBE, tmp_path / "probe", "distill", "--teacher", tiny_bert_b, "--student", tiny_bert, "--corpus", corpus,
            "-o", out, "--batch-size", "8", "--max-seq-length", "16", "--max-steps", "3", "--save-steps", "2",
        ],
        cwd=tmp_path, HF_HOME=tmp_path / "hf",  # no user accelerate config
    )  # fmt: skip
    assert run.returncode == 0, run.stderr[-3000:] + rank_output(tmp_path, 0)[-3000:]
    assert_one_ddp_run(tmp_path, out, [1, 2, 3], find_unused=True, what="Student")
    # rank 0 encoded the corpus with the teacher; rank 1 waited and read rank 0's cache
    assert [e["cache_hit"] for e in events(tmp_path, 0, "teacher")] == [False]
    assert [e["cache_hit"] for e in events(tmp_path, 1, "teacher")] == [True]
    assert len(list((out / "teacher_cache").glob("teacher-*.npy"))) == 1


@pytest.mark.distributed
@pytest.mark.slow
def test_an_interrupted_torchrun_run_resumes_with_the_same_command(tmp_path, tiny_bert, tiny_bert_b, corpus):
    """Killed after the checkpoint of step 2 (ICTM off: the poolers get no gradient), then rerun."""
    out = tmp_path / "twin"
    args = [
        "train", "--tower-a", tiny_bert, "--tower-b", tiny_bert_b, "--corpus", corpus, "-o", out,
        "--batch-size", "8", "--max-seq-length", "16", "--max-steps", "4", "--eval-steps", "2", "--ictm-weight", "0",
    ]  # fmt: skip
    killed = torchrun(tmp_path, *args, PROBE_KILL_AFTER_SAVE=2)
    assert killed.returncode != 0
    checkpoint = out / "checkpoints" / "checkpoint-2"
    assert {"rng_state_0.pth", "rng_state_1.pth", "optimizer.pt"} <= {p.name for p in checkpoint.iterdir()}
    assert not (out / "run_summary.json").exists()
    before = [{e["step"]: e["params"] for e in events(tmp_path, rank, "step")} for rank in (0, 1)]
    assert sorted(before[0]) == [1, 2] and before[0] == before[1]

    # one process cannot continue a two-process run: refused, checkpoint kept
    refused = invoke_cli(*args, cwd=tmp_path)
    assert "world_size" in one_error_line(refused) and checkpoint.is_dir()

    clear_probe(tmp_path)  # resumed, and killed again once the checkpoint of its last step is saved
    resumed = torchrun(tmp_path, *args, PROBE_KILL_AFTER_SAVE=4)
    assert resumed.returncode != 0 and not (out / "run_summary.json").exists()
    digests = [{e["step"]: e["params"] for e in events(tmp_path, rank, "step")} for rank in (0, 1)]
    assert sorted(digests[0]) == [3, 4] and digests[0] == digests[1]
    # ICTM off: the poolers get no gradient, and without find_unused_parameters DDP fails at step 2
    # (its note that it "did not find any unused parameters" is a false alarm: the twin returns the
    # poolers' outputs, unread)
    (begin,) = events(tmp_path, 0, "train_begin")
    assert begin["find_unused"] is True
    assert [e["path"] for e in events(tmp_path, 1) if e["event"] in ("save", "summary")] == []

    # the checkpoint holds the last step: the rerun finishes from it on both ranks without training again, and
    # rank 0 saves (and removes the checkpoints) only once every rank has read it, however slow (rank 1 here)
    clear_probe(tmp_path)
    last = out / "checkpoints" / "checkpoint-4"
    finished = torchrun(tmp_path, *args, PROBE_SLOW_FINISH=4)
    assert finished.returncode == 0, finished.stderr[-3000:] + rank_output(tmp_path, 0)[-3000:]
    for rank in (0, 1):
        assert events(tmp_path, rank, "step") == [] and events(tmp_path, rank, "train_begin") == []
        (trained,) = events(tmp_path, rank, "trained")
        assert resolved(tmp_path, trained["resumed_from"]) == last.resolve()
    assert [e["path"] for e in events(tmp_path, 1) if e["event"] in ("save", "summary")] == []
    assert [resolved(tmp_path, e["path"]) for e in events(tmp_path, 0, "save")] == [out.resolve() / SCRATCH]
    summary = json.loads((out / "run_summary.json").read_text())
    assert summary["steps"] == 4 and resolved(tmp_path, summary["resumed_from"]) == last.resolve()
    from jtcse.modeling.loading import load_model

    assert parameters_digest(load_model(str(out))) == digests[0][4]
    assert rank_output(tmp_path, 0).count("Twin saved to") == 1 and rank_output(tmp_path, 1) == ""

    # rerunning the finished run is a no-op on both ranks: rank 0 says so, nothing is written
    clear_probe(tmp_path)
    before = snapshot([out])
    rerun = torchrun(tmp_path, *args)
    assert rerun.returncode == 0, rerun.stderr[-3000:] + rank_output(tmp_path, 0)[-3000:]
    printed = rank_output(tmp_path, 0)
    assert "already holds this finished run (4 steps, same settings); nothing to do." in printed, printed[-3000:]
    assert printed.count("Twin saved to") == 1 and rank_output(tmp_path, 1) == ""
    assert events(tmp_path, 0) == events(tmp_path, 1) == [] and snapshot([out]) == before

    # other settings are refused on rank 0; rank 1 stops with it instead of waiting, silently
    again = torchrun(tmp_path, *args, "--seed", "7", probe=False)
    assert again.returncode != 0
    errors = [line for line in rank_output(tmp_path, 0).splitlines() if line.startswith("Error")]
    assert len(errors) == 1 and "already holds a finished run, with other settings (--seed 42 -> 7)" in errors[0], (
        errors
    )
    assert rank_output(tmp_path, 1) == "" and snapshot([out]) == before


@pytest.mark.distributed
@pytest.mark.slow
@pytest.mark.xdist_group("twin_job")
def test_a_second_writer_is_refused_while_a_torchrun_job_holds_the_output(twin_job):
    """Rank 0 holds the output's lock for the whole job (the other rank takes none, or rank 0's lock would
    refuse it); a second command into the same output is refused, naming rank 0, while rank 0 is frozen
    inside its checkpoint save (:func:`twin_job`), and touches nothing; the finished job leaves no lock."""
    out, holder = twin_job["out"], twin_job["holder"]
    line = one_error_line(twin_job["second_writer"])
    assert f"{out} is being written by PID {holder} on " in line, line
    assert twin_job["untouched"]
    summary = json.loads((out / "run_summary.json").read_text())
    assert summary["steps"] == 3 and summary["settings"]["world_size"] == 2 and not twin_job["lock_left"]


def _state(pid: int) -> str:
    """A process's state letter from ``/proc`` (``T``: stopped); ``""`` once it is gone."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return ""


@pytest.mark.distributed
@pytest.mark.slow
def test_bad_input_under_torchrun_is_one_error_per_rank_and_writes_nothing(tmp_path, corpus):
    out = tmp_path / "twin"
    # each rank refuses the options as it parses them, within a second or two of starting; under load one rank may
    # start seconds after the other, so torchrun looks every 4 s, not every 0.1 s, before it stops the slower one
    run = torchrun(
        tmp_path, "train", "--corpus", corpus, "-o", out, "--mini-batch-size", "4", "-r", "dispersion", probe=False,
        monitor_interval=4,
    )  # fmt: skip
    assert run.returncode != 0 and not out.exists()
    for rank, label in ((0, "Error: "), (1, "Error (rank 1): ")):
        errors = [line for line in rank_output(tmp_path, rank).splitlines() if line.startswith("Error")]
        assert len(errors) == 1 and errors[0].startswith(label) and "--mini-batch-size" in errors[0], errors


@pytest.mark.slow
@pytest.mark.cli
@pytest.mark.parametrize(
    "args",
    [
        ["train", "--mini-batch-size", "4", "--regularizer", "simreg"],
        ["simcse", "--mini-batch-size", "4", "--regularizer", "dispersion:weight=0.1"],
        ["train", "--mini-batch-size", "-1"],
        ["simcse", "--mini-batch-size", "-2"],
    ],
)
def test_bad_mini_batch_size_is_one_error_line_before_anything_is_loaded(tmp_path, corpus, args):
    out = tmp_path / "out"
    line = one_error_line(run_cli(*args, "--corpus", corpus, "-o", out))
    assert "--mini-batch-size" in line and not out.exists()


def test_mini_batch_size_with_token_terms_is_refused_by_the_library(tmp_path):
    from jtcse.training.simcse import train_simcse
    from jtcse.training.twin import train_twin

    with pytest.raises(ValueError, match="--mini-batch-size.*norm"):
        train_twin(output_dir=tmp_path / "a", mini_batch_size=4, extra_losses={"norm": lambda out: 0})
    with pytest.raises(ValueError, match="--mini-batch-size.*simreg"):
        train_simcse(output_dir=tmp_path / "b", mini_batch_size=4, regularizers=["simreg"])
    assert not any(tmp_path.iterdir())


@pytest.mark.parametrize("ictm_weight", [0.5, 0.0])
def test_pooler_parameters_are_exactly_the_ones_without_gradient(tiny_bert, tiny_bert_b, ictm_weight, one_thread):
    """The rule behind ``ddp_find_unused_parameters``: the poolers are what a step leaves without a
    gradient, in the twin with ICTM off and in a CLS tower under MultipleNegativesRankingLoss."""
    from sentence_transformers.sentence_transformer.losses import MultipleNegativesRankingLoss

    from jtcse import build_twin
    from jtcse.losses import JTCSELoss
    from jtcse.modeling.loading import load_cls_tower
    from jtcse.training.distributed import pooler_parameters

    sentences = ["The cat sat on the mat.", "Rain is expected tomorrow.", "She plays the violin.", "Tea."]
    twin = build_twin(tiny_bert, tiny_bert_b, cael_every=2)
    twin.train()
    sum(JTCSELoss(twin, ictm_weight=ictm_weight)([twin.preprocess(sentences)]).values()).backward()
    without_grad = {id(p) for p in twin.parameters() if p.grad is None}
    poolers = {id(p) for p in pooler_parameters(twin)}
    assert len(poolers) == 4  # weight and bias of both towers' poolers
    assert without_grad == (poolers if ictm_weight == 0 else set())

    tower, _ = load_cls_tower(tiny_bert, role="tower")
    tower.train()
    features = tower.preprocess(sentences)
    MultipleNegativesRankingLoss(tower)([features, dict(features)], None).backward()
    assert {id(p) for p in tower.parameters() if p.grad is None} == {id(p) for p in pooler_parameters(tower)} != set()
