"""Tiny random towers whose CLS vectors differ from sentence to sentence (test helper, not a test module).

With the default initialisation (std 0.02) attention is uniform and the CLS vector is the CLS token's own
embedding plus a whisper of the sentence: all sentences get cos ≈ 0.999. SimCSE on such a tower first has
to leave that plateau (dozens of steps), which is too slow for a unit test. Sharper attention (larger
query/key weights) and stronger value/output weights make CLS sentence-dependent from the start.
"""

from __future__ import annotations

from pathlib import Path


def make_spread_tower(
    out_dir: str | Path,
    arch: str = "bert",
    *,
    seed: int = 0,
    hidden: int = 32,
    qk_std: float = 0.2,
    vo_std: float = 0.3,
) -> str:
    import torch
    from sentence_transformers import SentenceTransformer

    from jtcse.testing import make_tiny_tower

    out_dir = Path(out_dir)
    base = make_tiny_tower(out_dir.parent / f"{out_dir.name}.base", arch, seed=seed, hidden=hidden)
    model = SentenceTransformer(base)
    generator = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, module in model[0].auto_model.named_modules():
            if name.endswith(("attention.self.query", "attention.self.key")):
                torch.nn.init.normal_(module.weight, std=qk_std, generator=generator)
            elif name.endswith(("attention.self.value", "attention.output.dense")):
                torch.nn.init.normal_(module.weight, std=vo_std, generator=generator)
    model.save(str(out_dir))
    return str(out_dir)
