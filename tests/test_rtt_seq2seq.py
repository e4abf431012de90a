"""The seq2seq backend with tiny randomly initialised models and real (locally trained) tokenizers."""

from __future__ import annotations

import pytest

from jtcse.errors import JTCSEError
from jtcse.rtt.base import TranslationFailure
from jtcse.rtt.cache import CachedTranslator, TranslationCache
from jtcse.rtt.seq2seq import Seq2SeqTranslator

TEXTS = [
    "The cat sat on the mat.",
    "A much longer sentence that needs more tokens than the others in this batch do.",
    "Short.",
    "",
    "Another sentence of middling length here.",
    "Return the value of the attribute.",
    "Lists are mutable sequences.",
]


def _tokenizer(extra_special: list[str] = ()):
    from tokenizers import Tokenizer, models, pre_tokenizers, processors, trainers
    from transformers import PreTrainedTokenizerFast

    from jtcse.defaults import default_corpus_sentences

    tok = Tokenizer(models.WordPiece(unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    specials = ["<pad>", "</s>", "<unk>", *extra_special]
    tok.train_from_iterator(
        default_corpus_sentences(limit=400), trainers.WordPieceTrainer(vocab_size=300, special_tokens=specials)
    )
    tok.post_processor = processors.TemplateProcessing(
        single="$A </s>", special_tokens=[("</s>", tok.token_to_id("</s>"))]
    )
    return PreTrainedTokenizerFast(
        tokenizer_object=tok, pad_token="<pad>", eos_token="</s>", unk_token="<unk>",
        additional_special_tokens=list(extra_special), model_max_length=64,
    )  # fmt: skip


def _save_marian(directory, seed: int) -> str:
    import torch
    from transformers import MarianConfig, MarianMTModel

    tokenizer = _tokenizer()
    torch.manual_seed(seed)
    config = MarianConfig(
        vocab_size=len(tokenizer), d_model=16, encoder_layers=1, decoder_layers=1, encoder_attention_heads=2,
        decoder_attention_heads=2, encoder_ffn_dim=32, decoder_ffn_dim=32, max_position_embeddings=64,
        pad_token_id=tokenizer.pad_token_id, eos_token_id=tokenizer.eos_token_id,
        decoder_start_token_id=tokenizer.pad_token_id, forced_eos_token_id=tokenizer.eos_token_id,
    )  # fmt: skip
    MarianMTModel(config).save_pretrained(directory)
    tokenizer.save_pretrained(directory)
    return str(directory)


@pytest.fixture(scope="module")
def marian_template(tmp_path_factory) -> str:
    root = tmp_path_factory.mktemp("mt")
    for seed, (src, tgt) in enumerate([("en", "de"), ("de", "en")]):
        _save_marian(root / f"tiny-mt-{src}-{tgt}", seed)
    return str(root / "tiny-mt-{src}-{tgt}")


@pytest.fixture(scope="module")
def m2m_path(tmp_path_factory) -> str:
    import torch
    from transformers import M2M100Config, M2M100ForConditionalGeneration

    tokenizer = _tokenizer(["__en__", "__de__", "__fr__"])
    torch.manual_seed(0)
    config = M2M100Config(
        vocab_size=len(tokenizer), d_model=16, encoder_layers=1, decoder_layers=1, encoder_attention_heads=2,
        decoder_attention_heads=2, encoder_ffn_dim=32, decoder_ffn_dim=32, max_position_embeddings=64,
        pad_token_id=tokenizer.pad_token_id, eos_token_id=tokenizer.eos_token_id, bos_token_id=tokenizer.eos_token_id,
        decoder_start_token_id=tokenizer.eos_token_id,
    )  # fmt: skip
    path = tmp_path_factory.mktemp("m2m") / "tiny-m2m"
    M2M100ForConditionalGeneration(config).save_pretrained(path)
    tokenizer.save_pretrained(path)
    return str(path)


def test_batched_equals_one_by_one_and_keeps_order(marian_template):
    batched = Seq2SeqTranslator(marian_template, batch_size=3, max_new_tokens=8, device="cpu")
    single = Seq2SeqTranslator(marian_template, batch_size=1, max_new_tokens=8, device="cpu")
    seen: list[int] = []
    out = batched.translate(TEXTS, "en", "de", on_result=lambda i, r: seen.append(i))
    assert out == single.translate(TEXTS, "en", "de")
    assert out[3] == "" and all(isinstance(x, str) for x in out)
    assert sorted(seen) == list(range(len(TEXTS)))
    assert batched.batches == 2  # 6 non-empty texts in batches of 3
    assert single.batches == 6


def test_template_loads_one_model_per_direction(marian_template):
    t = Seq2SeqTranslator(marian_template, max_new_tokens=6, max_loaded_models=2, device="cpu")
    there = t.translate(TEXTS[:2], "en", "de")
    back = t.round_trip(TEXTS[:2], "en", "de")
    assert len(there) == 2 and all(isinstance(x, str) for x in there)
    assert len(t._loaded) == 2 and all(
        marian_template.format(src=a, tgt=b) in t._loaded for a, b in [("en", "de"), ("de", "en")]
    )
    assert all(isinstance(x, str) for x in back)
    assert t.name == f"seq2seq:{marian_template}"


def test_device_placement(marian_template):
    import torch

    t = Seq2SeqTranslator(marian_template, max_new_tokens=4)
    expected = "cuda" if torch.cuda.is_available() else "cpu"
    assert t.device == expected
    t.translate(["hello world"], "en", "de")
    ((_, model),) = list(t._loaded.values())[:1]
    assert next(model.parameters()).device.type == expected


def test_too_long_inputs_fail_with_a_reason(marian_template):
    t = Seq2SeqTranslator(marian_template, max_new_tokens=4, device="cpu")
    long_text = " ".join(["the attribute value"] * 40)
    out = t.translate(["short one", long_text], "en", "de")
    assert isinstance(out[0], str)
    assert (
        isinstance(out[1], TranslationFailure) and "too long for the model" in out[1].reason and "> 64" in out[1].reason
    )


def test_cache_serves_second_call(marian_template, tmp_path):
    with TranslationCache(tmp_path / "c.sqlite") as cache:
        backend = Seq2SeqTranslator(marian_template, batch_size=4, max_new_tokens=6, device="cpu")
        cached = CachedTranslator(backend, cache)
        first = cached.translate(TEXTS, "en", "de")
        assert backend.batches == 2
        assert cached.translate(TEXTS, "en", "de") == first
        assert backend.batches == 2  # nothing generated again
        assert set(cache.backends()) == {backend.name}


def test_missing_model_is_a_clear_error(tmp_path):
    t = Seq2SeqTranslator(str(tmp_path / "nowhere-{src}-{tgt}"), device="cpu")
    with pytest.raises(JTCSEError, match=r"Cannot load the translation model .*nowhere-en-de.* for en→de"):
        t.translate(["x"], "en", "de")


def test_multilingual_model_forces_target_language(m2m_path):
    t = Seq2SeqTranslator(m2m_path, max_new_tokens=5, device="cpu")
    out = t.translate(["The cat sat.", "Lists are mutable."], "en", "de")
    assert all(isinstance(x, str) for x in out)
    tokenizer, model = t._loaded[m2m_path]
    # the forced first token is the target language token
    encoded = tokenizer(["The cat sat."], return_tensors="pt")
    generated = model.generate(
        **encoded, max_new_tokens=3, forced_bos_token_id=tokenizer.convert_tokens_to_ids("__de__")
    )
    assert tokenizer.convert_ids_to_tokens(int(generated[0, 1])) == "__de__"
    with pytest.raises(JTCSEError, match=r"no language token for xx\. Supported: de, en, fr"):
        t.translate(["x"], "en", "xx")


def test_bad_batch_size():
    with pytest.raises(JTCSEError, match="batch size"):
        Seq2SeqTranslator("m", batch_size=0)
