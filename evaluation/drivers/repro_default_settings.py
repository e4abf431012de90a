"""The settings of the defaults driver (``evaluation/DEFAULTS.md``): full and quick runs, its stages, the twin loss
variants and ensemble kinds it tries, and the names its tables give them."""

from __future__ import annotations

from jtcse.training.selection import MEASURED_GRID

FULL = {
    "corpus_lines": 10**6,  # every line of wiki12k.txt
    "small_corpus_lines": 3000,
    "simcse": {"batch_size": 32, "max_seq_length": 32, "learning_rate": 3e-5, "epochs": 1},
    "twin": {"batch_size": 16, "max_seq_length": 32, "cael_every": 2},
    "probe_steps": 100,
    "variant_lr": 3e-5,
    "twin_lrs": [1e-5, 3e-5, 1e-4],
    "twin_steps": 300,
    "distill": {"batch_size": 64, "max_seq_length": 32, "learning_rate": 2e-5},
    "distill_epochs": [1, 2],
    "weight_grid": list(MEASURED_GRID),  # the pipeline's own grid when this was measured
    "eval_max_seq_length": 128,
    "dev_pairs": None,
    "select_pairs": 1500,
    "diag_sentences": 0,
    "seeds": [1, 2, 3],
    "speed_sentences": 2048,
}
QUICK = {
    "corpus_lines": 64,
    "small_corpus_lines": 32,
    "simcse": {"batch_size": 8, "max_seq_length": 16, "learning_rate": 3e-5, "max_steps": 2},
    "twin": {"batch_size": 4, "max_seq_length": 16, "cael_every": 2},
    "probe_steps": 2,
    "variant_lr": 1e-5,
    "twin_lrs": [1e-5, 1e-4],
    "twin_steps": 3,
    "distill": {"batch_size": 8, "max_seq_length": 16, "learning_rate": 2e-5, "max_steps": 2},
    "distill_epochs": [1],
    "weight_grid": [0.5, 1.0],
    "eval_max_seq_length": 64,
    "dev_pairs": 60,
    "select_pairs": 60,
    "diag_sentences": 0,
    "seeds": [1, 2],
    "speed_sentences": 64,
}
SHIPPED = "shipped"
ABLATIONS = {
    "_noictm": {"ictm_weight": 0.0},
    "_nceonly": {"icnce_weight": 0.0, "ictm_weight": 0.0},
    "_nocael": {"cael_every": 0},  # no cross-attention (TNCSE)
}
"""Twin loss variants tried on seed 1 (name suffix -> train_twin keywords)."""
KIND_LABELS = {
    "twin": "the final twin alone",
    "start+twin": "shipped + final twin",
    "start+2twins": "shipped + twin_s + twin_s+1",
    "start+twin+warmups": "shipped + twin_s + W_s + W_s+1",
    "start+control": "shipped + W_s",
    "start+2controls": "shipped + W_s + W_s+1",
    "2controls": "W_s + W_s+1",
    "start+untrained": "shipped + untrained twin (W_s + W_s+1 summed)",
    "start+jtcse": "shipped + the full-JTCSE-loss twin (seed 1)",
}
LOSS_LABELS = {
    "": "full JTCSE loss",
    "_noictm": "no ICTM",
    "_nocael": "no CAEL (TNCSE)",
    "_nceonly": "NCE only (two SimCSE towers side by side)",
}
JTCSE_KINDS = ("twin", "start+twin", "start+2twins", "start+twin+warmups")
SIMCSE_KINDS = ("start+control", "start+2controls", "2controls", "start+untrained")
"""Ensembles with a JTCSE twin, and their same-budget controls built from the SimCSE warm-ups alone."""
SPLITS = ("dev", "select")
STAGES = (
    "rescore",
    "baselines",
    "controls",
    "corpus_size",
    "untrained",
    "terms",
    "ablation",
    "probe",
    "twins",
    "ensembles",
    "distill",
    "speed",
    "cls",
    "cls_recipe",
)
GENRES = ("captions", "news", "forums")


def genre_label(genre: str) -> str:
    """``main-captions`` -> ``captions``; STS-B train spells the forum genre ``main-forum``, dev ``main-forums``."""
    label = genre.removeprefix("main-")
    return "forums" if label == "forum" else label
