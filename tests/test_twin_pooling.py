"""A twin that keeps its towers' pooling: CLS or mean, in encode and in every JTCSE loss term.

The losses are checked against a float64 reference built by hand from the towers' hidden states (mean over
the non-padding tokens, the pooler's dense + tanh, NT-Xent and ICTM as loops), for both poolings; the
pooling is chosen from the towers, saved, and reloaded where jtcse is not importable.
"""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
import torch

from jtcse import build_twin
from jtcse.errors import JTCSEError
from jtcse.losses import JTCSELoss
from jtcse.losses.jtcse_loss import stack_views, tower_one_anchors

pytestmark = pytest.mark.usefixtures("one_thread")

VIEW_A = [
    "The cat sat on the mat.",
    "A quick brown fox jumps over the lazy dog.",
    "Rain tomorrow.",
    "Modules load once.",
]
VIEW_B = [
    "A cat was sitting on the mat.",
    "The fox jumped over a dog.",
    "It will rain tomorrow afternoon.",
    "Imports run once.",
]


def _cos(u, v) -> float:
    return float(u @ v / (u.norm() * v.norm()))


def _nt_xent(anchors, candidates, t: float) -> float:
    """Loop form of the two-view NT-Xent (positive: the other view; the same view's own entry excluded)."""
    n = len(anchors)
    total = 0.0
    for i in range(n):
        positive = (i + n // 2) % n
        denominator = sum(math.exp(_cos(anchors[i], candidates[j]) / t) for j in range(n) if j != i)
        total += -(_cos(anchors[i], candidates[positive]) / t - math.log(denominator))
    return total / n


def _ictm(h_anchor, h_partner, p_anchor, p_partner, eps: float = 1e-4) -> float:
    rows = []
    for s in range(len(h_anchor)):
        tmc = float((p_anchor[s] - p_partner[s]).norm() / (p_anchor[s].norm() + p_partner[s].norm()))
        rows.append(-math.log(max(_cos(h_anchor[s], h_partner[s]), eps)) * tmc)
    return sum(rows) / len(rows)


def _pool_by_hand(hidden, mask, pooling: str):
    if pooling == "cls":
        return hidden[:, 0]
    rows = []
    for b in range(hidden.shape[0]):
        kept = [hidden[b, t] for t in range(hidden.shape[1]) if mask[b, t]]
        rows.append(sum(kept) / len(kept))
    return torch.stack(rows)


def _double_twin(tiny_bert, tiny_bert_b, pooling: str):
    """A float64 twin with dropout off (the two views differ by their text), in training mode."""
    twin = build_twin(tiny_bert, tiny_bert_b, cael_every=2, pooling=pooling).double()
    for module in twin.modules():
        if isinstance(module, torch.nn.Dropout):
            module.p = 0.0
    return twin.train()


@pytest.mark.parametrize("pooling", ["cls", "mean"])
def test_loss_terms_match_a_float64_reference_built_by_hand(tiny_bert, tiny_bert_b, pooling):
    twin = _double_twin(tiny_bert, tiny_bert_b, pooling)
    columns = [twin.preprocess(VIEW_A), twin.preprocess(VIEW_B)]
    loss = JTCSELoss(twin, temperature=0.05, ictm_weight=0.5, seed=7)
    terms = {name: value.item() for name, value in loss(columns).items()}

    features = stack_views(columns, pad_token_id=twin.tokenizer.pad_token_id)
    mask = features["attention_mask"]
    inputs = {k: features[k] for k in ("input_ids", "attention_mask", "token_type_ids") if k in features}
    n = len(VIEW_A)
    with torch.no_grad():
        models = twin[0].tower_models()
        last = [m(**inputs).last_hidden_state for m in models]
        cross_last = [states[-1] for states in twin[0].run_streams(features).cross]
        h = [_pool_by_hand(x, mask, pooling) for x in last]
        c = [_pool_by_hand(x, mask, pooling) for x in cross_last]
        p = [torch.tanh(v @ m.pooler.dense.weight.T + m.pooler.dense.bias) for v, m in zip(h, models, strict=True)]
    x, y = (0, 1) if tower_one_anchors(7, 0, 0) else (1, 0)
    expected = {
        "nce_1": _nt_xent(h[0], h[0], 0.05),
        "nce_2": _nt_xent(h[1], h[1], 0.05),
        "icnce": _nt_xent(h[x], h[y], 0.05) + _nt_xent(c[x], c[y], 0.05),
        "ictm": 0.5 * (_ictm(h[0][:n], h[1][n:], p[0][:n], p[1][n:]) + _ictm(h[1][:n], h[0][n:], p[1][:n], p[0][n:])),
    }
    assert terms == pytest.approx(expected, rel=1e-9)
    assert expected["ictm"] > 0 and expected["icnce"] > 0


@pytest.mark.slow
def test_mean_and_cls_twins_differ_and_the_mean_skips_padding(tiny_bert, tiny_bert_b):
    mean = build_twin(tiny_bert, tiny_bert_b, pooling="mean")
    cls = build_twin(tiny_bert, tiny_bert_b, pooling="cls")
    alone = mean.encode(VIEW_A[2:3])
    padded = mean.encode(VIEW_A[1:3])[1:]  # beside a longer sentence: padded
    np.testing.assert_allclose(padded, alone, atol=1e-5)
    assert np.abs(cls.encode(VIEW_A[2:3]) - alone).max() > 1e-2


@pytest.mark.parametrize("pooling", ["cls", "mean"])
def test_pooler_heads_are_the_pooler_on_the_pooled_vector(tiny_bert, tiny_bert_b, pooling):
    twin = _double_twin(tiny_bert, tiny_bert_b, pooling)
    features = twin.preprocess(VIEW_A)
    with torch.no_grad():
        out = twin(dict(features))
        own = [
            m(**{k: features[k] for k in ("input_ids", "attention_mask", "token_type_ids")})
            for m in twin[0].tower_models()
        ]
    for i in (1, 2):
        if pooling == "cls":  # exactly BERT's own pooler_output
            torch.testing.assert_close(out[f"pooler_{i}"], own[i - 1].pooler_output)
        pooler = twin[0].tower_models()[i - 1].pooler.dense
        torch.testing.assert_close(out[f"pooler_{i}"], torch.tanh(pooler(out[f"pooled_{i}"])))


# -- which pooling a twin gets ----------------------------------------------------------------


@pytest.fixture(scope="module")
def pooled_towers(tiny_bert, tmp_path_factory):
    """tiny_bert saved with mean pooling + Normalize, with weighted-mean pooling, and as a plain transformers folder."""
    from sentence_transformers import SentenceTransformer
    from sentence_transformers.sentence_transformer.modules import Normalize, Pooling

    from jtcse.modeling.loading import load_model

    base = load_model(tiny_bert)[0]
    root = tmp_path_factory.mktemp("pooled")
    out = {}
    for name, modules in (
        ("mean", [Pooling(32, pooling_mode="mean"), Normalize()]),
        ("weightedmean", [Pooling(32, pooling_mode="weightedmean")]),
    ):
        SentenceTransformer(modules=[base, *modules], device="cpu").save(str(root / name))
        out[name] = str(root / name)
    out["hf"] = str(root / "hf")
    base.auto_model.save_pretrained(out["hf"])
    base.tokenizer.save_pretrained(out["hf"])
    return out


@pytest.mark.slow
def test_default_pooling_is_the_towers_own_else_cls(tiny_bert, pooled_towers, minilm_path):
    assert build_twin(tiny_bert, tiny_bert)[0].pooling == "cls"  # saved with CLS pooling
    assert build_twin(pooled_towers["mean"], pooled_towers["mean"])[0].pooling == "mean"
    assert (
        build_twin(pooled_towers["hf"], pooled_towers["hf"])[0].pooling == "cls"
    )  # plain transformers: the paper's CLS
    assert build_twin(pooled_towers["hf"], pooled_towers["hf"], pooling="mean")[0].pooling == "mean"
    assert build_twin(None, None)[0].pooling == "mean"  # the embedded MiniLM pools mean


@pytest.mark.slow
def test_unsupported_or_mismatched_pooling_is_refused_with_the_reason(tiny_bert, pooled_towers):
    with pytest.raises(JTCSEError, match=r"pools with 'weightedmean'.*pooling='cls' or pooling='mean'"):
        build_twin(pooled_towers["weightedmean"], pooled_towers["weightedmean"])
    # an explicit choice replaces it
    assert build_twin(pooled_towers["weightedmean"], pooled_towers["weightedmean"], pooling="mean")[0].pooling == "mean"
    with pytest.raises(JTCSEError, match=r"pool differently.*cls.*mean"):
        build_twin(tiny_bert, pooled_towers["mean"])
    for bad in ("max", "CLS", 1):
        with pytest.raises(ValueError, match=r"^pooling: Input should be 'cls' or 'mean'$"):
            build_twin(tiny_bert, tiny_bert, pooling=bad)
    from jtcse.modeling.twin import TwinTowers

    towers = build_twin(tiny_bert, tiny_bert)[0].towers
    with pytest.raises(ValueError, match="pooling must be one of cls, mean"):
        TwinTowers(towers[0], towers[1], pooling="weightedmean")


# A saved cls twin and a saved mean twin reopen without jtcse, each with its pooling, and encode as in memory:
# tests/test_twin_model.py::test_save_load_in_a_fresh_process_and_export_towers (one fresh interpreter for both).


@pytest.mark.slow
def test_a_twin_saved_before_pooling_was_a_choice_loads_as_cls(tiny_bert, tiny_bert_b, tmp_path):
    from jtcse.modeling.loading import load_model

    model = build_twin(tiny_bert, tiny_bert_b, pooling="cls")
    model.save(str(tmp_path / "old"))
    config_file = tmp_path / "old" / "jtcse_twin_config.json"
    config = json.loads(config_file.read_text())
    config_file.write_text(json.dumps({k: v for k, v in config.items() if k != "pooling"}))
    loaded = load_model(tmp_path / "old")
    assert loaded[0].pooling == "cls"
    np.testing.assert_allclose(loaded.encode(VIEW_A), model.encode(VIEW_A), atol=1e-5)
