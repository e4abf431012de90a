"""``jtcse diagnose``: geometry diagnostics and inference cost of an encoder (per tower for a twin)."""

from __future__ import annotations

from pathlib import Path

import typer

from jtcse.commands import _options as opts


def diagnose(
    model: str = opts.model_argument(required=True),
    sentences: Path | None = typer.Option(
        None, "--sentences", help="One sentence per line. Default: 512 sentences of the embedded stdlib prose."
    ),
    output: Path = opts.output_option("report.json and the PNGs"),
    out_alias: Path | None = opts.old_output_option("--out"),
    pairs: Path | None = typer.Option(
        None, "--pairs", help="STS-B-format file: alignment over pairs scoring above --positive-threshold."
    ),
    positive_threshold: float = typer.Option(
        4.0, "--positive-threshold", help="Pairs with gold score above this are positives."
    ),
    limit: int = typer.Option(
        512, "--limit", help="Use at most this many sentences (and positive pairs / pair sentences)."
    ),
    seq_len: int = typer.Option(128, "--seq-len", help="Sequence length at which MACs are counted."),
    max_length: int = typer.Option(128, "--max-length", help="Truncate sentences to this many tokens."),
    attention_size: int = typer.Option(24, "--attention-size", help="Positions shown in the attention heat maps."),
    batch_size: int = opts.inference_batch_size_option(32),
    device: str | None = opts.device_option(),
) -> None:
    """Alignment/uniformity, CLS energy per layer, attention-sink heat maps, condensation, MACs.

    OUTPUT is a folder of diagnose's own: new, empty, or written by an earlier diagnose (its jtcse_outputs.json lists
    each file, and a rerun replaces those); a file it does not list is never replaced.

    Writes OUTPUT/report.json, OUTPUT/attention_<encoder>.png (one panel per layer), OUTPUT/condensation.png,
    OUTPUT/cls_energy.png and, with --pairs, OUTPUT/alignment_uniformity.png. A twin checkpoint is
    inspected tower by tower; the cost total is the sum over towers.

    Example: jtcse diagnose runs/jtcse --sentences data/wiki.txt --pairs sts-dev.csv -o diag/
    """
    from jtcse.corpus import read_texts
    from jtcse.defaults import default_corpus_sentences
    from jtcse.errors import JTCSEError
    from jtcse.evaluation.diagnostics import diagnose_output, run_diagnostics
    from jtcse.evaluation.sts import read_stsb_file
    from jtcse.modeling.loading import load_model

    for name, value in (
        ("--limit", limit),
        ("--seq-len", seq_len),
        ("--max-length", max_length),
        ("--attention-size", attention_size),
        ("--batch-size", batch_size),
    ):
        if value < 1:
            raise JTCSEError(f"{name} must be at least 1")
    inputs = [model, sentences, pairs]
    diagnose_output(output, inputs).check()  # before anything is read or loaded
    texts = read_texts(sentences).sentences if sentences is not None else default_corpus_sentences(limit=limit)
    texts = texts[:limit]
    pair_data = read_stsb_file(pairs) if pairs is not None else None
    encoder = load_model(model, max_seq_length=max_length, device=device)  # clamped to the position table
    report = run_diagnostics(
        encoder,
        texts,
        output,
        pairs=pair_data,
        positive_threshold=positive_threshold,
        seq_len=seq_len,
        max_length=encoder.max_seq_length,
        batch_size=batch_size,
        attention_size=attention_size,
        max_pairs=limit,
        model_name=model,
        inputs=inputs,
    )
    for name, entry in report["alignment_uniformity"].items():
        extra = f", alignment {entry['alignment']:.4f}" if "alignment" in entry else ""
        typer.echo(f"{name}: uniformity {entry['uniformity']:.4f}{extra}")
    for name, entry in report["encoders"].items():
        cond = {k: "n/a" if v is None else f"{v:.3f}" for k, v in entry["condensation"].items()}
        typer.echo(
            f"{name}: CLS energy last layer {entry['cls_energy'][-1]:.4f}; condensation spearman {cond['spearman']} "
            f"kendall {cond['kendall']}; {entry['cost']['macs'] / 1e9:.3f} GMACs @ {seq_len} tokens, "
            f"{entry['cost']['params'] / 1e6:.2f} M params"
        )
    typer.echo(f"wrote {Path(output) / 'report.json'} and {len(report['plots'])} PNGs")


def register(app: typer.Typer) -> None:
    app.command("diagnose")(diagnose)
