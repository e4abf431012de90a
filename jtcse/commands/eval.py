"""``jtcse eval sts`` (SentEval-protocol 7-task STS table) and ``jtcse eval mteb`` (MTEB tasks)."""

from __future__ import annotations

from pathlib import Path

import typer

from jtcse.commands import _options as opts
from jtcse.errors import JTCSEError
from jtcse.locking import atomic_write_json

eval_app = typer.Typer(
    name="eval",
    help="Evaluate any sentence-transformers checkpoint: the SentEval 7-task STS table or MTEB tasks.",
    no_args_is_help=True,
)


def _parse_task_dirs(items: list[str]) -> dict[str, str]:
    out: dict[str, str] = {}
    for item in items:
        task, sep, path = item.partition("=")
        if not sep or not task or not path:
            raise JTCSEError(
                f"--task-dir takes TASK=PATH (e.g. STS16=/data/sts2016-english-with-gs-v1.0), not {item!r}"
            )
        out[task.strip()] = path.strip()
    return out


@eval_app.command("sts")
def sts(
    model: str = opts.model_argument(required=True),
    data_dir: Path | None = typer.Option(
        None, "--data-dir", help="SentEval data directory (holding STS/ and SICK/): the 7-task table."
    ),
    stsb_file: Path | None = typer.Option(
        None,
        "--stsb-file",
        help="Instead of --data-dir: one STS-B-format file (e.g. sts-dev.csv), scored over all pairs and per genre "
        "(captions, news, forums).",
    ),  # fmt: skip
    output: Path | None = opts.output_option("the scores and details as JSON", None, folder=False),
    output_json_alias: Path | None = opts.old_output_option("--output-json"),
    output_csv: Path | None = typer.Option(
        None,
        "--output-csv",
        help="Write a 'model,STS12,…,SICKR,avg' row here (with --stsb-file: 'model,file,all,<genres>'; appended when "
        "the file has that header).",
    ),
    pooling: str | None = opts.pooling_option(),
    max_seq_length: int | None = typer.Option(
        None,
        "--max-seq-length",
        help="Truncate inputs to this many tokens. Default: the model's position capacity (no truncation).",
    ),
    tasks: str = typer.Option(
        "STS12,STS13,STS14,STS15,STS16,STSB,SICKR", "--tasks", help="Comma-separated subset of the seven tasks."
    ),
    task_dir: list[str] = typer.Option(
        [], "--task-dir", help="TASK=PATH: read TASK from PATH instead of the SentEval layout (repeatable)."
    ),
    batch_size: int = opts.inference_batch_size_option(64),
    device: str | None = opts.device_option(),
    backend: str = typer.Option(
        "jtcse", "--backend", help="'jtcse' (built in) or 'senteval' (needs the senteval package)."
    ),
    update_card: bool = typer.Option(
        False,
        "--update-card",
        help="Write the scores into MODEL/README.md (model-index entry and a table); MODEL must be a writable folder.",
    ),
) -> None:
    """SentEval-protocol STS: STS12–16 (Spearman over all pairs of each year), STS-B test, SICK-R test.

    Expects the SentEval layout under --data-dir: STS/STS12-en-test/STS.input.<subset>.txt and
    STS.gs.<subset>.txt (… STS16-en-test, original STS2016.* names accepted), STS/STSBenchmark/sts-test.csv,
    SICK/SICK_test_annotated.txt. Missing tasks are reported and left out of the average.
    Scores are percent with two decimals; the JSON also reports encoding throughput (sentences/s) and, for
    STS-B, the Spearman of each genre.

    --stsb-file FILE scores one STS-B-format file instead (any split, e.g. sts-dev.csv): over all pairs and
    per genre, printed and written as JSON (-o) and CSV (--output-csv).

    -o replaces only a JSON that jtcse eval sts wrote (it says so: "written_by"); an input, or any other file,
    is never replaced.

    Example: jtcse eval sts runs/jtcse --data-dir SentEval/data/downstream -o sts.json
    Example: jtcse eval sts runs/ucd/distilled --stsb-file stsbenchmark/sts-dev.csv -o dev.json
    With --update-card the table also goes into runs/jtcse/README.md (see docs/model_cards.md).
    """
    from jtcse.evaluation.senteval_sts import run_senteval_package, run_senteval_sts, run_stsb_file
    from jtcse.modeling.loading import FULL_LENGTH, load_model
    from jtcse.output_paths import FileOutput

    if (data_dir is None) == (stsb_file is None):
        raise JTCSEError(
            "give --data-dir (the SentEval 7-task table) or --stsb-file (one STS-B-format file, per genre), one of them."
        )
    if stsb_file is not None:
        given = [name for name, value in (("--task-dir", task_dir), ("--update-card", update_card),
                                          ("--backend senteval", backend == "senteval")) if value]  # fmt: skip
        if given:
            raise JTCSEError(f"{', '.join(given)} applies to --data-dir, not to --stsb-file.")
        if not stsb_file.is_file():
            raise JTCSEError(f"STS-B file not found: {stsb_file}")
    task_list = tuple(t.strip() for t in tasks.split(",") if t.strip())
    if backend not in ("jtcse", "senteval"):
        raise JTCSEError(f"--backend must be 'jtcse' or 'senteval', not {backend!r}")
    if batch_size < 1:
        raise JTCSEError("--batch-size must be at least 1")
    task_dirs = _parse_task_dirs(task_dir)
    inputs = [model, data_dir, stsb_file, *task_dirs.values()]
    results = [
        FileOutput(path, "jtcse eval sts", inputs=inputs, record=record, appends=appends)
        for path, record, appends in ((output, "self", False), (output_csv, None, True))
        if path is not None
    ]
    for result in results:
        result.check()  # before the model loads: never an input, never a file jtcse did not write
    if update_card:
        from jtcse.model_card import check_writable

        if pooling is not None:
            raise JTCSEError(
                "--update-card records the checkpoint as saved; drop --pooling (it evaluates another model)."
            )
        check_writable(model, card=True)  # refuse before evaluating: a read-only checkpoint costs nothing
    encoder = load_model(model, pooling=pooling, max_seq_length=max_seq_length or FULL_LENGTH, device=device)
    if stsb_file is not None:
        report = run_stsb_file(encoder, stsb_file, batch_size=batch_size, show_progress_bar=True)
    elif backend == "senteval":
        report = run_senteval_package(encoder, data_dir, task_list, batch_size=batch_size)
    else:
        report = run_senteval_sts(
            encoder, data_dir, task_list, task_dirs=task_dirs, batch_size=batch_size, show_progress_bar=True
        )
    report.meta.update(model=model, pooling=pooling or "model", max_seq_length=encoder.max_seq_length)
    typer.echo(report.table())
    for result in results:
        with result.writing():
            if result.path == output:
                atomic_write_json(output, {**result.fields(), **report.to_json()})
            else:
                report.write_csv(output_csv)  # appended to a table of jtcse's with that header
        typer.echo(f"wrote {result.path}")
    if update_card:
        from jtcse.model_card import update_card_sts

        scores = {task: report.score(task) for task in report.tasks if task in report.results}
        note = f"inputs up to {encoder.max_seq_length} tokens"
        typer.echo(f"updated {update_card_sts(model, scores, note)}")


@eval_app.command("mteb")
def mteb_command(
    model: str = opts.model_argument(required=True),
    tasks: str | None = typer.Option(
        None,
        "--tasks",
        help="Comma-separated MTEB task names. Default: STS17 (en-en), STS22.v2 (en), STSBenchmarkMultilingualSTS (en, "
        "test); none with --benchmark.",
    ),
    benchmark: str | None = typer.Option(
        None, "--benchmark", help="An MTEB benchmark by name (mteb.get_benchmark), e.g. 'MTEB(eng, v2)': all its tasks."
    ),
    local_task: list[str] = typer.Option(
        [],
        "--local-task",
        help="PATH or TYPE:PATH of a task on disk (repeatable), NAME=PATH to name it; the type comes from the layout: "
        "a BEIR folder (retrieval), text/label/split rows or a train.jsonl + test.jsonl folder (classification), "
        "sentence1/sentence2/label rows (pair-classification), sentence1/sentence2/score rows or an STS-B file (sts). "
        "retrieval-pairs:FILE reads an STS file as retrieval (pairs scoring 4 or more: sentence1 finds sentence2). "
        "Unnamed, a task is Local_<file stem or folder>: BIOSSES/test.jsonl is Local_BIOSSES, STS17/en-en/test.jsonl "
        "Local_STS17_en-en.",
    ),
    output: Path = opts.output_option("the results, in mteb's results layout, and summary.json", Path("mteb-results")),
    output_dir_alias: Path | None = opts.old_output_option("--output-dir"),
    pooling: str | None = opts.pooling_option(),
    max_seq_length: int | None = typer.Option(
        None,
        "--max-seq-length",
        help="Truncate inputs to this many tokens. Default: the checkpoint's own, as mteb runs a model (and as its "
        "published scores were made); 'jtcse eval sts' instead reads whole sentences, as SimCSE does.",
    ),
    batch_size: int = opts.inference_batch_size_option(64),
    device: str | None = opts.device_option(),
    cache_dir: Path | None = typer.Option(
        None,
        "--cache-dir",
        help="MTEB result cache; results are reused only for the same weights (default: $MTEB_CACHE or ~/.cache/mteb).",
    ),
    update_card: bool = typer.Option(
        False,
        "--update-card",
        help="Write the main scores into MODEL/README.md (model-index entries and a table); MODEL must be a writable "
        "folder.",
    ),
) -> None:
    """Run MTEB tasks with mteb's own tasks and evaluators: by name, a whole benchmark, or tasks from local files.

    Task names are MTEB's (see `mteb.get_tasks()`); "NAME:SUBSET" keeps one subset (e.g. STS17:en-en).
    Results, in mteb's results layout: OUTPUT/<model>/<revision>/<Task>.json (mteb's TaskResult) and
    model_meta.json, plus OUTPUT/summary.json (main score per task). Name OUTPUT "results" and mteb reads it:
    mteb.ResultCache(PARENT).load_results(). OUTPUT is a folder of eval mteb's own: summary.json lists every file it
    wrote there, and a run into a folder holding any other file is refused before the model loads (nothing replaced).

    A task whose data cannot be loaded (e.g. offline) is reported and skipped. Exit status: 0 when at least one
    task ran (the ones that did not are listed); 2 when none ran, or on a mistake in the command.

    Example: jtcse eval mteb runs/jtcse -o results/mteb
    Example: jtcse eval mteb runs/jtcse --benchmark 'MTEB(eng, v2)' -o mteb/results
    Offline example: jtcse eval mteb runs/jtcse --tasks '' --local-task my_beir/ --local-task retrieval-pairs:sts-dev.csv
    Named: jtcse eval mteb runs/jtcse --tasks '' --local-task SciFactLocal=scifact/ --local-task Dev=sts:dev.tsv
    """
    from jtcse.evaluation.mteb_local_tasks import parse_task_spec
    from jtcse.evaluation.mteb_results import results_output
    from jtcse.evaluation.mteb_runner import DEFAULT_MTEB_TASKS, run_mteb
    from jtcse.modeling.loading import load_model

    if tasks is None:
        names = () if benchmark else DEFAULT_MTEB_TASKS
    else:
        names = tuple(t.strip() for t in tasks.split(",") if t.strip())
    if not names and not local_task and not benchmark:
        raise JTCSEError("nothing to run: give --tasks, --benchmark and/or --local-task")
    if update_card:
        from jtcse.model_card import check_writable

        if pooling is not None:
            raise JTCSEError(
                "--update-card records the checkpoint as saved; drop --pooling (it evaluates another model)."
            )
        check_writable(model, card=True)  # refuse before evaluating: a read-only checkpoint costs nothing
    inputs = [model, *(parse_task_spec(spec)[1] for spec in local_task)]
    results_output(output, inputs, cache_dir).check()  # before the model loads
    # The checkpoint's own length, as mteb loads a model: a BEIR corpus of abstracts read whole (512 tokens) scored
    # 0.90 nDCG@10 above mteb's published figure for the MiniLM (256 tokens), issue 46.
    encoder = load_model(model, pooling=pooling, max_seq_length=max_seq_length, device=device)
    summary = run_mteb(
        encoder,
        names,
        output,
        local_tasks=local_task,
        batch_size=batch_size,
        name=model,
        cache_dir=cache_dir,
        benchmark=benchmark,
    )
    _report_mteb(summary, output)
    if update_card:
        from jtcse.model_card import update_card_mteb

        ran = {name: entry for name, entry in summary["tasks"].items() if "error" not in entry}
        typer.echo(f"updated {update_card_mteb(model, ran)}")


def _report_mteb(summary: dict, output: Path) -> None:
    """Print each task's main score or why it did not run; raise when none ran."""
    ran = [name for name, entry in summary["tasks"].items() if "error" not in entry]
    for name, entry in summary["tasks"].items():
        if "error" in entry:
            typer.echo(f"{name}: not run ({entry['error']})")
        else:
            typer.echo(f"{name}: {entry['main_score']:.4f} ({entry['metric']})")
    typer.echo(f"wrote {output / 'summary.json'}")
    not_run = [name for name in summary["tasks"] if name not in ran]
    if not ran:
        named = ", ".join(not_run[:8]) + (f" and {len(not_run) - 8} more" if len(not_run) > 8 else "")
        hub = [name for name in not_run if not name.startswith("Local_")]  # (a local task's data is on disk)
        why = "; ".join(f"{name}: {summary['tasks'][name]['error']}" for name in not_run[:3])
        advice = (
            "Run the Hub's where the Hugging Face Hub is reachable (offline?), or give local files with --local-task."
            if hub
            else "Fix the file each names."
        )
        raise JTCSEError(f"none of the {len(not_run)} requested MTEB tasks ran ({named}): {why}. {advice}")
    if not_run:
        typer.echo(f"ran {len(ran)} of {len(summary['tasks'])} tasks: {', '.join(ran)}; not run: {', '.join(not_run)}")


def register(app: typer.Typer) -> None:
    app.add_typer(eval_app, name="eval")
