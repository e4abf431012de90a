"""jtcse: contrastive sentence encoders on sentence-transformers (JTCSE twin towers and friends)."""

from __future__ import annotations

__version__ = "0.1.0"

__all__ = ["__version__", "build_twin", "TwinTowers"]


def __getattr__(name: str):
    # Lazy so that `import jtcse` (and `jtcse --help`) stays fast: torch loads only when needed.
    if name == "build_twin":
        from jtcse.modeling.build import build_twin

        return build_twin
    if name == "TwinTowers":
        from jtcse.modeling.twin import TwinTowers

        return TwinTowers
    raise AttributeError(f"module 'jtcse' has no attribute {name!r}")
