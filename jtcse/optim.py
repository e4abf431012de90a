"""AdamW whose embedding rows move only when they receive a gradient ("Stop Jostling", §4.5).

With one AdamW state per embedding *matrix*, a row whose gradient is zero in a step still moves:
its first moment carries momentum from earlier steps, and weight decay shrinks it. Logit
thresholding zeroes exactly the gradients of far-away rows, so those rows must also be skipped by
the optimizer. The paper does this by storing each embedding row as its own parameter (AdamW skips
a parameter whose ``grad`` is None). :class:`RowIsolatedAdamW` gives the same updates without
splitting the matrix: for parameters in a ``row_isolated`` group it keeps moments and a step count
*per row* and updates only rows whose gradient is not entirely zero. All other groups are plain
``torch.optim.AdamW``. The masked update is vectorised (no per-row loop, no host sync).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import torch
from torch import Tensor, nn

__all__ = ["RowIsolatedAdamW", "row_isolated_param_groups"]


class RowIsolatedAdamW(torch.optim.AdamW):
    """``torch.optim.AdamW`` plus per-row isolation for groups with ``row_isolated=True``.

    For a row-isolated parameter ``W`` (at least 2-D; rows = first axis) each row ``r`` is updated
    exactly as if it were a separate AdamW parameter that only receives a gradient in the steps
    where ``grad[r]`` is not all zeros: its moments, bias-correction step count and decoupled weight
    decay advance only in those steps; otherwise the row and its state stay as they are.

    Example::

        groups = row_isolated_param_groups(model, weight_decay=0.01)
        optimizer = RowIsolatedAdamW(groups, lr=2e-5)
        trainer = SentenceTransformerTrainer(model=model, ..., optimizers=(optimizer, None))
    """

    def __init__(self, params: Iterable[Any], *args: Any, **kwargs: Any) -> None:
        super().__init__(params, *args, **kwargs)
        for group in self.param_groups:
            group.setdefault("row_isolated", False)
            if group["row_isolated"]:
                if group.get("amsgrad") or group.get("maximize"):
                    raise ValueError("RowIsolatedAdamW: amsgrad/maximize are not supported in row-isolated groups")
                for p in group["params"]:
                    if p.dim() < 2:
                        raise ValueError(
                            f"RowIsolatedAdamW: row-isolated parameters need ≥ 2 dimensions (rows × …), got {tuple(p.shape)}"
                        )

    def add_param_group(self, param_group: dict[str, Any]) -> None:
        param_group.setdefault("row_isolated", False)
        super().add_param_group(param_group)

    @torch.no_grad()
    def step(self, closure=None):
        loss = None
        if closure is not None:
            with torch.enable_grad():
                loss = closure()
        # Hide the row-isolated parameters from the stock AdamW step, then update them here.
        hidden: list[tuple[Tensor, Tensor]] = []
        for group in self.param_groups:
            if group["row_isolated"]:
                for p in group["params"]:
                    if p.grad is not None:
                        hidden.append((p, p.grad))
                        p.grad = None
        try:
            super().step()
        finally:
            for p, grad in hidden:
                p.grad = grad
        for group in self.param_groups:
            if group["row_isolated"]:
                for p in group["params"]:
                    if p.grad is not None:
                        self._row_step(p, group)
        return loss

    def _row_step(self, p: Tensor, group: dict[str, Any]) -> None:
        if p.grad.is_sparse:
            raise ValueError("RowIsolatedAdamW does not take sparse gradients; use a dense embedding")
        beta1, beta2 = group["betas"]
        lr, eps, weight_decay = group["lr"], group["eps"], group["weight_decay"]
        grad = p.grad
        state = self.state[p]
        if not state:
            state["step"] = torch.zeros((), dtype=torch.float32)  # steps seen; torch's Adam bookkeeping expects it
            state["row_step"] = torch.zeros(p.shape[0], dtype=torch.float32, device=p.device)
            state["exp_avg"] = torch.zeros_like(p, memory_format=torch.preserve_format)
            state["exp_avg_sq"] = torch.zeros_like(p, memory_format=torch.preserve_format)
        shape = (-1,) + (1,) * (p.dim() - 1)
        touched = grad.ne(0).flatten(1).any(dim=1)  # rows with any gradient
        row = touched.view(shape)
        state["step"] += 1
        step = state["row_step"].add_(touched.to(torch.float32))
        exp_avg, exp_avg_sq = state["exp_avg"], state["exp_avg_sq"]
        exp_avg.copy_(torch.where(row, exp_avg * beta1 + grad * (1 - beta1), exp_avg))
        exp_avg_sq.copy_(torch.where(row, exp_avg_sq * beta2 + grad * grad * (1 - beta2), exp_avg_sq))
        safe_step = step.clamp(min=1.0)
        safe_step = safe_step.double()  # bias corrections in double: float32 powers drift after ~1e3 steps
        bias1 = (1 - beta1**safe_step).view(shape).to(p.dtype)
        bias2 = (1 - beta2**safe_step).view(shape).to(p.dtype)
        update = (exp_avg / bias1) / ((exp_avg_sq / bias2).sqrt() + eps)
        new = p * (1 - lr * weight_decay) - lr * update
        p.copy_(torch.where(row, new, p))


def row_isolated_param_groups(
    model: nn.Module,
    weight_decay: float = 0.0,
    isolated: Iterable[Tensor] | None = None,
) -> list[dict[str, Any]]:
    """Parameter groups for :class:`RowIsolatedAdamW`: the input embedding matrices row-isolated, the rest plain.

    ``isolated`` lists the parameters to isolate; by default the word-embedding matrix of every
    ``transformers`` model inside ``model`` (``get_input_embeddings()``). Biases and LayerNorm
    weights get no weight decay, as in the ``transformers`` Trainer.
    """
    if isolated is None:
        isolated = []
        for module in model.modules():
            getter = getattr(module, "get_input_embeddings", None)
            if callable(getter) and isinstance(module, nn.Module) and module is not model:
                try:
                    embedding = getter()
                except (NotImplementedError, AttributeError):
                    continue
                if isinstance(embedding, nn.Embedding):
                    isolated.append(embedding.weight)
    isolated_ids = {id(p) for p in isolated}
    if not isolated_ids:
        raise ValueError("row_isolated_param_groups: found no embedding matrix to isolate; pass isolated=[...]")
    named = [(n, p) for n, p in model.named_parameters() if p.requires_grad]
    rows = [p for _, p in named if id(p) in isolated_ids]
    plain = [(n, p) for n, p in named if id(p) not in isolated_ids]
    no_decay = lambda name, p: p.dim() < 2 or "norm" in name.lower()  # noqa: E731
    return [
        {"params": rows, "weight_decay": weight_decay, "row_isolated": True},
        {"params": [p for n, p in plain if not no_decay(n, p)], "weight_decay": weight_decay},
        {"params": [p for n, p in plain if no_decay(n, p)], "weight_decay": 0.0},
    ]
