"""Tiny random towers with real tokenizers, for tests, examples and quick benchmarks.

BERT towers get the embedded MiniLM's uncased WordPiece tokenizer cut to its most frequent words
(:func:`_bert_tokenizer`); RoBERTa towers a real byte-level BPE tokenizer trained on the standard
library's prose (``pydoc_data``). Both layouts run the genuine ``transformers`` code path without any
download.
"""

from __future__ import annotations

from pathlib import Path


def _roberta_tokenizer(vocab_size: int = 600):
    from tokenizers import ByteLevelBPETokenizer
    from transformers import RobertaTokenizerFast

    from jtcse.defaults import default_corpus_sentences

    bpe = ByteLevelBPETokenizer()
    bpe.train_from_iterator(
        default_corpus_sentences(),
        vocab_size=vocab_size,
        min_frequency=2,
        special_tokens=["<s>", "<pad>", "</s>", "<unk>", "<mask>"],
        show_progress=False,
    )
    return RobertaTokenizerFast(tokenizer_object=bpe._tokenizer, model_max_length=512)


def _bert_tokenizer(words: int = 8000):
    """The embedded MiniLM's WordPiece tokenizer (uncased) keeping its special tokens, every single character
    and ``##`` character, and its first ``words`` other entries (the most frequent words): any text still splits
    into known pieces (18% more of them than with the full vocabulary, on the default corpus), and the
    ~9k-entry vocabulary loads in 10 ms where a 15k-word cut takes 18 (29 for the full 30,522 entries).
    Every model load in the tests pays it: the model-loading fast tests are about 8% cheaper than with 15,000
    words. 5,000 words saved more (18%) but changed what the slow tests rely on: the 1 MiB file-size limit of a
    checkpoint test no longer stopped the model's save, and a distillation test's student no longer learned.
    Deterministic, so every tiny BERT tower shares it."""
    from transformers import AutoTokenizer, BertTokenizerFast

    from jtcse.modeling.loading import resolve_source

    full = AutoTokenizer.from_pretrained(resolve_source(None))
    special = set(full.all_special_ids)
    by_id = sorted(full.get_vocab().items(), key=lambda item: item[1])
    first_piece = next(i for token, i in by_id if not token.startswith("[") and i not in special)
    kept = [
        token
        for token, i in by_id
        if i in special or first_piece <= i < first_piece + words or (token.startswith("##") and len(token) == 3)
    ]
    return BertTokenizerFast(vocab={token: i for i, token in enumerate(kept)}, do_lower_case=True, model_max_length=512)


def make_tiny_tower(
    out_dir: str | Path,
    arch: str = "bert",
    *,
    num_layers: int = 4,
    hidden: int = 32,
    heads: int = 4,
    seed: int = 0,
    max_seq_length: int = 64,
    pooling: str = "cls",
) -> str:
    """Write a randomly initialised sentence-transformers encoder (Transformer + Pooling) to ``out_dir``.

    ``arch`` is ``"bert"`` or ``"roberta"``. Returns the path as a string.
    """
    import torch
    from sentence_transformers.base.modules import Transformer
    from transformers import BertConfig, BertModel, RobertaConfig, RobertaModel

    from jtcse.modeling.twin import assemble_tower

    out_dir = Path(out_dir)
    hf_dir = out_dir.parent / f"{out_dir.name}.hf"
    torch.manual_seed(seed)
    common = dict(
        num_hidden_layers=num_layers,
        hidden_size=hidden,
        num_attention_heads=heads,
        intermediate_size=hidden * 2,
        max_position_embeddings=max_seq_length + 4,
    )
    if arch == "bert":
        tokenizer = _bert_tokenizer()
        config = BertConfig(vocab_size=tokenizer.vocab_size, **common)
        model = BertModel(config)
    elif arch == "roberta":
        tokenizer = _roberta_tokenizer()
        config = RobertaConfig(
            vocab_size=len(tokenizer),
            pad_token_id=tokenizer.pad_token_id,
            bos_token_id=tokenizer.bos_token_id,
            eos_token_id=tokenizer.eos_token_id,
            **common,
        )
        model = RobertaModel(config)
    else:
        raise ValueError(f"arch must be 'bert' or 'roberta', not {arch!r}")
    model.save_pretrained(hf_dir)
    tokenizer.save_pretrained(hf_dir)
    assemble_tower(Transformer(str(hf_dir), max_seq_length=max_seq_length), pooling).save(str(out_dir))
    return str(out_dir)
