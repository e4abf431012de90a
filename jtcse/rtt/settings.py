"""The settings of one ``jtcse rtt`` job, each declared once (type, default, help, check) on pydantic
(:mod:`jtcse.schema`): :class:`RttSettings`, the job's own and each backend's (:class:`GoogletransSettings`,
:class:`Seq2SeqSettings`, :class:`ReplaySettings`, whose keys read as the job's: ``--concurrency``). ``jtcse rtt``'s
options are generated from them (``jtcse/commands/_settings.py``); the translators take their defaults from them.
"""

from __future__ import annotations

import typing
from pathlib import Path
from typing import Annotated, Literal

from pydantic import Strict, model_validator

from jtcse.errors import SettingError
from jtcse.schema import Array, Settings, group, setting

Backend = Literal["googletrans", "seq2seq", "replay"]
"""The RTT backends by name: the one list (:func:`jtcse.rtt.backends.make_translator`)."""
BACKENDS = typing.get_args(Backend)
AnyPath = Annotated[Path, Strict(False)]
"""A file or folder, given as a path or as text."""


class GoogletransSettings(Settings):
    """How the googletrans backend asks (web; :class:`~jtcse.rtt.googletrans_backend.GoogletransTranslator`)."""

    service_url: str = setting(
        "translate.googleapis.com", "(googletrans) host[:port] serving /translate_a/single over https."
    )
    concurrency: int = setting(8, "(googletrans) requests in flight at most.", ge=1)
    rate_limit: float = setting(50.0, "(googletrans) requests per second at most (0: no limit).", ge=0)
    max_retries: int = setting(5, "(googletrans) retries per request on 429/5xx/timeouts.", ge=0)
    backoff_base: float = setting(1.0, "(googletrans) first backoff in seconds; doubles per retry, with jitter.", ge=0)
    timeout: float = setting(15.0, "(googletrans) seconds per request.", gt=0)
    pack_size: int = setting(16, "(googletrans) sentences sent together in one request (1: one per request).", ge=1)
    ca_bundle: AnyPath | None = setting(
        None, "(googletrans) extra CA certificate file to trust (TLS proxies, local servers).", metavar="FILE"
    )
    proxy: str | None = setting(None, "(googletrans) HTTP(S) proxy URL.", metavar="URL")


class Seq2SeqSettings(Settings):
    """How the seq2seq backend translates (a local transformers model; :mod:`jtcse.rtt.seq2seq`)."""

    model: str | None = setting(
        None,
        "(seq2seq) local path or name; '{src}'/'{tgt}' make a per-direction template, e.g. "
        "'models/opus-mt-{src}-{tgt}'. Multilingual (NLLB/M2M100) checkpoints take no template.",
        metavar="MODEL",
    )
    batch_size: int = setting(32, "Sentences translated (seq2seq) per batch (more: faster, more memory).", ge=1)
    num_beams: int = setting(1, "(seq2seq) beam size (1: greedy).", ge=1)


class ReplaySettings(Settings):
    """What the replay backend serves (the cache, earlier pairs files; :mod:`jtcse.rtt.replay`)."""

    backend: str | None = setting(
        None,
        "(replay) whose cached translations to serve.",
        key="replay_backend",
        unset="the only backend in the cache",
    )
    pairs_dir: AnyPath | None = setting(
        None,
        "(replay) directory of an earlier run: its pairs.<pivot>.tsv are served as whole round trips.",
        key="replay_pairs",
        metavar="FOLDER",
    )


class RttSettings(Settings):
    """One round-trip-translation job: the corpus, the languages, the backend and how it runs."""

    input: AnyPath | None = setting(
        None,
        "Corpus, one sentence per line (UTF-8).",
        short="-i",
        metavar="FILE",
        unset="the embedded English prose corpus",
    )
    pivots: Array[str] = setting(
        ("de", "fr", "zh"),
        "Comma-separated pivot languages; one pairs file per pivot.",
        short="-p",
        metavar="LANG1,LANG2,...",
    )
    backend: Backend = setting(
        "googletrans",
        "googletrans (web), seq2seq (local transformers model) or replay (cache / earlier pairs files only).",
        short="-b",
    )
    source: str = setting("en", "Language of the corpus.")
    cache: AnyPath | None = setting(
        None,
        "SQLite translation cache. Share one across jobs to reuse translations.",
        metavar="FILE",
        unset="<output>/rtt_cache.sqlite",
    )
    limit: int | None = setting(None, "Only the first N sentences of the corpus.", ge=1, unset="all")
    chunk_size: int = setting(1024, "Sentences per round-trip chunk (progress granularity).", ge=1)
    googletrans: GoogletransSettings = group(GoogletransSettings())
    seq2seq: Seq2SeqSettings = group(Seq2SeqSettings())
    replay: ReplaySettings = group(ReplaySettings())

    @model_validator(mode="after")
    def _seq2seq_needs_a_model(self) -> RttSettings:
        if self.backend == "seq2seq" and not self.seq2seq.model:
            raise SettingError(
                "{backend} seq2seq needs {model} (a local path, a name, or an '{{src}}'/'{{tgt}}' template).",
                ["backend", "model"],
            )
        return self
