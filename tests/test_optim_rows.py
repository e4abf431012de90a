"""RowIsolatedAdamW: rows without gradient stay put, and the rest is exactly AdamW on separate rows."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from jtcse.optim import RowIsolatedAdamW, row_isolated_param_groups

# Per step: which rows of a 6-row embedding receive a gradient.
SCHEDULE = [[0, 1, 2], [0, 3], [1], [0, 1, 2, 3], [5], [0, 5]]


def _grads(step: int, rows: int = 6, dim: int = 4) -> torch.Tensor:
    g = torch.Generator().manual_seed(100 + step)
    grad = torch.randn(rows, dim, generator=g, dtype=torch.float64)
    keep = torch.zeros(rows, 1, dtype=torch.float64)
    keep[SCHEDULE[step]] = 1.0
    return grad * keep


def test_plain_adamw_moves_rows_without_gradient():
    """The problem the utility solves: momentum and weight decay move untouched rows."""
    weight = nn.Parameter(torch.ones(6, 4, dtype=torch.float64))
    opt = torch.optim.AdamW([weight], lr=0.1, weight_decay=0.1)
    for step in range(2):
        weight.grad = _grads(step)
        opt.step()
    assert not torch.equal(weight[1].detach(), torch.ones(4, dtype=torch.float64))  # row 1 had no gradient in step 2


@pytest.mark.parametrize("weight_decay", [0.0, 0.05])
def test_row_isolated_adamw_equals_adamw_on_separate_rows(weight_decay):
    init = torch.randn(6, 4, dtype=torch.float64, generator=torch.Generator().manual_seed(0))
    matrix = nn.Parameter(init.clone())
    rows = [nn.Parameter(init[r].clone()) for r in range(6)]
    isolated = RowIsolatedAdamW(
        [{"params": [matrix], "row_isolated": True}], lr=0.05, betas=(0.8, 0.95), weight_decay=weight_decay
    )
    reference = torch.optim.AdamW(rows, lr=0.05, betas=(0.8, 0.95), weight_decay=weight_decay, foreach=False)
    for step in range(len(SCHEDULE)):
        grad = _grads(step)
        before = matrix.detach().clone()
        matrix.grad = grad
        isolated.step()
        for r, p in enumerate(rows):
            # AdamW skips a parameter whose grad is None: the paper's "separated embeddings"
            p.grad = grad[r].clone() if r in SCHEDULE[step] else None
        reference.step()
        untouched = [r for r in range(6) if r not in SCHEDULE[step]]
        assert torch.equal(matrix.detach()[untouched], before[untouched])  # bit-for-bit
        torch.testing.assert_close(matrix.detach(), torch.stack([p.detach() for p in rows]), rtol=1e-12, atol=1e-12)
    assert torch.equal(matrix.detach()[4], init[4])  # never had a gradient
    assert isolated.state[matrix]["row_step"].tolist() == [4, 3, 2, 2, 0, 2]


def test_embedding_rows_of_a_real_tower_stay_put(tiny_bert):
    from sentence_transformers import SentenceTransformer

    model = SentenceTransformer(tiny_bert)
    embedding = model[0].model.get_input_embeddings().weight
    groups = row_isolated_param_groups(model, weight_decay=0.01)
    assert groups[0]["params"] == [embedding] and groups[0]["row_isolated"]
    assert sum(len(g["params"]) for g in groups) == sum(1 for p in model.parameters() if p.requires_grad)
    optimizer = RowIsolatedAdamW(groups, lr=1e-2)
    before = embedding.detach().clone()
    seen = set()
    for sentences in (["the cat sat"], ["a dog ran far away"]):
        features = model.preprocess(sentences)
        seen |= set(features["input_ids"].flatten().tolist())
        optimizer.zero_grad()
        model(features)["sentence_embedding"].square().sum().backward()
        optimizer.step()
    moved = (embedding.detach() != before).any(dim=1)
    assert set(torch.nonzero(moved).flatten().tolist()) == seen
    other = model[0].model.encoder.layer[0].attention.self.query.weight
    assert any(p is other for p in groups[1]["params"])  # the rest is trained by the ordinary AdamW path


def test_state_dict_round_trip_keeps_row_counts():
    weight = nn.Parameter(torch.zeros(3, 2))
    opt = RowIsolatedAdamW([{"params": [weight], "row_isolated": True}], lr=0.1)
    weight.grad = torch.tensor([[1.0, 0.0], [0.0, 0.0], [0.0, 2.0]])
    opt.step()
    fresh = RowIsolatedAdamW([{"params": [weight], "row_isolated": True}], lr=0.1)
    fresh.load_state_dict(opt.state_dict())
    assert fresh.state[weight]["row_step"].tolist() == [1, 0, 1]
    assert fresh.param_groups[0]["row_isolated"] is True


def test_bad_configurations():
    with pytest.raises(ValueError, match="≥ 2 dimensions"):
        RowIsolatedAdamW([{"params": [nn.Parameter(torch.zeros(3))], "row_isolated": True}])
    with pytest.raises(ValueError, match="amsgrad"):
        RowIsolatedAdamW([{"params": [nn.Parameter(torch.zeros(3, 2))], "row_isolated": True}], amsgrad=True)
    with pytest.raises(ValueError, match="no embedding matrix"):
        row_isolated_param_groups(nn.Linear(2, 2))
