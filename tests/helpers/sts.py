"""A tiny STS-B-format file (six scored pairs) for tests that need a dev or test set."""

from __future__ import annotations

from pathlib import Path

DEV_PAIRS = [
    ("A man is playing a guitar.", "A man plays the guitar.", 4.8),
    ("A woman is slicing an onion.", "Someone is cutting an onion.", 4.2),
    ("A dog runs in the park.", "A cat sleeps on the sofa.", 0.6),
    ("The stock market fell today.", "Shares dropped sharply on Monday.", 3.4),
    ("Kids are playing football.", "Children play soccer outside.", 4.0),
    ("A plane is taking off.", "A man is eating pasta.", 0.1),
]


def write_stsb(path: Path) -> Path:
    """Write :data:`DEV_PAIRS` to ``path`` in the STS-B layout; returns ``path``."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(
        "".join(f"main-captions\tMSRvid\t2012test\t{i:04d}\t{s}\t{a}\t{b}\n" for i, (a, b, s) in enumerate(DEV_PAIRS)),
        encoding="utf-8",
    )
    return path
