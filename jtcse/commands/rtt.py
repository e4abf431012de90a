"""``jtcse rtt``: round-trip-translation paraphrases per pivot language, cached and resumable."""

from __future__ import annotations

from enum import Enum
from pathlib import Path

import typer

from jtcse.commands import _options as opts
from jtcse.locking import json_text


class Backend(str, Enum):
    googletrans = "googletrans"
    seq2seq = "seq2seq"
    replay = "replay"


def rtt(
    output: Path = opts.output_option(
        "pairs.<pivot>.tsv, dropped.<pivot>.tsv, summary.json (and, by default, the cache)"
    ),
    output_dir_alias: Path | None = opts.old_output_option("--output-dir"),
    input: Path | None = typer.Option(
        None, "--input", "-i", help="Corpus, one sentence per line (UTF-8). Default: the embedded English prose corpus."
    ),
    pivots: str = typer.Option(
        "de,fr,zh", "--pivots", "-p", help="Comma-separated pivot languages; one pairs file per pivot."
    ),
    backend: Backend = typer.Option(
        Backend.googletrans,
        "--backend",
        "-b",
        help="googletrans (web), seq2seq (local transformers model) or replay (cache / earlier pairs files only).",
    ),
    source: str = typer.Option("en", "--source", help="Language of the corpus."),
    cache: Path | None = typer.Option(
        None,
        "--cache",
        help="SQLite translation cache. Default: <output>/rtt_cache.sqlite. Share one across jobs to reuse translations.",
    ),
    limit: int | None = typer.Option(None, "--limit", help="Only the first N sentences of the corpus."),
    chunk_size: int = typer.Option(1024, "--chunk-size", help="Sentences per round-trip chunk (progress granularity)."),
    progress: bool = opts.progress_option(),
    # googletrans
    service_url: str = typer.Option(
        "translate.googleapis.com",
        "--service-url",
        help="(googletrans) host[:port] serving /translate_a/single over https.",
    ),
    concurrency: int = typer.Option(8, "--concurrency", help="(googletrans) requests in flight at most."),
    rate_limit: float = typer.Option(
        50.0, "--rate-limit", help="(googletrans) requests per second at most (0: no limit)."
    ),
    max_retries: int = typer.Option(5, "--max-retries", help="(googletrans) retries per request on 429/5xx/timeouts."),
    backoff_base: float = typer.Option(
        1.0, "--backoff-base", help="(googletrans) first backoff in seconds; doubles per retry, with jitter."
    ),
    timeout: float = typer.Option(15.0, "--timeout", help="(googletrans) seconds per request."),
    pack_size: int = typer.Option(
        16, "--pack-size", help="(googletrans) sentences sent together in one request (1: one per request)."
    ),
    ca_bundle: Path | None = typer.Option(
        None, "--ca-bundle", help="(googletrans) extra CA certificate file to trust (TLS proxies, local servers)."
    ),
    proxy: str | None = typer.Option(None, "--proxy", help="(googletrans) HTTP(S) proxy URL."),
    # seq2seq
    model: str | None = typer.Option(
        None,
        "--model",
        help="(seq2seq) local path or name; '{src}'/'{tgt}' make a per-direction template, e.g. 'models/opus-mt-{src}-{tgt}'. Multilingual (NLLB/M2M100) checkpoints take no template.",
    ),
    batch_size: int = opts.inference_batch_size_option(32, "translated (seq2seq)"),
    device: str | None = opts.device_option(),
    num_beams: int = typer.Option(1, "--num-beams", help="(seq2seq) beam size (1: greedy)."),
    # replay
    replay_backend: str | None = typer.Option(
        None,
        "--replay-backend",
        help="(replay) whose cached translations to serve (default: the only backend in the cache).",
    ),
    replay_pairs: Path | None = typer.Option(
        None,
        "--replay-pairs",
        help="(replay) directory of an earlier run: its pairs.<pivot>.tsv are served as whole round trips.",
    ),
) -> None:
    """Make round-trip-translation paraphrases: SOURCE → pivot → SOURCE for every corpus sentence.

    Writes, per pivot, pairs.<pivot>.tsv (original<TAB>round trip, the file `jtcse simcse --pairs-file` reads) and dropped.<pivot>.tsv (sentences not kept: identical, empty, failed or too long, each with its reason), plus summary.json.

    Every translation is committed to an SQLite cache as it arrives: after a crash or Ctrl-C, rerun the same command to resume; a rerun of a finished job sends no request.

    Examples:

    jtcse rtt --input corpus.txt --pivots de,fr,zh --backend googletrans -o rtt/

    jtcse rtt --input corpus.txt --pivots de --backend seq2seq --model 'models/opus-mt-{src}-{tgt}' -o rtt/

    jtcse rtt --input corpus.txt --pivots de,fr --backend replay --cache rtt/rtt_cache.sqlite -o rtt2/
    """
    from jtcse.corpus import read_corpus
    from jtcse.defaults import default_corpus_sentences
    from jtcse.errors import JTCSEError
    from jtcse.rtt.backends import GoogletransSettings, ReplaySettings, Seq2SeqSettings, make_translator
    from jtcse.rtt.cache import TranslationCache
    from jtcse.rtt.runner import rtt_output, run_rtt

    pivot_list = [p.strip() for p in pivots.split(",") if p.strip()]
    if input is not None:
        corpus = read_corpus(input)
        sentences, skipped = corpus.sentences, corpus.skipped_empty
    else:
        sentences, skipped = default_corpus_sentences(), 0
    if limit is not None:
        if limit < 1:
            raise JTCSEError(f"--limit must be at least 1, got {limit}")
        sentences = sentences[:limit]
    out = rtt_output(output, (input, replay_pairs))
    out.check()  # (run_rtt checks it too) before the cache is made in it
    cache_path = cache or (output / "rtt_cache.sqlite")
    if backend is Backend.replay and cache is not None and not cache.is_file():
        raise JTCSEError(f"Replay cache not found: {cache}")
    if cache_path.expanduser().resolve().parent == output.expanduser().resolve():  # the default, or given inside
        out.add(f"{cache_path.name}*")  # the cache and SQLite's -wal/-shm files beside it, entered before they exist

    with TranslationCache(cache_path) as store:
        translator = make_translator(
            backend.value,
            store,
            pivot_list,
            googletrans=GoogletransSettings(
                service_url=service_url,
                concurrency=concurrency,
                rate_limit=rate_limit,
                max_retries=max_retries,
                backoff_base=backoff_base,
                timeout=timeout,
                pack_size=pack_size,
                ca_bundle=ca_bundle,
                proxy=proxy,
            ),
            seq2seq=Seq2SeqSettings(model=model, batch_size=batch_size, device=device, num_beams=num_beams),
            replay=ReplaySettings(backend=replay_backend, pairs_dir=replay_pairs),
        )
        try:
            with translator:
                summary = run_rtt(
                    sentences, pivot_list, translator, output,
                    source=source, cache=store, chunk_size=chunk_size, progress=progress, inputs=(input, replay_pairs),
                )  # fmt: skip
        except KeyboardInterrupt:
            typer.secho(
                f"Interrupted. {store.count()} translations are safe in {store.path}; rerun the same command to resume.",
                fg=typer.colors.YELLOW, err=True,
            )  # fmt: skip
            raise typer.Exit(130) from None

    typer.echo(f"{len(sentences)} sentences ({skipped} blank lines skipped), backend {summary.backend}:")
    for p in summary.pivots:
        typer.echo(
            f"  {source}→{p.pivot}→{source}: kept {p.kept}, identical {p.identical}, empty {p.empty}, "
            f"failed {p.failed}, too long {p.too_long}  →  {p.pairs_file}"
        )
    typer.echo(f"backend stats: {json_text(summary.backend_stats, indent=None)}")
    typer.echo(f"summary: {output / 'summary.json'}; dropped sentences are listed in dropped.<pivot>.tsv")


def register(app: typer.Typer) -> None:
    app.command("rtt")(rtt)
