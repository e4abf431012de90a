"""Construction of an RTT backend by name (:data:`~jtcse.rtt.settings.BACKENDS`): ``googletrans`` (web),
``seq2seq`` (local model), ``replay``, from the job's :class:`~jtcse.rtt.settings.RttSettings`."""

from __future__ import annotations

from pathlib import Path

from jtcse.errors import JTCSEError
from jtcse.rtt.settings import RttSettings


def make_translator(settings: RttSettings, cache, *, device: str | None = None):
    """The :class:`~jtcse.rtt.base.Translator` of ``settings.backend``; only that backend's settings are read.

    ``cache`` is the open :class:`~jtcse.rtt.cache.TranslationCache` (replay serves from it); the job's pivots
    select the earlier ``pairs.<pivot>.tsv`` files replay may serve whole; ``device``: where seq2seq runs.
    """
    if settings.backend == "googletrans":
        from jtcse.rtt.googletrans_backend import GoogletransTranslator

        s = settings.googletrans
        if s.ca_bundle is not None and not s.ca_bundle.is_file():
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
    if settings.backend == "seq2seq":
        from jtcse.rtt.seq2seq import Seq2SeqTranslator

        s = settings.seq2seq  # a model is there: RttSettings checks it
        return Seq2SeqTranslator(s.model, batch_size=s.batch_size, device=device, num_beams=s.num_beams)
    from jtcse.rtt.replay import ReplayTranslator
    from jtcse.rtt.runner import pairs_path

    pairs_files, folder = {}, settings.replay.pairs_dir
    if folder is not None:
        if not Path(folder).is_dir():
            raise JTCSEError(f"--replay-pairs must be the output directory of an earlier run: {folder}")
        pivots = settings.pivots
        pairs_files = {p: pairs_path(folder, p) for p in pivots if pairs_path(folder, p).is_file()}
        if not pairs_files:
            raise JTCSEError(f"No pairs.<pivot>.tsv for {', '.join(pivots)} in {folder}")
    return ReplayTranslator(cache, backend=settings.replay.backend, pairs_files=pairs_files)
