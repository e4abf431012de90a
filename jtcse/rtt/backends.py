"""Construction of an RTT backend by name: ``googletrans`` (web), ``seq2seq`` (local model), ``replay``."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from jtcse.errors import JTCSEError

BACKENDS = ("googletrans", "seq2seq", "replay")


@dataclass(frozen=True)
class GoogletransSettings:
    service_url: str = "translate.googleapis.com"
    concurrency: int = 8
    rate_limit: float = 50.0
    max_retries: int = 5
    backoff_base: float = 1.0
    timeout: float = 15.0
    pack_size: int = 16
    ca_bundle: Path | None = None
    proxy: str | None = None


@dataclass(frozen=True)
class Seq2SeqSettings:
    model: str | None = None
    batch_size: int = 32
    device: str | None = None
    num_beams: int = 1


@dataclass(frozen=True)
class ReplaySettings:
    backend: str | None = None
    pairs_dir: Path | None = None


def make_translator(
    backend: str,
    cache,
    pivots: list[str],
    *,
    googletrans: GoogletransSettings = GoogletransSettings(),
    seq2seq: Seq2SeqSettings = Seq2SeqSettings(),
    replay: ReplaySettings = ReplaySettings(),
):
    """The :class:`~jtcse.rtt.base.Translator` named ``backend``; only that backend's settings are read.

    ``cache`` is the open :class:`~jtcse.rtt.cache.TranslationCache` (replay serves from it); ``pivots``
    selects the earlier ``pairs.<pivot>.tsv`` files replay may serve whole.
    """
    if backend == "googletrans":
        from jtcse.rtt.googletrans_backend import GoogletransTranslator

        s = googletrans
        if s.ca_bundle is not None and not Path(s.ca_bundle).is_file():
            raise JTCSEError(f"CA bundle not found: {s.ca_bundle}")
        return GoogletransTranslator(
            s.service_url,
            concurrency=s.concurrency,
            rate_limit=s.rate_limit or None,
            max_retries=s.max_retries,
            backoff_base=s.backoff_base,
            timeout=s.timeout,
            pack_size=s.pack_size,
            ca_bundle=str(s.ca_bundle) if s.ca_bundle else None,
            proxy=s.proxy,
        )
    if backend == "seq2seq":
        from jtcse.rtt.seq2seq import Seq2SeqTranslator

        s = seq2seq
        if not s.model:
            raise JTCSEError("--backend seq2seq needs --model (a local path, a name, or an '{src}'/'{tgt}' template).")
        return Seq2SeqTranslator(s.model, batch_size=s.batch_size, device=s.device, num_beams=s.num_beams)
    if backend == "replay":
        from jtcse.rtt.replay import ReplayTranslator
        from jtcse.rtt.runner import pairs_path

        pairs_files = {}
        if replay.pairs_dir is not None:
            folder = Path(replay.pairs_dir)
            if not folder.is_dir():
                raise JTCSEError(f"--replay-pairs must be the output directory of an earlier run: {folder}")
            pairs_files = {p: pairs_path(folder, p) for p in pivots if pairs_path(folder, p).is_file()}
            if not pairs_files:
                raise JTCSEError(f"No pairs.<pivot>.tsv for {', '.join(pivots)} in {folder}")
        return ReplayTranslator(cache, backend=replay.backend, pairs_files=pairs_files)
    raise JTCSEError(f"unknown RTT backend {backend!r}: use one of {', '.join(BACKENDS)}")
