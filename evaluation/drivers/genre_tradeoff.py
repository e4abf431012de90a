"""The captions trade-off of the default ensemble (``evaluation/DEFAULTS.md``, "No genre left behind?").

For the ensemble the pipeline builds by default (the shipped MiniLM at weight 1, its two SimCSE warm-ups W_s and
W_s+1 at a common weight w), Spearman ×100 over all pairs and per genre, on the selection split (STS-B train
sample) and on STS-B dev, for w from 0 (the shipped model alone) through the pipeline's grid as it was (``MEASURED_GRID``): mean over
the defaults driver's seeds.

Nothing is encoded: each row is exact from the pair cosines :mod:`evaluation.drivers.repro_default` cached
(``<work>/cos/NAME.{select,dev}.npy``), through :func:`jtcse.training.selection.concat_cosine`. Prints a Markdown
table and writes JSON. From the repository root::

    python -m evaluation.drivers.genre_tradeoff --data ../shared/data      # evaluation/default/genre_tradeoff.json
    python -m evaluation.drivers.genre_tradeoff --quick                    # from the driver's --quick run
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np
from scipy.stats import spearmanr

from evaluation.drivers.cli import DATA
from evaluation.drivers.grid import pair_of
from evaluation.drivers.repro_default_settings import FULL, QUICK, SHIPPED
from evaluation.drivers.splits import dev_and_selection
from jtcse.training.selection import MEASURED_GRID, concat_cosine

WEIGHTS = (0.0, 0.25, *MEASURED_GRID)
"""The warm-ups' common weight: none (the shipped model alone), a little, then every weight the pipeline tries."""
GENRES = {"select": ("main-captions", "main-news", "main-forum"), "dev": ("main-captions", "main-news", "main-forums")}


def spearman(cos: np.ndarray, gold: np.ndarray) -> float:
    return float(100 * spearmanr(cos, gold).statistic)


def scores(cos: np.ndarray, pairs, genres: tuple[str, ...]) -> dict[str, float]:
    """Spearman over all pairs and per genre."""
    gold, genre = np.asarray(pairs.scores), np.asarray(pairs.genres)
    return {"all": spearman(cos, gold), **{g: spearman(cos[genre == g], gold[genre == g]) for g in genres}}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="the defaults driver's --quick run (its settings)")
    parser.add_argument("--data", type=Path, default=DATA, help="folder with stsbenchmark/ (default ../shared/data)")
    parser.add_argument(
        "--cos", type=Path, default=None, help="the driver's cached cosines (default runs/default[_quick]/cos)"
    )
    parser.add_argument(
        "-o", "--output", type=Path, default=None, help="default evaluation/default/genre_tradeoff.json"
    )
    args = parser.parse_args()

    cfg = QUICK if args.quick else FULL
    cos_dir = args.cos or Path("runs/default_quick/cos" if args.quick else "runs/default/cos")
    output = (
        args.output or (cos_dir.parent / "report" if args.quick else Path("evaluation/default")) / "genre_tradeoff.json"
    )
    splits = dev_and_selection(args.data, cfg["select_pairs"], cfg["dev_pairs"])
    pairs = {"select": splits.select, "dev": splits.dev}

    def cosines(name: str, split: str) -> np.ndarray:
        cos = np.load(cos_dir / f"{name}.{split}.npy")
        return splits.selection_cosines(cos) if split == "select" else cos

    seeds = cfg["seeds"]
    rows = []
    for w in WEIGHTS:
        per_seed = []
        for seed in seeds:
            members = [SHIPPED, *(f"control_s{s}" for s in pair_of(seed, seeds))]
            per_seed.append({
                split: scores(concat_cosine([cosines(m, split) for m in members], [1.0, w, w]), pairs[split], GENRES[split])
                for split in ("select", "dev")
            })  # fmt: skip
        rows.append({"weight": w, **{split: {k: float(np.mean([s[split][k] for s in per_seed])) for k in per_seed[0][split]}
                                     for split in ("select", "dev")}})  # fmt: skip
    output.parent.mkdir(parents=True, exist_ok=True)
    output.write_text(json.dumps({"seeds": seeds, "select_pairs": len(splits.select), "rows": rows}, indent=2) + "\n",
                      encoding="utf-8")  # fmt: skip
    head = ["selection", "sel. captions", "sel. news", "sel. forums", "dev", "dev captions", "dev news", "dev forums"]
    print("| weight of W_s, W_s+1 (start at 1) | " + " | ".join(head) + " |")
    print("| --- |" + " ---: |" * len(head))
    for row in rows:
        cells = [row[split][k] for split in ("select", "dev") for k in ("all", *GENRES[split])]
        label = "0 (the shipped MiniLM)" if row["weight"] == 0 else f"{row['weight']:g}"
        print(f"| {label} | " + " | ".join(f"{x:.2f}" for x in cells) + " |")


if __name__ == "__main__":
    main()
