"""Inference cost: multiply-accumulates (MACs) and parameters of one forward pass.

MACs are counted by ``torch.utils.flop_counter.FlopCounterMode`` (matrix products, 2 FLOPs per MAC);
element-wise work (softmax, LayerNorm, GELU) is not counted, as usual for MAC tables. Attention is
switched to the eager implementation while counting, because the CPU fused-attention kernel has no
FLOP formula registered and would be silently left out.
"""

from __future__ import annotations

import contextlib

import torch


@contextlib.contextmanager
def eager_attention(hf_model):
    """Temporarily use the eager attention implementation (needed for attention weights and FLOP counts)."""
    config = getattr(hf_model, "config", None)
    previous = getattr(config, "_attn_implementation", None)
    switch = previous not in (None, "eager") and hasattr(hf_model, "set_attn_implementation")
    if switch:
        hf_model.set_attn_implementation("eager")
    try:
        yield hf_model
    finally:
        if switch:
            hf_model.set_attn_implementation(previous)


def count_macs(module: torch.nn.Module, *args, **kwargs) -> int:
    """MACs of ``module(*args, **kwargs)`` under ``no_grad``."""
    from torch.utils.flop_counter import FlopCounterMode

    counter = FlopCounterMode(display=False)
    with torch.no_grad(), counter:
        module(*args, **kwargs)
    return counter.get_total_flops() // 2


def parameter_count(module: torch.nn.Module) -> int:
    return sum(p.numel() for p in module.parameters())


def encoder_cost(hf_model, seq_len: int) -> dict[str, int]:
    """MACs and parameters of one forward of a transformers encoder on one sequence of ``seq_len`` tokens."""
    device = next(hf_model.parameters()).device
    input_ids = torch.full((1, seq_len), 1, dtype=torch.long, device=device)
    attention_mask = torch.ones_like(input_ids)
    was_training = hf_model.training
    hf_model.eval()
    with eager_attention(hf_model):
        macs = count_macs(hf_model, input_ids=input_ids, attention_mask=attention_mask)
    hf_model.train(was_training)
    return {"seq_len": seq_len, "macs": int(macs), "params": parameter_count(hf_model)}
