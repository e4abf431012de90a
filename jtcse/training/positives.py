"""What a warm-up's positives are, and which part of its corpus it reads: the ways two warm-ups of one model can
differ (an ensemble of members that differ gains more than one of members that differ only in seed).

A positive other than ``dropout`` is the sentence changed a little, at the word level, once per run (each choice
drawn from a generator seeded by the run's seed and the sentence itself, so a rerun or resume sees the same):

==============  ==========================================================================================
``dropout``     the sentence itself: the two dropout passes are the views (SimCSE)
``deletion``    each word dropped with probability 0.1, at least one kept (word deletion)
``cutoff``      one contiguous span of ⌈0.1·n⌉ of its n words removed (span cutoff, at the word level)
``repetition``  up to ⌊0.32·n⌋ of its words (at least 2 allowed) repeated in place (ESimCSE's word repetition)
``reorder``     two of its words swapped (word reordering)
==============  ==========================================================================================
"""

from __future__ import annotations

import math
import re
import typing
import zlib
from collections.abc import Sequence
from typing import Literal

Positives = Literal["dropout", "deletion", "cutoff", "repetition", "reorder"]
"""What a warm-up's positives are (see the module docstring): the one list."""
POSITIVES = typing.get_args(Positives)
DELETION = 0.1
CUTOFF = 0.1
REPETITION = 0.32
_PART = re.compile(r"^(all|([1-9]\d*)/([1-9]\d*))$")


def positive_of(sentence: str, kind: str, seed: int) -> str:
    """The positive of ``sentence`` (see the module docstring); a sentence of one word is its own positive."""
    import numpy as np

    words = sentence.split()
    if kind == "dropout" or len(words) < 2:
        return sentence
    rng = np.random.default_rng([seed, zlib.crc32(sentence.encode("utf-8"))])
    n = len(words)
    if kind == "deletion":
        keep = rng.random(n) >= DELETION
        if not keep.any():
            keep[rng.integers(n)] = True
        words = [w for w, k in zip(words, keep, strict=True) if k]
    elif kind == "cutoff":
        span = min(n - 1, math.ceil(CUTOFF * n))
        start = int(rng.integers(n - span + 1))
        words = words[:start] + words[start + span :]
    elif kind == "repetition":
        count = int(rng.integers(0, max(2, int(REPETITION * n)) + 1))
        repeated = set(rng.choice(n, size=min(count, n), replace=False).tolist())
        words = [x for i, w in enumerate(words) for x in ((w, w) if i in repeated else (w,))]
    elif kind == "reorder":
        i, j = rng.choice(n, size=2, replace=False)
        words[i], words[j] = words[j], words[i]
    else:
        raise ValueError(f"positives must be one of {', '.join(POSITIVES)}, not {kind!r}.")
    return " ".join(words)


def part_problem(part: str) -> str | None:
    """What is wrong with a corpus part (``all``, or ``K/N`` with 1 ≤ K ≤ N), or ``None``."""
    match = _PART.match(part)
    if match is None or (match.group(2) and int(match.group(2)) > int(match.group(3))):
        return "must be all or K/N, the K-th of N equal parts (1 <= K <= N), e.g. 1/2"
    return None


def corpus_part(sentences: Sequence[str], part: str) -> list[str]:
    """The ``part`` of ``sentences``: all of them, or the K-th of N contiguous, near-equal parts (``K/N``)."""
    if part == "all":
        return list(sentences)
    k, n = map(int, part.split("/"))
    return list(sentences[(k - 1) * len(sentences) // n : k * len(sentences) // n])
