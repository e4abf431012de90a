"""How much two encoders differ, as ensemble members: whether they make the same mistakes on labelled pairs, and
how alike their embeddings are.

* :func:`error_agreement`: each member's error on a pair is how far its rank of the pair's cosine is from the
  gold score's rank (``rank(cos_m) - rank(gold)``, the residual Spearman's correlation scores); the agreement
  is the Spearman correlation of the two members' errors over the pairs. 1: they err alike, and averaging
  them cannot cancel a mistake; 0: unrelated errors; what an ensemble gains grows as it falls.
* :func:`linear_cka`: linear centred kernel alignment of two embedding matrices of the same sentences
  (Kornblith et al., 2019): ``‖Yᵀ X‖²_F / (‖Xᵀ X‖_F ‖Yᵀ Y‖_F)`` on column-centred ``X``, ``Y``; 1 for embeddings
  equal up to a rotation and a scale, whatever their widths.
"""

from __future__ import annotations

import numpy as np
from scipy.stats import rankdata, spearmanr


def rank_errors(cosines: np.ndarray, gold: np.ndarray) -> np.ndarray:
    """Each pair's error: its rank by ``cosines`` less its rank by ``gold`` (ties averaged), over the pairs."""
    cosines, gold = np.asarray(cosines, dtype=np.float64), np.asarray(gold, dtype=np.float64)
    if cosines.shape != gold.shape or cosines.ndim != 1:
        raise ValueError(f"one cosine per gold score is needed, not {cosines.shape} and {gold.shape}.")
    return (rankdata(cosines) - rankdata(gold)) / len(gold)


def error_agreement(cosines_a: np.ndarray, cosines_b: np.ndarray, gold: np.ndarray) -> float:
    """Spearman correlation of two members' rank errors (:func:`rank_errors`) on the same labelled pairs."""
    return float(spearmanr(rank_errors(cosines_a, gold), rank_errors(cosines_b, gold)).statistic)


def linear_cka(x: np.ndarray, y: np.ndarray) -> float:
    """Linear CKA of ``x`` (n × d1) and ``y`` (n × d2), the same n sentences embedded by two encoders."""
    x, y = np.asarray(x, dtype=np.float64), np.asarray(y, dtype=np.float64)
    if x.ndim != 2 or y.ndim != 2 or len(x) != len(y):
        raise ValueError(f"two embeddings of the same sentences are needed, not {x.shape} and {y.shape}.")
    x, y = x - x.mean(0), y - y.mean(0)
    cross = np.linalg.norm(y.T @ x) ** 2
    return float(cross / (np.linalg.norm(x.T @ x) * np.linalg.norm(y.T @ y)))
