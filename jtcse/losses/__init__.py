"""Loss classes (sentence-transformers conventions) and their pure-tensor forms in ``jtcse.losses.functional``.

Exports resolve lazily, so light modules here (``registry``) import without torch.
"""

from __future__ import annotations

import importlib

_EXPORTS = {
    "CachedJTCSELoss": "cached_jtcse_loss",
    "DispersionLoss": "dispersion",
    "DistillationSumLoss": "distillation",
    "JTCSELoss": "jtcse_loss",
    "NITPHead": "nitp",
    "NormalizedMSELoss": "distillation",
    "NITPLoss": "nitp",
    "remove_nitp_head": "nitp",
    "RegularizedLoss": "regularized",
    "TokenRegularizer": "regularized",
    "SimilarityMatrixLoss": "distillation",
    "SimRegLoss": "simreg",
    "ThresholdedCrossEntropyLoss": "thresholding",
    "ThresholdedMultipleNegativesRankingLoss": "thresholding",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str):
    if name in _EXPORTS:
        return getattr(importlib.import_module(f"jtcse.losses.{_EXPORTS[name]}"), name)
    raise AttributeError(f"module 'jtcse.losses' has no attribute {name!r}")
