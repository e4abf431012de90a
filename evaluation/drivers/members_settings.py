"""The settings of the members driver (``evaluation/DEFAULTS.md``, "Members that differ"): full and quick runs, the
warm-up variants it trains, the ensemble kinds it scores, its stages."""

from __future__ import annotations

from jtcse.training.selection import MEASURED_GRID

FULL = {
    "corpus_lines": 10**6,  # every line of wiki12k.txt
    # the pipeline's warm-up, as `jtcse pipeline` trains it (so the pipeline finds these folders done)
    "simcse": {"batch_size": 32, "max_seq_length": 32, "learning_rate": 3e-5, "epochs": 1},
    # the twin with a real signal: 128 sentences a step through GradCache (CachedJTCSELoss), 32 per forward, each
    # batch a group of neighbours by tower I (hard negatives; paraphrases kept apart). 50 steps (6,400 sentences,
    # half the corpus): a step takes about 30 s on 2 cores, so three twins of a whole epoch would take 2.5 hours
    "twin": {
        "batch_size": 128,
        "mini_batch_size": 32,
        "max_steps": 50,
        "learning_rate": 1e-5,
        "max_seq_length": 32,
        "hard_negatives": True,
        "paraphrase_threshold": 0.8,
    },
    "distill": {},  # the pipeline's distillation as it is
    # the pipeline's own grid, and below it the small weights where the start's genres hold (captions fall about
    # 0.3 a selection point for each 0.4 of the warm-ups' weight)
    "weight_grid": sorted({0.2, 0.25, 0.3, 0.35, 0.4, 0.45, 0.6, 0.7, 0.8, 0.9, *MEASURED_GRID}),
    "eval_max_seq_length": 128,
    "dev_pairs": None,
    "select_pairs": 1500,
    "diag_sentences": 0,
    "seeds": [1, 2, 3],
    "genre_margin": 0.003,  # a default may lose at most 0.3 points on a selection genre to the start
    "today_seeds": 1,  # today's default through the pipeline again: DEFAULTS.md has its 3 seeds
    "today_weights": [1.25, 1.25, 1.0],  # today's default ensemble: warm-up I, warm-up II, the start
    # the twin is trained on the warm-ups of this kind (two warm-ups that differ in their positives); the
    # per-seed weights that chose it then were later replaced by one weight per kind, under which the kinds tie
    "twin_kind": "deletion",
    "short_twin_steps": 25,  # a twin that fits the time bar: half the steps (the 50-step one ran 1.9x today's)
    "time_bar": 1.5,  # a default may run at most 1.5 times as long as today's
    "later_stages_s": 420,  # the ensemble's teacher vectors and the distillation, 2 cores (DEFAULTS.md: 7 minutes)
}
QUICK = {
    "corpus_lines": 64,
    "simcse": {"batch_size": 8, "max_seq_length": 16, "learning_rate": 3e-5, "max_steps": 2},
    "twin": {
        "batch_size": 8,
        "mini_batch_size": 4,
        "max_steps": 2,
        "learning_rate": 1e-5,
        "max_seq_length": 16,
        "hard_negatives": True,
        "paraphrase_threshold": 0.8,
    },
    "distill": {"batch_size": 8, "max_seq_length": 16, "max_steps": 2},
    "weight_grid": [0.5, 1.0],
    "eval_max_seq_length": 64,
    "dev_pairs": 60,
    "select_pairs": 60,
    "diag_sentences": 0,
    "seeds": [1, 2],
    "genre_margin": 0.003,
    "today_seeds": 1,
    "today_weights": [1.25, 1.25, 1.0],
    "twin_kind": "deletion",
    "short_twin_steps": 1,
    "time_bar": 1.5,
    "later_stages_s": 420,
}
VARIANTS = {
    "dropout": {},
    "deletion": {"positives": "deletion"},
    "cutoff": {"positives": "cutoff"},
    "repetition": {"positives": "repetition"},
    "dispersion": {"regularizers": ["dispersion:weight=0.1"]},
    "half1": {"corpus_part": "1/2"},
    "half2": {"corpus_part": "2/2"},
}
"""Warm-up variants (row name prefix -> ``train_simcse`` keys, each a ``[warmup_b]`` key of the pipeline)."""
VARIANT_LABELS = {
    "dropout": "dropout views (SimCSE: today's warm-ups)",
    "deletion": "word deletion (10%)",
    "cutoff": "span cutoff (10% of the words)",
    "repetition": "word repetition (ESimCSE, up to 32%)",
    "dispersion": "dropout + the dispersion regulariser (weight 0.1)",
    "half1": "dropout, first half of the corpus",
    "half2": "dropout, second half of the corpus",
}
KINDS = {
    "dropout": ("dropout", "dropout"),
    "deletion": ("dropout", "deletion"),
    "cutoff": ("dropout", "cutoff"),
    "repetition": ("dropout", "repetition"),
    "dispersion": ("dropout", "dispersion"),
    "halves": ("half1", "half2"),
}
"""Ensemble kinds: the start + warm-up I (seed s) + warm-up II (seed s + 1), as the pipeline joins them; the
variants of (warm-up I, warm-up II). ``dropout`` is today's default."""
PIPELINE_KEYS = {kind: {"warmup": VARIANTS[a], "warmup_b": VARIANTS[b]} for kind, (a, b) in KINDS.items()}
"""Each kind as the pipeline's settings (its ``[warmup]`` and ``[warmup_b]`` tables)."""
SHIPPED = "shipped"
STAGES = ("shipped", "warmups", "ensembles", "twin", "pipeline")


def trained_twin(choice: str) -> str | None:
    """The row prefix of the twin a choice trains (``twin:KIND`` and ``towers:KIND``: ``twin``; ``short:KIND``:
    ``short``), ``None`` for a kind (no twin)."""
    return {"twin": "twin", "towers": "twin", "short": "short"}.get(choice.rpartition(":")[0])
