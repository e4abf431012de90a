"""The captions trade-off of the default ensemble (evaluation/DEFAULTS.md, "No genre left behind?").

For the ensemble the pipeline builds by default (the shipped MiniLM at weight 1, its two SimCSE warm-ups W_s and
W_s+1 at a common weight w), Spearman ×100 over all pairs and per genre, on the selection split (STS-B train
sample) and on STS-B dev, for w from 0 (the shipped model alone) up: mean over the driver's three seeds.

Nothing is encoded: a concat of L2-normalised members has cos = Σ w_i² cos_i / Σ w_i², so each row is exact from
the pair cosines `scripts/repro_default.py` cached (``runs/default/cos/NAME.{select,dev}.npy``). Prints a Markdown
table and writes JSON.

    python scripts/genre_tradeoff.py --data ../shared/data -o evaluation/default/genre_tradeoff.json
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np
from scipy.stats import spearmanr

from jtcse.evaluation.sts import pair_keys, read_stsb_file, without_pairs_of

WEIGHTS = (0.0, 0.25, 0.5, 0.75, 1.0, 1.25, 1.5, 2.0, 3.0)
SEEDS = (1, 2, 3)
GENRES = {"select": ("main-captions", "main-news", "main-forum"), "dev": ("main-captions", "main-news", "main-forums")}


def spearman(cos: np.ndarray, gold: np.ndarray) -> float:
    return float(100 * spearmanr(cos, gold).statistic)


def scores(cos: np.ndarray, pairs, genres: tuple[str, ...]) -> dict[str, float]:
    """Spearman over all pairs and per genre."""
    gold, genre = np.asarray(pairs.scores), np.asarray(pairs.genres)
    return {"all": spearman(cos, gold), **{g: spearman(cos[genre == g], gold[genre == g]) for g in genres}}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data", type=Path, default=Path("../shared/data"), help="folder with stsbenchmark/")
    parser.add_argument("--cos", type=Path, default=Path("runs/default/cos"), help="the driver's cached cosines")
    parser.add_argument("-o", "--output", type=Path, default=Path("evaluation/default/genre_tradeoff.json"))
    args = parser.parse_args()

    dev = read_stsb_file(args.data / "stsbenchmark" / "sts-dev.csv")
    train = read_stsb_file(args.data / "stsbenchmark" / "sts-train.csv")
    rng = np.random.default_rng(0)  # the driver's selection sample (scripts/repro_default.py)
    sample = train.take(np.sort(rng.choice(len(train), size=1500, replace=False)))
    select, _ = without_pairs_of(sample, dev)
    dev_keys = set(pair_keys(dev))
    keep = np.array([key not in dev_keys for key in pair_keys(sample)])  # the cached select cosines are the sample's

    def cosines(name: str, split: str) -> np.ndarray:
        cos = np.load(args.cos / f"{name}.{split}.npy")
        return cos[keep] if split == "select" else cos

    rows = []
    for w in WEIGHTS:
        per_seed = []
        for i, seed in enumerate(SEEDS):
            members = [(1.0, "shipped"), (w, f"control_s{seed}"), (w, f"control_s{SEEDS[(i + 1) % len(SEEDS)]}")]
            norm = sum(x * x for x, _ in members)
            per_seed.append({
                split: scores(sum(x * x * cosines(m, split) for x, m in members) / norm, pairs, GENRES[split])
                for split, pairs in (("select", select), ("dev", dev))
            })  # fmt: skip
        rows.append({"weight": w, **{split: {k: float(np.mean([s[split][k] for s in per_seed])) for k in per_seed[0][split]}
                                     for split in ("select", "dev")}})  # fmt: skip
    args.output.parent.mkdir(parents=True, exist_ok=True)
    args.output.write_text(json.dumps({"seeds": SEEDS, "select_pairs": len(select), "rows": rows}, indent=2) + "\n",
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
