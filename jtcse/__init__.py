"""jtcse: contrastive sentence encoders on sentence-transformers (JTCSE twin towers and friends)."""

from __future__ import annotations

from jtcse.processes import die_with_parent as _die_with_parent

_die_with_parent()  # in a pool worker that is starting (JTCSE_POOL_PARENT set): die with the process that started it

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
