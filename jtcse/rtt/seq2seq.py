"""The local seq2seq backend: ``transformers`` translation models (Marian, NLLB, M2M100 style), batched.

``model`` is either

* a *template* with ``{src}`` and ``{tgt}`` for one-pair-per-model families such as Marian
  (``Helsinki-NLP/opus-mt-{src}-{tgt}`` or ``/models/opus-mt-{src}-{tgt}``), loaded per direction
  (the two most recent directions stay loaded, which is what a round trip alternates between); or
* one multilingual checkpoint (M2M100, NLLB): the source language goes to ``tokenizer.src_lang`` and
  generation starts with the target language token (``forced_bos_token_id``). Two-letter codes are
  mapped to NLLB's ``xxx_Script`` codes for the common languages; NLLB codes are accepted as is.

Texts are sorted by length before batching (less padding), run under ``torch.inference_mode`` on
the GPU when there is one, and answered in input order; a batch's results are reported through
``on_result`` as soon as it is decoded. Inputs longer than the model's ``model_max_length`` tokens
are not truncated silently: they fail with a "too long" reason.
"""

from __future__ import annotations

import re
from collections import OrderedDict
from collections.abc import Sequence

from jtcse.errors import JTCSEError
from jtcse.rtt.base import ResultCallback, TranslationFailure, Translator
from jtcse.rtt.settings import Seq2SeqSettings

_DEFAULTS = Seq2SeqSettings()
"""The settings' defaults are the translator's (``jtcse rtt`` declares them once)."""

# ISO 639-1 → NLLB-200 (FLORES-200) codes for the usual pivots.
NLLB_CODES = {
    "en": "eng_Latn", "de": "deu_Latn", "fr": "fra_Latn", "es": "spa_Latn", "it": "ita_Latn",
    "pt": "por_Latn", "nl": "nld_Latn", "ru": "rus_Cyrl", "zh": "zho_Hans", "ja": "jpn_Jpan",
    "ko": "kor_Hang", "ar": "arb_Arab", "hi": "hin_Deva", "tr": "tur_Latn", "pl": "pol_Latn",
    "cs": "ces_Latn", "sv": "swe_Latn", "fi": "fin_Latn", "el": "ell_Grek", "he": "heb_Hebr",
    "vi": "vie_Latn", "id": "ind_Latn", "uk": "ukr_Cyrl", "fa": "pes_Arab", "bn": "ben_Beng",
}  # fmt: skip


_LANG_TOKEN = re.compile(r"^[a-z]{3}_[A-Z][a-z]{3}$")


class Seq2SeqTranslator(Translator):
    """Translate with local ``AutoModelForSeq2SeqLM`` checkpoints (see the module docstring)."""

    def __init__(
        self,
        model: str,
        *,
        batch_size: int = _DEFAULTS.batch_size,
        device: str | None = None,
        num_beams: int = _DEFAULTS.num_beams,
        max_new_tokens: int = 256,
        fp16: bool = False,
        max_loaded_models: int = 2,
    ) -> None:
        if batch_size < 1:
            raise JTCSEError(f"batch size must be at least 1, got {batch_size}")
        self.model_spec = model
        self.is_template = "{src}" in model or "{tgt}" in model
        self.batch_size = batch_size
        self.num_beams = num_beams
        self.max_new_tokens = max_new_tokens
        self.fp16 = fp16
        self.max_loaded_models = max(1, max_loaded_models)
        self._device = device
        self._loaded: OrderedDict[str, tuple] = OrderedDict()
        self.name = f"seq2seq:{model}" + (f":beams={num_beams}" if num_beams != 1 else "")
        self.batches = 0
        self.too_long = 0

    @property
    def device(self) -> str:
        if self._device is None:
            import torch

            self._device = "cuda" if torch.cuda.is_available() else "cpu"
        return self._device

    # -- models -----------------------------------------------------------------------------------
    def _load(self, source: str, target: str):
        """``(tokenizer, model)`` for this direction, loading (and evicting the oldest) as needed."""
        ref = self.model_spec.format(src=source, tgt=target) if self.is_template else self.model_spec
        if ref in self._loaded:
            self._loaded.move_to_end(ref)
            return self._loaded[ref]
        import torch
        from transformers import AutoModelForSeq2SeqLM, AutoTokenizer

        try:
            tokenizer = AutoTokenizer.from_pretrained(ref)
            model = AutoModelForSeq2SeqLM.from_pretrained(ref)
        except (OSError, ValueError) as err:
            first = str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
            raise JTCSEError(
                f"Cannot load the translation model {ref!r} for {source}→{target}: {first}. Give a local path "
                "or a name available offline (a template like 'opus-mt-{src}-{tgt}' is filled per direction)."
            ) from None
        model.eval().to(self.device)
        if self.fp16 and self.device.startswith("cuda"):
            model.half()
        while len(self._loaded) >= self.max_loaded_models:
            self._loaded.popitem(last=False)
            if torch.cuda.is_available():
                torch.cuda.empty_cache()
        self._loaded[ref] = (tokenizer, model)
        return tokenizer, model

    @staticmethod
    def _language_token(tokenizer, code: str) -> str | None:
        """The language token of ``code`` in a multilingual tokenizer (NLLB ``deu_Latn``, M2M ``__de__``)."""
        vocab = tokenizer.get_vocab()
        for candidate in (NLLB_CODES.get(code), code if _LANG_TOKEN.match(code) else None, f"__{code}__"):
            if candidate and candidate in vocab:
                return candidate
        return None

    @staticmethod
    def _multilingual_codes(tokenizer) -> list[str]:
        reverse = {v: k for k, v in NLLB_CODES.items()}
        codes = set()
        for token in tokenizer.get_vocab():
            if _LANG_TOKEN.match(token):
                codes.add(reverse.get(token, token))
            elif token.startswith("__") and token.endswith("__") and 2 <= len(token) - 4 <= 3:
                codes.add(token[2:-2])
        return sorted(codes)

    # -- translation ------------------------------------------------------------------------------
    def translate(
        self,
        texts: Sequence[str],
        source: str,
        target: str,
        on_result: ResultCallback | None = None,
    ) -> list[str | TranslationFailure]:
        import torch

        tokenizer, model = self._load(source, target)
        generate_kwargs: dict = {"num_beams": self.num_beams, "max_new_tokens": self.max_new_tokens}
        if not self.is_template:
            target_token = self._language_token(tokenizer, target)
            source_token = self._language_token(tokenizer, source)
            if target_token is None or source_token is None:
                supported = self._multilingual_codes(tokenizer)
                bad = [c for c, t in ((source, source_token), (target, target_token)) if t is None]
                raise JTCSEError(
                    f"The model {self.model_spec!r} has no language token for {', '.join(bad)}. "
                    f"Supported: {', '.join(supported) if supported else 'none found (use a {src}/{tgt} template for single-pair models)'}"
                )
            if hasattr(tokenizer, "src_lang"):  # M2M100 takes "de", NLLB "deu_Latn"
                tokenizer.src_lang = source_token[2:-2] if source_token.startswith("__") else source_token
            generate_kwargs["forced_bos_token_id"] = tokenizer.convert_tokens_to_ids(target_token)

        results: list[str | TranslationFailure | None] = [None] * len(texts)
        limit = min(tokenizer.model_max_length, getattr(model.config, "max_position_embeddings", None) or 10**9)
        lengths = (
            [len(ids) for ids in tokenizer(list(texts), add_special_tokens=True, verbose=False)["input_ids"]]
            if texts
            else []
        )
        order = []
        for i, (text, n) in enumerate(zip(texts, lengths, strict=True)):
            if not text.strip():
                results[i] = ""
            elif n > limit:
                self.too_long += 1
                results[i] = TranslationFailure(f"too long for the model ({n} tokens > {limit})")
            else:
                order.append(i)
        for i, r in enumerate(results):
            if r is not None and on_result is not None:
                on_result(i, r)
        order.sort(key=lambda i: lengths[i])
        for start in range(0, len(order), self.batch_size):
            batch = order[start : start + self.batch_size]
            encoded = tokenizer([texts[i] for i in batch], return_tensors="pt", padding=True).to(model.device)
            with torch.inference_mode():
                generated = model.generate(**encoded, **generate_kwargs)
            decoded = tokenizer.batch_decode(generated, skip_special_tokens=True)
            self.batches += 1
            for i, text in zip(batch, decoded, strict=True):
                results[i] = text.strip()
                if on_result is not None:
                    on_result(i, results[i])
        return results  # type: ignore[return-value]

    def stats(self) -> dict:
        return {"requests": 0, "batches": self.batches, "too_long": self.too_long, "device": self.device}

    def close(self) -> None:
        self._loaded.clear()
