"""``jtcse rtt``: round-trip-translation paraphrases per pivot language, cached and resumable."""

from __future__ import annotations

from pathlib import Path

import typer

from jtcse.commands import _options as opts
from jtcse.commands._settings import Options, settings_from, with_settings
from jtcse.locking import json_text
from jtcse.rtt.settings import RttSettings

OPTIONS = Options(RttSettings, RttSettings())


@with_settings(OPTIONS)
def rtt(
    output: Path = opts.output_option(
        "pairs.<pivot>.tsv, dropped.<pivot>.tsv, summary.json (and, by default, the cache)"
    ),
    output_dir_alias: Path | None = opts.old_output_option("--output-dir"),
    progress: bool = opts.progress_option(),
    device: str | None = opts.device_option(),
    **options,
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
    from jtcse.rtt.backends import make_translator
    from jtcse.rtt.cache import TranslationCache
    from jtcse.rtt.runner import cache_files, rtt_output, run_rtt

    settings = settings_from(OPTIONS, options)
    if settings.input is not None:
        corpus = read_corpus(settings.input)
        sentences, skipped = corpus.sentences, corpus.skipped_empty
    else:
        sentences, skipped = default_corpus_sentences(), 0
    sentences = sentences[: settings.limit]
    inputs = (settings.input, settings.replay.pairs_dir)
    cache = settings.cache
    cache_path = cache or (output / "rtt_cache.sqlite")
    out = rtt_output(output, inputs, live=cache_files(cache_path))
    out.check()  # (run_rtt checks it too) before the cache is made in it
    if settings.backend == "replay" and cache is not None and not cache.is_file():
        raise JTCSEError(f"Replay cache not found: {cache}")
    if cache_path.expanduser().resolve().parent == output.expanduser().resolve():  # the default, or given inside
        out.add(*cache_files(cache_path))  # the cache and SQLite's -wal/-shm files beside it, entered before they exist

    with TranslationCache(cache_path) as store:
        translator = make_translator(settings, store, device=device)
        try:
            with translator:
                summary = run_rtt(
                    sentences,
                    settings.pivots,
                    translator,
                    output,
                    source=settings.source,
                    cache=store,
                    chunk_size=settings.chunk_size,
                    progress=progress,
                    inputs=inputs,
                )
        except KeyboardInterrupt:
            saved = f"{store.count()} translations are safe in {store.path}"
            typer.secho(f"Interrupted. {saved}; rerun the same command to resume.", fg=typer.colors.YELLOW, err=True)
            raise typer.Exit(130) from None

    typer.echo(f"{len(sentences)} sentences ({skipped} blank lines skipped), backend {summary.backend}:")
    for p in summary.pivots:
        typer.echo(
            f"  {settings.source}→{p.pivot}→{settings.source}: kept {p.kept}, identical {p.identical}, empty {p.empty}, "
            f"failed {p.failed}, too long {p.too_long}  →  {p.pairs_file}"
        )
    typer.echo(f"backend stats: {json_text(summary.backend_stats, indent=None)}")
    typer.echo(f"summary: {output / 'summary.json'}; dropped sentences are listed in dropped.<pivot>.tsv")


def register(app: typer.Typer) -> None:
    app.command("rtt")(rtt)
