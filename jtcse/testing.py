"""Tiny random towers with real tokenizers, for tests, examples and quick benchmarks.

BERT towers reuse the embedded MiniLM's WordPiece tokenizer; RoBERTa towers get a real
byte-level BPE tokenizer trained on the standard library's prose (``pydoc_data``), so both
layouts run the genuine ``transformers`` code path without any download.
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
    from transformers import AutoTokenizer, BertConfig, BertModel, RobertaConfig, RobertaModel

    from jtcse.modeling.loading import resolve_source
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
        tokenizer = AutoTokenizer.from_pretrained(resolve_source(None))
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
