#!/usr/bin/env python
"""Benchmark: the default pipeline's stages at reduced steps, fp32 against bf16 (``auto``'s choice on a CPU
with native bf16), side by side in one run.

Tiny but real: the embedded MiniLM, the first ``--lines`` sentences of wiki12k as the corpus, the first
``--dev-pairs`` pairs of STS-B dev as the dev file, every stage of ``jtcse pipeline``'s default recipe (two
warm-ups, the twin with its batches of neighbours and GradCache, the ensemble with the start, the distillation,
the evaluation) with only the step counts cut. The variants take turns stage by stage (each runs up to the same
``--until`` before the next stage starts), so a shared machine's drift hits them alike. A stage's seconds are its
wall time in the pipeline (loading, encoding and training), as ``pipeline_summary.json`` reports them; its CPU
seconds are the process's over the same call (``cpu_seconds``, ``cpu_ratio_vs_fp32``), and ``load`` is the
machine's one-minute load average as the stage started. On a machine other jobs share, wall seconds follow their
load (a 2-thread step waits for a thread the other jobs took: one twin step of 128 took from 14 s to 130 s); CPU
seconds with ``--threads 1`` are the work a stage does, which that load barely moves, so compare those there.

Also printed: the padded token share of the corpus at the stages' batch sizes and length 32, for random batches
(what the stages train on) and for length-grouped ones (``group_by_length``); ``--variants`` may add
``bf16+grouped`` (the warm-ups and the distillation with ``group_by_length``; the twin keeps its batches of
neighbours), to time it.

    python scripts/bench_pipeline.py -o docs/bench_pipeline.json
    python scripts/bench_pipeline.py --variants fp32,bf16,bf16+grouped --lines 1000
    python scripts/bench_pipeline.py --until twin --twin-steps 3 --threads 1   # up to the twin, on a busy machine
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
DATA = REPO.parent / "shared" / "data"


def _inputs(folder: Path, corpus: Path, lines: int, dev: Path, pairs: int) -> tuple[Path, Path]:
    """The first ``lines`` sentences of ``corpus`` and the first ``pairs`` pairs of ``dev``, written into ``folder``."""
    from jtcse.corpus import read_corpus

    cut = folder / "corpus.txt"
    cut.write_text("\n".join(read_corpus(corpus).sentences[:lines]) + "\n", encoding="utf-8")
    dev_cut = folder / "dev.csv"
    dev_cut.write_text("\n".join(dev.read_text(encoding="utf-8").splitlines()[:pairs]) + "\n", encoding="utf-8")
    return cut, dev_cut


def _config(corpus: Path, dev: Path, args, variant: str, until: str):
    from jtcse.pipeline.settings import PipelineConfig

    precision, _, grouped = variant.partition("+")
    values = {
        "tower_a": args.tower,
        "corpus": str(corpus),
        "dev_file": str(dev),
        "precision": precision,
        "until": until,
        "warmup": {"max_steps": args.warmup_steps},
        "twin": {"max_steps": args.twin_steps},
        "distill": {"max_steps": args.distill_steps},
    }
    if grouped:
        values["warmup"]["group_by_length"] = True
        values["distill"]["group_by_length"] = True
    return PipelineConfig.from_values(values)


def padding(corpus: Path, tower: str | None, seed: int = 0) -> dict:
    """The padded token share at length 32 for random and length-grouped batches of the stages' batch sizes."""
    from jtcse.corpus import read_training_sentences
    from jtcse.modeling.loading import load_model
    from jtcse.pipeline.settings import PipelineConfig
    from jtcse.training.length_batches import length_grouped_batches, padded_share, random_batches, token_lengths

    config = PipelineConfig()
    sentences = read_training_sentences(str(corpus))[0]
    tokenizer = load_model(tower, role="encode").tokenizer
    out = {}
    for table in ("warmup", "twin", "distill"):
        training = getattr(config, table).training
        lengths = token_lengths(tokenizer, sentences, training.max_seq_length)
        size = training.batch_size
        out[table] = {
            "batch_size": size,
            "max_seq_length": training.max_seq_length,
            "random": round(padded_share(lengths, random_batches(len(lengths), size, seed)), 4),
            "length_grouped": round(padded_share(lengths, length_grouped_batches(lengths, size, seed)), 4),
        }
    return out


class StageCpuClock:
    """The pipeline's ``say``: from its line as a stage starts (``[i/N] name → folder``) to its line as it ends
    (``[i/N] name done in ...``), the process's CPU seconds (``cpu``) and the one-minute load average as it started
    (``load``), by stage name."""

    LINE = re.compile(r"^\[\d+/\d+\] (\S+) (→|done in)")

    def __init__(self) -> None:
        self.cpu: dict[str, float] = {}
        self.load: dict[str, float] = {}
        self._started: dict[str, float] = {}

    def say(self, line: str) -> None:
        found = self.LINE.match(line)
        if found is None:
            return
        stage, event = found.groups()
        if event == "→":
            self._started[stage], self.load[stage] = time.process_time(), round(os.getloadavg()[0], 1)
        else:
            self.cpu[stage] = round(time.process_time() - self._started[stage], 2)


def _ratios(seconds: dict[str, dict[str, float]], base: str) -> dict[str, dict[str, float]]:
    """Each variant's stage seconds over ``base``'s."""
    return {
        variant: {stage: round(s / seconds[base][stage], 3) for stage, s in times.items() if seconds[base].get(stage)}
        for variant, times in seconds.items()
        if variant != base
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--tower", default=None, help="the towers' starting model (default: the embedded MiniLM)")
    parser.add_argument("--corpus", type=Path, default=DATA / "wiki12k.txt")
    parser.add_argument("--dev-file", type=Path, default=DATA / "stsbenchmark" / "sts-dev.csv")
    parser.add_argument("--lines", type=int, default=1500, help="corpus sentences used (the first ones)")
    parser.add_argument("--dev-pairs", type=int, default=250, help="dev pairs used (the first ones)")
    parser.add_argument("--warmup-steps", type=int, default=16)
    parser.add_argument("--twin-steps", type=int, default=2)
    parser.add_argument("--distill-steps", type=int, default=16)
    parser.add_argument("--variants", default="fp32,bf16", help="comma-separated: fp32, auto, bf16, bf16+grouped")
    parser.add_argument("--until", default="eval", help="the last stage timed, as the pipeline's --until names it")
    parser.add_argument("--threads", type=int, default=None, help="torch CPU threads (default: torch's choice)")
    parser.add_argument("-o", "--output", default=None, help="also write the JSON here")
    args = parser.parse_args()

    import torch

    from jtcse.devices import check_precision, native_bf16_cpu
    from jtcse.pipeline.plan import make_plan
    from jtcse.pipeline.run import run_pipeline

    if args.threads:
        torch.set_num_threads(args.threads)
    variants = [v.strip() for v in args.variants.split(",") if v.strip()]
    seconds: dict[str, dict[str, float]] = {v: {} for v in variants}
    cpu: dict[str, dict[str, float]] = {v: {} for v in variants}
    load: dict[str, dict[str, float]] = {v: {} for v in variants}
    with tempfile.TemporaryDirectory(prefix="bench_pipeline_") as tmp:
        corpus, dev = _inputs(Path(tmp), args.corpus, args.lines, args.dev_file, args.dev_pairs)
        whole = make_plan(_config(corpus, dev, args, variants[0], args.until), Path(tmp) / "plan")
        # stage by stage, every variant in turn
        for until in dict.fromkeys(stage.metadata.until for stage in whole.stages):
            for variant in variants:
                config = _config(corpus, dev, args, variant, until)
                clock = StageCpuClock()
                result = run_pipeline(Path(tmp) / variant, config, say=clock.say)
                for row in result["table"]:
                    if row["status"] == "ran":
                        seconds[variant][row["stage"]] = row["seconds"]
                        cpu[variant][row["stage"]] = clock.cpu[row["stage"]]
                        load[variant][row["stage"]] = clock.load[row["stage"]]
    base = variants[0]
    ratios, cpu_ratios = _ratios(seconds, base), _ratios(cpu, base)
    totals = {variant: round(sum(times.values()), 2) for variant, times in seconds.items()}
    report = {
        "benchmark": "the default pipeline's stages at reduced steps, side by side (stage by stage)",
        "variants": {
            v: check_precision(v.partition("+")[0], "cpu") + (" + group_by_length" * ("+" in v)) for v in variants
        },
        "native_bf16_cpu": native_bf16_cpu(),
        "tower": args.tower or "the embedded MiniLM",
        "corpus": f"{args.corpus.name}, first {args.lines} sentences",
        "dev_file": f"{args.dev_file.name}, first {args.dev_pairs} pairs",
        "steps": {"warmup": args.warmup_steps, "twin": args.twin_steps, "distill": args.distill_steps},
        "seconds": seconds,
        "total_seconds": totals,
        f"ratio_vs_{base}": ratios,
        f"total_ratio_vs_{base}": {v: round(totals[v] / totals[base], 3) for v in variants if v != base},
        "cpu_seconds": cpu,
        f"cpu_ratio_vs_{base}": cpu_ratios,
        "load": load,
        "padded_token_share": padding(args.corpus, args.tower),
        "threads": torch.get_num_threads(),
        "machine": platform.processor() or platform.machine(),
        "versions": {"torch": torch.__version__},
    }
    text = json.dumps(report, indent=2)
    print(text)
    if args.output:
        Path(args.output).write_text(text + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
